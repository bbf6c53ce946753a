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
(:mod:`specmon.control.rounds`: rounds of fresh launches of every undecided
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
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from specmon import paths
from specmon.control import dims as dimensions
from specmon.control.dims import Point
from specmon.control.guard import read_only_message, read_only_reason
from specmon.control.launch import CommandPlan, LaunchError, LaunchProfile, build_plan, parse_result_line
from specmon.control.load import LoadReport
from specmon.control.runner import CommandRunner, StepEvent, execute, wait_ready
from specmon.model.analysis import Analysis, ConfigRow, analyze, summarize_runs
from specmon.model.design import summaries as design_summaries
from specmon.model.guided import Measurement, Setting, Surrogate, initial_design, next_setting
from specmon.model.launches import DEFAULT_LAUNCH_CV, Launch, launch_of
from specmon.model.schedule import Schedule, schedules_from
from specmon.model.session import Run, RunConfig, ServerState, Session
from specmon.model.stats import Summary, summarize
from specmon.model.stopping import StoppingRule, SweepVerdict, check_source, sweep_verdict
from specmon.records import Config, Decode, Engine, Spec
from specmon.redact import redact_text
from specmon.sources.base import stop_reading
from specmon.wording import counted

ORDERS = ("given", "random", "interleave", "launches")
#: ``grid`` measures every setting; ``guided`` only those the cost model says could win (model/guided.py).
STRATEGIES = ("grid", "guided")
STATE_VERSION = 1

PENDING, ACTIVE, DONE, FAILED = "pending", "active", "done", "failed"
#: A setting the guided strategy did not restart for: the model bounds it below the best measured.
SKIPPED = "skipped"
SETTLED = (DONE, FAILED, SKIPPED)


class SweepError(Exception):
    """A sweep cannot start or continue (bad plan, incompatible state file); the message says why."""


# --------------------------------------------------------------------------- injected parts


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """What a restart did: ``ok`` means started *and* ready."""

    ok: bool
    detail: str = ""
    log: str | None = None


class Restarter(Protocol):
    """Restarts the server with ``steps`` speculative steps and waits until it is ready.

    A sweep over more dimensions than the step count also passes ``dims``, the
    setting's other launch parameters (``{"topk": 4, "draft_tokens": 8}``); a
    steps-only sweep calls ``restart(steps)``, so restarters that know only the
    step count keep working.
    """

    def __call__(self, steps: int, dims: dict[str, int | str] | None = None) -> Awaitable[RestartOutcome]:
        """Apply ``steps`` (0 = no speculation) and ``dims``."""
        ...


class LoadControl(Protocol):
    """Starts and stops the workload a sweep measures."""

    async def start(self, concurrency: int, workload: str | None = None) -> None:
        """Start keeping ``concurrency`` requests in flight (with the named prompt set ``workload``).

        A sweep without workloads calls ``start(concurrency)`` only.
        """
        ...

    async def stop(self) -> LoadReport | None:
        """Stop; return the client-side report of the run."""
        ...


@dataclass(frozen=True, slots=True)
class SweepEvent:
    """A progress message for the user (stderr, the dashboard's event log)."""

    kind: str  # plan, restart, ready, start, look, done, failed, resume, verdict
    text: str
    cell: str | None = None


# --------------------------------------------------------------------------- plan and state


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep and how.

    Attributes:
        steps: Step counts to try; 0 = no speculation (the baseline).
        concurrency: Load concurrencies to measure at each step count.
        order: ``given``, ``random`` or ``interleave``.
        seed: Seed of the random order (None: drawn once and kept in the state).
        rule: The sequential stopping rule.
        max_minutes: Collection budget per setting, minutes (None: samples only).
        settle: Samples skipped after the load starts or changes.
        stall_s: A setting fails when no sample arrives for this long.
        attach_s: How long to wait for the restarted server's run to show in the log.
        poll_s: How often the session is read.
        strategy: ``grid`` (every setting) or ``guided`` (the cost model picks what to measure).
        points: The settings when they have more dimensions than the step count:
            ``(steps, point)`` pairs from :func:`specmon.control.dims.expand_grid`
            (empty: one setting per step count). ``steps`` must then list their step counts.
    """

    steps: tuple[int, ...]
    concurrency: tuple[int, ...] = (1,)
    order: str = "given"
    seed: int | None = None
    rule: StoppingRule = field(default_factory=StoppingRule)
    max_minutes: float | None = 10.0
    settle: int = 2
    stall_s: float = 180.0
    attach_s: float = 120.0
    poll_s: float = 1.0
    strategy: str = "grid"
    points: tuple[tuple[int, Point], ...] = ()
    #: Named prompt sets, each measured at every setting (empty: the load's one set).
    workloads: tuple[str, ...] = ()
    #: Launch CV assumed while no setting has two launches (a fraction; ``--launch-cv`` in percent).
    launch_cv: float = DEFAULT_LAUNCH_CV
    #: The difference worth resolving, percent (``--resolve-pct``): with it (or ``order="launches"``) the
    #: sweep buys launches as well as samples (:mod:`specmon.control.rounds`).
    resolve_pct: float | None = None
    #: Start-up time assumed before the first restart is timed, seconds (a restart's cost).
    restart_s: float = 60.0

    def __post_init__(self) -> None:
        if len(set(self.workloads)) != len(self.workloads):
            raise SweepError("a workload is listed twice")
        for w in self.workloads:
            if not isinstance(w, str) or not w or any(not (ch.isalnum() or ch in "-_") for ch in w):
                raise SweepError(f"a workload name is letters, digits, - and _: {w!r}")
        if self.points:
            try:
                checked = tuple((s, dimensions.check_point(dict(p))) for s, p in self.points)
            except ValueError as exc:
                raise SweepError(str(exc)) from None
            if checked != tuple(self.points):
                raise SweepError("points must be validated and in canonical order (use dims.expand_grid)")
            if len(set(self.points)) != len(self.points):
                raise SweepError("a setting is listed twice")
            if tuple(dict.fromkeys(s for s, _ in self.points)) != tuple(self.steps):
                raise SweepError("steps must list the step counts of the points, in order")
        if not self.steps:
            raise SweepError("give at least one step count")
        for s in self.steps:
            if type(s) is not int or s < 0:
                raise SweepError(f"step counts are whole numbers >= 0, not {s!r}")
        if len(set(self.steps)) != len(self.steps):
            raise SweepError("a step count is listed twice")
        for s, p in self.settings:
            problem = dimensions.point_problem(s, dict(p))
            if problem:
                raise SweepError(f"{dimensions.label(s, p)}: {problem}")
        if not self.concurrency or any(type(c) is not int or c < 1 for c in self.concurrency):
            raise SweepError("concurrency values are whole numbers >= 1")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise SweepError("a concurrency is listed twice")
        if self.strategy not in STRATEGIES:
            raise SweepError(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}")
        if self.strategy == "guided" and self.order == "interleave":
            raise SweepError("the guided strategy chooses its own order: use --order given or random")
        if self.order not in ORDERS:
            raise SweepError(f"order must be one of {', '.join(ORDERS)}, not {self.order!r}")
        if not (0 <= self.launch_cv < 1):
            raise SweepError("the launch CV is a percentage from 0 to below 100")
        if self.resolve_pct is not None and not 0 < self.resolve_pct < 100:
            raise SweepError("--resolve-pct must be between 0 and 100")
        if self.restart_s < 0:
            raise SweepError("restart_s must be >= 0")
        if self.order == "launches" and self.strategy == "guided":
            raise SweepError("the guided strategy chooses its own order: use --order given or random")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise SweepError("max_minutes must be positive")
        if self.settle < 0 or self.stall_s <= 0 or self.attach_s <= 0 or self.poll_s <= 0:
            raise SweepError("settle must be >= 0; stall_s, attach_s and poll_s positive")

    def identity(self) -> dict[str, Any]:
        """The fields a resumed sweep must share with the interrupted one."""
        r = self.rule
        return {"steps": list(self.steps), "concurrency": list(self.concurrency), "order": self.order,
                "rule": {"alpha": r.alpha, "looks": r.looks, "min_samples": r.min_samples,
                         "max_samples": r.max_samples, "margin_pct": r.margin_pct,
                         "precision_pct": r.precision_pct},
                "max_minutes": self.max_minutes, "settle": self.settle,
                **({"strategy": self.strategy} if self.strategy != "grid" else {}),
                **({"points": [dimensions.key(s, p) for s, p in self.points]} if self.points else {}),
                **({"workloads": list(self.workloads)} if self.workloads else {}),
                **({"launch_cv": self.launch_cv} if self.launch_cv != DEFAULT_LAUNCH_CV else {}),
                **({"resolve_pct": self.resolve_pct} if self.resolve_pct is not None else {})}

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        return {**self.identity(), "seed": self.seed, "stall_s": self.stall_s, "attach_s": self.attach_s,
                "poll_s": self.poll_s}

    @property
    def settings(self) -> tuple[tuple[int, Point], ...]:
        """Every ``(steps, point)`` setting (a point is empty for a steps-only sweep)."""
        return self.points or tuple((s, ()) for s in self.steps)

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The dimensions swept: ``("steps",)`` or e.g. ``("steps", "topk", "draft_tokens")``."""
        used = {k for _, p in self.settings for k, _ in p}
        return ("steps", *(d for d in dimensions.EXTRA if d in used))

    def ordered_settings(self, seed: int) -> list[tuple[int, int, Point, str | None]]:
        """``(steps, concurrency, point, workload)`` in measuring order (the concurrencies and workloads of
        one setting stay together: one restart serves them all)."""
        settings = list(self.settings)
        if self.order == "random":
            random.Random(seed).shuffle(settings)
        loads: tuple[str | None, ...] = self.workloads or (None,)
        return [(s, c, p, w) for s, p in settings for c in self.concurrency for w in loads]

    def ordered_cells(self, seed: int) -> list[tuple[int, int]]:
        """``(steps, concurrency)`` in measuring order (a steps-only sweep's settings)."""
        return [(s, c) for s, c, _, _ in self.ordered_settings(seed)]

    @property
    def groups(self) -> list[tuple[int, str | None]]:
        """Every ``(concurrency, workload)`` a verdict is given for."""
        return [(c, w) for c in self.concurrency for w in (self.workloads or (None,))]


def cell_key(steps: int, concurrency: int, point: Point = (), workload: str | None = None) -> str:
    """The state file's name for a setting: ``"2@1"``, ``"2/topk=4/draft_tokens=8@1"``, ``"2@1#code"``."""
    return f"{dimensions.key(steps, point)}@{concurrency}" + (f"#{workload}" if workload else "")


@dataclass
class Segment:
    """Samples of one setting from one server run (a setting measured in several visits has several)."""

    source: str
    run_id: int | None
    config: dict[str, Any] | None
    throughput: list[float] = field(default_factory=list)
    accept_len: list[float] = field(default_factory=list)
    accept_rate: list[float] = field(default_factory=list)
    per_position: list[float] | None = None
    #: Where the samples above come from: ``counters`` (the engine's /metrics) or ``log``.
    kind: str = "log"
    #: The log's throughput samples of a counters segment (kept for the cross-check).
    log_throughput: list[float] = field(default_factory=list)
    #: Tokens behind each counter throughput sample (same order; empty for log segments): weights
    #: for the pooled figure the cross-check compares with the client's pooled one.
    tokens: list[float] = field(default_factory=list)
    # Live bookkeeping, not persisted: where the next new sample starts in the run's arrays.
    _run: Run | None = field(default=None, repr=False)
    _tp: int = 0
    _al: int = 0
    _ar: int = 0
    _cm: int = 0  # next counter sample
    _pp: list[float] = field(default_factory=list, repr=False)  # per-position sums weighted by drafts
    _pw: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """Persisted form (samples rounded to what logs print)."""
        return {"source": self.source, "run_id": self.run_id, "config": self.config, "kind": self.kind,
                "throughput": [round(v, 3) for v in self.throughput],
                "accept_len": [round(v, 4) for v in self.accept_len],
                "accept_rate": [round(v, 4) for v in self.accept_rate],
                "per_position": self.per_position,
                "log_throughput": [round(v, 3) for v in self.log_throughput],
                "tokens": [round(v, 1) for v in self.tokens]}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Segment:
        """Inverse of :meth:`to_json`."""
        return cls(str(d.get("source", "")), d.get("run_id"), d.get("config"),
                   [float(v) for v in d.get("throughput", [])], [float(v) for v in d.get("accept_len", [])],
                   [float(v) for v in d.get("accept_rate", [])], d.get("per_position"),
                   str(d.get("kind", "log")), [float(v) for v in d.get("log_throughput", [])],
                   [float(v) for v in d.get("tokens", [])])

    @property
    def log_samples(self) -> list[float]:
        """The log's throughput samples of this segment, whichever source drives it."""
        return self.log_throughput if self.kind == "counters" else self.throughput


@dataclass
class CellState:
    """One setting's progress."""

    steps: int
    concurrency: int
    status: str = PENDING
    reason: str = ""
    text: str = ""
    looks_done: int = 0
    elapsed_s: float = 0.0
    segments: list[Segment] = field(default_factory=list)
    client: dict[str, Any] = field(default_factory=lambda: {"requests": 0, "errors": 0, "output_tokens": 0,
                                                            "decode_tps": [], "ttft_s": [], "seconds": 0.0,
                                                            "untimed": 0})
    label: str = ""
    #: The setting's dimensions beyond the step count (empty for a steps-only sweep).
    point: Point = ()
    #: The named prompt set it is measured with (None: the load's one set).
    workload: str | None = None
    _summary: tuple[int, Summary | None] | None = field(default=None, repr=False)

    @property
    def key(self) -> str:
        """``"steps@concurrency"`` (with the point's dimensions when there are any)."""
        return cell_key(self.steps, self.concurrency, self.point, self.workload)

    @property
    def group(self) -> tuple[int, str | None]:
        """``(concurrency, workload)``: the settings one verdict compares."""
        return self.concurrency, self.workload

    @property
    def setting(self) -> tuple[int, Point]:
        """``(steps, point)``: what the server is started with."""
        return self.steps, self.point

    @property
    def setting_label(self) -> str:
        """``2 steps`` or ``2 steps, topk 4, draft_tokens 8``."""
        return dimensions.label(self.steps, self.point)

    @property
    def n(self) -> int:
        """Counted throughput samples so far."""
        return sum(len(s.throughput) for s in self.segments)

    def launches(self) -> list[Launch]:
        """One :class:`~specmon.model.launches.Launch` per server launch this setting was measured in.

        Visits on the same server run (the same source and run id) are one launch.
        """
        out: list[Launch] = []
        for name, values in launch_samples(self.segments):
            x = launch_of(values, name)
            if x is not None:
                out.append(x)
        return out

    def summary(self) -> Summary | None:
        """Pooled throughput summary (batch means per segment, as the analysis pools runs)."""
        n = self.n
        if self._summary is None or self._summary[0] != n:
            self._summary = (n, summarize_runs(self.segments, "throughput") if n else None)  # type: ignore[arg-type]
        return self._summary[1]

    def add_client(self, report: LoadReport | None) -> None:
        """Add a load run's client-side figures."""
        if report is None:
            return
        c = self.client
        c["requests"] += len(report.results)
        c["errors"] += report.errors
        c["output_tokens"] += report.output_tokens
        c["untimed"] = c.get("untimed", 0) + report.untimed
        c["retried"] = c.get("retried", 0) + sum(r.retried for r in report.results)
        c["first_error"] = c.get("first_error") or next((r.error for r in report.results if r.error), None)
        c["decode_tps"] += [round(v, 3) for v in report.decode_tps()]
        # Pooled decode speed (tokens after the first chunk over the time they took, summed): what
        # llama.cpp's counters measure, so the cross-check can compare like with like.
        for r in report.results:
            tps = r.decode_tps(report.time_scale)
            if tps:
                after = r.output_tokens - (r.first_tokens if r.first_tokens is not None else 1)
                c["decode_tokens"] = c.get("decode_tokens", 0) + after
                c["decode_seconds"] = c.get("decode_seconds", 0.0) + after / tps
        c["ttft_s"] += [round(v, 4) for v in report.ttft()]
        c["seconds"] += (report.ended_at - report.started_at) * report.time_scale

    def to_json(self) -> dict[str, Any]:
        """Persisted form."""
        return {"steps": self.steps, "concurrency": self.concurrency, "status": self.status,
                "reason": self.reason, "text": self.text, "looks_done": self.looks_done,
                "elapsed_s": round(self.elapsed_s, 3), "label": self.label,
                "segments": [s.to_json() for s in self.segments], "client": self.client,
                **({"point": [list(kv) for kv in self.point]} if self.point else {}),
                **({"workload": self.workload} if self.workload else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CellState:
        """Inverse of :meth:`to_json` (an interrupted ``active`` cell becomes ``pending`` again)."""
        cell = cls(int(d["steps"]), int(d["concurrency"]), str(d.get("status", PENDING)), str(d.get("reason", "")),
                   str(d.get("text", "")), int(d.get("looks_done", 0)), float(d.get("elapsed_s", 0.0)),
                   [Segment.from_json(s) for s in d.get("segments", [])], label=str(d.get("label", "")),
                   point=dimensions.check_point({str(k): v for k, v in d.get("point", [])}),
                   workload=d.get("workload"))
        if isinstance(d.get("client"), dict):
            cell.client.update(d["client"])
        if cell.status == ACTIVE:
            cell.status = PENDING
        return cell


def launch_samples(segments: Sequence[Segment]) -> list[tuple[str, list[float]]]:
    """The segments' throughput samples per launch: consecutive visits on one server run are one launch."""
    out: list[tuple[str, list[float]]] = []
    last: tuple[str, int] | None = None
    for seg in segments:
        ident = (seg.source, seg.run_id) if seg.run_id is not None else None
        if ident is not None and ident == last and out:
            out[-1][1].extend(seg.throughput)
        else:
            out.append((f"{seg.source} run {seg.run_id}" if seg.run_id is not None else seg.source,
                        list(seg.throughput)))
        last = ident
    return out


def group_summaries(cells: Sequence[CellState], launch_cv: float) -> dict[str, Summary]:
    """Two-level throughput summaries of the settings one verdict compares (key: ``cell.key``).

    The between-launch part is pooled over these settings, as :func:`specmon.model.analysis.assemble`
    pools it over a verdict's rows: the stopping rule and the verdict see the same intervals.
    """
    groups: dict[Hashable, Sequence[Launch]] = {c.key: c.launches() for c in cells}
    bases: dict[Hashable, Summary | None] = {c.key: c.summary() for c in cells}
    _, sums = design_summaries(groups, launch_cv, bases)
    return {str(k): v for k, v in sums.items()}


def _config_json(cfg: RunConfig | None) -> dict[str, Any] | None:
    if cfg is None:
        return None
    return {"engine": cfg.engine.value, "algorithm": cfg.algorithm, "steps": cfg.steps, "topk": cfg.topk,
            "draft_tokens": cfg.draft_tokens, "model": cfg.model}


def _config_for(steps: int, d: dict[str, Any] | None, point: Point = ()) -> RunConfig:
    pt: dict[str, Any] = dict(point)
    # The sweep's own setting names the row, so a run whose log omitted a value still lands right,
    # and settings the log cannot tell apart (vLLM's prompt_lookup_max) stay separate rows.
    params = tuple((k, str(v)) for k, v in point if k not in ("topk", "draft_tokens"))
    if d is None:
        return RunConfig(Engine.UNKNOWN, None if steps == 0 else "spec", steps,
                         pt.get("topk"), pt.get("draft_tokens"), None, params)
    try:
        engine = Engine(d.get("engine", "unknown"))
    except ValueError:
        engine = Engine.UNKNOWN
    return RunConfig(engine, d.get("algorithm") if steps else None, steps, pt.get("topk", d.get("topk")),
                     pt.get("draft_tokens", d.get("draft_tokens")), d.get("model"), params)


def _matches(cfg: RunConfig, steps: int, point: Point = ()) -> bool:
    if steps == 0:
        return cfg.algorithm is None and (cfg.steps in (0, None))
    if cfg.steps != steps:
        return False
    # Where the log announces a dimension (SGLang logs top-k and draft tokens), it must be the one asked for.
    for name, value in point:
        logged = getattr(cfg, name, None) if name in ("topk", "draft_tokens") else None
        if logged is not None and logged != value:
            return False
    return True


def finished_state(path: str | os.PathLike[str], plan: SweepPlan) -> bool:
    """Whether ``path`` holds this plan's sweep, already finished (nothing left to restart)."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return (isinstance(data, dict) and data.get("version") == STATE_VERSION and bool(data.get("finished"))
            and data.get("identity") == plan.identity())


# --------------------------------------------------------------------------- results


@dataclass
class SweepResult:
    """What a sweep found: a verdict per concurrency and every setting's numbers."""

    plan: SweepPlan
    cells: list[CellState]
    verdicts: list[SweepVerdict]
    finished: bool
    state_path: str | None = None
    #: Server restarts this run of the sweep asked for (a resumed sweep counts its own only).
    restarts: int = 0

    @property
    def restart_note(self) -> str:
        """``restarts: 5 (a grid restarts once per setting: 11; 6 saved)``."""
        settings = len({c.setting for c in self.cells})
        skipped = len({c.setting for c in self.cells if c.status == SKIPPED})
        text = f"restarts: {self.restarts} for {counted(settings, 'setting')}"
        if skipped:
            text += f" ({skipped} not measured: the cost model bounds them below the best)"
        return text

    @property
    def verdict(self) -> SweepVerdict | None:
        """The verdict at the first concurrency of the plan (1 by default: what a user feels)."""
        return self.verdicts[0] if self.verdicts else None

    def to_json(self) -> dict[str, Any]:
        """The document ``specmon sweep --format json`` prints."""
        runs = []
        for cell in self.cells:
            row = self.row_of(cell)
            tp = row.throughput if row else cell.summary()
            al = row.accept_len if row else None
            vs = row.vs_baseline if row else None
            client = cell.client
            dec = summarize(client.get("decode_tps") or [])
            ttft = summarize(client.get("ttft_s") or [])
            secs = client.get("seconds") or 0.0
            runs.append({
                "steps": cell.steps, "concurrency": cell.concurrency,
                **({"dims": dict(cell.point), "setting": cell.setting_label} if self.plan.points else {}),
                **({"workload": cell.workload} if cell.workload else {}),
                "label": row.label if row else (cell.label or cell.setting_label),
                "status": cell.status, "stop_reason": cell.reason, "stop_text": cell.text,
                "samples": cell.n, "launches": len(cell.launches()), "looks": cell.looks_done,
                # What the throughput interval covers ("3 launches", "1 launch + assumed launch CV 5%").
                "interval_covers": row.covers if row else None,
                "elapsed_s": round(cell.elapsed_s, 2),
                "throughput": tp.to_json() if tp else None,
                "accept_len": al.to_json() if al else None,
                "accept_rate": row.accept_rate.to_json() if row and row.accept_rate else None,
                "vs_baseline_pct": round(vs.pct, 2) if vs else None,
                "vs_baseline_ci95": None if vs is None else [
                    None if vs.ci95_low is None else round(vs.ci95_low, 2),
                    None if vs.ci95_high is None else round(vs.ci95_high, 2)],
                "is_baseline": bool(row and row.is_baseline), "best": bool(row and row.best),
                "source": "+".join(sorted({s.kind for s in cell.segments if s.throughput})) or None,
                "tps_by_source": {k: round(v, 2) for k, v in source_means(cell).items()},
                "client": {
                    "requests": client.get("requests", 0), "errors": client.get("errors", 0),
                    "untimed": client.get("untimed", 0), "retried": client.get("retried", 0),
                    "first_error": client.get("first_error"),
                    "output_tps": round(client["output_tokens"] / secs, 3) if secs and client.get("output_tokens") else None,
                    "decode_tps": dec.to_json() if dec else None, "ttft_s": ttft.to_json() if ttft else None,
                },
            })
        verdict = self.verdict.to_json() if self.verdict else {
            "best": None, "best_steps": None, "speedup_pct": None, "separated": False, "sentence": "no data"}
        verdict = {**verdict, **self._client_check(self.verdict),
                   **(self._winner_json(self.verdict) if self.verdict else {"best_setting": None, "best_dims": None})}
        return {
            "verdict": verdict,
            "verdicts": [{**v.to_json(), **self._client_check(v), **self._winner_json(v)} for v in self.verdicts],
            "dimensions": list(self.plan.dimensions),
            "winners_differ": self.winners_differ(),
            "schedules": [sc.to_json() for sc in self.schedules()],
            "runs": runs,
            "plan": self.plan.to_json(),
            "finished": self.finished,
            "state": self.state_path,
            "restarts": self.restarts,
            "settings": len({c.setting for c in self.cells}),
            "skipped": sorted({c.setting_label for c in self.cells if c.status == SKIPPED}),
        }

    def row_of(self, cell: CellState) -> ConfigRow | None:
        """The analysis row of one setting (None before it has samples)."""
        for v in self.verdicts:
            if (v.concurrency, v.workload) == cell.group:
                return next((r for r in v.analysis.rows if r.config is not None and _row_is(r.config, cell)), None)
        return None

    def winner_cell(self, v: SweepVerdict | None) -> CellState | None:
        """The setting a verdict names best (None when it names none)."""
        if v is None or v.best is None or v.best.config is None:
            return None
        cfg = v.best.config
        return next((c for c in self.cells if c.group == (v.concurrency, v.workload) and _row_is(cfg, c)), None)

    def _winner_json(self, v: SweepVerdict) -> dict[str, Any]:
        cell = self.winner_cell(v)
        return {"best_setting": cell.setting_label if cell else None,
                "best_dims": dict(cell.point) if cell and cell.point else None}

    def schedules(self) -> list[Schedule]:
        """A step count per batch size from the verdicts at each concurrency (:mod:`specmon.model.schedule`);
        empty for one concurrency, or for a grid (a schedule varies the step count only)."""
        if self.plan.points:
            return []
        return schedules_from(self.verdicts)

    def winners_differ(self) -> str | None:
        """A sentence when the best setting is not the same at every concurrency and workload (else None)."""
        named = [(v, cell) for v in self.verdicts if (cell := self.winner_cell(v)) is not None]
        if len(named) < 2 or len({cell.setting for _, cell in named}) == 1:
            return None
        what = []
        if len({v.concurrency for v, _ in named}) > 1:
            what.append("load")
        if len({v.workload for v, _ in named}) > 1:
            what.append("workload")
        parts = [f"{cell.setting_label} at concurrency {v.concurrency}"
                 + (f" on the {v.workload} prompts" if v.workload else "") for v, cell in named]
        listed = "; ".join(parts)
        if all(v.separated for v, _ in named):
            return f"The winner depends on the {' and '.join(what) or 'load'}: {listed}."
        return (f"The fastest setting by mean differs with the {' and '.join(what) or 'load'}: {listed}; "
                "not every verdict separates it from the runner-up, so this may be noise.")

    def _client_check(self, v: SweepVerdict | None) -> dict[str, Any]:
        """The client-side view: which step count the client measured fastest, and whether it agrees."""
        if v is None:
            return {"client_best_steps": None, "client_agrees": None}
        means: dict[tuple[int, Point], float] = {}
        for cell in self.cells:
            if cell.group == (v.concurrency, v.workload) and len(cell.client.get("decode_tps") or []) >= 3:
                means[cell.setting] = sum(cell.client["decode_tps"]) / len(cell.client["decode_tps"])
        if not means:
            return {"client_best_steps": None, "client_agrees": None}
        best = max(means, key=lambda s: means[s])
        server = self.winner_cell(v)
        extra = {"client_best_setting": dimensions.label(*best)} if self.plan.points else {}
        return {"client_best_steps": best[0], **extra,
                "client_agrees": None if server is None else best == server.setting}


def pooled_counters(segments: Sequence[Segment]) -> float | None:
    """Σ tokens / Σ seconds over counter samples: each sample weighted by the time it measured.

    Like the client's pooled decode speed, and unlike a mean of per-sample ratios, which
    gives a one-second interval with a fast request as much weight as one with a slow
    request (on the llama.cpp kit the ratio mean read 15% above the pooled figure).
    None when a segment lacks its token counts (a sweep file from before they were kept).
    """
    tokens = seconds = 0.0
    for seg in segments:
        if len(seg.tokens) != len(seg.throughput):
            return None
        for n, tps in zip(seg.tokens, seg.throughput, strict=True):
            if tps > 0:
                tokens, seconds = tokens + n, seconds + n / tps
    return tokens / seconds if seconds > 0 else None


def source_means(cell: CellState) -> dict[str, float]:
    """Mean tok/s of one setting by each source that measured it (counters, log, client)."""
    out: dict[str, float] = {}
    counted = [s for s in cell.segments if s.kind == "counters" and s.throughput]
    ctr = [v for s in counted for v in s.throughput]
    log = [v for s in cell.segments for v in s.log_samples]
    if ctr:
        out["counters"] = pooled_counters(counted) or sum(ctr) / len(ctr)
    if log:
        out["log"] = sum(log) / len(log)
    # The client's output tok/s (tokens over the load's wall time) is what compares with the server's
    # throughput: both include prefill and the gaps between requests. Its per-request decode speed
    # leaves those out (on purpose: it is what a reader of the stream sees) and runs higher.
    # llama.cpp's counters are that decode speed (generated tokens over generation seconds, per
    # stream): there the client's pooled decode speed is the like-for-like figure (on the kit,
    # output tok/s at concurrency 2 read 59-72% off a correct counters figure).
    if ctr and any((s.config or {}).get("engine") == "llamacpp" for s in cell.segments if s.kind == "counters"):
        dsecs, dtokens = cell.client.get("decode_seconds") or 0.0, cell.client.get("decode_tokens") or 0
        if dsecs > 0 and dtokens and cell.client.get("requests", 0) >= 3:
            out["client"] = dtokens / dsecs
        return out
    secs, tokens = cell.client.get("seconds") or 0.0, cell.client.get("output_tokens") or 0
    if secs > 0 and tokens and cell.client.get("requests", 0) >= 3:
        out["client"] = tokens / secs
    return out


def verdict_sources(verdict: SweepVerdict, cells: Sequence[CellState], concurrency: int,
                    tolerance_pct: float = 10.0) -> SweepVerdict:
    """Say which source ``verdict`` rests on and whether the other sources agree with it."""
    cs = [c for c in cells if c.group == (concurrency, verdict.workload) and c.n]
    kinds = {s.kind for c in cs for s in c.segments if s.throughput}
    source = "counters" if kinds == {"counters"} else ("log" if kinds <= {"log"} else "counters+log")
    multi = any(c.point for c in cs)

    def name(c: CellState) -> Any:
        # Steps-only sweeps keep step counts as names (the sentences say "N steps").
        return c.setting_label if multi else c.steps

    # Each source's own mean (counters pooled over time) against the others': like for like. The
    # verdict's summary means have warm-up and batching applied, which the other sources have not.
    primary = {name(c): source_means(c).get(source, sm.mean) for c in cs if (sm := c.summary()) is not None}
    best_cfg = verdict.best.config if verdict.best else None
    best = None if best_cfg is None else next((name(c) for c in cs if _row_is(best_cfg, c)), None)
    checks = []
    for src in ("counters", "log", "client"):
        if src == source or (source == "counters+log" and src != "client"):
            continue
        means = {name(c): m[src] for c in cs if src in (m := source_means(c))}
        if means:
            checks.append(check_source(src, means, primary, verdict_best=best, separated=verdict.separated,
                                       tolerance_pct=tolerance_pct))
    return verdict.with_sources(source, checks)


def _row_is(cfg: RunConfig, cell: CellState) -> bool:
    """Whether an analysis row's configuration is this setting's."""
    if cell.steps == 0:
        return cfg.is_nospec or (cfg.steps == 0)
    if cfg.steps != cell.steps:
        return False
    pt = dict(cell.point)
    params = tuple((k, str(v)) for k, v in cell.point if k not in ("topk", "draft_tokens"))
    return (cfg.params == params and all(getattr(cfg, k) == pt[k] for k in ("topk", "draft_tokens") if k in pt))


def guided_setting(steps: int, point: Point) -> Setting:
    """How the guided search's cost model sees a sweep setting.

    Top-k and draft tokens shape the tree the model predicts; the other
    dimensions (n-gram window, llama.cpp's speculative type) make a *family*
    whose acceptance is learnt from its own measurements (the cycle cost is shared).
    A missing draft-token count follows SGLang's default shape: a chain at top-k 1, else the full tree.
    """
    if steps == 0:
        return Setting.chain(0)
    pt = dict(point)
    topk = int(pt.get("topk", 1))
    dt = int(pt.get("draft_tokens", steps + 1 if topk == 1 else steps * topk + 1))
    family = tuple((k, v) for k, v in point if k not in ("topk", "draft_tokens"))
    return Setting(steps, topk, dt, family)


def _measurement(cell: CellState) -> Measurement | None:
    """A finished setting as the guided search sees it (None without throughput)."""
    summary = cell.summary()
    if summary is None or summary.mean <= 0:
        return None
    accepted = [v for seg in cell.segments for v in seg.accept_len]
    accept_len = sum(accepted) / len(accepted) if accepted and cell.steps else 1.0
    return Measurement(guided_setting(cell.steps, cell.point), summary.mean, summary.ci_half_width or 0.0,
                       accept_len, cell.concurrency)


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


def analyses_from_cells(cells: Sequence[CellState], concurrency: int,
                        launch_cv: float = DEFAULT_LAUNCH_CV) -> Analysis:
    """Analyse one concurrency's settings with :func:`specmon.model.analysis.analyze`.

    The stored samples are replayed into a fresh session (one run per segment,
    warm-up already excluded), so a resumed sweep and a live one reach their
    verdict through exactly the same code as ``specmon summarize``.
    """
    session = Session(warmup=0)
    line = 0
    for cell in cells:
        if cell.concurrency != concurrency:
            continue
        last: tuple[str, int] | None = None
        for i, seg in enumerate(cell.segments):
            if not seg.throughput and not seg.accept_len:
                continue
            cfg = _config_for(cell.steps, seg.config, cell.point)
            ident = (seg.source, seg.run_id) if seg.run_id is not None else None
            same_launch = ident is not None and ident == last
            last = ident
            if not same_launch:
                # One run per server launch: visits on the same run are one launch, not a replicate.
                session.begin_source(f"sweep {cell.key} #{i + 1}")
                line += 1
                session.ingest(Config(line, None, None, engine=cfg.engine, algorithm=cfg.algorithm,
                                      steps=cfg.steps, topk=cfg.topk, draft_tokens=cfg.draft_tokens, model=cfg.model))
                if cfg.params and session.runs and session.runs[-1].config is not None:
                    # The log's Config record has no field for them: the run carries the sweep's own.
                    session.runs[-1].config = cfg
            # Acceptance rides on the decode records (as SGLang logs it); any extra acceptance
            # samples (vLLM logs them separately) follow as spec records.
            acc, rates = seg.accept_len, seg.accept_rate
            for j, v in enumerate(seg.throughput):
                line += 1
                session.ingest(Decode(line, None, None, running_req=concurrency, gen_throughput=v,
                                      accept_len=acc[j] if j < len(acc) else None,
                                      accept_rate=rates[j] if j < len(rates) else None))
            for j in range(len(seg.throughput), max(len(acc), len(rates))):
                line += 1
                session.ingest(Spec(line, None, None, mean_acceptance_length=acc[j] if j < len(acc) else None,
                                    draft_acceptance_rate=rates[j] if j < len(rates) else None))
            if seg.per_position:
                line += 1
                session.ingest(Spec(line, None, None, per_position=tuple(seg.per_position)))
    return analyze(session.runs, launch_cv=launch_cv)


# --------------------------------------------------------------------------- the sweep


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
        self,
        plan: SweepPlan,
        *,
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
            data = json.loads(self.state_path.read_text(encoding="utf-8"))
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
        from specmon.control.rounds import LaunchRounds

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
        (a resumed sweep keeps them) feed :func:`specmon.model.guided.next_setting`;
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
                measured = [m for c in cells.values() if c.status == DONE and (m := _measurement(c)) is not None]
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
        runs = self.session.runs[mark:]
        for run in reversed(runs):
            if run.config is not None:
                if _matches(run.config, steps, point):
                    return run, ""
                if run is runs[-1]:
                    names = "".join("{" + n + "}" for n in ("steps", *(k for k, _ in point)))
                    return None, (f"the restarted server reports {run.label}, not the "
                                  f"{dimensions.label(steps, point)} asked for (check the profile's {names} "
                                  "placeholders)")
            elif allow_unlabelled and run is runs[-1]:
                return run, ""
        return None, ""

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
        seg = Segment(run.source, run.id, _config_json(run.config), _run=run,
                      _tp=len(run.throughput) + settle, _al=len(run.accept_len) + settle,
                      _ar=len(run.accept_rate) + settle)
        if use_counters and self.counters is not None:
            seg.kind = "counters"
            seg._cm = len(self.counters.samples) + settle
        cell.segments.append(seg)
        cfg = _config_for(cell.steps, seg.config, cell.point)
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
        if newest.id > current.id and (newest.config is None or _matches(newest.config, steps, point)):
            return newest
        return None

    async def _visit(self, cell: CellState, *, until_done: bool,
                     stop_when: Callable[[CellState, Segment], bool] | None = None) -> None:
        """Measure one setting on the running (or a restarted) server.

        Without ``stop_when`` the visit judges the setting at its planned looks (the sample
        rule); with it, the visit only collects, until ``stop_when`` says this launch has
        given what it should (the launch design of :mod:`specmon.control.rounds` judges after
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
        report = None
        try:
            while not self._stop_requested:
                await self._sleep(self.plan.poll_s)
                now = self._clock()
                cell.elapsed_s = base_elapsed + (now - started)
                if self._pull(seg):
                    last_progress = now
                run = self._run
                assert run is not None
                if run.state is ServerState.CRASHED:
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
                             "since the last check left out); run the same command again to continue", cell)
        self.request_stop()

    # -- results ---------------------------------------------------------------------------

    @property
    def verdict_rule(self) -> StoppingRule:
        """The rule the verdict tests with: the plan's, or the launch design's (its looks are rounds)."""
        if self.plan.order != "launches":
            return self.plan.rule
        from specmon.control.rounds import effective_rule

        p = self.plan
        return effective_rule(p.rule, p.resolve_pct, p.launch_cv, p.restart_s)[0]

    def result(self) -> SweepResult:
        """The verdicts from what has been measured so far."""
        verdicts = []
        for c, w in self.plan.groups:
            cells = [cell for cell in self.cells if cell.workload == w]
            if any(cell.concurrency == c and cell.n for cell in cells):
                v = sweep_verdict(analyses_from_cells(cells, c, self.plan.launch_cv), self.verdict_rule, c, w)
                verdicts.append(verdict_sources(v, cells, c))
        return SweepResult(self.plan, list(self.cells), verdicts, self.finished,
                           str(self.state_path) if self.state_path else None, self._restarts)

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


# --------------------------------------------------------------------------- real-world adapters


def stderr_show(text: str) -> None:
    """Print what is about to run on stderr (the default for headless commands)."""
    print(text, file=sys.stderr, flush=True)


#: Raw log lines a :class:`LogFollower` keeps, and how many of them a failed start-up shows.
RECENT_LINES, TAIL_SHOWN = 40, 12


def log_tail(lines: Sequence[str], limit: int = TAIL_SHOWN) -> list[str]:
    """The lines that say why a start-up failed: from the last ``Traceback`` on, else the last few.

    Args:
        lines: The log's last raw lines, oldest first.
        limit: At most this many lines (the end of a long traceback: the error is last).

    Returns:
        Non-blank lines, oldest first.
    """
    kept = [line.rstrip() for line in lines if line.strip()]
    for i in range(len(kept) - 1, -1, -1):
        if "Traceback (most recent call last)" in kept[i]:
            kept = kept[i:]
            break
    return kept[-limit:]


class LogFollower:
    """Follows the server's log into a session, switching files at every restart.

    Args:
        ingest: A :class:`~specmon.output.recording.RecordedIngest` (feeds and records).
        make_source: ``(path, from_end) -> LineSource`` (a local or SSH tail).
    """

    def __init__(self, ingest: Any, make_source: Callable[[str, bool], Any]) -> None:
        self.ingest = ingest
        self._make = make_source
        self._source: Any = None
        self._task: asyncio.Task[None] | None = None
        #: The last raw lines of the file followed now: a failed start-up shows them.
        self.recent: deque[str] = deque(maxlen=RECENT_LINES)

    async def follow(self, path: str, *, from_end: bool = False) -> None:
        """Stop following the old file; follow ``path`` (from its start, or its current end)."""
        await self.stop()
        self.recent.clear()
        self._source = self._make(path, from_end)
        self.ingest.begin_source(getattr(self._source, "name", path))
        self._task = asyncio.ensure_future(self._pump(self._source))

    async def _pump(self, source: Any) -> None:
        async for batch in source.batches():
            self.ingest.feed(batch)
            self.recent.extend(batch)

    async def stop(self) -> None:
        """Stop following."""
        source, task = self._source, self._task
        self._source = self._task = None
        await stop_reading(source, task)


def controller_restarter(controller: Any, show: Callable[[str], None] | None = None) -> Restarter:
    """The sweep's ``restart`` made from the dashboard's :class:`~specmon.control.restart.RestartController`.

    Each restart builds the plan, shows it (``show`` gets the text the
    controller marks as shown: the event log, or stderr), runs it and follows
    it to ready; the controller's ``on_log_switch`` points the dashboard's
    source at the new log, so the session the sweep reads gains the new run.
    The user confirms the sweep once, for all its step counts, beforehand.

    Args:
        controller: A ``RestartController`` (typed loosely: the sweep does not depend on it).
        show: Receives each plan's description before it runs.
    """

    async def restart(steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
        plan = controller.plan_for(steps, dims=dims) if dims else controller.plan_for(steps)  # LaunchError / RestartError: the sweep fails this setting
        text = controller.describe(plan)
        if show is not None:
            show(text)
        view = await controller.run(plan)
        phase = getattr(view.phase, "value", str(view.phase))
        return RestartOutcome(phase == "ready", view.message or phase, view.log)

    return restart


class PlanRestarter:
    """The sweep's ``restart`` for a launch profile: build the plan, show it, run it, wait for ready.

    Args:
        profile: A validated launch profile (steps 0 needs its no-speculation command).
        runner: Where commands run (``LocalRunner``, ``SSHRunner``).
        host: Shown in the plan.
        follower: Re-pointed at the plan's log around each restart.
        show: Receives the plan's description before anything runs (stderr by default).
        ready_poll_s: Seconds between readiness checks (None: the plan's own).
    """

    def __init__(self, profile: LaunchProfile, runner: CommandRunner, *, host: str = "localhost",
                 follower: LogFollower | None = None, show: Callable[[str], None] = stderr_show,
                 ready_poll_s: float | None = None, record_servers: bool = False) -> None:
        self.profile = profile
        self.runner = runner
        self.host = host
        self.follower = follower
        self.show = show
        self.ready_poll_s = ready_poll_s
        self.last_plan: CommandPlan | None = None
        #: Record each server started in the user data dir (real servers, left running at the end).
        self.record_servers = record_servers
        self.started: Any = None  # the last start's ServerRecord, when recorded
        #: PID and start time of the server the last start launched (managed mode), for :meth:`check_server`.
        self.identity: Any = None

    def plan_for(self, steps: int, dims: dict[str, int | str] | None = None) -> CommandPlan:
        """The plan a restart with ``steps`` (and the other dimensions ``dims``) would run.

        Raises:
            LaunchError: the profile cannot restart with ``steps`` (message for the user).
        """
        return build_plan(self.profile, steps, host=self.host, dims=dims)

    async def __call__(self, steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
        """Restart with ``steps`` and ``dims``; never raises for an expected failure."""
        try:
            plan = self.plan_for(steps, dims)
        except LaunchError as exc:
            return RestartOutcome(False, str(exc))
        self.show(plan.describe())
        # Custom commands may append to the log: follow from its current end, before the restart.
        # A managed start moves the old log aside and starts a new file: follow it from the start, after.
        if self.follower is not None:
            if plan.mode == "custom" and plan.log:
                await self.follower.follow(plan.log, from_end=True)
            else:
                await self.follower.stop()

        def on_step(ev: StepEvent) -> None:
            if ev.phase == "finished" and ev.outcome is not None:
                self.show(f"  {ev.outcome.summary()}")
                if ev.step.name == "stop" and ev.outcome.ok:
                    self.identity = None
                if ev.step.name == "start" and ev.outcome.ok:
                    from specmon.control.launch import ProcessIdentity
                    from specmon.control.servers import record_started

                    try:
                        who = ProcessIdentity(int(ev.outcome.fields["pid"]), int(ev.outcome.fields["starttime"]))
                    except (KeyError, ValueError):
                        return
                    self.identity = who
                    if self.record_servers:
                        self.started = record_started(plan, who)

        # Recorded before it runs: a sweep stopped half-way through this start still stops its server.
        self.last_plan = plan
        report = await execute(plan, self.runner, on_step)
        if not report.ok:
            return RestartOutcome(False, redact_text("; ".join(o.summary() for o in report.outcomes),
                                                     self.profile.secrets()), plan.log)
        if self.follower is not None and plan.mode == "managed" and plan.log:
            await self.follower.follow(plan.log, from_end=False)
        poll = self.ready_poll_s

        async def sleep(seconds: float) -> None:
            await asyncio.sleep(seconds if poll is None else min(seconds, poll))

        ready = await wait_ready(plan, self.runner, sleep=sleep)
        if ready.state == "exited" and self.started is not None:
            # Gone at once (a bad flag, out of memory): recorded as exited with its cause, never
            # "left running", and never adopted by the next session.
            from specmon.control.servers import exit_cause, record_exited

            record_exited(plan.host, self.started.pidfile, self.started.pid,
                          redact_text(exit_cause(ready.last.stdout if ready.last else ""), self.profile.secrets()))
            self.started = None
        if ready.state != "ready":
            last = ready.last.stdout.strip().splitlines()[-1:] if ready.last else []
            text = f"server not ready ({ready.state}{': ' + last[0] if last else ''})"
            if self.follower is not None:
                await asyncio.sleep(0.4)  # its last words may still be on their way through the tail
                tail = log_tail(self.follower.recent)
                if tail:
                    text += f"; {plan.log} ends with:\n" + "\n".join(f"    {line}" for line in tail)
            return RestartOutcome(False, redact_text(text, self.profile.secrets()), plan.log)
        return RestartOutcome(True, f"ready after {ready.checks} check(s)", plan.log)

    async def check_server(self) -> str | None:
        """Is the server being measured still the one the last start launched? None when it is (or
        when it cannot be told: custom commands, the host unreachable), else why not.

        The fixed read-only ``alive.sh``: the PID alive with its recorded start time, and the
        pidfile still naming it (else another specmon, or someone, restarted it).
        """
        plan, who = self.last_plan, self.identity
        if plan is None or who is None or plan.pidfile is None:
            return None
        from specmon.control.servers import ServerRecord, check_with_cause

        record = ServerRecord(plan.host, plan.pidfile, who.pid, who.starttime, plan.steps, plan.draft_tokens,
                              plan.log, 0.0)
        state, detail = await check_with_cause(record, self.runner, 30.0)
        if state == "gone":
            self.identity = None
            return f"the server measured (PID {who.pid}) has exited" + (f": {detail}" if detail else "")
        if state == "replaced":
            self.identity = None
            return (f"the server measured (PID {who.pid}) is no longer the one in {plan.pidfile}: another "
                    "specmon (or someone) restarted it")
        return None

    async def stop_server(self) -> str | None:
        """Stop the server the last restart started (its plan's stop command, shown first)."""
        plan = self.last_plan
        if plan is None:
            return None
        stop = plan.stop_only
        self.show(f"stop:  {stop.display}")
        result = await self.runner.run(stop.command, stop.timeout_s)
        line = (result.stdout.strip().splitlines() or [""])[-1]
        if "no-pidfile" in line:
            # A start cut short may record its server a moment later: one more look.
            await asyncio.sleep(1.0)
            result = await self.runner.run(stop.command, stop.timeout_s)
            line = (result.stdout.strip().splitlines() or [""])[-1]
        if self.follower is not None:
            await self.follower.stop()
        fields = parse_result_line(result.stdout, "specmon-stop")
        if fields.get("result") in ("stopped", "killed", "not-running") and plan.pidfile is not None:
            from specmon.control.servers import forget

            forget(plan.host, plan.pidfile)  # stopped as asked: nothing is left running
            self.started = None
        return line
