"""The session model: records in, runs with their samples and the server's state out.

A *run* is one server launch with one configuration. A new run begins at a
configuration line that differs (or repeats after the server already served),
at a start or ready marker after the current run has served, after a crash or
shutdown, and at a new input source. Samples are kept compactly (``array``) so
millions of batches cost megabytes, not gigabytes; live series for the
dashboard are small ring buffers.

Which samples count (the rest are counted as excluded, never silently lost):

* the first ``warmup`` samples of each rank in a run (default: 5 SGLang
  decode lines, 1 vLLM interval, 1 llama.cpp request) — caches, graph replays
  and the first requests after start are not steady state;
* throughput samples that span idle time: SGLang's ``gen throughput`` divides
  the tokens since the previous decode line by the wall time since then, so the
  first line after a pause (or after start) reports a fraction of the real
  speed; vLLM intervals with no running request are idle or partly idle.
"""

from __future__ import annotations

from array import array
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from functools import reduce
from itertools import compress
from operator import add
from typing import Any, cast

import numpy as np

from specmon.engines import adapter
from specmon.model.collapse import CollapseGuard
from specmon.model.rows import Rows
from specmon.parsing.lifecycle import EXCEPTION_LINE
from specmon.records import (
    Config,
    Decode,
    Engine,
    EngineStats,
    Event,
    Lifecycle,
    ParsedRecord,
    Prefill,
    Spec,
    Unparsed,
)

#: Default warm-up, in samples per rank, by engine (see module docstring).
#: Warm-up samples left out of a run's figures, by engine (each engine module declares its own).
DEFAULT_WARMUP: dict[Engine, int] = {e: adapter(e).warmup for e in Engine}
#: An SGLang throughput sample whose gap to the previous decode line exceeds
#: max(IDLE_GAP_MIN_S, IDLE_GAP_FACTOR × the rank's typical gap) spans idle time.
IDLE_GAP_MIN_S = 5.0
IDLE_GAP_FACTOR = 4.0
#: How many recent samples the live series keep (the dashboard's sparklines and rolling means).
LIVE_POINTS = 600
#: How many events and unparsed lines are kept for display (all are counted).
EVENTS_KEPT = 500
UNPARSED_KEPT = 200


# The bulk path hands a column without a missing value as an array (floats as "d", counts as
# "I"): it crosses from the worker as one buffer, not an object per value, and joins the run's
# float32 arrays in C. A column with a gap (None) stays a list. Both read the same by index.
def _packed(column: Any) -> bool:
    """The column crossed as an array (bulk._as_array: no None, every value fits its type)."""
    return isinstance(column, array)


def _complete(column: Any) -> bool:
    """No value is missing (an array cannot hold None; a list is searched)."""
    return isinstance(column, array) or None not in column


def _gap_average_py(times: Any, last: float | None, ema: float | None, floor: float, factor: float
                    ) -> tuple[float | None, float | None, list[int]]:
    """A rank's gap average over a column of times (None: no time), as :meth:`Session._update_gap`
    keeps it sample by sample, and the positions of the samples that came after an idle gap (as
    :meth:`Session._add_sample` finds them): ``(average, last time, idle positions)``."""
    idle = []
    for at, t in enumerate(times):
        if t is None:
            continue
        if last is not None:
            gap = t - last
            limit = max(floor, factor * (ema or 0.0))
            if gap > limit:
                idle.append(at)
            if gap >= 0:
                if ema is None:
                    ema = gap
                elif gap <= limit:
                    ema = 0.9 * ema + 0.1 * gap
        last = t
    return ema, last, idle


try:  # the same loop in C (specmon/_native.c: the feeding process's largest cost per piece)
    from specmon._native import gap_average as _gap_average
except ImportError:  # built without a C compiler
    _gap_average = _gap_average_py


def _times_by_rank(ranks: list[str | None], times: Any
                   ) -> tuple[dict[str | None, Any], Callable[[str | None], np.ndarray]]:
    """Each rank's times in line order, the ranks in the order they first appear (ranks that
    take turns: DP attention prints a line per DP rank), and where a rank's lines are in the
    column (its times' positions, asked only for a rank with an idle gap).

    Split by numpy on the ranks' numbers: a loop over the samples appending to each rank's list
    was the feeding process's largest cost on such logs (2 ranks, 2M lines: 0.3-0.5 s). The
    times are the same doubles, in the same order, so every sum over them is the same.
    """
    number = {r: k for k, r in enumerate(dict.fromkeys(ranks))}
    codes = np.fromiter(map(number.__getitem__, ranks), dtype=np.intp, count=len(ranks))
    values = (np.frombuffer(times, dtype=np.float64) if isinstance(times, array) and times.typecode == "d"
              else np.array(times, dtype=np.float64))
    split = {r: values[codes == k] for r, k in number.items()}
    if _gap_average is _gap_average_py:
        split = {r: t.tolist() for r, t in split.items()}  # (Python floats for the Python loop)
    return split, lambda r: np.flatnonzero(codes == number[r])


def _extend(dst: array[Any], values: Any) -> None:
    """``dst.extend(values)``, also from an array of another type (rounded as ``append`` rounds)."""
    if isinstance(values, array) and values.typecode != dst.typecode:
        dst.frombytes(np.frombuffer(values, dtype=values.typecode).astype(dst.typecode).tobytes())
    else:
        dst.extend(values)


class ServerState(str, Enum):
    """What the server is doing, as far as its log tells."""

    UNKNOWN = "unknown"
    STARTING = "starting"
    LOADING = "loading weights"
    CAPTURING = "capturing graphs"
    READY = "ready"
    SERVING = "serving"
    CRASHED = "crashed"
    STOPPED = "stopped"


@dataclass(frozen=True, slots=True)
class RunConfig:
    """The speculative configuration of a run; equal configurations share a table row."""

    engine: Engine
    algorithm: str | None
    steps: int | None
    topk: int | None = None
    draft_tokens: int | None = None
    model: str | None = None
    #: Other launch parameters a sweep varied (``(("prompt_lookup_max", "4"),)``): distinct rows.
    params: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_record(cls, rec: Config) -> RunConfig:
        """The configuration a ``Config`` record announces."""
        # A schedule of step counts by batch size (vLLM's dynamic speculative decoding) is its own
        # configuration: "ngram 3 tokens schedule 1-2:3 3-64:1", never the fixed 3 tokens' row.
        schedule = rec.extra.get("schedule") if rec.extra else None
        params = (("schedule", schedule),) if isinstance(schedule, str) and schedule else ()
        return cls(rec.engine, rec.algorithm, rec.steps, rec.topk, rec.draft_tokens, rec.model, params)

    @property
    def is_nospec(self) -> bool:
        """Whether this configuration runs without speculation."""
        return self.algorithm is None and self.steps == 0

    @property
    def label(self) -> str:
        """A short human label: ``EAGLE3 2 steps``, ``no speculation``."""
        if self.is_nospec:
            return "no speculation"
        algo = self.algorithm or "spec"
        schedule = dict(self.params).get("schedule")
        if schedule is not None:  # step counts by batch size: the fixed count is only their cap
            return f"{algo} schedule {schedule}"
        steps = "?" if self.steps is None else str(self.steps)
        # What the count counts is the engine's (vLLM: draft tokens; SGLang: draft steps, but
        # draft tokens for its trie drafter).
        unit = adapter(self.engine).steps_unit(self.algorithm)
        text = f"{algo} {steps} {unit}{'' if self.steps == 1 else 's'}"
        if self.topk and self.topk > 1:
            text += f" topk {self.topk}"
        if (self.draft_tokens is not None and self.steps is not None and self.engine is Engine.SGLANG
                and self.draft_tokens != self.steps + 1):
            text += f" draft {self.draft_tokens}"
        for name, value in self.params:
            if value != self.algorithm:  # llama.cpp names its run after the type: "ngram-mod 4 tokens"
                text += f" {name} {value}"
        return text


@dataclass(slots=True)
class SessionEvent:
    """A line for the event log.

    ``timestamp`` is the log's own time (naive, read as UTC; None for specmon's own events),
    ``received`` the wall time (``time.time()``) at which specmon saw or made the event: the
    live dashboard orders and shows events by it, one clock whatever the host's clock says.
    """

    line: int
    timestamp: float | None
    level: str  # "info", "warning", "error"
    text: str
    run_id: int | None = None
    received: float | None = None


@dataclass(slots=True)
class _RankState:
    seen: int = 0  # samples seen (counted or not)
    last_ts: float | None = None
    gap_ema: float | None = None


@dataclass(eq=False)
class Run:
    """One server launch with one configuration, and everything measured in it."""

    id: int
    source: str
    first_line: int
    config: RunConfig | None = None
    baseline_source: bool = False  # came from a --baseline file
    state: ServerState = ServerState.UNKNOWN
    started_at: float | None = None
    ready_at: float | None = None
    last_at: float | None = None
    last_line: int = 0
    load_progress: tuple[int, int] | None = None
    crash_detail: str | None = None  # the latest words of a crash (the dashboard's)
    #: The line that best names what killed the run — an OOM, else the exception line, else the
    #: first crash message; never a bare "Traceback" header or the parent's later sigquit — its
    #: line number and log time.
    crash_cause: str | None = None
    crash_line: int | None = None
    crash_at: float | None = None
    _cause_weight: int = 0
    #: The crash rests only on a Python traceback (its header or its exception line), which a
    #: server also prints for an error it catches and survives: samples after it, with no new
    #: start in between, say the process went on serving (an engine's fatal marker, a native
    #: abort or an OOM is certain instead).
    _crash_suspect: bool = False
    #: Tracebacks the server printed and went on serving after: (line, what it said).
    errors_survived: list[tuple[int | None, str]] = field(default_factory=list)
    #: The engine whose stats lines this run's first samples carried (UNKNOWN until then).
    engine: Engine = Engine.UNKNOWN
    # Counted samples (after warm-up and idle exclusion), compact.
    throughput: array[float] = field(default_factory=lambda: array("f"))
    concurrency: array[int] = field(default_factory=lambda: array("I"))  # 0 = unknown
    accept_len: array[float] = field(default_factory=lambda: array("f"))
    accept_rate: array[float] = field(default_factory=lambda: array("f"))
    per_position_sum: list[float] = field(default_factory=list)
    per_position_n: int = 0
    accepted: int = 0
    drafted: int = 0
    excluded_warmup: int = 0
    excluded_idle: int = 0
    ranks: set[str] = field(default_factory=set)
    # Live series (all samples, warm-up included, so the screen moves from the first line).
    live_throughput: deque[float] = field(default_factory=lambda: deque(maxlen=LIVE_POINTS))
    live_accept_len: deque[float] = field(default_factory=lambda: deque(maxlen=LIVE_POINTS))
    live_accept_rate: deque[float] = field(default_factory=lambda: deque(maxlen=LIVE_POINTS))
    _ranks: dict[str | None, _RankState] = field(default_factory=dict)
    _spec_seen: int = 0
    #: Begun by a launch's own lines (its configuration, start or weight loading) and not ready yet:
    #: a ready line then ends this launch's start-up, even after samples (SGLang serves requests
    #: that arrive during its warm-up before it prints "fired up and ready to roll").
    _launching: bool = False
    #: Stopped while serving (a shutdown after samples): decode lines may still come as it drains.
    _draining: bool = False
    #: Watches this run's acceptance for a collapse (:mod:`specmon.model.collapse`).
    guard: CollapseGuard = field(default_factory=CollapseGuard)

    @property
    def label(self) -> str:
        """The configuration label, or what is known of an unlabelled run."""
        if self.config is not None:
            return self.config.label
        return f"unknown config ({self.source})"

    @property
    def used(self) -> bool:
        """Whether the server produced any sample in this run (counted or not)."""
        return bool(self._ranks) or self._spec_seen > 0

    @property
    def per_position(self) -> tuple[float, ...] | None:
        """Mean acceptance rate per draft position, where the engine logs it."""
        if not self.per_position_n:
            return None
        return tuple(s / self.per_position_n for s in self.per_position_sum)


def _cause_weight(event: Event, detail: str) -> int:
    """How well a crash line names the cause: OOM 3, an exception line 2, other words 1, a header 0."""
    if event is Event.OOM:
        return 3
    if EXCEPTION_LINE.match(detail):
        return 2
    return 0 if "Traceback" in detail else 1


@dataclass(slots=True)
class StatsColumns:
    """Consecutive interval stats lines (vLLM engine lines, llama.cpp eval lines) as columns."""

    engine: Engine
    ranks: list[str | None]
    ts: list[float | None]
    running: list[int | None]
    tput: list[float]

    def record(self, i: int, line: int) -> EngineStats:
        """Line ``i`` as the record the line parser gives (its line number: ``line``)."""
        return EngineStats(line, self.ts[i], self.ranks[i], gen_throughput=self.tput[i], running=self.running[i],
                           engine=self.engine)


@dataclass(slots=True)
class SpecColumns:
    """Consecutive speculative-decoding lines (vLLM SpecDecoding, llama.cpp draft acceptance) as columns."""

    engine: Engine
    ranks: list[str | None]
    ts: list[float | None]
    mal: list[float | None]
    rate: list[float | None]
    accepted: list[int | None]
    drafted: list[int | None]
    per_position: list[tuple[float, ...] | None] | Rows  # (Rows: packed by the bulk pass)

    def record(self, i: int, line: int) -> Spec:
        """Line ``i`` as a record with what the session reads of it."""
        return Spec(line, self.ts[i], self.ranks[i], mean_acceptance_length=self.mal[i], accepted=self.accepted[i],
                    drafted=self.drafted[i], draft_acceptance_rate=self.rate[i], per_position=self.per_position[i],
                    engine=self.engine)


class _Flags:
    """Which lines of a spec block count: numpy's flags, and the list only once something asks."""

    __slots__ = ("flags", "_list")

    def __init__(self, flags: np.ndarray) -> None:
        self.flags = flags
        self._list: list[bool] | None = None

    @property
    def list(self) -> list[bool]:
        if self._list is None:
            self._list = self.flags.tolist()
        return self._list


class Session:
    """Ingests records, in order, from one or more sources, and keeps the runs.

    Args:
        warmup: samples excluded at the start of each run, per rank; None = the engine default.
    """

    def __init__(self, *, warmup: int | None = None) -> None:
        self.warmup = warmup
        self.runs: list[Run] = []
        self.counts: Counter[str] = Counter()
        self.lines = 0
        self.events: deque[SessionEvent] = deque(maxlen=EVENTS_KEPT)
        self.unparsed: deque[Unparsed] = deque(maxlen=UNPARSED_KEPT)
        #: The engine that wrote the input: the majority of the per-line engine markers
        #: (each stats / configuration record knows its engine), ties broken by ``engine_hint``.
        self.engine = Engine.UNKNOWN
        #: What the file's signature lines say (``detect_engine``): decides when the lines do not.
        self.engine_hint = Engine.UNKNOWN
        self.engine_votes: Counter[Engine] = Counter()
        self.state = ServerState.UNKNOWN
        self._current: Run | None = None
        self._source = ""
        self._baseline_source = False
        #: Called with (name, baseline) after every begin_source — the recorder listens here.
        self.source_listeners: list[Callable[[str, bool], None]] = []

    # -- sources ---------------------------------------------------------------------------

    def begin_source(self, name: str, *, baseline: bool = False) -> None:
        """Start a new input: the next record opens a new run.

        Args:
            name: the source's name (a file path, ``host:path``).
            baseline: whether this source's runs are the baseline (``--baseline FILE``).
        """
        self._current = None
        self._source = name
        self._baseline_source = baseline
        for listener in self.source_listeners:
            listener(name, baseline)

    @property
    def current(self) -> Run | None:
        """The run records are going to now."""
        return self._current

    def set_engine_hint(self, engine: Engine) -> None:
        """The engine a file's signature lines name: it decides while the records do not."""
        self.engine_hint = engine
        self._decide_engine()

    def _vote(self, engine: Engine, n: int = 1) -> None:
        self.engine_votes[engine] += n
        if engine is not self.engine:
            self._decide_engine()

    def _decide_engine(self) -> None:
        votes = self.engine_votes
        if not votes:
            self.engine = self.engine_hint
            return
        top = max(votes.values())
        tied = [e for e, n in votes.items() if n == top]
        if len(tied) == 1:
            self.engine = tied[0]
        elif self.engine_hint in tied:
            self.engine = self.engine_hint
        else:
            # A tie the file's signature does not settle: the engines' own order, not the order the
            # votes came in. The bulk path counts a piece's votes kind by kind, the line path line
            # by line: "the first seen" named SGLang on one and vLLM on the other for the same file.
            order = list(Engine)
            self.engine = min(tied, key=order.index)

    # -- ingestion ---------------------------------------------------------------------------

    def ingest(self, rec: ParsedRecord) -> None:
        """Take one record (in input order)."""
        self.counts[rec.kind] += 1
        if isinstance(rec, Decode):
            self._sample(rec, rec.gen_throughput, rec.running_req, rec.accept_len, rec.accept_rate,
                         idle_by_gap=True)
        elif isinstance(rec, EngineStats):
            # A vLLM interval with nothing running was idle (or partly: load ended inside it).
            idle = rec.running == 0 or rec.gen_throughput == 0
            self._sample(rec, rec.gen_throughput, rec.running, None, None, idle_by_gap=False, idle=idle)
        elif isinstance(rec, Spec):
            self._spec(rec)
        elif isinstance(rec, Lifecycle):
            self._lifecycle(rec)
        elif isinstance(rec, Config):
            self._config(rec)
        elif isinstance(rec, Prefill):
            self._vote(Engine.SGLANG)
        elif isinstance(rec, Unparsed):
            self.unparsed.append(rec)
            if self.counts["unparsed"] in (1, 10, 100, 1000) or self.counts["unparsed"] % 10000 == 0:
                self._event(rec, "warning", f"{self.counts['unparsed']} line(s) with a known marker could "
                                            f"not be parsed (latest: line {rec.line}, {rec.reason})")

    def _new_run(self, rec: ParsedRecord, config: RunConfig | None = None) -> Run:
        run = Run(id=len(self.runs) + 1, source=self._source, first_line=rec.line, config=config,
                  baseline_source=self._baseline_source, started_at=rec.timestamp)
        self.runs.append(run)
        self._current = run
        if len(self.runs) > 1:
            self._event(rec, "info", f"run {run.id} begins: {run.label}")
        return run

    def _run_for_sample(self, rec: ParsedRecord) -> Run:
        run = self._current
        # A stopped server still drains the requests in flight (SGLang logs decode batches for
        # seconds after uvicorn's "Shutting down"): those samples are its own. A crashed one
        # serves nothing more: samples after it are another launch's.
        if run is not None and run.state is ServerState.CRASHED and run._crash_suspect:
            self._survived(run, rec)
        elif run is None or run.state is ServerState.CRASHED and run.used or (
                run.state is ServerState.STOPPED and run.used and not run._draining):
            run = self._new_run(rec)
        return run

    def _survived(self, run: Run, rec: ParsedRecord) -> None:
        """A sample after a traceback-only crash: the server caught the error and went on serving."""
        line, cause = run.crash_line, run.crash_cause or run.crash_detail or "a traceback"
        run.errors_survived.append((line, cause))
        run.crash_detail = run.crash_cause = run.crash_line = run.crash_at = None
        run._cause_weight, run._crash_suspect = 0, False
        run.state = self.state = ServerState.SERVING
        where = f" at line {line}" if line is not None else ""
        self._event(rec, "warning", f"the server went on serving after the error{where} ({cause}): "
                                    "an error it caught, not a crash")

    def _touch(self, run: Run, rec: ParsedRecord) -> None:
        run.last_line = rec.line
        if rec.timestamp is not None:
            run.last_at = rec.timestamp

    def _warmup_for(self) -> int:
        if self.warmup is not None:
            return self.warmup
        return DEFAULT_WARMUP[self.engine]

    def _sample(self, rec: Decode | EngineStats, tput: float | None, conc: int | None,
                acc_len: float | None, acc_rate: float | None, *, idle_by_gap: bool,
                idle: bool = False) -> None:
        # A record built without an engine (tests, the sweep's synthetic stats) is vLLM's, as before.
        engine = Engine.SGLANG if isinstance(rec, Decode) else (rec.engine if rec.engine is not Engine.UNKNOWN
                                                                else Engine.VLLM)
        self._vote(engine)
        run = self._run_for_sample(rec)
        if run.engine is Engine.UNKNOWN:
            run.engine = engine
        self._touch(run, rec)
        if run.state is not ServerState.SERVING:
            run.state = self.state = ServerState.SERVING
        self._add_sample(run, rec.rank, rec.timestamp, tput, conc, acc_len, acc_rate,
                         idle_by_gap, idle, self._warmup_for(), rec)

    def count_lines(self, kind: str, n: int) -> None:
        """Lines of a kind the bulk path counts without records (SGLang prefill): counted, and
        voting for their engine, as :meth:`ingest` counts and votes for each record."""
        if not n:
            return
        self.counts[kind] += n
        if kind == "prefill":
            self._vote(Engine.SGLANG, n)

    def ingest_decode_columns(self, ranks: list[str | None], ts: list[float | None], running: list[int],
                              tput: list[float], acc_len: list[float | None] | None,
                              acc_rate: list[float | None] | None, first_line: int, last_line: int) -> None:
        """Take a block of consecutive, well-formed SGLang decode lines as columns.

        The bulk path of ``summarize`` on large files: the same rules as
        :meth:`ingest` applied to ``Decode`` records, without building them.
        """
        n = len(tput)
        if not n:
            return
        self.counts["decode"] += n
        self._vote(Engine.SGLANG, n)
        first = Decode(first_line, ts[0], ranks[0])
        run = self._run_for_sample(first)
        if run.engine is Engine.UNKNOWN:
            run.engine = Engine.SGLANG
        run.last_line = last_line
        for t in reversed(ts):
            if t is not None:
                run.last_at = t
                break
        if run.state is not ServerState.SERVING:
            run.state = self.state = ServerState.SERVING
        warmup = self._warmup_for()
        add = self._add_sample
        i = 0
        rank = ranks[0]
        rs = run._ranks.get(rank)
        # Per sample while the rank is warming up (or has no history yet) ...
        while i < n and (rs is None or rs.seen < max(warmup, 1) or rs.last_ts is None):
            add(run, ranks[i], ts[i], tput[i], running[i], acc_len[i] if acc_len else None,
                acc_rate[i] if acc_rate else None, True, False, warmup)
            rs = run._ranks.get(rank)
            i += 1
        if i < n and not self._bulk_steady(run, rank, ranks, ts, running, tput, acc_len, acc_rate, i, warmup):
            # Per sample. Ranks in turn (DP attention) warm up one beside the other, and the loop
            # above waited for the first only: once each has had its warm-up, the steady path is
            # tried once more (the first block of a DP log went through here whole, 14,000 lines).
            # A sample without its time fails it too, for the whole rest of the block: it is
            # tried again at growing distances, so the lines after it go back to the steady path.
            span = max(warmup, 1) * len(set(ranks[i:])) + 1
            retry = i + span
            for j in range(i, n):
                if j == retry:
                    if self._bulk_steady(run, ranks[j], ranks, ts, running, tput, acc_len, acc_rate, j, warmup):
                        break
                    span *= 2
                    retry = j + span
                add(run, ranks[j], ts[j], tput[j], running[j], acc_len[j] if acc_len else None,
                    acc_rate[j] if acc_rate else None, True, False, warmup)

    def _bulk_steady(self, run: Run, rank: str | None, ranks: list[str | None], ts: list[float | None],
                     running: list[int], tput: list[float], acc_len: list[float | None] | None,
                     acc_rate: list[float | None] | None, i: int, warmup: int) -> bool:
        """The common case in bulk: warmed-up ranks, every sample with its time.

        The rules of :meth:`_add_sample` then reduce to appends in line order, each rank's
        gap average over its own samples, and the samples after an idle gap (found by the
        same loop as the average: a pause between benchmark runs, a night) left out of
        throughput and concurrency. Several ranks in turn (DP attention prints one line per
        DP rank) are the same rules per rank. Returns False (nothing done) otherwise.

        (Before idle gaps were found here, a block with one went sample by sample from the
        gap until a retry found the rest of it gap-free: 43,000 samples of a 2M-line log
        with pauses, 0.2 s of the feeding process.)
        """
        tail_ts = ts[i:]
        tail_ranks = ranks[i:]
        if not _complete(tail_ts):
            return False
        by_rank: dict[str | None, Any]
        where: Callable[[str | None], np.ndarray] | None = None
        # In C: count() (the bulk path hands one object per rank).
        if tail_ranks.count(rank) == len(tail_ts):
            by_rank = {rank: tail_ts}  # (no None: tested above)
        else:
            by_rank, where = _times_by_rank(tail_ranks, tail_ts)
        steady: list[tuple[str | None, _RankState, float | None, float | None, int]] = []
        idle: list[int] = []
        for r, times in by_rank.items():
            rs = run._ranks.get(r)
            if rs is None or rs.seen < max(warmup, 1) or rs.last_ts is None:
                return False
            ema, last, gaps = _gap_average(times, rs.last_ts, rs.gap_ema, IDLE_GAP_MIN_S, IDLE_GAP_FACTOR)
            if gaps:
                idle.extend(gaps if where is None else where(r)[gaps].tolist())
            steady.append((r, rs, ema, last, len(times)))
        for r, rs, ema, last, n in steady:
            rs.gap_ema, rs.last_ts = ema, last
            rs.seen += n
            if r:
                run.ranks.add(r)
        busy_tput: Any = tput[i:]
        busy_running: Any = running[i:]
        if idle:
            run.excluded_idle += len(idle)
            busy = [True] * len(busy_tput)
            for k in idle:
                busy[k] = False
            busy_tput = list(compress(busy_tput, busy))
            busy_running = list(compress(busy_running, busy))
        tail = slice(max(i, len(tput) - LIVE_POINTS), None)
        run.live_throughput.extend(tput[tail])
        _extend(run.throughput, busy_tput)
        _extend(run.concurrency, busy_running)
        for column, counted, live in ((acc_len, run.accept_len, run.live_accept_len),
                                      (acc_rate, run.accept_rate, run.live_accept_rate)):
            if column:
                after: Any = column[i:]  # a list, or an array (bulk._as_array) that holds no None
                values = after if isinstance(after, array) else [v for v in after if v is not None]
                _extend(counted, values)
                live.extend(values[-LIVE_POINTS:])
        return True

    def ingest_stats_columns(self, first_line: int, last_line: int, last_ts: float | None, first_is_spec: bool,
                             stats: StatsColumns | None, spec: SpecColumns | None) -> bool:
        """Take a block of consecutive, well-formed vLLM / llama.cpp stats and spec lines as columns.

        The same rules as :meth:`ingest` on the records, in line order (stats and spec
        lines touch different figures, so only the block's first line and last time need
        the order). Returns False, having done nothing, when the current run has ended
        (which line comes first then decides whether a new run begins): feed the records.
        """
        run = self._current
        if run is not None and run.state in (ServerState.CRASHED, ServerState.STOPPED):
            return False
        wmax = self.warmup if self.warmup is not None else max(DEFAULT_WARMUP.values())
        order = ((spec, True), (stats, False)) if first_is_spec else ((stats, False), (spec, True))
        for cols, is_spec in order:
            if cols is None or not cols.ts:
                continue
            n = len(cols.ts)
            i = 0
            # Where the column's last rank begins its unbroken stretch (bulk only there).
            same = n - 1
            if cols.ranks.count(cols.ranks[-1]) == n:
                same = 0  # one rank throughout (in C: the loop below took 1.6 ms a piece)
            while same > 0 and cols.ranks[same - 1] == cols.ranks[-1]:
                same -= 1
            # Record by record while the run or the rank warms up (and to open the run).
            while i < n and not self._steady(cols, is_spec, i, wmax, same):
                self.ingest(cols.record(i, first_line))
                i += 1
            if i < n:
                if is_spec:
                    self._bulk_spec(cols, i)  # type: ignore[arg-type]
                else:
                    self._bulk_stats(cols, i)  # type: ignore[arg-type]
        run = self._current
        if run is not None:
            run.last_line = last_line
            if last_ts is not None:
                run.last_at = last_ts
        return True

    def _steady(self, cols: StatsColumns | SpecColumns, is_spec: bool, i: int, wmax: int, same: int) -> bool:
        run = self._current
        if run is None or run.engine is Engine.UNKNOWN:
            return False
        if is_spec:
            return run._spec_seen >= wmax
        rank = cols.ranks[i]
        rs = run._ranks.get(rank)
        return rs is not None and rs.seen >= wmax and run.state is ServerState.SERVING and i >= same

    def _bulk_stats(self, c: StatsColumns, i: int) -> None:
        run = self._current
        assert run is not None
        n = len(c.ts) - i
        self.counts["engine_stats"] += n
        self._vote(c.engine, n)
        rank = c.ranks[i]
        rs = run._ranks[rank]
        if rank:
            run.ranks.add(rank)
        rs.seen += n
        # The gap average, in order (what _add_sample keeps through _update_gap).
        rs.gap_ema, rs.last_ts, _idle = _gap_average(c.ts[i:], rs.last_ts, rs.gap_ema, IDLE_GAP_MIN_S,
                                                    IDLE_GAP_FACTOR)
        tput, running = c.tput[i:], c.running[i:]
        run.live_throughput.extend(tput[-LIVE_POINTS:])
        if 0 not in running and 0.0 not in tput:
            # No idle interval: the common case, in C (llama.cpp prints no concurrency: 0 = unknown).
            _extend(run.throughput, tput)
            if _complete(running):
                _extend(run.concurrency, running)
            elif running.count(None) == len(running):
                run.concurrency.extend([0] * len(running))
            else:
                run.concurrency.extend(0 if r is None else r for r in running)
            return
        busy = [not (r == 0 or t == 0) for r, t in zip(running, tput, strict=True)]
        run.excluded_idle += busy.count(False)
        run.throughput.extend(compress(tput, busy))
        run.concurrency.extend(r if r is not None and r >= 0 else 0 for r in compress(running, busy))

    def _bulk_spec(self, c: SpecColumns, i: int) -> None:
        run = self._current
        assert run is not None
        n = len(c.ts) - i
        self.counts["spec"] += n
        self._vote(c.engine, n)
        run._spec_seen += n
        mal, rate, acc, dra, pps = c.mal[i:], c.rate[i:], c.accepted[i:], c.drafted[i:], c.per_position[i:]
        for column, live in ((mal, run.live_accept_len), (rate, run.live_accept_rate)):
            live.extend(column[-LIVE_POINTS:] if _complete(column)
                        else [v for v in column if v is not None][-LIVE_POINTS:])  # type: ignore[arg-type]
        pp = run.per_position_sum
        if 0 not in dra and _complete(mal) and _complete(rate) and _complete(acc) and _complete(dra):
            # Every line drafted and read whole: the common case, in C (sums in line order).
            _extend(run.accept_len, mal)
            _extend(run.accept_rate, rate)
            run.accepted += sum(acc)  # type: ignore[arg-type]
            run.drafted += sum(dra)  # type: ignore[arg-type]
            if isinstance(pps, Rows) and pps.width >= len(pp):
                # Packed by the bulk pass (rows of one width, no None): a position at a time.
                pp.extend([0.0] * (pps.width - len(pp)))
                pps.add_to(pp)
                run.per_position_n += len(pps)
                return
            if not isinstance(pps, Rows) and None not in pps and pps:
                whole = cast("list[tuple[float, ...]]", pps)
                width = len(whole[0])
                # (the widths as a set, in C: a generator over the rows took 50 ms of a 2M-line log)
                if width and width >= len(pp) and set(map(len, whole)) == {width}:
                    pp.extend([0.0] * (width - len(pp)))
                    for j, values in enumerate(zip(*whole, strict=True)):
                        pp[j] = reduce(add, values, pp[j])
                    run.per_position_n += len(whole)
                    return
            keep = _Flags(np.ones(len(dra), dtype=bool))
        else:
            # Some line drafted nothing, or gave no mean length (llama.cpp before its
            # acceptance length: every line), or a value was cut: line by line, except where a
            # column is whole (in numpy) or empty (no None to skip one by one). The lines kept are
            # found in numpy from the packed drafted counts, and listed only if a column needs it
            # (a comprehension took 30 ms of a 2M-line llama.cpp log).
            counts = cast("array[int] | None", dra if _packed(dra) else None)
            keep = _Flags(np.frombuffer(counts, dtype=counts.typecode) != 0 if counts is not None
                          else np.array([d != 0 for d in dra], dtype=bool))
            kept = keep.flags
            columns: tuple[tuple[Any, array[float]], ...] = ((mal, run.accept_len), (rate, run.accept_rate))
            for column, dst in columns:
                if _packed(column):
                    code = column.typecode
                    _extend(dst, array(code, np.frombuffer(column, dtype=code)[kept].tobytes()))
                elif column.count(None) != len(column):
                    dst.extend(v for v in compress(column, keep.list) if v is not None)
            if _packed(acc) and _packed(dra):  # (counts of 32 bits: a list may hold any int)
                run.accepted += int(np.asarray(acc, dtype=np.int64)[kept].sum())
                run.drafted += int(np.asarray(dra, dtype=np.int64)[kept].sum())
            else:
                for a, d, k in zip(acc, dra, keep.list, strict=True):
                    if k and a is not None and d is not None:
                        run.accepted += a
                        run.drafted += d
            if not isinstance(pps, Rows) and pps.count(None) == len(pps):
                return  # (no line gave its rates per position)
        for p in compress(pps, keep.list):
            if p:
                if len(pp) < len(p):
                    pp.extend([0.0] * (len(p) - len(pp)))
                if len(p) == len(pp):
                    for j, v in enumerate(p):
                        pp[j] += v
                    run.per_position_n += 1

    def _add_sample(self, run: Run, rank: str | None, ts: float | None, tput: float | None,
                    conc: int | None, acc_len: float | None, acc_rate: float | None,
                    idle_by_gap: bool, idle: bool, warmup: int, rec: ParsedRecord | None = None) -> None:
        if rank:
            run.ranks.add(rank)
        rs = run._ranks.get(rank)
        if rs is None:
            rs = run._ranks[rank] = _RankState()
        rs.seen += 1
        gap = None
        if ts is not None:
            if rs.last_ts is not None:
                gap = ts - rs.last_ts
            rs.last_ts = ts
        if tput is not None:
            run.live_throughput.append(tput)
        if acc_len is not None:
            run.live_accept_len.append(acc_len)
        if acc_rate is not None:
            run.live_accept_rate.append(acc_rate)
        if rs.seen <= warmup:
            run.excluded_warmup += 1
            self._update_gap(rs, gap)
            return
        if idle_by_gap:
            limit = max(IDLE_GAP_MIN_S, IDLE_GAP_FACTOR * (rs.gap_ema or 0.0))
            if gap is None and ts is not None and rs.seen == 1:
                idle = True  # nothing before it on this rank: its interval is unknown
            elif gap is not None and gap > limit:
                idle = True
        self._update_gap(rs, gap)
        if acc_len is not None:
            run.accept_len.append(acc_len)
        if acc_rate is not None:
            run.accept_rate.append(acc_rate)
        if rec is not None and (acc_len is not None or acc_rate is not None):
            self._watch_acceptance(run, rec, acc_len, acc_rate)
        if tput is None:
            return
        if idle:
            run.excluded_idle += 1
            return
        run.throughput.append(tput)
        run.concurrency.append(conc if conc is not None and conc >= 0 else 0)

    @staticmethod
    def _update_gap(rs: _RankState, gap: float | None) -> None:
        if gap is None or gap < 0:
            return
        # Idle gaps must not teach the typical gap: only learn from plausible ones.
        if rs.gap_ema is None:
            rs.gap_ema = gap
        elif gap <= max(IDLE_GAP_MIN_S, IDLE_GAP_FACTOR * rs.gap_ema):
            rs.gap_ema = 0.9 * rs.gap_ema + 0.1 * gap

    def _spec(self, rec: Spec) -> None:
        engine = rec.engine if rec.engine is not Engine.UNKNOWN else Engine.VLLM
        self._vote(engine)
        run = self._run_for_sample(rec)
        if run.engine is Engine.UNKNOWN:
            run.engine = engine
        self._touch(run, rec)
        run._spec_seen += 1
        if rec.mean_acceptance_length is not None:
            run.live_accept_len.append(rec.mean_acceptance_length)
        if rec.draft_acceptance_rate is not None:
            run.live_accept_rate.append(rec.draft_acceptance_rate)
        if run._spec_seen <= self._warmup_for():
            run.excluded_warmup += 1
            return
        if rec.drafted == 0:
            return  # nothing drafted in the interval: no acceptance to measure
        if rec.mean_acceptance_length is not None:
            run.accept_len.append(rec.mean_acceptance_length)
        if rec.draft_acceptance_rate is not None:
            run.accept_rate.append(rec.draft_acceptance_rate)
        if rec.mean_acceptance_length is not None or rec.draft_acceptance_rate is not None:
            self._watch_acceptance(run, rec, rec.mean_acceptance_length, rec.draft_acceptance_rate)
        if rec.accepted is not None and rec.drafted is not None:
            run.accepted += rec.accepted
            run.drafted += rec.drafted
        if rec.per_position:
            pp = run.per_position_sum
            if len(pp) < len(rec.per_position):
                pp.extend([0.0] * (len(rec.per_position) - len(pp)))
            if len(rec.per_position) == len(pp):
                for i, v in enumerate(rec.per_position):
                    pp[i] += v
                run.per_position_n += 1

    def _config(self, rec: Config) -> None:
        cfg = RunConfig.from_record(rec)
        if cfg.engine is not Engine.UNKNOWN:
            self._vote(cfg.engine)
        run = self._current
        ended = run is not None and run.state in (ServerState.CRASHED, ServerState.STOPPED)
        if (run is not None and not run.used and not ended and run.config is not None and run.config.params
                and not cfg.params and replace(run.config, params=()) == cfg):
            # vLLM's engine-init line repeats its args line with less detail (no batch-size schedule):
            # the same launch, and the richer configuration stays.
            cfg = run.config
        if run is None or run.used or ended or (run.config is not None and run.config != cfg):
            run = self._new_run(rec, cfg)
        else:
            run.config = cfg
        self._touch(run, rec)
        run.state = self.state = ServerState.STARTING
        run._launching = True
        if run.started_at is None:
            run.started_at = rec.timestamp
        self._event(rec, "info", f"server configuration: {cfg.label}")

    def _lifecycle(self, rec: Lifecycle) -> None:
        ev = rec.event
        run = self._current
        starts = ev in (Event.SERVER_START, Event.LOAD_BEGIN, Event.READY)
        # A launch's own ready line after samples served during its warm-up is still this launch.
        own_ready = (ev is Event.READY and run is not None and run._launching
                     and run.state not in (ServerState.CRASHED, ServerState.STOPPED))
        if starts and not own_ready and (run is None or run.used
                                         or run.state in (ServerState.CRASHED, ServerState.STOPPED)):
            run = self._new_run(rec)
        if run is None:
            run = self._new_run(rec)
        if ev in (Event.SERVER_START, Event.LOAD_BEGIN):
            run._launching = True
        self._touch(run, rec)
        level = "info"
        if ev is Event.SERVER_START:
            run.state = ServerState.STARTING
        elif ev in (Event.LOAD_BEGIN, Event.LOAD_PROGRESS, Event.LOAD_END, Event.KV_CACHE):
            run.state = ServerState.LOADING
            if rec.progress is not None:
                run.load_progress = rec.progress
        elif ev in (Event.GRAPH_BEGIN, Event.GRAPH_PROGRESS, Event.GRAPH_END):
            run.state = ServerState.CAPTURING
        elif ev is Event.READY:
            run._launching = False
            # Samples served during the warm-up already made the run serving: it stays so.
            run.state = ServerState.SERVING if run.used else ServerState.READY
            run.ready_at = rec.timestamp
        elif ev in (Event.CRASH, Event.OOM) and run.state is ServerState.STOPPED:
            # Engines often print tracebacks while they shut down (vLLM: EngineDeadError after
            # SIGINT); a stop that was asked for is not a crash.
            level = "warning"
        elif ev in (Event.CRASH, Event.OOM):
            level = "error"
            # Certain once any line of it is more than a traceback's header or exception line.
            traceback_only = ev is Event.CRASH and bool(
                rec.detail and (rec.detail.startswith("Traceback") or EXCEPTION_LINE.match(rec.detail)))
            run._crash_suspect = traceback_only and (run.state is not ServerState.CRASHED or run._crash_suspect)
            if run.state is not ServerState.CRASHED or rec.detail and "Traceback" not in rec.detail:
                run.crash_detail = rec.detail
            weight = _cause_weight(ev, rec.detail)
            if run.crash_cause is None or weight > run._cause_weight:
                run.crash_cause, run._cause_weight, run.crash_line = rec.detail, weight, rec.line
                # An exception line inside a traceback has no time of its own: the traceback's.
                run.crash_at = rec.timestamp if rec.timestamp is not None else run.last_at
            run.state = ServerState.CRASHED
        elif ev is Event.RETRACT:
            level = "warning"
        elif ev is Event.SHUTDOWN and run.state is not ServerState.CRASHED:
            run._draining = run.state is ServerState.SERVING or run._draining
            run.state = ServerState.STOPPED
        self.state = run.state
        # Progress lines arrive by the hundred: the event log keeps the milestones only.
        if ev not in (Event.LOAD_PROGRESS, Event.GRAPH_PROGRESS):
            self._event(rec, level, f"{ev.value.replace('_', ' ')}: {rec.detail}")

    def _watch_acceptance(self, run: Run, rec: ParsedRecord, acc_len: float | None, acc_rate: float | None) -> None:
        """Feed the run's collapse guard one counted sample; a change goes to the event log."""
        gain = acc_len - 1.0 if acc_len is not None else acc_rate
        if gain is None:
            return
        change = run.guard.add(rec.timestamp, gain)
        if change is None:
            return
        # Said in the figure the engine logs (accept length = gain + 1), over the guard's window.
        what, shift = ("accept length", 1.0) if acc_len is not None else ("accept rate", 0.0)
        recent, level = change.recent + shift, change.level + shift
        if change.collapsed:
            self._event(rec, "warning", f"acceptance collapsed: {what} {recent:.2f} over the last "
                                        f"{change.span:.0f} s against {level:.2f} for this run "
                                        f"({change.drop_pct:+.0f}% of the drafter's gain); the server "
                                        "keeps serving, slower")
        else:
            self._event(rec, "info", f"acceptance recovered: {what} {recent:.2f} (this run's level {level:.2f})")

    def _event(self, rec: ParsedRecord, level: str, text: str) -> None:
        run_id = self._current.id if self._current is not None else None
        self.events.append(SessionEvent(rec.line, rec.timestamp, level, text, run_id))
