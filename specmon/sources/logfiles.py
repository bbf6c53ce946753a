"""Reading log files from disk: in large binary chunks, decoded with replacement.

Real logs contain binary junk and broken UTF-8; a reader that raises on them
loses the file. Lines are split on ``\\n`` only (``str.splitlines`` would also
split on form feeds and other separators and shift every line number after
them), and a trailing ``\\r`` is dropped.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import BinaryIO

from specmon.smallfile import InputError, check_input, open_bytes
from specmon.sources.lines import DEFAULT_MAX_LINE

CHUNK = 1 << 20


class LogFileError(Exception):
    """A log file that cannot be read, with a message for the user."""


#: What a log read whole says after a FIFO's or a device's sentence.
WHOLE_LOG_HINT = "a log read whole must be a file (save the stream to a file first; specmon watch follows a FIFO)"


def check_readable(path: str | Path) -> Path:
    """The path, or a LogFileError saying in one sentence why it cannot be read whole.

    Through :func:`specmon.smallfile.check_input`: a FIFO or a device (which would block the
    reader, or never end) is refused before anything opens it.
    """
    try:
        check_input(path, "log file", hint=WHOLE_LOG_HINT)
    except InputError as exc:
        raise LogFileError(str(exc)) from None
    return Path(path)


def open_log(p: str | Path) -> BinaryIO:
    """The log, opened without blocking and checked again once open (it may have changed since it
    was checked: a FIFO put in its place is one sentence, never an ``open`` that waits for a writer)."""
    return open_bytes(Path(p), "log file", LogFileError, hint=WHOLE_LOG_HINT)


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


def _text(raw: bytes) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text[:-1] if text.endswith("\r") else text


def iter_line_batches(path: str | Path, chunk: int = CHUNK, max_line: int = DEFAULT_MAX_LINE) -> Iterator[list[str]]:
    """Yield lists of lines (without line endings) from a file, reading it in chunks.

    A final line without a newline is yielded too: a file on disk is complete. A line longer
    than ``max_line`` bytes is cut there and the rest of it skipped, so memory stays bounded
    whatever the file holds (a sparse file is gigabytes of NULs and no newline); while such a
    line is skipped, an empty list is yielded per chunk, so a caller on an event loop gets its
    turn back.
    """
    p = check_readable(path)
    f = open_log(p)
    try:
        rest = b""
        skipping = False  # inside a line already cut at max_line
        while True:
            try:
                data = f.read(chunk)
            except OSError as exc:
                raise LogFileError(f"{p}: read failed: {exc.strerror or exc}") from exc
            if not data:
                break
            if skipping:
                nl = data.find(b"\n")
                if nl < 0:
                    yield []
                    continue
                data, skipping = data[nl + 1:], False
            data = rest + data
            cut = data.rfind(b"\n")
            if cut < 0:
                rest = data
            else:
                rest = data[cut + 1:]
                text = data[:cut].decode("utf-8", errors="replace")
                lines = text.split("\n")
                yield [ln[:-1] if ln.endswith("\r") else ln for ln in lines]
            if len(rest) > max_line:
                yield [_text(rest[:max_line])]
                rest, skipping = b"", True
        if rest:
            yield [_text(rest)]
    finally:
        f.close()


def head_lines(path: str | Path, size: int = 1 << 20) -> list[str]:
    """The first lines of a file (up to ``size`` bytes), for engine detection."""
    with open_log(check_readable(path)) as f:
        return f.read(size).decode("utf-8", errors="replace").split("\n")
