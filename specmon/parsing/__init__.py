"""Turn log lines into typed records: pure functions, no I/O, no Textual.

``LineParser.parse`` is the one entry point. It strips the outer wrappers real
captures add (ANSI colours, ``docker logs -t`` stamps, Ray / vLLM process tags),
then looks for each engine's marker anywhere in the line, cheapest test first:
most lines of a busy server are decode stats or HTTP access lines, and both
must cost little. It is stateful only for multi-line context (a traceback's
final exception line) and for the engine it has recognised.
"""

from __future__ import annotations

import re
from calendar import timegm
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime

from specmon.engines import ADAPTERS, KINDS
from specmon.grammar.common import strip_ansi, strip_outer
from specmon.grammar.prefix import read_prefix
from specmon.parsing.detect import detect_engine
from specmon.parsing.lifecycle import EXCEPTION_LINE, SHORT_FATAL, match_lifecycle, match_serving, pending_fatal
from specmon.records import Decode, Engine, EngineStats, Event, Lifecycle, ParsedRecord, Serving, Spec

__all__ = ["FRAME_WORD", "LineParser", "detect_engine", "parse_lines"]

_REMNANT = re.compile(r"\[[0-9;]{1,8}m")
# A vLLM-style level+time prefix, for the message part of traceback lines.
_LEVEL_PREFIX = re.compile(r"^(?:\S+ )?(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) [\d\- :.]+\[?[^\]\s]+:\d+\] ")
_SGLANG_PREFIX = re.compile(r"^\[[^\]]{8,40}\] ")
#: What every frame line of a Python traceback holds (the bulk path sends such lines here).
FRAME_WORD = 'File "'
# A Python traceback's frame line: '  File "/x/y.py", line 12, in f'.
_FRAME = re.compile(r'File "[^"\n]{1,400}", line \d+, in ')
# Every engine's line kinds (specmon.engines): the markers, in order.
_DISPATCH = KINDS

#: An engine's stats-line parser: (message, line number, timestamp, rank) -> record.
StatsParser = Callable[[str, int, float | None, str | None], ParsedRecord | None]


class LineParser:
    """Parses lines one at a time, remembering the engine and traceback context.

    Args:
        year: the year assumed for vLLM's year-less ``MM-DD HH:MM:SS`` stamps
            (callers pass the log file's year; default: this year).
        day: the midnight (epoch seconds, UTC) of a time of day printed without a date
            (callers pass the log file's first date; default: 1 January of ``year``).
        engine: the engine, when already known (otherwise recognised from the lines).
    """

    def __init__(self, *, year: int | None = None, engine: Engine = Engine.UNKNOWN, day: float | None = None) -> None:
        self.year = year if year is not None else datetime.now(UTC).year
        self.day = day if day is not None else float(timegm((self.year, 1, 1, 0, 0, 0)))
        self.engine = engine
        #: Inside a traceback, whose final ``SomeError: ...`` line names the crash.
        self.in_traceback = False
        #: An error the server may have caught is pending (a traceback, an out-of-memory error) and
        #: no sample came since: the next line of a request answered gives a ``Serving`` record
        #: (which tells the session the server went on serving), every other time such a line
        #: gives nothing. A sample clears it (the session takes a sample as serving already).
        self.awaiting_serving = False
        #: Each engine's reader of its configuration lines (llama.cpp's pairs two lines: stateful).
        self._configs = tuple((a, reader) for a in ADAPTERS if (reader := a.config_reader()) is not None)

    def parse(self, text: str, lineno: int) -> ParsedRecord | None:
        """Parse one line (without its line ending).

        Args:
            text: the line; any content, any length.
            lineno: its 1-based number in the input, kept in the record.

        Returns:
            A record, or None for a line that carries nothing specmon reads.
        """
        # Fast exits first: the bulk of a busy log is stats lines and HTTP access lines.
        if ' - "' in text and "HTTP/" in text:
            # uvicorn access line: nothing, unless it answers for a pending error.
            return self._served(*self._clean(text), lineno) if self.awaiting_serving else None
        for kind in _DISPATCH:
            if kind.marker in text and (kind.gate is None or kind.gate(text)):
                return self._stats(text, lineno, kind.marker, kind.parse, kind.engine)
        return self._slow(text, lineno)

    # -- helpers ---------------------------------------------------------------------------

    def _clean(self, text: str) -> tuple[str, float | None]:
        if "\x1b" in text:
            text = strip_ansi(text)
        elif "m" in text[:64] and _REMNANT.search(text, 0, 64):
            text = _REMNANT.sub("", text[:64]) + text[64:]
        return strip_outer(text)

    def _stats(self, text: str, lineno: int, marker: str, fn: StatsParser, engine: Engine) -> ParsedRecord | None:
        message, outer_ts = self._clean(text)
        at = message.find(marker)
        if at < 0:  # the marker sat inside a wrapper we removed: treat as plain text
            return self._slow(text, lineno)
        ts, rank = read_prefix(message[:at], self.year, self.day)
        if ts is None:
            ts = outer_ts
        rec = fn(message, lineno, ts, rank)
        if rec is not None and rec.kind != "unparsed":
            if isinstance(rec, Decode | EngineStats | Spec):
                rec.engine = engine  # the record says whose line it was: several engines print each
            if self.engine is Engine.UNKNOWN:
                self.engine = engine
            if rec.kind in SAMPLE_KINDS:
                self.awaiting_serving = False
        #: Inside a traceback, whose final ``SomeError: ...`` line names the crash.
        self.in_traceback = False
        return rec

    def _slow(self, text: str, lineno: int) -> ParsedRecord | None:
        if len(text) < 8 and text.strip() not in SHORT_FATAL:
            return None
        message, outer_ts = self._clean(text)
        for adapter, reader in self._configs:
            at = adapter.config_at(message)
            if at < 0:
                continue
            ts, rank = read_prefix(message[:at], self.year, self.day)
            cfg = reader(message, lineno, ts if ts is not None else outer_ts, rank)
            if cfg is not None:
                self.engine = adapter.engine
                return cfg
        found = match_lifecycle(message, self.engine)
        if found is None:
            if self.in_traceback:
                return self._exception_line(message, lineno, outer_ts)
            if FRAME_WORD in message and _FRAME.search(message):
                # A traceback whose header was cut off (a log that starts mid-way, a capture
                # that lost lines): its frames say one is under way, its last line names it.
                self.in_traceback = True
                return None
            return self._served(message, outer_ts, lineno) if self.awaiting_serving else None
        event, detail, progress = found
        ts, rank = read_prefix(message[: max(0, message.find(detail[:20]))], self.year, self.day)
        self.in_traceback = event is Event.CRASH and "Traceback" in message
        if event is Event.CRASH or event is Event.OOM:
            self.awaiting_serving = pending_fatal(event, detail)
        return Lifecycle(lineno, ts if ts is not None else outer_ts, rank,
                         event=event, detail=detail, progress=progress)

    def _exception_line(self, message: str, lineno: int, outer_ts: float | None) -> ParsedRecord | None:
        """Inside a traceback, the final ``SomeError: message`` line names the crash."""
        body = message
        ts = None
        m = _LEVEL_PREFIX.match(body) or _SGLANG_PREFIX.match(body)
        if m is not None:
            ts, _ = read_prefix(body[: m.end()], self.year, self.day)
            body = body[m.end():]
        body = body.strip()
        if EXCEPTION_LINE.match(body):
            self.in_traceback = False
            detail = body if len(body) <= 160 else body[:157] + "..."
            event = Event.OOM if "out of memory" in body.lower() else Event.CRASH
            self.awaiting_serving = True  # (an exception line is pending: pending_fatal)
            return Lifecycle(lineno, ts if ts is not None else outer_ts, None, event=event, detail=detail)
        return None


    def _served(self, message: str, outer_ts: float | None, lineno: int) -> Serving | None:
        """A ``Serving`` record for a line of a request answered (while an error is pending).

        Not inside a traceback: a line of another thread printed between its frames says nothing
        of the exception still to be named.
        """
        if self.in_traceback:
            return None
        detail = match_serving(message)
        if detail is None:
            return None
        self.awaiting_serving = False
        ts, rank = read_prefix(message[: max(0, message.find(detail[:20]))], self.year, self.day)
        return Serving(lineno, ts if ts is not None else outer_ts, rank, detail=detail)


#: The records the session takes as samples (a sample after a pending error says it was caught).
SAMPLE_KINDS = frozenset({"decode", "engine_stats", "spec"})


def parse_lines(lines: Iterable[str], *, year: int | None = None,
                engine: Engine = Engine.UNKNOWN) -> Iterator[ParsedRecord]:
    """Parse an iterable of lines (line endings are stripped); yields records in order."""
    parser = LineParser(year=year, engine=engine)
    for i, raw in enumerate(lines, 1):
        rec = parser.parse(raw.rstrip("\r\n"), i)
        if rec is not None:
            yield rec

