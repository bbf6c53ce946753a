"""Automatic sweeps over speculative step counts, with sequential stopping and a verdict.

For every *setting* — a step count (0 = no speculation = the baseline) at a
load concurrency — the sweep:

1. restarts the server with that step count (an injected ``restart`` function:
   the control layer's plan, run and readiness check) and finds the new run
   in the session the log feeds;
2. starts the load (an injected :class:`LoadControl`, e.g. the built-in
   :class:`~specmon.control.load.BackgroundLoad`), skips ``settle`` samples
   after it starts (on top of the session's own warm-up exclusion);
3. collects the run's counted throughput samples, judging them at the
   planned looks of :class:`~specmon.model.stopping.StoppingRule` until the rule
   says stop or the time budget runs out;
4. moves on.

Orders: ``given``; ``random`` (seeded shuffle of the step counts, to keep
slow drift from favouring one setting); ``interleave`` (rounds: each visit
collects up to the setting's next look, then the next setting gets a turn,
alternating direction every round — more restarts, least drift); ``launches``
(:mod:`specmon.experiment.rounds`: rounds of fresh launches of every undecided
setting, measured as long as more time beats another start, judged on the
two-level intervals of :mod:`specmon.model.launches`).

Every decision and verdict uses those two-level intervals: a setting's launches
(its segments, visits on one server run counting as one launch) are the unit,
with the between-launch variance pooled over the settings of a verdict, or
``plan.launch_cv`` assumed while none has two launches.

Progress is kept in a small JSON state file, samples included, written after
every look and every few seconds: an interrupted sweep started again with the
same plan continues where it stopped, and its verdict includes what was
measured before the interruption.

Everything non-deterministic is injected (restart, session, load, clock,
sleep), so the statistical tests drive a simulated world in-process and the
dashboard can run a sweep on its own session.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from specmon import paths
from specmon.control import dims as dimensions
from specmon.control.dims import Point
from specmon.control.guard import read_only_message, read_only_reason
from specmon.control.launch import LaunchError
from specmon.experiment.rounds import LaunchRounds, effective_rule, needs_more_of
from specmon.experiment.stats.guided import Measurement, Setting, Surrogate, initial_design, next_setting
from specmon.experiment.sweep_plan import LoadControl, Restarter, RestartOutcome, SweepError, SweepEvent, SweepPlan
from specmon.experiment.sweep_result import SweepResult, analyses_from_cells, group_objective_verdict, verdict_sources
from specmon.experiment.sweep_state import (
    ACTIVE,
    DONE,
    FAILED,
    PENDING,
    SETTLED,
    SKIPPED,
    STATE_VERSION,
    CellState,
    Segment,
    config_for,
    config_json,
    config_matches,
    group_summaries,
    guided_setting,
    match_run,
    measurement,
    read_state,
)
from specmon.model.pending import PendingWatch
from specmon.model.session import Run, ServerState, Session
from specmon.model.stats import Summary
from specmon.model.stopping import StoppingRule, sweep_verdict
from specmon.redact import redact_text
from specmon.smallfile import InputError
from specmon.wording import counted

#: Seconds between two checks that the server measured is still the one the sweep started.
SERVER_CHECK_S = 10.0
#: A segment's sample lists, cut back together when the server turns out to have changed.
_MARKED = ("throughput", "accept_len", "accept_rate", "log_throughput", "tokens")


def _mark(cell: CellState) -> tuple[int, tuple[int, ...]]:
    """Where the cell's samples stand: the last segment's index and its lists' lengths."""
    if not cell.segments:
        return 0, tuple(0 for _ in _MARKED)
    seg = cell.segments[-1]
    return len(cell.segments) - 1, tuple(len(getattr(seg, name)) for name in _MARKED)


class Sweep:
    """Runs a :class:`SweepPlan` (see the module docstring).

    Args:
        plan: What to sweep.
        session: The session the server's log feeds (by a follower the caller runs).
        restart: Restarts the server with a step count and waits for ready.
        load: The workload; None when the traffic comes from elsewhere.
        clock: Monotonic seconds.
        sleep: Awaitable sleep (a simulated world advances on it in tests).
        state_path: JSON file for progress and resume (None: not persisted).
        resume: Continue from ``state_path`` when it holds this plan's unfinished sweep.
        recorder: A :class:`~specmon.output.recording.Recorder` for restarts, looks and the verdict.
        on_event: Called with every :class:`SweepEvent`.
        counters: A :class:`~specmon.sources.metrics.MetricsScraper` on the server's ``/metrics``: when it
            reads the engine's counters, a visit's samples come from them (about one a second) and
            the log's samples are kept for the cross-check; when it cannot, the log is the source
            and the sweep says so.
        server_check: Says whether the server being measured is still the one the sweep started
            (``None``) or why not (gone, replaced by another restart). Asked at every look and
            every :data:`SERVER_CHECK_S` seconds; when it objects, the sweep stops, says so, and
            drops the samples since the last check that passed (see :meth:`_server_lost`).
    """

    def __init__(
        self, plan: SweepPlan, *,
        session: Session,
        restart: Restarter,
        load: LoadControl | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        state_path: str | os.PathLike[str] | None = None,
        resume: bool = True,
        recorder: Any = None,
        on_event: Callable[[SweepEvent], None] | None = None,
        counters: Any = None,
        server_check: Callable[[], Awaitable[str | None]] | None = None,
    ) -> None:
        if load is None and not plan.objective.is_tps:
            raise SweepError(f"the {plan.objective.name} objective is measured on the load specmon drives: "
                             "it cannot run without it (--no-load)")
        self.plan = plan
        self.counters = counters
        self.session = session
        self._restart_fn = restart
        self.load = load
        self._clock = clock
        self._sleep = sleep
        self.state_path = Path(state_path) if state_path is not None else None
        self.recorder = recorder
        self._on_event = on_event
        self._run: Run | None = None
        self._server_steps: int | None = None
        self._server_point: Point = ()
        self._last_save = -math.inf
        self._stop_requested = False
        self._restarts = 0
        self._server_check = server_check
        #: Why the sweep stopped measuring a server that was no longer the one it started (None: it did not).
        self.lost: str | None = None
        #: Seconds each successful restart took (the launch design's cost of a new launch).
        self.restart_times: list[float] = []
        self.current: CellState | None = None
        self.resumed = False
        self.finished = False
        seed = plan.seed if plan.seed is not None else random.SystemRandom().randrange(1 << 31)
        self.seed = seed
        self.cells = [CellState(s, c, point=p, workload=w) for s, c, p, w in plan.ordered_settings(seed)]
        if self.state_path is not None and resume and self.state_path.exists():
            self._load_state()

    @property
    def server_steps(self) -> int | None:
        """The step count the server is running now, as far as the sweep knows (None: unknown or down)."""
        return self._server_steps

    @property
    def server_setting(self) -> tuple[int, Point] | None:
        """``(steps, point)`` the server is running now (None: unknown or down)."""
        return None if self._server_steps is None else (self._server_steps, self._server_point)

    # -- state file ------------------------------------------------------------------------

    def _load_state(self) -> None:
        assert self.state_path is not None
        try:
            data = read_state(self.state_path)
        except InputError as exc:  # a FIFO, a device, a huge file: its sentence names the file
            raise SweepError(str(exc)) from None
        except (OSError, ValueError) as exc:
            raise SweepError(f"cannot read sweep state {self.state_path}: {exc}") from None
        if not isinstance(data, dict) or data.get("version") != STATE_VERSION:
            raise SweepError(f"{self.state_path} is not a sweep state file this specmon understands")
        if data.get("identity") != self.plan.identity():
            raise SweepError(f"{self.state_path} holds a different sweep (other steps, concurrency or rule); "
                             "start afresh with --fresh, or give another --state file")
        try:
            cells = [CellState.from_json(c) for c in data["cells"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise SweepError(f"{self.state_path}: damaged sweep state ({exc})") from None
        if sorted(c.key for c in cells) != sorted(c.key for c in self.cells):
            raise SweepError(f"{self.state_path}: its settings do not match this plan; use --fresh")
        self.cells = cells
        self.seed = int(data.get("seed", self.seed))
        self.finished = bool(data.get("finished"))
        self.resumed = True

    def save(self) -> None:
        """Write the state file atomically (temp file + rename)."""
        if self.state_path is None:
            return
        doc = {"version": STATE_VERSION, "identity": self.plan.identity(), "plan": self.plan.to_json(),
               "seed": self.seed, "finished": self.finished, "saved_at": time.time(),
               "cells": [c.to_json() for c in self.cells]}
        # 0600 in a 0700 folder, atomically: it holds the server's log tails and failure texts.
        paths.write_private(self.state_path, json.dumps(doc, separators=(",", ":")))
        self._last_save = self._clock()

    # -- events ----------------------------------------------------------------------------

    def _emit(self, kind: str, text: str, cell: CellState | None = None) -> None:
        text = redact_text(text)  # the event log and the recording keep it: no secret value in either
        if self._on_event is not None:
            self._on_event(SweepEvent(kind, text, cell.key if cell else None))
        if self.recorder is not None:
            self.recorder.meta("sweep", kind=kind, text=text, cell=cell.key if cell else None)

    def request_stop(self) -> None:
        """Stop after the current poll; progress is saved and the sweep can be resumed."""
        self._stop_requested = True

    # -- running ---------------------------------------------------------------------------

    async def run(self) -> SweepResult:
        """Run (or continue) the sweep; returns the result (also when stopped early or when
        every restart failed: then it holds no verdict, and each setting says why)."""
        if self.finished:
            self._emit("resume", "this sweep already finished; showing its verdict")
            return self.result()
        if read_only_reason() is not None:  # a finished sweep's verdict is shown; nothing new runs
            raise SweepError(read_only_message("run a sweep (it restarts the server)"))
        rounds = LaunchRounds(self) if self.plan.order == "launches" else None
        done = sum(1 for c in self.cells if c.status in SETTLED)
        if self.resumed:
            self._emit("resume", f"resuming: {done} of {len(self.cells)} settings already measured")
        order = ", ".join(c.key for c in self.cells)
        names = "/".join(self.plan.dimensions)
        looks = (f"judged after rounds {list(rounds.looks)} of launches" if rounds is not None
                 else f"looks at {list(self.plan.rule.look_points)} samples")
        self._emit("plan", f"sweep of {len(self.cells)} settings ({names}@concurrency: {order}), order "
                           f"{self.plan.order}, {looks}")
        self.save()
        try:
            if self.plan.strategy == "guided":
                await self._guided()
            elif rounds is not None:
                await rounds.run()
            elif self.plan.order == "interleave":
                await self._interleaved()
            else:
                for cell in self.cells:
                    if self._stop_requested:
                        break
                    if cell.status in (DONE, FAILED):
                        continue
                    await self._visit(cell, until_done=True)
            if not self._stop_requested:
                self.finished = all(c.status in SETTLED for c in self.cells)
        finally:
            if self.load is not None:
                try:
                    await self.load.stop()
                except Exception:
                    pass
            if self.counters is not None:
                await self.counters.stop()
            self.current = None
            self.save()
        result = self.result()
        if self.recorder is not None:
            self.recorder.verdict(result.to_json())
        if result.verdict is not None:
            self._emit("verdict", result.verdict.sentence)
        for more in result.needs_more:  # an undecided ending says what would decide it
            self._emit("advice", more.text)
        return result

    async def _interleaved(self) -> None:
        forward = True
        while not self._stop_requested:
            todo = [c for c in self.cells if c.status not in (DONE, FAILED)]
            if not todo:
                return
            # Alternate direction: the setting measured last in one round goes first in the next,
            # so no setting always follows the same neighbour.
            for cell in (todo if forward else list(reversed(todo))):
                if self._stop_requested or cell.status in (DONE, FAILED):
                    continue
                await self._visit(cell, until_done=False)
            forward = not forward

    async def _guided(self) -> None:
        """Measure the initial design, then whatever the fitted cost model says could still win.

        Per concurrency and workload (a *group*): the settings measured so far
        (a resumed sweep keeps them) feed :func:`specmon.experiment.stats.guided.next_setting`;
        when it has nothing left, the group's unmeasured settings are marked
        skipped with the model's bound. Restarts are what costs: a setting one
        group asks for is measured, on that one restart, in every group still
        searching (their verdicts then rest on the same server launch).
        """
        groups = {g: {guided_setting(c.steps, c.point): c for c in self.cells if c.group == g}
                  for g in self.plan.groups}
        space = list(next(iter(groups.values())))
        design = list(initial_design(space))
        finished: set[tuple[int, str | None]] = set()
        while not self._stop_requested:
            wanted: Setting | None = None
            for g, cells in groups.items():
                if g in finished:
                    continue
                pending = [st for st in design if cells[st].status not in SETTLED]
                if pending:
                    wanted = pending[0]
                    break
                measured = [m for c in cells.values() if c.status == DONE and (m := measurement(c)) is not None]
                if not measured:
                    finished.add(g)  # nothing measurable: every initial setting failed
                    continue
                # A failed setting is not offered again (it would be asked for forever).
                nxt = next_setting([st for st in space if cells[st].status != FAILED], measured)
                if nxt is None:
                    self._skip_rest(cells, space, measured)
                    finished.add(g)
                    continue
                wanted = nxt
                break
            if wanted is None:
                return
            for g, cells in groups.items():
                cell = cells[wanted]
                if g in finished or cell.status in SETTLED:
                    continue
                await self._visit(cell, until_done=True)
                if cell.status == PENDING:
                    return  # stopped (or interrupted) mid-setting: resume picks it up

    def _skip_rest(self, cells: dict[Setting, CellState], space: Sequence[Setting],
                   measured: Sequence[Measurement]) -> None:
        model = Surrogate(list(measured))
        best = max(measured, key=lambda m: m.tps)
        best_name = next((c.setting_label for s, c in cells.items() if s == best.setting), best.setting.label())
        left = [s for s in space if cells[s].status not in SETTLED]
        for s in left:
            p = model.predict(s, best.concurrency)
            cell = cells[s]
            cell.status, cell.reason = SKIPPED, "model"
            cell.text = (f"the cost model bounds it at {p.upper:.1f} tok/s, below {best_name} "
                         f"({best.tps:.1f})")
        saved = len(left)
        self._emit("guided", f"guided search: {len(space) - saved} of {len(space)} settings measured, "
                             f"{counted(saved, 'restart')} saved")
        self.save()

    async def _ensure_server(self, cell: CellState) -> bool:
        crashed = self._run is not None and self._run.state is ServerState.CRASHED
        if self.server_setting == cell.setting and self._run is not None and not crashed:
            return True
        if self.load is not None:
            await self.load.stop()
        ok, why = await self._restart(cell.steps, cell.point)
        if ok:
            return True
        for c in self.cells:
            if c.setting == cell.setting and c.status not in SETTLED:
                c.status, c.reason, c.text = FAILED, "restart", why
        self._emit("failed", f"{cell.setting_label}: {why}", cell)
        self.save()
        return False

    @property
    def restarts(self) -> int:
        """Restarts this sweep asked for (a resumed sweep counts only its own)."""
        return self._restarts

    async def _restart(self, steps: int, point: Point = ()) -> tuple[bool, str]:
        self._server_steps = None
        self._server_point = ()
        self._run = None
        self._restarts += 1
        mark = len(self.session.runs)
        label = dimensions.label(steps, point)
        self._emit("restart", f"restarting the server with {label}")
        if self.recorder is not None:
            self.recorder.restart(steps=steps, phase="started", **({"dims": dict(point)} if point else {}))
        began = self._clock()
        try:
            outcome = await (self._restart_fn(steps, dict(point)) if point else self._restart_fn(steps))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            outcome = RestartOutcome(False, f"{type(exc).__name__}: {exc}" if not isinstance(exc, LaunchError)
                                     else str(exc))
        # The detail may end with the server's log tail: it is kept in the state file and the recording.
        outcome = RestartOutcome(outcome.ok, redact_text(outcome.detail), outcome.log)
        if self.recorder is not None:
            self.recorder.restart(steps=steps, phase="finished", ok=outcome.ok, detail=outcome.detail)
        if not outcome.ok:
            return False, f"restart failed: {outcome.detail}"
        self.restart_times.append(self._clock() - began)
        deadline = self._clock() + self.plan.attach_s
        fallback_at = self._clock() + self.plan.attach_s / 2
        while True:
            run, problem = self._match_run(mark, steps, point, allow_unlabelled=self._clock() >= fallback_at)
            if problem:
                return False, problem
            if run is not None:
                self._run = run
                self._server_steps = steps
                self._server_point = point
                self._emit("ready", f"server ready with {label}: {run.label} (run {run.id})")
                return True, ""
            if self._clock() >= deadline:
                return False, (f"the server reported ready but its log showed no new run within "
                               f"{self.plan.attach_s:g} s (is the log path right?)")
            await self._sleep(min(self.plan.poll_s, 0.5))

    def _match_run(self, mark: int, steps: int, point: Point = (), *,
                   allow_unlabelled: bool) -> tuple[Run | None, str]:
        return match_run(self.session.runs[mark:], steps, point, allow_unlabelled=allow_unlabelled)

    def _others(self, cell: CellState) -> tuple[Summary | None, dict[str, Summary], dict[str, str]]:
        """This setting's two-level summary, and its rivals' (same concurrency and workload)."""
        group = [c for c in self.cells if c.group == cell.group and (c is cell or c.status != FAILED)]
        summaries = group_summaries(group, self.plan.launch_cv)
        others, names = {}, {}
        for c in group:
            s = summaries.get(c.key)
            if c is not cell and s is not None:
                others[c.key] = s
                names[c.key] = c.label or c.key
        return summaries.get(cell.key), others, names

    async def _counters_ready(self) -> bool:
        """Whether this visit's samples can come from the engine's counters (says so when not)."""
        ctr = self.counters
        if ctr is None:
            return False
        ctr.rebase()  # no sample spans a restart or a load change
        ctr.start()  # scraping only while a setting is measured (never a server that is restarting)
        ok = bool(await ctr.wait_available(min(15.0, self.plan.attach_s)))
        if not ok:
            self._emit("source", f"the engine's counters are not available ({ctr.problem}); "
                                 "falling back to the server log")
        return ok

    def _start_segment(self, cell: CellState, use_counters: bool = False) -> Segment:
        run = self._run
        assert run is not None
        settle = self.plan.settle
        seg = Segment(run.source, run.id, config_json(run.config), _run=run,
                      _tp=len(run.throughput) + settle, _al=len(run.accept_len) + settle,
                      _ar=len(run.accept_rate) + settle)
        if use_counters and self.counters is not None:
            seg.kind = "counters"
            seg._cm = len(self.counters.samples) + settle
        cell.segments.append(seg)
        cfg = config_for(cell.steps, seg.config, cell.point)
        cell.label = cfg.label
        return seg

    def _pull(self, seg: Segment) -> int:
        run = seg._run
        if run is None:
            return 0
        if seg.kind == "counters":
            return self._pull_counters(seg, run)
        before = len(seg.throughput)
        for name, idx_name in (("throughput", "_tp"), ("accept_len", "_al"), ("accept_rate", "_ar")):
            src = getattr(run, name)
            start = getattr(seg, idx_name)
            if len(src) > start:
                getattr(seg, name).extend(src[start:])
                setattr(seg, idx_name, len(src))
        if run.per_position is not None:
            seg.per_position = [round(v, 4) for v in run.per_position]
        return len(seg.throughput) - before

    def _pull_counters(self, seg: Segment, run: Run) -> int:
        """Counter samples since the last pull into the segment; the log's throughput alongside."""
        if len(run.throughput) > seg._tp:
            seg.log_throughput.extend(run.throughput[seg._tp:])
            seg._tp = len(run.throughput)
        samples = self.counters.samples if self.counters is not None else []
        new = samples[seg._cm:]
        seg._cm = max(seg._cm, len(samples))
        for smp in new:
            if smp.throughput is None:
                continue
            seg.throughput.append(smp.throughput)
            if smp.tokens is not None and smp.tokens > 0 and len(seg.tokens) == len(seg.throughput) - 1:
                seg.tokens.append(smp.tokens)
            if smp.accept_len is not None:
                seg.accept_len.append(smp.accept_len)
            if smp.accept_rate is not None:
                seg.accept_rate.append(smp.accept_rate)
            if smp.per_position and smp.drafts:
                if len(seg._pp) != len(smp.per_position):
                    seg._pp, seg._pw = [0.0] * len(smp.per_position), 0.0
                seg._pp = [a + b * smp.drafts for a, b in zip(seg._pp, smp.per_position, strict=True)]
                seg._pw += smp.drafts
        if seg._pw:
            seg.per_position = [round(v / seg._pw, 4) for v in seg._pp]
        return sum(1 for smp in new if smp.throughput is not None)

    def _switched_run(self, steps: int, point: Point = ()) -> Run | None:
        """A newer run of the same configuration (the server restarted by itself) to follow instead."""
        current = self._run
        runs = self.session.runs
        if current is None or not runs or runs[-1] is current:
            return None
        newest = runs[-1]
        if newest.id > current.id and (newest.config is None or config_matches(newest.config, steps, point)):
            return newest
        return None

    async def _visit(self, cell: CellState, *, until_done: bool,
                     stop_when: Callable[[CellState, Segment], bool] | None = None) -> None:
        """Measure one setting on the running (or a restarted) server.

        Without ``stop_when`` the visit judges the setting at its planned looks (the sample
        rule); with it, the visit only collects, until ``stop_when`` says this launch has
        given what it should (the launch design of :mod:`specmon.experiment.rounds` judges after
        each round).
        """
        if not await self._ensure_server(cell):
            return
        rule = self.plan.rule
        self.current = cell
        cell.status = ACTIVE
        if self.load is not None:
            if cell.workload is not None:
                await self.load.start(cell.concurrency, workload=cell.workload)
            else:
                await self.load.start(cell.concurrency)
        use_counters = await self._counters_ready()
        seg = self._start_segment(cell, use_counters)
        on = f" on the {cell.workload} prompts" if cell.workload else ""
        self._emit("start", f"measuring {cell.label} at concurrency {cell.concurrency}{on} "
                            f"({cell.n} samples so far; source: {seg.kind})", cell)
        started = self._clock()
        base_elapsed = cell.elapsed_s
        last_progress = started
        checked_at, mark = started, _mark(cell)  # the server was checked ready just before
        points = rule.look_points
        budget_s = self.plan.max_minutes * 60.0 if self.plan.max_minutes is not None else math.inf
        report, watch = None, PendingWatch()  # (an exception waits for serving to resume: pending.py)
        try:
            while not self._stop_requested:
                await self._sleep(self.plan.poll_s)
                now = self._clock()
                cell.elapsed_s = base_elapsed + (now - started)
                if self._pull(seg):
                    last_progress = now
                run = self._run
                assert run is not None
                if watch.ended(run, now):
                    detail = run.crash_detail or "see the server log"
                    cell.status, cell.reason, cell.text = FAILED, "crash", f"the server crashed: {detail}"
                    self._emit("failed", f"{cell.label}: {cell.text}", cell)
                    self._server_steps = None
                    break
                if self._server_check is not None:
                    target = points[cell.looks_done] if cell.looks_done < len(points) else None
                    due = target is None or cell.n >= target or cell.elapsed_s >= budget_s
                    if due or now - checked_at >= SERVER_CHECK_S:
                        problem = await self._server_check()
                        if problem is not None:
                            self._server_lost(cell, mark, problem)
                            break
                        checked_at, mark = now, _mark(cell)
                newer = self._switched_run(cell.steps, cell.point)
                if newer is not None:
                    self._run = newer
                    seg = self._start_segment(cell, seg.kind == "counters")
                n = cell.n
                budget = cell.elapsed_s >= budget_s
                target = points[cell.looks_done] if cell.looks_done < len(points) else None
                if stop_when is not None:
                    if stop_when(cell, seg) or now - started >= budget_s:
                        break
                elif (target is not None and n >= target) or budget or target is None:
                    summary, others, names = self._others(cell)
                    if summary is None:
                        if budget:
                            cell.status, cell.reason = FAILED, "no-data"
                            cell.text = f"no counted samples within {self.plan.max_minutes:g} min"
                            self._emit("failed", f"{cell.label}: {cell.text}", cell)
                            break
                        continue
                    decision = rule.decide(summary, others, budget_spent=budget or target is None,
                                           label=cell.label, names=names)
                    # Every look point passed counts as used: a burst of samples never buys extra tests.
                    cell.looks_done = max(cell.looks_done + 1, sum(1 for p in points if p <= n))
                    self._emit("look", f"{cell.label}: n={n}, {summary.mean:.1f} tok/s"
                                       + (f" ± {summary.ci_half_width:.1f}" if summary.ci_half_width else "")
                                       + (f" — {decision.text}" if decision.text else " — continue"), cell)
                    if decision.stop:
                        cell.status, cell.reason, cell.text = DONE, decision.reason, decision.text
                        break
                    self.save()
                    if not until_done:
                        break
                if now - last_progress > self.plan.stall_s:
                    cell.status, cell.reason = FAILED, "stalled"
                    cell.text = f"no new sample for {self.plan.stall_s:g} s (is the load reaching the server?)"
                    self._emit("failed", f"{cell.label}: {cell.text}", cell)
                    break
                if now - self._last_save >= 5.0:
                    self.save()
        finally:
            if self.counters is not None:
                await self.counters.pause()
            if self.load is not None:
                report = await self.load.stop()
                cell.add_client(report)
                seg.add_requests(report)
            if cell.status == ACTIVE:
                cell.status = PENDING
            self.current = None
            self.save()
        if report is not None and report.errors and not report.ok:
            self._emit("failed", f"{cell.label}: every load request failed ({report.results[0].error})", cell)
        if cell.status == DONE:
            self._emit("done", f"{cell.label} done after {cell.n} samples: {cell.text or cell.reason}", cell)

    def _server_lost(self, cell: CellState, mark: tuple[int, tuple[int, ...]], problem: str) -> None:
        """The server is no longer the one this sweep started: stop, say so, keep only checked samples.

        Samples since the last check that passed may come from a server that was being stopped,
        another one, or none: they are dropped. The setting stays pending (a resumed sweep
        measures it again); nothing more is measured.
        """
        kept, sizes = mark
        dropped = sum(len(s.throughput) for s in cell.segments[kept:]) - (sizes[0] if kept < len(cell.segments)
                                                                           else 0)
        if kept < len(cell.segments):
            seg = cell.segments[kept]
            for name, size in zip(_MARKED, sizes, strict=True):
                del getattr(seg, name)[size:]
            del cell.segments[kept + 1:]
        self.lost = f"{problem}; measuring stopped"
        cell.text = self.lost
        self._server_steps = None
        self._run = None
        self._emit("failed", f"{cell.label or cell.setting_label}: {self.lost} ({counted(max(dropped, 0), 'sample')} "
                             "since the last check left out)", cell)
        self.request_stop()

    # -- results ---------------------------------------------------------------------------

    @property
    def verdict_rule(self) -> StoppingRule:
        """The rule the verdict tests with: the plan's, or the launch design's (its looks are rounds)."""
        if self.plan.order != "launches":
            return self.plan.rule
        p = self.plan
        return effective_rule(p.rule, p.resolve_pct, p.launch_cv, p.restart_s, p.rounds,
                              getattr(self, "design", None) or p.design)[0]

    def result(self) -> SweepResult:
        """The verdicts from what has been measured so far."""
        verdicts = []
        objective = []
        rule = self.verdict_rule
        for c, w in self.plan.groups:
            cells = [cell for cell in self.cells if cell.workload == w]
            if any(cell.concurrency == c and cell.n for cell in cells):
                v = sweep_verdict(analyses_from_cells(cells, c, self.plan.launch_cv), rule, c, w)
                verdicts.append(verdict_sources(v, cells, c))
            if not self.plan.objective.is_tps:
                objective.append(group_objective_verdict(self.plan, [x for x in cells if x.concurrency == c],
                                                         rule, c, w))
        return SweepResult(self.plan, list(self.cells), verdicts, self.finished,
                           str(self.state_path) if self.state_path else None, self._restarts, objective,
                           needs_more_of(self.plan, self.cells, self.restart_times, verdicts, objective))

    def snapshot(self) -> dict[str, Any]:
        """Progress for a UI: every setting's status, samples and next look."""
        points = self.plan.rule.look_points
        return {
            "current": self.current.key if self.current else None,
            "finished": self.finished,
            "cells": [{"key": c.key, "steps": c.steps, "concurrency": c.concurrency, "label": c.label,
                       "point": dict(c.point), "workload": c.workload,
                       "status": c.status, "samples": c.n, "reason": c.reason, "text": c.text,
                       "next_look": points[c.looks_done] if c.looks_done < len(points) else None,
                       "mean": (s.mean if (s := c.summary()) else None)} for c in self.cells],
        }
