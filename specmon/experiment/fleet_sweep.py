"""Parallel A/B sweeps: settings measured side by side on the replicas of a fleet, in rotated rounds.

A sequential sweep restarts one server once per setting (and again per launch), so with
15-minute loads five settings cost more than an hour of loading weights. With ``R`` replicas
the settings run side by side, under the same hour's load, and every round is one restart
cycle. In each round:

1. every replica is assigned a setting by the seeded, rotated layout of
   :mod:`specmon.experiment.stats.rotation` (balanced within the round; over ``S`` rounds each replica
   runs each setting once, so a fast replica favours none);
2. every replica is restarted with its setting *at once* (each restart's commands are shown
   first, by the restarter, as for one server), and its new run is found in its own session;
3. the same workload (concurrency, prompts) is driven to every replica, ``settle`` samples are
   skipped and ``samples`` counted samples make the launch (or its time cap ends it);
4. the launches so far are fitted with the replica as a random effect
   (:mod:`specmon.experiment.stats.replica_effects`) and judged against the leader at a level adjusted for
   the rounds planned: a winner, equivalent settings, or another round. Settings shown slower
   leave the rotation and the replicas spread over the rest.

A replica whose start fails is reported and dropped from that setting's arm (barred from it);
it goes on with the others. One replica failing never stops the round for the rest.

Everything that acts on the world is injected per replica (:class:`Arm`: restart, session,
load), so the statistical tests drive simulated replicas in-process, and the CLI hands real
ones (each a :class:`~specmon.experiment.plan_restarter.PlanRestarter` on its own host).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.experiment.stats import bai
from specmon.experiment.stats.replica_effects import (
    CONTINUE,
    EQUIVALENT,
    UNDECIDED,
    WINNER,
    FleetDecision,
    FleetFit,
    FleetLaunch,
    adjusted_level,
    decide,
    fit_fleet,
)
from specmon.experiment.stats.rotation import assign
from specmon.experiment.sweep_plan import LoadControl, Restarter, SweepError, SweepEvent
from specmon.experiment.sweep_state import match_run
from specmon.model.launches import DEFAULT_LAUNCH_CV, launch_of
from specmon.model.session import ServerState, Session
from specmon.model.verdict import NO_WINNER, Answer, answer, pct_bound
from specmon.redact import redact_text


def _request_failures(report: Any) -> str:
    """``; 88 of 88 requests failed: connection refused (is the server up?)`` (its most said error), or ""."""
    failed = [r for r in report.results if not r.ok]
    if not failed:
        return ""
    said = Counter(r.error or (f"HTTP {r.status}" if r.status else "no answer") for r in failed)
    text, _n = said.most_common(1)[0]
    return f"; {len(failed)} of {len(report.results)} requests failed: {redact_text(text)}"


def steps_label(steps: int) -> str:
    """``no speculation`` or ``3 steps``: a setting as the tables name it."""
    return "no speculation" if steps == 0 else f"{steps} step{'s' if steps != 1 else ''}"


def _closest(means: Mapping[Hashable, float], among: Mapping[Hashable, Any]) -> Hashable | None:
    """The setting of ``among`` closest to the leader: the fastest measured one (else the first)."""
    measured = [s for s in among if s in means]
    if measured:
        return max(measured, key=lambda s: means[s])
    return next(iter(among), None)


@dataclass(frozen=True)
class FleetPlan:
    """What a parallel sweep measures (checked when made).

    Attributes:
        steps: The step counts compared (0 = no speculation), two or more, distinct.
        concurrency: Requests kept in flight on every replica.
        samples: Counted samples that make one launch.
        rounds: Rounds at most (the tests' level is adjusted for this many looks).
        seed: The layout's seed (None: drawn, and reported so the layout can be redone).
        alpha: Chance of ever calling two equal settings different.
        margin_pct: Settings within ± this share of the leader are equivalent.
        launch_cv: The launch CV assumed while no setting has two launches (a fraction).
        settle: Samples skipped after the load starts, per launch.
        launch_minutes: A launch's time cap (it counts with the samples it has then).
        attach_s: Seconds to wait for a restarted server's new run in its log.
        stall_s: A launch with no new sample for this long ends (failed: the load is not reaching it).
        poll_s: How often the launches are checked.
        check_s: A launch with no new sample for this long asks whether its server is still there
            (:attr:`Arm.check`), and again every ``check_s`` while none comes: a replica that died
            ends its launch with the cause when it is seen, not after the launch's whole budget.
    """

    steps: tuple[int, ...]
    concurrency: int = 1
    samples: int = 40
    rounds: int | None = None
    seed: int | None = None
    alpha: float = 0.05
    margin_pct: float = 1.0
    launch_cv: float = DEFAULT_LAUNCH_CV
    settle: int = 2
    launch_minutes: float = 10.0
    attach_s: float = 120.0
    stall_s: float = 120.0
    poll_s: float = 1.0
    check_s: float = 10.0
    #: ``bai``: after two launches each, rounds fill with the leader and its closest challenger (model/bai.py).
    design: str = "today"

    def __post_init__(self) -> None:
        if len(self.steps) < 2:
            raise SweepError("a parallel sweep compares two or more settings: give --steps with at least two")
        if len(set(self.steps)) != len(self.steps):
            raise SweepError("each step count once in --steps")
        if self.samples < 3:
            raise SweepError("a launch needs at least 3 counted samples (--min-samples)")
        if self.rounds is not None and self.rounds < 1:
            raise SweepError("--rounds must be at least 1")
        if not 0 < self.alpha < 1:
            raise SweepError("--alpha must be in (0, 1)")

    @property
    def max_rounds(self) -> int:
        """Rounds at most: as given, or twice the settings (each replica runs each setting twice)."""
        return self.rounds if self.rounds is not None else 2 * len(self.steps)

    @property
    def level(self) -> float:
        """Two-sided confidence of every test (see :func:`specmon.experiment.stats.replica_effects.adjusted_level`)."""
        return adjusted_level(self.alpha, self.max_rounds)


@dataclass
class Arm:
    """One replica as a parallel sweep acts on it.

    Attributes:
        name: What the tables call it.
        restart: Restarts its server with a step count and waits for ready (commands shown first).
        session: The session its log feeds.
        load: Its workload (None: the traffic comes from elsewhere).
        check: Says why the server measured is gone (its process exited, with its log's last
            words; another one in its pidfile), or None while it runs or when that cannot be told.
            By default the restarter's own ``check_server`` when it has one (a managed start
            knows its server's PID).
    """

    name: str
    restart: Restarter
    session: Session
    load: LoadControl | None = None
    check: Callable[[], Awaitable[str | None]] | None = None

    def __post_init__(self) -> None:
        if self.check is None:
            self.check = getattr(self.restart, "check_server", None)


@dataclass
class LaunchRecord:
    """One cell of the allocation table: a replica's launch in a round, measured or failed."""

    round: int
    replica: str
    steps: int
    ok: bool
    text: str = ""
    mean: float | None = None
    samples: int = 0
    accept_len: float | None = None
    requests: int = 0
    errors: int = 0
    seconds: float = 0.0
    began: float = field(default=0.0, repr=False)

    def to_json(self) -> dict[str, Any]:
        return {"round": self.round, "replica": self.replica, "steps": self.steps, "ok": self.ok,
                "text": self.text or None, "tok_s": None if self.mean is None else round(self.mean, 3),
                "samples": self.samples,
                "accept_len": None if self.accept_len is None else round(self.accept_len, 4),
                "requests": self.requests, "errors": self.errors, "seconds": round(self.seconds, 2)}


@dataclass
class FleetSweepResult:
    """What a parallel sweep found: the allocation, every launch, the fit and the decision."""

    plan: FleetPlan
    seed: int
    replicas: list[str]
    records: list[LaunchRecord]
    fit: FleetFit | None
    decision: FleetDecision | None
    rounds_run: int
    seconds: float
    stopped: bool = False
    launches: list[FleetLaunch] = field(default_factory=list, repr=False)
    #: Per round run: its layout, and the settings that left the rotation at its look (slower, or
    #: that no replica could start), so a reader sees why a later round holds fewer settings.
    rounds: list[dict[str, Any]] = field(default_factory=list)

    @property
    def winner(self) -> int | None:
        """The winning step count, when there is one."""
        d = self.decision
        return int(d.leader) if d is not None and d.kind == WINNER else None  # type: ignore[call-overload]

    def sentence(self) -> str:
        """The verdict in one sentence, with what it rests on (the answer's, :attr:`answer`)."""
        return self.answer.sentence

    @property
    def answer(self) -> Answer:
        """The verdict as every surface draws it (:mod:`specmon.model.verdict`): ★ only for a declared
        winner, ☆ for a leader not separated, in the sentence shapes of a sequential sweep's verdict.

        Its runner-up is the setting the sentence compares the leader with: the closest one beaten (a
        winner), the closest equivalent one, or the closest one not told apart from it.
        """
        d, ff, plan = self.decision, self.fit, self.plan
        level = d.level if d is not None else plan.level
        means = {} if ff is None else ff.means
        if ff is None or not means:
            why = "the sweep was stopped before" if self.stopped else "no round gave"
            return answer(leader=None, runner_up=None, separated=False, equivalent=False, level=level,
                          sentence=f"Not enough data: {why} two settings with launches of 3+ samples.")
        leader = d.leader if d is not None else max(means, key=lambda s: means[s])
        lead = steps_label(int(leader))  # type: ignore[call-overload]
        planned = f"{plan.max_rounds} round{'s' if plan.max_rounds != 1 else ''}"
        rounds = f"{self.rounds_run} of {planned}"
        rests = (f" Rests on {rounds}{' (stopped)' if self.stopped else ''}: {ff.covers()}; each comparison "
                 f"at {100 * level:.2f}% (adjusted for {planned}, {100 * (1 - plan.alpha):g}% overall).")
        head = self._head(ff, leader)
        among: Mapping[Hashable, tuple[float, float | None, float | None]]
        if d is None:  # no look judged them: every other measured setting is open
            kind, among = UNDECIDED, {s: (math.nan, None, None) for s in means if s != leader}
        else:
            kind = d.kind if d.kind in (WINNER, EQUIVALENT) else UNDECIDED
            among = d.slower if kind == WINNER else d.equivalent if kind == EQUIVALENT else d.open
        closest = _closest(means, among)
        if closest is None:
            return answer(leader=lead, runner_up=None, separated=False, equivalent=False, level=level,
                          leader_steps=int(leader),  # type: ignore[call-overload]
                          sentence=f"{head}; nothing else to compare with.{rests}")
        runner = steps_label(int(closest))  # type: ignore[call-overload]
        others = [steps_label(int(s)) for s in among if s != closest and s in means]  # type: ignore[call-overload]
        at = f"{100 * level:.2f}% interval"
        pct, lo, hi = among[closest]
        if kind == WINNER:
            assert lo is not None and hi is not None
            tail = (f"; faster than {runner} by {pct_bound(pct).replace('+', '', 1)}% ({at} {pct_bound(lo)}…"
                    f"{pct_bound(hi)}%, adjusted "
                    f"for repeated looks)" + (f", and than {', '.join(others)}" if others else "") + ".")
        elif kind == EQUIVALENT:
            assert lo is not None and hi is not None
            also = f", as {'is' if len(others) == 1 else 'are'} {', '.join(others)}" if others else ""
            tail = (f"; {runner} is equivalent within ±{self.plan.margin_pct:g}% ({at} of the difference "
                    f"{pct_bound(lo)}…{pct_bound(hi)}%){also}: {'any of them' if others else 'either'} will do.")
        else:
            unmeasured = [steps_label(int(s)) for s in among if s not in means]  # type: ignore[call-overload]
            if closest in means:
                names = ", ".join([runner, *others])
                verb = "are" if others else "is"
                iv = ""
                if lo is not None and hi is not None:
                    iv = (f" ({at} of the difference{f' from {runner}' if others else ''} {pct_bound(lo)}…"
                          f"{pct_bound(hi)}%, wider than ±{self.plan.margin_pct:g}%)")
                tail = f"; {names} {verb} not distinguishable{iv}"
                tail += f", and {', '.join(unmeasured)} not measured" if unmeasured else ""
            else:
                tail = f"; {', '.join(unmeasured)} not measured"
            tail += f": {NO_WINNER}."
        return answer(leader=lead, runner_up=runner, separated=kind == WINNER, equivalent=kind == EQUIVALENT,
                      sentence=head + tail + rests, leader_steps=int(leader),  # type: ignore[call-overload]
                      runner_up_steps=int(closest), level=level)  # type: ignore[call-overload]

    def _head(self, ff: FleetFit, leader: Hashable) -> str:
        """``2 steps: +17.5% (+12.0…+23.1%) over no speculation at concurrency 1`` (95%, as a sequential
        sweep's speed-up), or its tok/s where no speculation was not measured."""
        lead = steps_label(int(leader))  # type: ignore[call-overload]
        at = f" at concurrency {self.plan.concurrency}"
        if leader == 0:
            return f"{lead} is fastest{at} ({ff.means[leader]:.1f} tok/s)"
        if 0 not in ff.means:
            return f"{lead}: {ff.means[leader]:.1f} tok/s{at} (no speculation not measured)"
        pct, lo, hi = ff.ratio_pct(leader, 0, 0.95)
        iv = f" ({pct_bound(lo)}…{pct_bound(hi)}%)" if lo is not None and hi is not None else ""
        return f"{lead}: {pct_bound(pct)}%{iv} over no speculation{at}"

    def to_json(self) -> dict[str, Any]:
        d, ff = self.decision, self.fit
        made = self.answer
        settings = []
        for s in self.plan.steps:
            row: dict[str, Any] = {"steps": s, "label": steps_label(s),
                                   "launches": ff.launches.get(s, 0) if ff else 0}
            if ff is not None and s in ff.means:
                iv = ff.interval(s)
                row.update(tok_s=round(ff.means[s], 3),
                           ci95=None if iv is None else [round(iv[0], 3), round(iv[1], 3)])
                if d is not None and s != d.leader:
                    pct, lo, hi = ff.ratio_pct(d.leader, s, d.level)
                    row["leader_ahead_pct"] = [round(pct, 3), None if lo is None else round(lo, 3),
                                               None if hi is None else round(hi, 3)]
            settings.append(row)
        return {
            "kind": "parallel-sweep", "seed": self.seed, "replicas": self.replicas,
            "concurrency": self.plan.concurrency, "samples_per_launch": self.plan.samples,
            "rounds_planned": self.plan.max_rounds, "rounds_run": self.rounds_run, "seconds": round(self.seconds, 1),
            "stopped": self.stopped,
            "verdict": {"kind": None if d is None else d.kind, "winner_steps": self.winner,
                        "leader_steps": made.leader_steps, "level": None if d is None else d.level,
                        "model": None if ff is None else ff.model, "rests_on": None if ff is None else ff.covers(),
                        "replica_cv": None if ff is None else ff.replica_cv,
                        "runner_up_steps": made.runner_up_steps,
                        "sentence": made.sentence, "answer": made.to_json()},
            "settings": settings,
            "rounds": [dict(r) for r in self.rounds],
            "launches": [r.to_json() for r in self.records],
        }


class FleetSweep:
    """Runs a :class:`FleetPlan` over ``arms`` (see the module docstring)."""

    def __init__(self, plan: FleetPlan, arms: Sequence[Arm], *,
                 clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
                 on_event: Callable[[SweepEvent], None] | None = None, recorder: Any = None) -> None:
        if not arms:
            raise SweepError("a parallel sweep needs at least one replica")
        names = [a.name for a in arms]
        if len(set(names)) != len(names):
            raise SweepError("two replicas have one name: name them apart in the profile")
        self.plan = plan
        self.arms = list(arms)
        self._clock = clock
        self._sleep = sleep
        self._on_event = on_event
        self.recorder = recorder
        self.seed = plan.seed if plan.seed is not None else random.SystemRandom().randrange(1 << 31)
        self.records: list[LaunchRecord] = []
        self.launches: list[FleetLaunch] = []
        #: Per replica, the settings it failed to start with (dropped from those arms).
        self.barred: dict[str, set[int]] = {a.name: set() for a in arms}
        #: What each replica runs now, as far as the sweep knows (None: unknown, failed or stopped).
        self.running: dict[str, int | None] = dict.fromkeys(names)
        self._stop = False

    def request_stop(self) -> None:
        """Stop after the round under way (its launches end at their next check)."""
        self._stop = True

    def _emit(self, kind: str, text: str) -> None:
        text = redact_text(text)
        if self._on_event is not None:
            self._on_event(SweepEvent(kind, text, None))
        if self.recorder is not None:
            self.recorder.meta("fleet-sweep", kind=kind, text=text)

    async def run(self) -> FleetSweepResult:
        """Run rounds until a decision or the last round; returns the result (also when stopped)."""
        plan = self.plan
        began = self._clock()
        open_steps = list(plan.steps)
        decision: FleetDecision | None = None
        ff: FleetFit | None = None
        names = [a.name for a in self.arms]
        self._emit("plan", f"parallel sweep of {len(plan.steps)} settings ({', '.join(map(str, plan.steps))} steps) "
                           f"on {len(self.arms)} replicas at concurrency {plan.concurrency}: up to {plan.max_rounds} "
                           f"rounds of {plan.samples} samples per launch, layout seed {self.seed}")
        rounds_run = 0
        log: list[dict[str, Any]] = []
        try:
            for k in range(plan.max_rounds):
                if self._stop:
                    break
                layout = assign(names, self._contenders(open_steps, ff, decision), k, self.seed, self.barred)
                if not layout:
                    self._emit("failed", "no replica can run any open setting: every start failed")
                    break
                self._emit("round", f"round {k + 1}: " + ", ".join(
                    f"{n} → {steps_label(layout[n])}" for n in names if n in layout))
                if self.recorder is not None:
                    self.recorder.meta("fleet-sweep-round", round=k + 1, layout=dict(layout))
                arms = [a for a in self.arms if a.name in layout]
                await asyncio.gather(*(self._launch(a, layout[a.name], k) for a in arms))
                rounds_run = k + 1
                entry: dict[str, Any] = {"round": k + 1, "layout": {n: layout[n] for n in names if n in layout},
                                         "left_out": []}
                log.append(entry)
                lost = [s for s in open_steps if all(s in self.barred[n] for n in names)]
                entry["left_out"] += [{"steps": s, "why": "no replica could start it"} for s in lost]
                if lost:  # no replica can start it: it cannot be measured, and must not hold the others up
                    open_steps = [s for s in open_steps if s not in lost]
                    self._emit("failed", "no replica could start " + ", ".join(steps_label(s) for s in lost)
                               + ": left out of the comparison")
                    if not open_steps:
                        break
                ff = fit_fleet(self.launches, plan.launch_cv)
                if ff is None:
                    continue
                last = k == plan.max_rounds - 1
                decision = decide(ff, open_steps, level=plan.level, margin_pct=plan.margin_pct, last=last)
                if decision is None:
                    continue
                self._emit("look", self._look_text(k + 1, ff, decision))
                if decision.stop:
                    break
                dropped = [s for s in open_steps if s in decision.slower]
                open_steps = [s for s in open_steps if s not in decision.slower]
                why = f"slower than {steps_label(int(decision.leader))}"  # type: ignore[call-overload]
                entry["left_out"] += [{"steps": s, "why": why} for s in dropped]
                if dropped:
                    self._emit("look", f"left out of the next rounds ({why}): "
                                       + ", ".join(steps_label(s) for s in dropped))
        finally:
            await asyncio.gather(*(a.load.stop() for a in self.arms if a.load is not None), return_exceptions=True)
        if decision is not None and decision.kind == CONTINUE:
            # Stopped (or out of replicas) before the planned last round: said as not separated.
            decision = FleetDecision("undecided", decision.leader, decision.slower, decision.equivalent,
                                     decision.open, decision.level)
        result = FleetSweepResult(plan, self.seed, names, self.records, ff, decision, rounds_run,
                                  self._clock() - began, self._stop, list(self.launches), log)
        if self.recorder is not None:
            self.recorder.verdict(result.to_json())
        self._emit("verdict", result.sentence())
        return result

    def _contenders(self, open_steps: list[int], ff: FleetFit | None, d: FleetDecision | None) -> list[int]:
        """The settings this round's rotation spreads the replicas over: every open one, or with the
        best-arm design the leader and its closest challenger once each has two launches."""
        if self.plan.design != bai.NAME or ff is None or d is None or d.leader is None:
            return open_steps
        lead = d.leader
        high: dict[Hashable, float | None] = {s: ff.ratio_pct(s, lead, self.plan.level)[2] for s in open_steps
                                              if s != lead and s in ff.means}
        return [int(s) for s in bai.fleet_pick(open_steps, ff.launches, lead, high)]  # type: ignore[call-overload]

    def _look_text(self, rnd: int, ff: FleetFit, d: FleetDecision) -> str:
        parts = []
        for s in self.plan.steps:
            if s in ff.means:
                parts.append(f"{steps_label(s)} {ff.means[s]:.1f}")
        head = f"after round {rnd}: " + ", ".join(parts) + " tok/s"
        return f"{head} ({ff.model}) — {d.kind}"

    async def _launch(self, arm: Arm, steps: int, rnd: int) -> None:
        """Restart ``arm`` with ``steps``, drive the load, and record the launch (or why it failed)."""
        plan = self.plan
        began = self._clock()
        rec = LaunchRecord(rnd + 1, arm.name, steps, False, began=began)
        self.records.append(rec)
        self.running[arm.name] = None
        if arm.load is not None:
            await arm.load.stop()
        mark = len(arm.session.runs)
        self._emit("restart", f"{arm.name}: restarting with {steps_label(steps)}")
        try:
            outcome = await arm.restart(steps)
            ok, detail = outcome.ok, outcome.detail
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # a restarter's own failure: this replica's launch fails, not the sweep
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        if not ok:
            self._fail(arm, rec, steps, f"restart failed: {redact_text(detail)}", bar=True)
            return
        run = None
        deadline = self._clock() + plan.attach_s
        while run is None:
            run, problem = match_run(arm.session.runs[mark:], steps,
                                     allow_unlabelled=self._clock() >= deadline - plan.attach_s / 2)
            if problem:
                self._fail(arm, rec, steps, problem, bar=True)
                return
            if run is None:
                if self._clock() >= deadline:
                    self._fail(arm, rec, steps, f"ready, but its log showed no new run within {plan.attach_s:g} s",
                               bar=True)
                    return
                await self._sleep(min(plan.poll_s, 0.5))
        self.running[arm.name] = steps
        if arm.load is not None:
            await arm.load.start(plan.concurrency)
        start = len(run.throughput) + plan.settle
        cap = plan.launch_minutes * 60.0
        measuring = self._clock()
        last_n, last_progress = len(run.throughput), measuring
        last_check = measuring
        why = ""
        gone = False
        try:
            while not self._stop:
                await self._sleep(plan.poll_s)
                now = self._clock()
                n = len(run.throughput)
                if n != last_n:
                    last_n, last_progress = n, now
                if run.state is ServerState.CRASHED and not run.crash_pending:
                    why = f"the server crashed: {run.crash_cause or run.crash_detail or 'see its log'}"
                    break
                if n - start >= plan.samples or now - measuring >= cap:
                    break
                if (arm.check is not None and now - last_progress >= plan.check_s
                        and now - last_check >= plan.check_s):
                    # No sample for a while: is its server still there? A kill -9, the host's OOM
                    # killer or a crash the log does not word leaves no line to read.
                    last_check = now
                    exited = await arm.check()
                    if exited:
                        why, gone = redact_text(exited), True
                        break
                if now - last_progress >= plan.stall_s:
                    # An error with no serving after it (pending until now): the server's end.
                    why = (f"the server crashed: {run.crash_cause or run.crash_detail or 'see its log'}"
                           if run.state is ServerState.CRASHED else
                           f"no new sample for {plan.stall_s:g} s (is the load reaching it?)")
                    break
        finally:
            report = await arm.load.stop() if arm.load is not None else None
        if not why and run.state is ServerState.CRASHED:
            # Its log ended in an error with no serving after it: the end of the input confirms it.
            why = f"the server crashed: {run.crash_cause or run.crash_detail or 'see its log'}"
        values = list(run.throughput[start:start + plan.samples])
        rec.seconds = self._clock() - began
        failed_requests = ""
        if report is not None:
            rec.requests, rec.errors = len(report.results), report.errors
            failed_requests = _request_failures(report)
        dead = gone or run.state is ServerState.CRASHED
        if why and len(values) < 3:
            self.running[arm.name] = None if dead else steps
            self._fail(arm, rec, steps, why + ("" if dead else failed_requests), bar=dead)
            return
        launch = launch_of(values, name=f"{arm.name} round {rnd + 1}")
        if launch is None or launch.se is None:
            # Say what its requests met (the connection refused of a replica that died unseen).
            self._fail(arm, rec, steps, f"only {len(values)} counted samples (3 needed){failed_requests}", bar=False)
            return
        al = run.accept_len[-len(values):] if run.accept_len else []
        rec.ok, rec.mean, rec.samples = True, launch.mean, launch.n
        rec.accept_len = sum(al) / len(al) if al else None
        rec.text = why
        self.launches.append(FleetLaunch(arm.name, steps, rnd, launch))
        self._emit("done", f"{arm.name}: {steps_label(steps)} {launch.mean:.1f} tok/s over {launch.n} samples"
                           + (f" ({why})" if why else ""))

    def _fail(self, arm: Arm, rec: LaunchRecord, steps: int, why: str, *, bar: bool) -> None:
        rec.ok, rec.text = False, why
        rec.seconds = rec.seconds or self._clock() - rec.began
        if bar:
            self.barred[arm.name].add(steps)
        self._emit("failed", f"{arm.name}: {steps_label(steps)}: {why}"
                             + ("; dropped from this setting's arm" if bar else ""))
