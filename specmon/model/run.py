"""A run: one server launch with one configuration, and everything measured in it.

What a run is and when one begins is the session's rule (:mod:`specmon.model.session`); this
module holds what a run keeps (its configuration, state, counted samples and live series) and
the constants its figures are defined by (warm-up, idle gaps, the live window).
"""

from __future__ import annotations

from array import array
from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from specmon.engines import adapter
from specmon.model.collapse import CollapseGuard
from specmon.records import Config, Engine

#: Default warm-up, in samples per rank, by engine (see module docstring).
#: Warm-up samples left out of a run's figures, by engine (each engine module declares its own).
DEFAULT_WARMUP: dict[Engine, int] = {e: adapter(e).warmup for e in Engine}
#: An SGLang throughput sample whose gap to the previous decode line exceeds
#: max(IDLE_GAP_MIN_S, IDLE_GAP_FACTOR × the rank's typical gap) spans idle time.
IDLE_GAP_MIN_S = 5.0
IDLE_GAP_FACTOR = 4.0
#: How many recent samples the live series keep (the dashboard's sparklines and rolling means).
LIVE_POINTS = 600


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
        # A draft-token count apart from the engine's own rule (a tree's steps + 1) is shown.
        if (self.draft_tokens is not None and self.steps is not None and adapter(self.engine).draft_tree
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
    crash_detail: str | None = None  # a crash's words on the dashboard: its cause
    #: What killed the run: its first fatal line (a traceback that begins with it or right after
    #: it is named by its exception line; never a bare "Traceback" header when the exception
    #: line came, nor the parent's later sigquit) — its line number and log time.
    crash_cause: str | None = None
    crash_line: int | None = None
    crash_at: float | None = None
    _cause_weight: int = 0
    #: The cause is a traceback's header or the announcement of one: its exception line, when it
    #: comes, names the crash instead.
    _cause_open: bool = False
    #: The crash is pending: it rests only on Python exceptions (a traceback's header or its
    #: exception line, an OOM's included), which a server also prints for an error it catches and
    #: survives: samples after it, with no new start in between, say the process went on serving.
    #: An engine's word of a death, a signal, an abort or a wrapper's report is certain instead, and
    #: the end of the input, a restart or the process's exit confirms a pending one.
    _crash_suspect: bool = False
    #: The first line of a stop (``SIGTERM received ...``): why a stopped server ended.
    stop_detail: str | None = None
    stop_line: int | None = None
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
    def crash_pending(self) -> bool:
        """Whether the run's crash rests only on exceptions so far (serving may still resume): a
        display may say "error (serving stopped?)" until the end of input or a restart confirms it."""
        return self.state is ServerState.CRASHED and self._crash_suspect

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
