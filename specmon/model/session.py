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

from collections import Counter, deque
from collections.abc import Callable
from dataclasses import replace

from specmon.engines import KINDS, adapter
from specmon.model.column_ingest import ColumnIngest
from specmon.model.run import DEFAULT_WARMUP, IDLE_GAP_FACTOR, IDLE_GAP_MIN_S, _RankState
from specmon.model.run import Run as Run
from specmon.model.run import RunConfig as RunConfig
from specmon.model.run import ServerState as ServerState
from specmon.model.run import SessionEvent as SessionEvent
from specmon.parsing.lifecycle import EXCEPTION_LINE
from specmon.parsing.lifecycle import pending_fatal as pending_fatal
from specmon.records import (
    Config,
    Decode,
    Engine,
    EngineStats,
    Event,
    Lifecycle,
    ParsedRecord,
    Prefill,
    Serving,
    Spec,
    Unparsed,
)

# What a run holds is in specmon.model.run; the names imported "as" themselves above stay
# importable from here (the UI and many tests take them with the session).

def _first_maker(record: type, skip: Engine | None = None) -> Engine:
    """The first registered engine whose line kinds make ``record`` (``skip`` passed over)."""
    return next((k.engine for k in KINDS if k.record is record and k.engine is not skip), Engine.UNKNOWN)


# A record built without its engine (tests, the sweep's synthetic samples, the simulated server)
# is taken as the registry's first maker of its kind: decode and prefill lines SGLang's; stats and
# spec lines vLLM's as before (llama.cpp, listed first, prints them only per request and names its
# own records).
_DECODE_DEFAULT = _first_maker(Decode)
_DEFAULTS: dict[type, Engine] = {
    Decode: _DECODE_DEFAULT, Prefill: _first_maker(Prefill),
    EngineStats: _first_maker(EngineStats, skip=_first_maker(Spec)),
    Spec: _first_maker(Spec, skip=_first_maker(Spec)),
}


def _default_engine(rec: ParsedRecord) -> Engine:
    return _DEFAULTS.get(type(rec), Engine.UNKNOWN)


#: How many events and unparsed lines are kept for display (all are counted).
EVENTS_KEPT = 500
UNPARSED_KEPT = 200


def _cause_weight(event: Event, detail: str) -> int:
    """How a crash line names the cause: an out-of-memory error 3, an exception line 2, other
    words 1, a traceback's header 0 (its exception line, to come, names it)."""
    if event is Event.OOM:
        return 3
    if EXCEPTION_LINE.match(detail):
        return 2
    return 0 if "Traceback" in detail else 1


class Session(ColumnIngest):
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
            order = list(Engine)  # the registry's order: a registered engine is a member
            self.engine = min(tied, key=order.index)

    # -- ingestion ---------------------------------------------------------------------------

    def ingest(self, rec: ParsedRecord) -> None:
        """Take one record (in input order)."""
        self.counts[rec.kind] += 1
        if isinstance(rec, Decode):
            # Whether its throughput spans the time since its previous line (idle by the gap) or one
            # interval (idle when it ran nothing) is its engine's fact.
            by_gap = adapter(rec.engine if rec.engine is not Engine.UNKNOWN
                             else _DECODE_DEFAULT).throughput_since_last_line
            self._sample(rec, rec.gen_throughput, rec.running_req, rec.accept_len, rec.accept_rate,
                         idle_by_gap=by_gap, idle=not by_gap and (rec.running_req == 0 or rec.gen_throughput == 0))
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
            self._vote(_default_engine(rec))
        elif isinstance(rec, Serving):
            # A request answered after a pending error: the server caught it (the parser gives
            # these only then; after a certain crash, or a sample, there is nothing to demote).
            run = self._current
            if run is not None and run.crash_pending:
                self._survived(run, rec)
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
        run._cause_weight, run._crash_suspect, run._cause_open = 0, False, False
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
        # The record says whose line it was. One built without an engine (tests, the sweep's
        # synthetic samples) is the first registered engine's that makes its kind of record.
        engine = rec.engine if rec.engine is not Engine.UNKNOWN else _default_engine(rec)
        self._vote(engine)
        run = self._run_for_sample(rec)
        if run.engine is Engine.UNKNOWN:
            run.engine = engine
        self._touch(run, rec)
        # A stopped server's last requests (drained after its shutdown line) are counted, and
        # the server stays stopped: it serves nothing new (a fleet called it live, then quiet).
        if run.state is not ServerState.SERVING and not (run.state is ServerState.STOPPED and run._draining):
            run.state = self.state = ServerState.SERVING
        self._add_sample(run, rec.rank, rec.timestamp, tput, conc, acc_len, acc_rate,
                         idle_by_gap, idle, self._warmup_for(), rec)

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
        engine = rec.engine if rec.engine is not Engine.UNKNOWN else _default_engine(rec)
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
        # So is one after an error still pending in its start-up (a failed warm-up request it caught).
        own_ready = (ev is Event.READY and run is not None and run._launching
                     and (run.state not in (ServerState.CRASHED, ServerState.STOPPED) or run.crash_pending))
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
            if run.crash_pending:
                self._survived(run, rec)
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
            # Pending while every line of it is only an exception (a traceback's lines, an
            # out-of-memory error): the next sample demotes it to an error the server caught.
            # Certain once any line is an engine's word of a death, a signal, an abort or a
            # wrapper's report; the end of the input or a restart leaves it as it is: a crash.
            pending = pending_fatal(ev, rec.detail)
            run._crash_suspect = pending and (run.state is not ServerState.CRASHED or run._crash_suspect)
            self._name_cause(run, ev, rec)
            run.state = ServerState.CRASHED
        elif ev is Event.RETRACT:
            level = "warning"
        elif ev is Event.SHUTDOWN and run.state is not ServerState.CRASHED:
            run._draining = run.state is ServerState.SERVING or run._draining
            if run.state is not ServerState.STOPPED:
                # The first word of the stop ("SIGTERM received ...") says why the server ended,
                # not the lines it prints on the way out.
                run.stop_detail, run.stop_line = rec.detail, rec.line
            run.state = ServerState.STOPPED
        self.state = run.state
        # Progress lines arrive by the hundred: the event log keeps the milestones only.
        if ev not in (Event.LOAD_PROGRESS, Event.GRAPH_PROGRESS):
            what = ev.value.replace("_", " ")
            if ev is Event.CRASH and level == "error" and run._crash_suspect:
                # Only an exception so far: the server may go on serving (then it was an error it
                # caught, and the next event says so).
                what = "error (serving stopped?)"
            self._event(rec, level, f"{what}: {rec.detail}")

    @staticmethod
    def _name_cause(run: Run, ev: Event, rec: Lifecycle) -> None:
        """The crash's cause is its FIRST fatal line (the lines after it are its consequences: the
        parent's sigquit, the API server's EngineDeadError, other ranks' errors). A traceback that
        begins with it or right after it (vLLM's "EngineCore encountered a fatal error." then the
        traceback) is named by its exception line instead."""
        weight = _cause_weight(ev, rec.detail)
        if run.crash_cause is None:
            take = True
            run._cause_open = weight == 0
        elif (weight == 0 and run._cause_weight < 2 and run.crash_line is not None
              and rec.line == run.crash_line + 1):
            take, run._cause_open = False, True  # the announcement's own traceback begins
        else:
            take = run._cause_open and weight >= 2
        if take:
            if run.crash_cause is not None:
                run._cause_open = False
            run.crash_cause, run._cause_weight, run.crash_line = rec.detail, weight, rec.line
            # An exception line inside a traceback has no time of its own: the traceback's.
            run.crash_at = rec.timestamp if rec.timestamp is not None else run.last_at
        # The dashboard's words follow the cause.
        run.crash_detail = run.crash_cause

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
