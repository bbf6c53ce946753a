"""Reading a recording: its entries in order, checked against the format's header.

A killed writer leaves a truncated last line, which is skipped and noted; other damaged lines,
and entries whose fields are not what the writer writes (a wrong type, NaN, 1e999, a huge
integer, deep nesting, a missing key: :func:`~specmon.recording_format.entry_problem`), are
skipped and counted (:class:`ReadStats`), never raised. Entries are decoded a chunk of whole lines at a
time (orjson where it reads exactly what json reads), so memory stays bounded whatever the size.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import contains
from pathlib import Path
from typing import Any, BinaryIO

import orjson

from specmon.recording_format import FORMAT, VERSION, RecordingError, checked_entries, entry_problem
from specmon.smallfile import open_bytes, open_input


@dataclass
class ReadStats:
    """What reading a recording skipped."""

    entries: int = 0
    #: Entries skipped in the middle: lines that are not JSON, and entries whose fields are not
    #: the writer's (a wrong type, a number out of range, nesting too deep, a missing field).
    bad_lines: int = 0
    truncated_tail: bool = False

    @property
    def skipped(self) -> int:
        """Every entry skipped: the damaged ones and a truncated last line."""
        return self.bad_lines + self.truncated_tail


def read_recording(path: str | os.PathLike[str], stats: ReadStats | None = None) -> Iterator[dict[str, Any]]:
    """Yield the entries of a recording in order.

    A truncated last line (the process was killed mid-write) is skipped and
    noted in ``stats.truncated_tail``; other undecodable lines are skipped and
    counted in ``stats.bad_lines``.

    Raises:
        RecordingError: the file is missing, unreadable, or not a recording.
    """
    for batch in read_recording_batches(path, stats):
        yield from batch


def _open_recording(p: Path) -> BinaryIO:
    """The file, opened to read bytes; RecordingError when it is missing or unreadable.

    Opened through :func:`specmon.smallfile.open_input`: a FIFO (``open`` would block) or a
    device (``/dev/zero`` never ends) is one sentence, before anything is read.
    """
    return open_bytes(p, "recording", RecordingError, hint=RECORDING_HINT)


#: Most bytes of the header line read (a few hundred in a real recording): beyond it, the first
#: line is no header and the file no recording.
HEAD_LIMIT = 1 << 20
#: What a FIFO's or a device's sentence says to do instead.
RECORDING_HINT = "a recording is read from a file (specmon writes one with --record)"


def read_recording_batches(path: str | os.PathLike[str],
                           stats: ReadStats | None = None) -> Iterator[list[dict[str, Any]]]:
    """The entries of a recording in order, as lists of about ``_CHUNK_BYTES`` of lines each.

    What :func:`read_recording` yields, a chunk at a time: the replay works on runs of
    raw lines within a chunk instead of one entry at a time. Same errors and ``stats``.
    """
    p = Path(path)
    stats = stats if stats is not None else ReadStats()
    f = _open_recording(p)
    try:
        first = True
        for chunk in _chunks(f):
            yield list(_read_lines(p, chunk, stats, first)) if first else _decode_lines(p, chunk, stats)
            first = False
        if first:
            raise RecordingError(f"{p}: empty file, not a specmon recording")
    finally:
        f.close()


#: Bytes of whole lines decoded at once (bounded memory whatever the file's size).
_CHUNK_BYTES = 1 << 21
#: Every digit as "0", every other byte as " ": a run of 19 digits is then one bytes search.
_DIGIT_RUNS = bytes(48 if 48 <= i <= 57 else 32 for i in range(256))


def _digit_run_py(data: bytes, n: int) -> bool:
    return b"0" * n in data.translate(_DIGIT_RUNS)


try:  # in C: one pass, no copy (the translate and search took 0.9 ms a 2 MB chunk)
    from specmon._native import digit_run as _digit_run
except ImportError:  # built without a C compiler
    _digit_run = _digit_run_py


def _all_entries(items: Any) -> bool:
    """Whether a decoded chunk is a list of entries (objects with a "type"), tested in C."""
    return (type(items) is list and set(map(type, items)) <= {dict}
            and all(map(contains, items, repeat("type"))))


def _decode_chunk(data: bytes) -> Any:
    """A chunk of whole lines as one JSON array, or None if some line in it is not JSON.

    orjson decodes a 2 MB chunk of line entries in 2.8 ms where json takes 7.6 (measured), and
    that was most of report's reading. It reads an integer past 64 bits as a float, though:
    a chunk with 19 digits in a row anywhere (1.2 ms to look) goes to json, and so does one
    that orjson refuses (NaN, Infinity, a damaged line), before the line-by-line reading.
    """
    if not _digit_run(data, 19):
        try:
            return orjson.loads(data)
        except ValueError:
            pass
    try:
        return json.loads(data)
    except (ValueError, RecursionError):  # (json recurses per level of nesting)
        return None


def _chunks(f: Any) -> Iterator[list[bytes]]:
    """The first line alone (the header is checked apart), then about _CHUNK_BYTES of lines at a time."""
    head = f.readline(HEAD_LIMIT)  # bounded: a sparse file is gigabytes of NULs and no newline
    if not head:
        return
    yield [head]
    while chunk := f.readlines(_CHUNK_BYTES):
        yield chunk


def _raw_chunks(p: Path, stats: ReadStats, span: tuple[int, int] | None = None
                ) -> Iterator[list[dict[str, Any]] | bytes]:
    """The header's entries, then about _CHUNK_BYTES of whole lines at a time, as bytes
    (report reads the usual raw lines in place: ``_line_run`` in :mod:`~specmon.output.recording_replay`). Errors as :func:`read_recording`.

    ``span``: only the bytes from its start to its end (each just after a newline, or the
    file's start and end); the header is read only by the span that starts the file.
    """
    f = _open_recording(p)
    with f:
        start, end = span if span is not None else (0, None)
        if start == 0:
            head = f.readline(HEAD_LIMIT)  # bounded: a sparse file is gigabytes of NULs and no newline
            if not head:
                raise RecordingError(f"{p}: empty file, not a specmon recording")
            yield list(_read_lines(p, [head], stats, True))
        else:
            f.seek(start)
        while True:
            left = -1 if end is None else end - f.tell()
            if not left or not (data := f.read(_CHUNK_BYTES if left < 0 else min(_CHUNK_BYTES, left))):
                break
            if not data.endswith(b"\n"):
                data += f.readline(-1 if end is None else end - f.tell())
            yield data


def _decode_lines(p: Path, lines: list[bytes], stats: ReadStats) -> list[dict[str, Any]]:
    """The entries of lines after the header: all at once when they are whole, each a JSON
    entry; else one at a time, skipping and counting what cannot be read."""
    if lines and lines[-1].endswith(b"\n"):
        items = _decode_chunk(b"[" + b",".join(lines) + b"]")
        # One entry per line, or the lines one at a time: a blank line alone made "[\n]" (no
        # entry, not counted as the bad line it is), and a line holding two entries joined by a
        # comma made two.
        if items is not None and len(items) == len(lines) and _all_entries(items):
            kept, bad = checked_entries(items)
            stats.entries += len(kept)
            stats.bad_lines += bad
            return kept
    return list(_read_lines(p, lines, stats, False))


def _read_lines(p: Path, chunk: list[bytes], stats: ReadStats, first: bool) -> Iterator[dict[str, Any]]:
    """The entries of a chunk one line at a time: skips and counts what cannot be read."""
    for raw in chunk:
        complete = raw.endswith(b"\n")
        try:
            entry = json.loads(raw.decode("utf-8", errors="replace"))
            if not isinstance(entry, dict) or "type" not in entry:
                raise ValueError("not an entry")
        except (ValueError, RecursionError):  # (json recurses per level of nesting)
            if first:
                raise RecordingError(f"{p}: not a specmon recording (first line is not JSON)") from None
            if not complete:
                stats.truncated_tail = True
            else:
                stats.bad_lines += 1
            continue
        problem = entry_problem(entry)
        if first:
            if entry.get("type") != "meta" or entry.get("format") != FORMAT:
                raise RecordingError(f"{p}: not a specmon recording (no '{FORMAT}' header)")
            version = entry.get("version")
            if type(version) is int and version > VERSION:
                raise RecordingError(f"{p}: recording version {version} is newer than this "
                                     f"specmon understands ({VERSION}); upgrade specmon")
            if problem is not None:
                # (without its header nothing of the file can be read: refused, not skipped)
                raise RecordingError(f"{p}: the recording's header is damaged ({problem})")
            first = False
        elif problem is not None:
            stats.bad_lines += 1
            continue
        stats.entries += 1
        yield entry


def check_header(path: str | os.PathLike[str]) -> None:
    """Raise RecordingError unless ``path`` is a regular file that starts with a recording's header.

    One bounded line is read: what is no recording (a FIFO, a device, a log, a sparse file of
    NULs) is said before a reader splits the file into spans or starts a worker.
    """
    p = Path(path)
    with _open_recording(p) as f:
        head = f.readline(HEAD_LIMIT)
    if not head:
        raise RecordingError(f"{p}: empty file, not a specmon recording")
    for _ in _read_lines(p, [head], ReadStats(), True):
        pass


def is_recording(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a specmon recording (cheap: reads the first line only)."""
    try:
        fd, _ = open_input(path, "recording")  # never blocks: a FIFO or a device is no recording
        with os.fdopen(fd, "rb") as f:
            head = f.readline(1 << 16)
        entry = json.loads(head)
    except (OSError, ValueError, RecursionError):
        return False
    return isinstance(entry, dict) and entry.get("type") == "meta" and entry.get("format") == FORMAT


def recording_lines(path: str | os.PathLike[str]) -> Iterator[tuple[float | None, str, str]]:
    """``(receive time, source, text)`` of every recorded raw line, for paced replay."""
    for entry in read_recording(path):
        if entry["type"] == "line":
            yield entry.get("t"), str(entry.get("src", "")), str(entry.get("text", ""))

