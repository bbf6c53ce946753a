"""Reading log files from disk: in large binary chunks, decoded with replacement.

Real logs contain binary junk and broken UTF-8; a reader that raises on them
loses the file. Lines are split on ``\\n`` only (``str.splitlines`` would also
split on form feeds and other separators and shift every line number after
them), and a trailing ``\\r`` is dropped.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

CHUNK = 1 << 20


class LogFileError(Exception):
    """A log file that cannot be read, with a message for the user."""


def check_readable(path: str | Path) -> Path:
    """The path, or a LogFileError saying clearly why it cannot be read."""
    p = Path(path)
    if not p.exists():
        raise LogFileError(f"{p}: no such file")
    if p.is_dir():
        raise LogFileError(f"{p}: is a directory, not a log file")
    if not os.access(p, os.R_OK):
        raise LogFileError(f"{p}: permission denied")
    return p


def file_year(path: str | Path) -> int:
    """The year a log was last written, for vLLM's year-less timestamps."""
    try:
        return datetime.fromtimestamp(Path(path).stat().st_mtime, tz=UTC).year
    except OSError:
        return datetime.now(UTC).year


#: A dated stamp (``2026-08-23 09:00:00``, ``2026-08-23T09:00:00``).
_DATED = re.compile(r"(?<!\d)((?:19|20)\d{2})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[ T]\d{2}:\d{2}:\d{2}")
#: Its part from the first ``-``: a pattern that starts with a literal is searched at C speed
#: (``re`` skips to each ``-``), where ``_DATED`` is tried at every position of every line.
_DATED_TAIL = re.compile(r"-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12]\d|3[01])[ T]\d{2}:\d{2}:\d{2}")


def first_date(lines: list[str]) -> tuple[int, int, int] | None:
    """(year, month, day) of the first dated stamp in ``lines`` (a docker/k8s stamp, an SGLang
    prefix), or None.

    The lines are searched as one text for the stamp's tail, and each tail found is checked
    with the whole pattern from four characters before it: the same first match as searching
    line by line (no stamp spans a newline), 60 times faster on a head without dates
    (1 MB of llama.cpp lines: 26 ms → 0.4 ms).
    """
    text = "\n".join(lines)
    for tail in _DATED_TAIL.finditer(text):
        m = _DATED.match(text, tail.start() - 4) if tail.start() >= 4 else None
        if m is not None:
            return int(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def log_year(path: str | Path, head: list[str] | None = None) -> int:
    """The year for a log's year-less timestamps (vLLM ``MM-DD``): that of the first dated
    line among its first lines (a docker/k8s stamp, an SGLang prefix), else the file's
    modification year — never the machine's clock when the file says otherwise.
    """
    date = first_date(head if head is not None else head_lines(path, 1 << 16))
    return date[0] if date is not None else file_year(path)


def iter_line_batches(path: str | Path, chunk: int = CHUNK) -> Iterator[list[str]]:
    """Yield lists of lines (without line endings) from a file, reading it in chunks.

    A final line without a newline is yielded too: a file on disk is complete.
    """
    p = check_readable(path)
    try:
        f = open(p, "rb")
    except OSError as exc:
        raise LogFileError(f"{p}: {exc.strerror or exc}") from exc
    try:
        rest = b""
        while True:
            try:
                data = f.read(chunk)
            except OSError as exc:
                raise LogFileError(f"{p}: read failed: {exc.strerror or exc}") from exc
            if not data:
                break
            data = rest + data
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
                continue
            rest = data[cut + 1:]
            text = data[:cut].decode("utf-8", errors="replace")
            lines = text.split("\n")
            yield [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
        if rest:
            text = rest.decode("utf-8", errors="replace")
            yield [text[:-1] if text.endswith("\r") else text]
    finally:
        f.close()


def head_lines(path: str | Path, size: int = 1 << 20) -> list[str]:
    """The first lines of a file (up to ``size`` bytes), for engine detection."""
    with open(check_readable(path), "rb") as f:
        return f.read(size).decode("utf-8", errors="replace").split("\n")
