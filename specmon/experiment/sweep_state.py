"""A sweep's progress as kept in its JSON state file: every setting's status and samples.

:class:`CellState` is one setting's progress (status, looks, client figures),
:class:`Segment` its samples from one server run; both round-trip through
JSON, so an interrupted sweep started again with the same plan resumes where it
stopped (:func:`finished_state` tells whether a file holds a finished one).
Also here: how a segment's recorded configuration maps to a
:class:`~specmon.model.session.RunConfig`, and how the guided search sees a setting.
"""

from __future__ import annotations

import json
import os
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.control import dims as dimensions
from specmon.control.dims import Point
from specmon.control.load import LoadReport
from specmon.experiment.stats.design import summaries as design_summaries
from specmon.experiment.stats.guided import Measurement, Setting
from specmon.experiment.sweep_plan import SweepPlan
from specmon.model.analysis import summarize_runs
from specmon.model.launches import Launch, launch_of
from specmon.model.objective import Objective, RequestFigures, launch_value, request_figures
from specmon.model.session import Run, RunConfig
from specmon.model.stats import Summary
from specmon.records import Engine
from specmon.smallfile import read_small_text

STATE_VERSION = 1

PENDING, ACTIVE, DONE, FAILED = "pending", "active", "done", "failed"
#: A setting the guided strategy did not restart for: the model bounds it below the best measured.
SKIPPED = "skipped"
SETTLED = (DONE, FAILED, SKIPPED)


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
    #: The load's requests on this segment, as ``(ok, TTFT s, ITL s)`` (the first wave left out), and the
    #: seconds the load ran: what a latency or goodput objective is judged on (:mod:`specmon.model.objective`).
    requests: list[RequestFigures] = field(default_factory=list)
    load_s: float = 0.0
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
                "tokens": [round(v, 1) for v in self.tokens],
                **({"requests": [[int(ok), _r6(t), _r6(i)] for ok, t, i in self.requests],
                    "load_s": round(self.load_s, 3)} if self.requests else {})}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Segment:
        """Inverse of :meth:`to_json`."""
        return cls(str(d.get("source", "")), d.get("run_id"), d.get("config"),
                   [float(v) for v in d.get("throughput", [])], [float(v) for v in d.get("accept_len", [])],
                   [float(v) for v in d.get("accept_rate", [])], d.get("per_position"),
                   str(d.get("kind", "log")), [float(v) for v in d.get("log_throughput", [])],
                   [float(v) for v in d.get("tokens", [])], _requests_of(d.get("requests")),
                   float(d.get("load_s") or 0.0))

    def add_requests(self, report: LoadReport | None) -> None:
        """The requests of one load run on this segment (a visit's report), for a latency objective."""
        if report is None:
            return
        self.requests.extend(request_figures(report.results, report.concurrency, report.time_scale))
        self.load_s += max(0.0, report.ended_at - report.started_at) * report.time_scale

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

    def objective_launches(self, obj: Objective) -> list[Launch]:
        """This setting's launches judged on ``obj`` (tok/s: :meth:`launches`)."""
        return self.launches() if obj.is_tps else objective_launches(self.segments, obj)

    @property
    def requests(self) -> int:
        """Requests counted for a latency objective (the first wave of each load run left out)."""
        return sum(len(s.requests) for s in self.segments)

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
        # Per prompt of the set (every launch sends them in the same order, so they pair across
        # launches and settings): [completed, timed, sum of decode tok/s, drafted, accepted].
        prompts = c.setdefault("prompts", {})
        for r in report.results:
            if not r.ok:
                continue
            row = prompts.setdefault(str(r.prompt_index), [0, 0, 0.0, 0, 0])
            row[0] += 1
            tps = r.decode_tps(report.time_scale)
            if tps:
                row[1] += 1
                row[2] = round(row[2] + tps, 3)
            if r.drafted is not None and r.accepted is not None:
                row[3] += r.drafted
                row[4] += r.accepted

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


def _r6(v: float | None) -> float | None:
    return None if v is None else round(v, 6)


def _requests_of(raw: object) -> list[RequestFigures]:
    """A state file's requests back as figures (anything malformed is left out, not guessed)."""
    out: list[RequestFigures] = []
    if not isinstance(raw, list):
        return out
    for item in raw:
        if isinstance(item, list) and len(item) == 3:
            ok, t, i = item
            if all(v is None or isinstance(v, (int, float)) for v in (t, i)):
                out.append((bool(ok), None if t is None else float(t), None if i is None else float(i)))
    return out


def launch_segments(segments: Sequence[Segment]) -> list[tuple[str, list[Segment]]]:
    """The segments grouped by server launch, named: consecutive visits on one server run are one launch."""
    out: list[tuple[str, list[Segment]]] = []
    last: tuple[str, int] | None = None
    for seg in segments:
        ident = (seg.source, seg.run_id) if seg.run_id is not None else None
        if ident is not None and ident == last and out:
            out[-1][1].append(seg)
        else:
            out.append((f"{seg.source} run {seg.run_id}" if seg.run_id is not None else seg.source, [seg]))
        last = ident
    return out


def objective_launches(segments: Sequence[Segment], obj: Objective) -> list[Launch]:
    """One launch value of ``obj`` per server launch, each from the requests completed on it; a launch
    with too few requests is left out."""
    out = []
    for name, segs in launch_segments(segments):
        reqs: list[RequestFigures] = [r for seg in segs for r in seg.requests]
        x = launch_value(obj, reqs, sum(seg.load_s for seg in segs), name)
        if x is not None:
            out.append(x)
    return out


def launch_samples(segments: Sequence[Segment]) -> list[tuple[str, list[float]]]:
    """The segments' throughput samples per launch: consecutive visits on one server run are one launch."""
    return [(name, [v for seg in segs for v in seg.throughput]) for name, segs in launch_segments(segments)]


def group_summaries(cells: Sequence[CellState], launch_cv: float,
                    objective: Objective | None = None) -> dict[str, Summary]:
    """Two-level throughput summaries of the settings one verdict compares (key: ``cell.key``).

    The between-launch part is pooled over these settings, as :func:`specmon.model.analysis.assemble`
    pools it over a verdict's rows: the stopping rule and the verdict see the same intervals.
    """
    if objective is not None and not objective.is_tps:
        # A latency or goodput: each launch's value from its requests; no per-sample base.
        _, sums = design_summaries({c.key: c.objective_launches(objective) for c in cells}, launch_cv)
        return {str(k): v for k, v in sums.items()}
    groups: dict[Hashable, Sequence[Launch]] = {c.key: c.launches() for c in cells}
    bases: dict[Hashable, Summary | None] = {c.key: c.summary() for c in cells}
    _, sums = design_summaries(groups, launch_cv, bases)
    return {str(k): v for k, v in sums.items()}


def config_json(cfg: RunConfig | None) -> dict[str, Any] | None:
    """A run's configuration as a segment stores it (None: the log announced none)."""
    if cfg is None:
        return None
    return {"engine": cfg.engine.value, "algorithm": cfg.algorithm, "steps": cfg.steps, "topk": cfg.topk,
            "draft_tokens": cfg.draft_tokens, "model": cfg.model}


def config_for(steps: int, d: dict[str, Any] | None, point: Point = ()) -> RunConfig:
    """The run configuration of a setting's segment, from what it stored (``d``: :func:`config_json`)."""
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


def config_matches(cfg: RunConfig, steps: int, point: Point = ()) -> bool:
    """Whether a run's announced configuration is the setting ``(steps, point)`` asked for."""
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


#: Most bytes a sweep's state file may have (every sample of every launch: a few MB for a long sweep).
STATE_LIMIT = 256_000_000


def read_state(path: str | os.PathLike[str]) -> Any:
    """The JSON of a sweep's state file, read bounded and without blocking (:mod:`specmon.smallfile`).

    Raises:
        FileNotFoundError: no such file.
        InputError: a FIFO, a device, a directory or a file beyond :data:`STATE_LIMIT`; one sentence.
        OSError, ValueError: unreadable, or not JSON.
    """
    return json.loads(read_small_text(path, limit=STATE_LIMIT, timeout=30.0, what="sweep state file"))


def finished_state(path: str | os.PathLike[str], plan: SweepPlan) -> bool:
    """Whether ``path`` holds this plan's sweep, already finished (nothing left to restart)."""
    try:
        data = read_state(path)
    except (OSError, ValueError):
        return False
    return (isinstance(data, dict) and data.get("version") == STATE_VERSION and bool(data.get("finished"))
            and data.get("identity") == plan.identity())


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


def measurement(cell: CellState) -> Measurement | None:
    """A finished setting as the guided search sees it (None without throughput)."""
    summary = cell.summary()
    if summary is None or summary.mean <= 0:
        return None
    accepted = [v for seg in cell.segments for v in seg.accept_len]
    accept_len = sum(accepted) / len(accepted) if accepted and cell.steps else 1.0
    return Measurement(guided_setting(cell.steps, cell.point), summary.mean, summary.ci_half_width or 0.0,
                       accept_len, cell.concurrency)


def match_run(runs: Sequence[Run], steps: int, point: Point = (), *,
              allow_unlabelled: bool) -> tuple[Run | None, str]:
    """The run a restart with ``steps`` (and ``point``) started, among the runs since it (``runs``).

    ``(run, "")`` when found; ``(None, why)`` when the newest run announced another
    configuration (the profile's placeholders do not reach the server); ``(None, "")`` while
    none has come yet. ``allow_unlabelled``: a run that announced no configuration counts.
    """
    for run in reversed(runs):
        if run.config is not None:
            if config_matches(run.config, steps, point):
                return run, ""
            if run is runs[-1]:
                names = "".join("{" + n + "}" for n in ("steps", *(k for k, _ in point)))
                return None, (f"the restarted server reports {run.label}, not the "
                              f"{dimensions.label(steps, point)} asked for (check the profile's {names} "
                              "placeholders)")
        elif allow_unlabelled and run is runs[-1]:
            return run, ""
    return None, ""
