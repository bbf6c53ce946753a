"""Tracking a server's start-up from its new log: :class:`StartupTracker` (lifecycle, configuration,
crash, the last raw lines), pure (no I/O; a clock only if given, for a pending error's wait).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from specmon.control.restart_progress import Phase
from specmon.model.pending import PendingWatch
from specmon.model.session import RunConfig, ServerState, Session
from specmon.parsing import LineParser
from specmon.parsing.lifecycle import usage_error
from specmon.records import Engine, Event, Lifecycle

#: Raw log lines kept for display (a crash shows them).
LINES_KEPT = 20


class StartupTracker:
    """Reads the new log into a private session: lifecycle, configuration, crash, raw lines.

    Pure (no I/O): feed it batches of lines.

    Args:
        engine: The engine, when the profile says it (settles ambiguous markers).
        keep: Raw lines kept for display.
        clock: Seconds, for how long a pending error has waited (:mod:`specmon.model.pending`);
            without one a pending error is never called a crash by waiting (the process's exit,
            which the caller sees, or an engine's word of a death confirms it).
    """

    def __init__(self, *, engine: Engine = Engine.UNKNOWN, keep: int = LINES_KEPT,
                 clock: Callable[[], float] | None = None) -> None:
        self.session = Session()
        self.session.begin_source("restart")
        self._parser = LineParser(engine=engine)
        self._lineno = 1
        self._lines: deque[str] = deque(maxlen=keep)
        self._last_was_progress = False
        #: The furthest start-up phase the log has shown (LOADING, CAPTURING, READY) or None.
        self.reached: Phase | None = None
        self.load_progress: tuple[int, int] | None = None
        self.graph_progress: tuple[int, int] | None = None
        self.config: RunConfig | None = None
        #: A command-line parser's refusal before start-up began: why the server is gone.
        self._refused: str | None = None
        self._clock = clock
        self._watch = PendingWatch()

    @property
    def crash(self) -> str | None:
        """Why the server died, once the log shows the end of serving: its first fatal line
        (``Run.crash_cause``: a traceback named by its exception line).

        Certain at once: an engine's word of a death, a signal, an abort, a usage error, or a
        crash that a new start in the same log confirmed. An exception alone (a traceback, an
        out-of-memory error) is pending (:attr:`pending_error`): a server also logs those for a
        request it fails, and a sample or a request answered after it makes it an error it caught.
        It is the crash once it has waited ``PENDING_WAIT_S`` on the clock with nothing served.
        """
        if self._refused is not None:
            return self._refused
        for earlier in self.session.runs[:-1]:  # (an earlier launch in this log: the start after it confirmed it)
            if earlier.state is ServerState.CRASHED:
                return earlier.crash_cause or earlier.crash_detail or "the server crashed"
        run = self.session.current
        if run is None or run.state is not ServerState.CRASHED:
            self._watch.since = None
            return None
        if run.crash_pending and (self._clock is None or not self._watch.ended(run, self._clock())):
            return None
        return run.crash_cause or run.crash_detail or "the server crashed"

    @property
    def pending_error(self) -> str | None:
        """The cause of an error that may yet be caught (no serving after it so far), else None."""
        run = self.session.current
        if run is None or not run.crash_pending:
            return None
        return run.crash_cause or run.crash_detail

    @property
    def last_lines(self) -> tuple[str, ...]:
        """The last raw lines (progress-bar lines folded to the latest one)."""
        return tuple(self._lines)

    @property
    def lines_seen(self) -> int:
        """How many lines of the new log have been fed."""
        return self._lineno - 1

    def feed(self, lines: list[str] | tuple[str, ...]) -> None:
        """Take a batch of complete lines from the new log."""
        for text in lines:
            rec = self._parser.parse(text, self._lineno)
            self._keep(text, rec)
            if rec is not None:
                self.session.ingest(rec)
                self._note(rec)
            elif self.reached is None and (refused := usage_error(text)) is not None:
                # Before any start-up phase, a command-line parser's error is why the server is gone.
                self._refused = self._refused or refused
            self._lineno += 1
        self.session.lines += len(lines)

    def catch_up(self, first: int, lines: tuple[str, ...]) -> None:
        """Feed the lines of a log excerpt that starts at line ``first`` which were not fed yet."""
        skip = self.lines_seen + 1 - first
        if skip < 0:
            # The tail fell behind by more than the excerpt: the lines between are lost to the
            # tracker, but the last words are what name the cause.
            self._lineno, skip = first, 0
        if skip < len(lines):
            self.feed(lines[skip:])

    def _keep(self, text: str, rec: object) -> None:
        if not text.strip():
            return
        progress = isinstance(rec, Lifecycle) and rec.event in (Event.LOAD_PROGRESS, Event.GRAPH_PROGRESS)
        if progress and self._last_was_progress and self._lines:
            # A tqdm bar prints one line per shard: only the latest says anything.
            self._lines[-1] = text
        else:
            self._lines.append(text)
        self._last_was_progress = progress

    def _note(self, rec: object) -> None:
        run = self.session.current
        if isinstance(rec, Lifecycle):
            ev = rec.event
            if ev in (Event.LOAD_BEGIN, Event.LOAD_PROGRESS, Event.LOAD_END, Event.KV_CACHE):
                self._reach(Phase.LOADING)
                if ev is Event.LOAD_PROGRESS and rec.progress is not None:
                    self.load_progress = rec.progress
            elif ev in (Event.GRAPH_BEGIN, Event.GRAPH_PROGRESS, Event.GRAPH_END):
                self._reach(Phase.CAPTURING)
                if ev is Event.GRAPH_PROGRESS and rec.progress is not None:
                    self.graph_progress = rec.progress
            elif ev is Event.READY:
                self._reach(Phase.READY)
        elif run is not None and run.config is not None:
            self.config = run.config

    def _reach(self, phase: Phase) -> None:
        order = (None, Phase.LOADING, Phase.CAPTURING, Phase.READY)
        if order.index(phase) > order.index(self.reached):
            self.reached = phase
