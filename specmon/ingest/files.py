"""Feeding files into a session: the path ``summarize`` and ``replay`` share."""

from __future__ import annotations

from calendar import timegm
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from specmon.grammar.prefix import Rollover, clock_mode
from specmon.model.session import Session
from specmon.parsing import LineParser, detect_engine
from specmon.sources.logfiles import file_year, first_date, head_lines, iter_line_batches


@dataclass(frozen=True)
class LogClock:
    """What a log's stamps leave out, inferred once per file: the year, the first day, the gaps.

    Attributes:
        year: for year-less ``MM-DD`` stamps: ``--year``, else the year of the first dated
            line (a docker/k8s stamp, an SGLang prefix), else the file's modification year.
        day: the midnight (UTC epoch) a time of day without a date belongs to: the first
            dated line's day, else the modification day (with ``--year``'s year if given).
        mode: ``"time"`` / ``"md"`` when the log's own stamps lack the date / the year
            (a large step back is then the next day / year), else None.
    """

    year: int
    day: float
    mode: str | None

    def rollover(self) -> Rollover:
        """A fresh day-keeper for one pass over the file."""
        return Rollover(self.mode, self.year)


def log_clock(path: str | Path, head: list[str], year: int | None = None) -> LogClock:
    """The :class:`LogClock` of a file from its first lines (``year``: the user's ``--year``)."""
    day = first_date(head)
    y = year if year is not None else day[0] if day is not None else file_year(path)
    if day is None:
        try:
            when = datetime.fromtimestamp(Path(path).stat().st_mtime, tz=UTC)
        except OSError:
            when = datetime.now(UTC)
        day = (when.year, when.month, min(when.day, 28) if (when.month, when.day) == (2, 29) else when.day)
    if year is not None:
        day = (year, day[1], 28 if (day[1], day[2]) == (2, 29) else day[2])
    return LogClock(y, float(timegm((*day, 0, 0, 0))), clock_mode(head))


def ingest_lines(session: Session, parser: LineParser, lines: Iterable[str], first_lineno: int = 1,
                 rollover: Rollover | None = None) -> int:
    """Parse lines into the session; returns the next line number."""
    n = first_lineno
    parse = parser.parse
    ingest = session.ingest
    fix = rollover.fix if rollover is not None and rollover.mode is not None else None
    for text in lines:
        rec = parse(text, n)
        if rec is not None:
            if fix is not None:
                rec.timestamp = fix(rec.timestamp)
            ingest(rec)
        n += 1
    session.lines += n - first_lineno
    return n


def ingest_file(session: Session, path: str, *, baseline: bool = False, year: int | None = None) -> None:
    """Read one log file into the session as a new source."""
    session.begin_source(path, baseline=baseline)
    # The engine decides a few ambiguous markers (SGLang's "Application startup complete"
    # comes before its warm-up; vLLM's is its ready line): recognise it from the head first.
    head = head_lines(path)
    engine = detect_engine(head)
    # The file's signature lines break a tie of the per-line engine markers (and name the
    # engine of a log with no stats line at all).
    session.set_engine_hint(engine)
    clock = log_clock(path, head, year)
    parser = LineParser(year=clock.year, engine=engine, day=clock.day)
    rollover = clock.rollover()
    n = 1
    for batch in iter_line_batches(path):
        n = ingest_lines(session, parser, batch, n, rollover)

