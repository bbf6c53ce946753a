"""Feeding files into a session: the path ``summarize`` and ``replay`` share."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from specmon.ingest.logfiles import check_readable, file_year, head_lines, iter_line_batches
from specmon.model.session import Session
from specmon.parsing import LineParser, detect_engine


def ingest_lines(session: Session, parser: LineParser, lines: Iterable[str], first_lineno: int = 1) -> int:
    """Parse lines into the session; returns the next line number."""
    n = first_lineno
    parse = parser.parse
    ingest = session.ingest
    for text in lines:
        rec = parse(text, n)
        if rec is not None:
            ingest(rec)
        n += 1
    session.lines += n - first_lineno
    return n


def ingest_file(session: Session, path: str, *, baseline: bool = False) -> None:
    """Read one log file into the session as a new source."""
    session.begin_source(path, baseline=baseline)
    # The engine decides a few ambiguous markers (SGLang's "Application startup complete"
    # comes before its warm-up; vLLM's is its ready line): recognise it from the head first.
    engine = detect_engine(head_lines(path))
    # The file's signature lines break a tie of the per-line engine markers (and name the
    # engine of a log with no stats line at all).
    session.set_engine_hint(engine)
    parser = LineParser(year=file_year(path), engine=engine)
    n = 1
    for batch in iter_line_batches(path):
        n = ingest_lines(session, parser, batch, n)


def ingest_files(files: Sequence[str], *, baseline: Sequence[str] = (), warmup: int | None = None,
                 jobs: int = 0) -> Session:
    """A session built from log files (baseline files first, then the rest, in order).

    Raises:
        LogFileError: a file is missing or unreadable (checked before any work).
    """
    for path in [*baseline, *files]:
        check_readable(path)
    from specmon.ingest.bulk import ingest_file_fast

    session = Session(warmup=warmup)
    for path in baseline:
        ingest_file_fast(session, path, baseline=True, jobs=jobs)
    for path in files:
        ingest_file_fast(session, path, jobs=jobs)
    return session
