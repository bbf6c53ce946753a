"""A session built from whole log files by the bulk path: what ``specmon summarize`` reads.

Its own module, above both :mod:`specmon.ingest.files` (the line path and the log's clock)
and :mod:`specmon.ingest.bulk` (which reads that clock): kept in ``files.py`` it imported the
bulk path back, and the two modules were a circle.
"""

from __future__ import annotations

from collections.abc import Sequence

from specmon.ingest.feeding import ingest_file_fast
from specmon.model.session import Session
from specmon.sources.logfiles import check_readable

__all__ = ["ingest_files"]


def ingest_files(files: Sequence[str], *, baseline: Sequence[str] = (), warmup: int | None = None,
                 jobs: int = 0, year: int | None = None) -> Session:
    """A session built from log files (baseline files first, then the rest, in order).

    Raises:
        LogFileError: a file is missing or unreadable (checked before any work).
    """
    for path in [*baseline, *files]:
        check_readable(path)
    session = Session(warmup=warmup)
    for path in baseline:
        ingest_file_fast(session, path, baseline=True, jobs=jobs, year=year)
    for path in files:
        ingest_file_fast(session, path, jobs=jobs, year=year)
    return session
