"""Tracking a server's start-up from its new log: :class:`StartupTracker` (lifecycle, configuration,
crash, the last raw lines), pure (no I/O, no clock).
"""

from __future__ import annotations

from collections import deque

from specmon.control.restart_progress import Phase
from specmon.model.session import RunConfig, ServerState, Session
from specmon.parsing import LineParser
from specmon.parsing.lifecycle import usage_error
from specmon.records import Engine, Event, Lifecycle

#: Raw log lines kept for display (a crash shows them).
LINES_KEPT = 20


class StartupTracker:
    """Reads the new log into a private session: lifecycle, configuration, crash, raw lines.

    Pure (no I/O, no clock): feed it batches of lines.

    Args:
        engine: The engine, when the profile says it (settles ambiguous markers).
        keep: Raw lines kept for display.
    """

    def __init__(self, *, engine: Engine = Engine.UNKNOWN, keep: int = LINES_KEPT) -> None:
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
        self._crash_details: list[tuple[Event, str]] = []

    @property
    def crash(self) -> str | None:
        """Why the server died, once the log shows a crash or an out-of-memory error.

        The most telling line wins: an out-of-memory message, else the first
        crash line that is not just a traceback header.
        """
        details = self._crash_details
        if not details:
            return None
        for event, text in details:
            if event is Event.OOM:
                return text
        for _, text in details:
            if "Traceback" not in text:
                return text
        return details[0][1]

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
                self._crash_details.append((Event.CRASH, refused))
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
            elif ev in (Event.CRASH, Event.OOM) and run is not None and run.state is ServerState.CRASHED:
                # A traceback during a requested stop is not a crash (the session knows).
                self._crash_details.append((ev, rec.detail or ev.value))
        elif run is not None and run.config is not None:
            self.config = run.config

    def _reach(self, phase: Phase) -> None:
        order = (None, Phase.LOADING, Phase.CAPTURING, Phase.READY)
        if order.index(phase) > order.index(self.reached):
            self.reached = phase
