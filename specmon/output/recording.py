"""Session recordings: everything a session saw, appended to a JSONL file as it happens.

One JSON object per line, each with a ``type``:

==========  ==================================================================
``meta``    ``event: "start"`` first (format, version, command, warm-up), then
            ``"source"`` whenever a new input begins (name, baseline, year),
            ``"sweep"`` progress notes, and ``"end"`` at a clean close
``line``    a raw log line: receive time ``t``, source ``src``, number ``n``, ``text``
``record``  the parsed record of that line (``rec``: the ``specmon parse`` JSON), with ``run``
``run``     a run began (``event: "begin"``) or the recording closed (``"end"``, with its numbers)
``restart`` a restart the control layer ran (steps, commands shown, outcome)
``verdict`` a verdict (the ``summarize``/``sweep`` JSON)
==========  ==================================================================

Crash safety: entries are buffered in memory and written by a background
thread every ``flush_interval`` seconds (0.5 s by default) and at close, with
one ``write`` of whole lines each time, to a file opened in append mode. A
killed process therefore loses at most the last interval, and the file stays
valid up to its last complete line; the reader ignores a truncated last line.

Replay re-parses the recorded raw lines per source, in order, into a fresh
:class:`~specmon.model.session.Session` with the recorded warm-up, so
``specmon replay RECORDING`` reproduces the table the live session showed.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import multiprocessing as mp
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from itertools import compress, groupby, repeat
from operator import contains, itemgetter
from pathlib import Path
from typing import Any, BinaryIO, cast

import orjson

from specmon import __version__, paths
from specmon.model.session import Run, Session
from specmon.parsing import LineParser, detect_engine
from specmon.records import (
    Config,
    Decode,
    Engine,
    EngineStats,
    Event,
    Lifecycle,
    ParsedRecord,
    Prefill,
    Spec,
    Unparsed,
)
from specmon.redact import redact_line

FORMAT = "specmon-recording"
VERSION = 1
#: Most seconds between two writes to disk (the issue allows losing at most one second).
DEFAULT_FLUSH_INTERVAL = 0.5

__all__ = [
    "FORMAT", "Recorder", "RecordedIngest", "RecordingError", "is_recording",
    "new_recording_path", "read_recording", "record_from_json", "recording_lines", "replay_recording",
]


class RecordingError(Exception):
    """A file that is not a readable recording; the message says why."""


def new_recording_path(kind: str, directory: Path | None = None) -> Path:
    """A fresh file name such as ``sweep-20260212-091403.jsonl`` (never an existing file)."""
    base = directory if directory is not None else paths.recordings_dir()
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    path = base / f"{kind}-{stamp}.jsonl"
    i = 1
    while path.exists():
        i += 1
        path = base / f"{kind}-{stamp}-{i}.jsonl"
    return path


# --------------------------------------------------------------------------- writing


@dataclass(frozen=True, slots=True)
class _LineBatch:
    """Raw lines received together, encoded as ``line`` entries by the writer thread."""

    source: str
    first: int
    lines: tuple[str, ...]
    t: float

    def encode(self) -> str:
        """The batch's entries, one JSON line each, each text through :func:`redact_line`.

        A recording is a file people share (a report's attachment): a server's --api-key or
        HF_TOKEN in its args line is not kept (about 2 us a line for the quick look, measured).
        orjson escapes each text (0.3 us against json's 6 for the whole entry, measured);
        one it refuses (a lone surrogate from undecodable bytes) goes through json.
        """
        head = f'{{"type":"line","src":{_quoted(self.source)},"n":'
        tail = f',"t":{self.t!r}}}\n'
        out = []
        for i, text in enumerate(self.lines):
            out.append(f'{head}{self.first + i},"text":{_quoted(redact_line(text))}{tail}')
        return "".join(out)


def _quoted(text: str) -> str:
    try:
        return orjson.dumps(text).decode()
    except TypeError:
        return json.dumps(text, ensure_ascii=False)



class Recorder:
    """Appends entries to a recording file, flushed on a timer and at close.

    Args:
        path: The JSONL file (created with mode 0600; parents with 0700: a
            recording holds server log lines, which may be private).
        flush_interval: Seconds between background writes (at most 1.0).
        meta: Extra fields for the opening ``meta`` entry (command, profile, ...).
        warmup: The session's warm-up setting, so replay uses the same one.
        clock: Wall clock for ``t`` fields.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        flush_interval: float = DEFAULT_FLUSH_INTERVAL,
        meta: dict[str, Any] | None = None,
        warmup: int | None = None,
        clock: Any = time.time,
    ) -> None:
        if not 0 < flush_interval <= 1.0:
            raise ValueError("flush_interval must be in (0, 1] seconds")
        self.path = Path(path)
        paths.private_dir(self.path.parent)
        # A session that records nothing but meta (a refused connect) leaves no file behind.
        self._created = not self.path.exists()
        self._has_data = False
        self._fd: int | None = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._clock = clock
        #: Encoded entries, and batches of raw lines the writer thread encodes (see :meth:`batch`).
        self._buffer: list[str | _LineBatch] = []
        self._lock = threading.Lock()  # guards the buffer
        self._write_lock = threading.Lock()  # one writer at a time keeps entries in order
        self._stop = threading.Event()
        self._interval = flush_interval
        self.entries = 0
        #: The first write failure, as a sentence (None: every entry written so far).
        self.error: str | None = None
        #: Entries that could not be written (a full disk, a file-size limit).
        self.lost = 0
        self._torn = False  # the file may end inside a line: the next write starts a new one
        self._unmarked = False  # the failure is not yet marked in the file
        self.write({"type": "meta", "event": "start", "format": FORMAT, "version": VERSION,
                    "specmon": __version__, "warmup": warmup, "pid": os.getpid(), **(meta or {})})
        self._thread = threading.Thread(target=self._run, name="specmon-recorder", daemon=True)
        self._thread.start()
        # A clean interpreter exit flushes too; a weak reference keeps the recorder collectable.
        ref = weakref.ref(self)

        def close_at_exit() -> None:
            recorder = ref()
            if recorder is not None:
                recorder.close()

        self._atexit = close_at_exit
        atexit.register(self._atexit)

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` ran."""
        return self._fd is None

    # -- entries ---------------------------------------------------------------------------

    def write(self, entry: dict[str, Any]) -> None:
        """Queue one entry (a ``t`` receive time is added when missing)."""
        if self._fd is None:
            return
        if entry.get("type") != "meta":
            self._has_data = True
        if "t" not in entry:
            entry = {**entry, "t": round(self._clock(), 6)}
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"), default=_jsonable) + "\n"
        with self._lock:
            self._buffer.append(text)
            self.entries += 1

    def meta(self, event: str, **fields_: Any) -> None:
        """A ``meta`` entry (``source``, ``sweep``, ``end``, ...)."""
        self.write({"type": "meta", "event": event, **fields_})

    def source(self, name: str, *, baseline: bool = False, year: int | None = None) -> None:
        """A new input begins: replay calls ``Session.begin_source`` here."""
        self.meta("source", source=name, baseline=baseline, year=year)

    def line(self, source: str, lineno: int, text: str, t: float | None = None) -> None:
        """A raw log line as received, with secret values hidden (:func:`~specmon.redact.redact_line`)."""
        entry: dict[str, Any] = {"type": "line", "src": source, "n": lineno, "text": redact_line(text)}
        if t is not None:
            entry["t"] = round(t, 6)
        self.write(entry)

    def batch(self, source: str, first_lineno: int, lines: Sequence[str], t: float | None = None) -> None:
        """A batch of raw lines received together (numbered from ``first_lineno``).

        The cheapest way for an ingest loop that parses on its own (the dashboard's
        feeder) to record: raw lines are all replay needs.
        """
        if self._fd is None or not lines:
            return
        when = round(self._clock() if t is None else t, 6)
        # Queued raw: the writer thread hides secrets and encodes. Done here, on the event loop,
        # they were 80% of a flood's ingest time (py-spy: 363 of 435 samples of the feeder) and
        # every key waited behind them (p95 2.4 s while catching up with a 50,000 lines/s flood).
        with self._lock:
            self._buffer.append(_LineBatch(source, first_lineno, tuple(lines), when))
            self.entries += len(lines)
            self._has_data = True

    def record(self, source: str, rec: ParsedRecord, run_id: int | None, t: float | None = None) -> None:
        """The parsed record of a line, and the run it went to."""
        entry: dict[str, Any] = {"type": "record", "src": source, "run": run_id, "rec": rec.to_json()}
        if t is not None:
            entry["t"] = round(t, 6)
        self.write(entry)

    def run(self, run: Run, event: str = "begin") -> None:
        """A run began, or (``"end"``) its final numbers."""
        entry: dict[str, Any] = {"type": "run", "event": event, "id": run.id, "label": run.label,
                                 "steps": run.config.steps if run.config else None, "source": run.source,
                                 "first_line": run.first_line}
        if event != "begin":
            entry |= {"state": run.state.value, "samples": len(run.throughput),
                      "excluded_warmup": run.excluded_warmup, "excluded_idle": run.excluded_idle,
                      "mean_tps": round(sum(run.throughput) / len(run.throughput), 4) if len(run.throughput) else None}
        self.write(entry)

    def restart(self, **fields_: Any) -> None:
        """A restart by the control layer (what was shown, what happened)."""
        self.write({"type": "restart", **fields_})

    def verdict(self, payload: dict[str, Any]) -> None:
        """A verdict, as JSON."""
        self.write({"type": "verdict", "verdict": payload})

    # -- flushing ------------------------------------------------------------------------

    def flush(self) -> None:
        """Write every queued entry now (whole lines, one ``write``)."""
        with self._write_lock:
            with self._lock:
                queued, self._buffer = self._buffer, []
            if not queued and not self._unmarked or self._fd is None:
                return
            pending = [item if isinstance(item, str) else item.encode() for item in queued]
            head = "\n" if self._torn else ""
            if self._unmarked:
                # Said in the file too, once it takes bytes again: a report tells a failed write
                # from a killed recorder, and how much is missing.
                head += json.dumps({"type": "meta", "event": "write-failed", "error": self.error, "lost": self.lost,
                                    "t": round(self._clock(), 6)}) + "\n"
            data = (head + "".join(pending)).encode("utf-8", errors="replace")
            view = memoryview(data)
            try:
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
            except OSError as exc:
                # A full disk must not kill the session being recorded: keep going, but loudly
                # (the app's header and event log read ``error``; the command's exit status too).
                if self.error is None:
                    self.error = f"recording to {self.path} failed: {exc.strerror or exc}"
                self.lost += len(pending)
                self._torn = self._torn or len(view) < len(data)
                self._unmarked = True
            else:
                self._torn = self._unmarked = False

    def _run(self) -> None:
        while not self._stop.wait(self._interval):
            self.flush()

    def close(self) -> None:
        """Write an ``end`` entry, flush and close the file (idempotent)."""
        if self._fd is None:
            return
        self.meta("end")
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5.0)
        self.flush()
        with self._write_lock:
            fd, self._fd = self._fd, None
            if fd is not None:
                os.close(fd)
        if self._created and not self._has_data:
            with contextlib.suppress(OSError):
                self.path.unlink()
        atexit.unregister(self._atexit)

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _jsonable(value: Any) -> Any:
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "value"):  # enums
        return value.value
    raise TypeError(f"cannot record a {type(value).__name__}")


class RecordedIngest:
    """Feeds lines into a session and records them, with their records and new runs.

    This is how a live session is recorded: give every source's lines to
    :meth:`feed` (after :meth:`begin_source`) instead of parsing them yourself.

    Args:
        session: The session to feed.
        recorder: Where to record; None feeds without recording.
        records: Also record each parsed record (the raw lines alone suffice for replay).
        clock: Wall clock for receive times.
    """

    def __init__(self, session: Session, recorder: Recorder | None = None, *, records: bool = True,
                 clock: Any = time.time) -> None:
        self.session = session
        self.recorder = recorder
        self._records = records
        self._clock = clock
        self._parser = LineParser()
        self._source = ""
        self._lineno = 0
        self._runs_seen = len(session.runs)

    def begin_source(self, name: str, *, baseline: bool = False, year: int | None = None) -> None:
        """A new input: the session starts a new run at its next record."""
        self.session.begin_source(name, baseline=baseline)
        self._parser = LineParser(year=year)
        self._source = name
        self._lineno = 0
        if self.recorder is not None:
            self.recorder.source(name, baseline=baseline, year=self._parser.year)

    def feed(self, lines: Sequence[str], t: float | None = None) -> None:
        """Parse and ingest a batch of complete lines received at ``t`` (now by default)."""
        if not lines:
            return
        when = self._clock() if t is None else t
        rec_ = self.recorder
        session = self.session
        parse = self._parser.parse
        for text in lines:
            self._lineno += 1
            if rec_ is not None:
                rec_.line(self._source, self._lineno, text, when)
            record = parse(text, self._lineno)
            if record is None:
                continue
            session.ingest(record)
            if rec_ is not None:
                self._note_runs()
                if self._records:
                    current = session.current
                    rec_.record(self._source, record, current.id if current else None, when)
        session.lines += len(lines)

    def _note_runs(self) -> None:
        runs = self.session.runs
        if len(runs) == self._runs_seen:
            return
        assert self.recorder is not None
        for run in runs[self._runs_seen:]:
            self.recorder.run(run, "begin")
        self._runs_seen = len(runs)

    def close(self) -> None:
        """Record every run's final numbers (the recorder stays open)."""
        if self.recorder is None:
            return
        self._note_runs()
        for run in self.session.runs:
            self.recorder.run(run, "end")


# --------------------------------------------------------------------------- reading


@dataclass
class ReadStats:
    """What reading a recording skipped."""

    entries: int = 0
    bad_lines: int = 0
    truncated_tail: bool = False


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
    """The file, opened to read bytes; RecordingError when it is missing or unreadable."""
    try:
        return open(p, "rb")
    except FileNotFoundError:
        raise RecordingError(f"{p}: no such file") from None
    except OSError as exc:
        raise RecordingError(f"{p}: {exc.strerror or exc}") from None


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


def _run_keys(batch: list[dict[str, Any]]) -> list[Any]:
    """Per entry: its source if it is a raw line of a text-named source, else _OTHER.

    In C for the usual chunk, raw lines only, each with a text source name.
    """
    types = set(map(itemgetter("type"), batch))
    if types == {"line"}:
        srcs = _field(batch, "src", None)
        if set(map(type, srcs)) == {str}:
            return srcs
    return [e["src"] if e["type"] == "line" and type(e.get("src")) is str else _OTHER for e in batch]


def _field(part: list[dict[str, Any]], key: str, default: Any) -> list[Any]:
    """One field of every entry of a run, in C (itemgetter) when all have it, as .get otherwise."""
    try:
        return list(map(itemgetter(key), part))
    except KeyError:
        return [e.get(key, default) for e in part]


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
    except ValueError:
        return None


def _chunks(f: Any) -> Iterator[list[bytes]]:
    """The first line alone (the header is checked apart), then about _CHUNK_BYTES of lines at a time."""
    head = f.readline()
    if not head:
        return
    yield [head]
    while chunk := f.readlines(_CHUNK_BYTES):
        yield chunk


def _raw_chunks(p: Path, stats: ReadStats, span: tuple[int, int] | None = None
                ) -> Iterator[list[dict[str, Any]] | bytes]:
    """The header's entries, then about _CHUNK_BYTES of whole lines at a time, as bytes
    (report reads the usual raw lines in place: :func:`_line_run`). Errors as :func:`read_recording`.

    ``span``: only the bytes from its start to its end (each just after a newline, or the
    file's start and end); the header is read only by the span that starts the file.
    """
    f = _open_recording(p)
    with f:
        start, end = span if span is not None else (0, None)
        if start == 0:
            head = f.readline()
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
            stats.entries += len(items)
            return cast(list[dict[str, Any]], items)
    return list(_read_lines(p, lines, stats, False))


_LineRun = Callable[[bytes, int, "str | None", int, int], tuple[int, int, Any, Any, Any, Any, Any]]
_line_run: _LineRun | None
try:  # in C: the usual raw line read in place (see _native.c)
    from specmon._native import line_run as _line_run
except ImportError:  # built without a C compiler: every line through the JSON decoder
    _line_run = None


def _read_lines(p: Path, chunk: list[bytes], stats: ReadStats, first: bool) -> Iterator[dict[str, Any]]:
    """The entries of a chunk one line at a time: skips and counts what cannot be read."""
    for raw in chunk:
        complete = raw.endswith(b"\n")
        try:
            entry = json.loads(raw.decode("utf-8", errors="replace"))
            if not isinstance(entry, dict) or "type" not in entry:
                raise ValueError("not an entry")
        except ValueError:
            if first:
                raise RecordingError(f"{p}: not a specmon recording (first line is not JSON)") from None
            if not complete:
                stats.truncated_tail = True
            else:
                stats.bad_lines += 1
            continue
        if first:
            if entry.get("type") != "meta" or entry.get("format") != FORMAT:
                raise RecordingError(f"{p}: not a specmon recording (no '{FORMAT}' header)")
            if int(entry.get("version", 0)) > VERSION:
                raise RecordingError(f"{p}: recording version {entry.get('version')} is newer than this "
                                     f"specmon understands ({VERSION}); upgrade specmon")
            first = False
        stats.entries += 1
        yield entry


def is_recording(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` starts like a specmon recording (cheap: reads the first line only)."""
    try:
        with open(path, "rb") as f:
            head = f.readline(1 << 16)
        entry = json.loads(head)
    except (OSError, ValueError):
        return False
    return isinstance(entry, dict) and entry.get("type") == "meta" and entry.get("format") == FORMAT


def recording_lines(path: str | os.PathLike[str]) -> Iterator[tuple[float | None, str, str]]:
    """``(receive time, source, text)`` of every recorded raw line, for paced replay."""
    for entry in read_recording(path):
        if entry["type"] == "line":
            yield entry.get("t"), str(entry.get("src", "")), str(entry.get("text", ""))


_KINDS: dict[str, type[ParsedRecord]] = {c.kind: c for c in (Decode, Prefill, EngineStats, Spec, Lifecycle, Config, Unparsed)}


def record_from_json(data: dict[str, Any]) -> ParsedRecord:
    """Rebuild a record from its ``to_json()`` form (the inverse of :meth:`Record.to_json`).

    Raises:
        ValueError: an unknown kind or a malformed field.
    """
    cls = _KINDS.get(str(data.get("kind")))
    if cls is None:
        raise ValueError(f"unknown record kind {data.get('kind')!r}")
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "timestamp" and value is not None:
            # to_json writes the naive log time read as UTC; read it back the same way.
            value = datetime.fromisoformat(value).replace(tzinfo=None)
            value = (value - datetime(1970, 1, 1)).total_seconds()
        elif f.name == "event":
            value = Event(value)
        elif f.name == "engine":
            value = Engine(value)
        elif f.name in ("per_position", "progress") and value is not None:
            value = tuple(value)
        kwargs[f.name] = value
    rec: ParsedRecord = cls(**kwargs)
    return rec


#: Raw lines replayed together: a block of plain stats lines goes through the bulk path.
REPLAY_BLOCK = 8192
#: What engine detection looks at, as ``summarize`` does (``head_lines`` + ``detect_engine``).
_HEAD_LINES, _HEAD_BYTES = 5000, 1 << 20

#: ``on_samples(log times, receive times, throughputs, run id)``: a bulk block's decode samples.
SamplesCallback = Callable[[Sequence[float | None], Sequence[float | None], Sequence[float], int], None]


#: Recordings at least this big are read and pre-parsed by a second process while this one
#: feeds the session (the way ``summarize`` splits a big log over the cores).
PIPELINE_MIN_BYTES = 32 << 20


def replay_recording(path: str | os.PathLike[str], *, warmup: int | None = None,
                     stats: ReadStats | None = None,
                     on_record: Callable[[float | None, ParsedRecord, Session], None] | None = None,
                     on_entry: Callable[[dict[str, Any]], None] | None = None,
                     on_samples: SamplesCallback | None = None, year: int | None = None) -> Session:
    """Rebuild the session a recording captured, streaming (memory bounded by a block of lines).

    Raw lines are parsed again per source, in order, with the recorded
    warm-up (``warmup`` overrides it), the way ``summarize`` reads a log: the
    engine is recognised from each source's first lines, and blocks made only of
    plain stats lines take the bulk path, which gives what the line parser gives.
    A source that recorded parsed records but no raw lines is rebuilt from those records.
    A big recording is read and decoded by a second process while this one parses its blocks
    and feeds the session.

    Args:
        path: The recording.
        warmup: Override the recorded warm-up.
        stats: Receives what reading skipped (truncated tail, bad lines).
        on_record: Called after each record is ingested, with the line's receive time.
        on_entry: Called with every entry but the raw lines (meta, records, runs, restarts,
            verdicts), in order.
        on_samples: Called for the decode samples of a block read in bulk (no records are built
            for them). Without it, every line goes through the line parser and ``on_record``.
        year: the year of year-less stamps (``--year``), instead of the recorded one.

    Raises:
        RecordingError: as for :func:`read_recording`.
    """
    bulk = on_samples is not None or on_record is None
    try:
        size = os.stat(path).st_size
    except OSError:
        size = 0
    session: Session | None = None
    parsers: dict[str, LineParser] = {}
    #: Sources begun (a source entry, or lines of an undeclared name) whose first block is to come:
    #: the engine is recognised from that block, as summarize recognises a file's head.
    fresh: set[str] = set()
    last_year: list[int | None] = [None]  # the year of the source begun last

    def known() -> _Known:
        # What the reading processes may take as known, as this side knows it now.
        return _Known({src: p.year for src, p in parsers.items()},
                      {src: p.engine for src, p in parsers.items() if src not in fresh}, last_year[0])

    workers = min(os.cpu_count() or 1, -(-size // READ_SPAN))
    if bulk and size >= PIPELINE_MIN_BYTES and workers > 1 and "fork" in mp.get_all_start_methods():
        ops: Iterator[_Op] = _ops_from_pool(Path(path), size, workers, stats, year, known)
    else:
        ops = _replay_ops(path, stats, bulk, year)
    has_lines: set[str] = set()
    pending_records: list[tuple[str, dict[str, Any]]] = []
    reread: dict[tuple[int, int], list[_Block]] = {}  # the last span read again here
    for op in ops:
        kind = op[0]
        if kind == "block":
            assert session is not None
            _, src, block, piece, engine_used, detected, year_used, cut_at = op
            parser = parsers[src]
            if src in fresh:
                fresh.discard(src)
                if detected is None or (cut_at is not None and len(block.ns) < REPLAY_BLOCK):
                    block = _whole_block(Path(path), block, year, reread)
                    # Read apart: its reading process took the source for one begun before (it
                    # had not seen it begun again), or the block's lines go on past its span.
                    detected = _detect_head(_first_block(Path(path), block, src, cut_at))
            else:
                detected = None
            if detected is not None:
                session.set_engine_hint(detected)
                if parser.engine is Engine.UNKNOWN:
                    parser.engine = detected
            if piece is not None and (parser.in_traceback or parser.engine is not engine_used
                                      or parser.year != year_used):
                block = _whole_block(Path(path), block, year, reread)
                piece = None  # it assumed another parser state: redo it here
                if bulk and not parser.in_traceback:
                    piece = _bulk(block, parser)
            _apply_block(session, parser, block, piece, on_record, on_samples, bulk)
            continue
        if kind == "entry":
            entry = op[1]
            if on_entry is not None:
                on_entry(entry)
            if session is None:
                recorded = entry.get("warmup")
                session = Session(warmup=warmup if warmup is not None
                                  else (recorded if isinstance(recorded, int) else None))
                continue
            if entry["type"] == "meta" and entry.get("event") == "source":
                _flush_records(session, pending_records, has_lines, on_record)
                current = str(entry.get("source", ""))
                session.begin_source(current, baseline=bool(entry.get("baseline")))
                recorded_year = entry.get("year") if year is None else year
                parsers[current] = LineParser(year=recorded_year if isinstance(recorded_year, int) else None)
                fresh.add(current)
                last_year[0] = parsers[current].year
            elif entry["type"] == "record":
                src = str(entry.get("src", ""))
                if src not in has_lines:  # lines are authoritative: their source's records are not kept
                    pending_records.append((src, entry))
        elif kind == "implicit" and op[1] not in parsers:  # (a reading process may not know it begun)
            assert session is not None
            session.begin_source(op[1])
            parsers[op[1]] = LineParser()
            fresh.add(op[1])
        elif kind == "has_lines":
            has_lines.add(op[1])
        elif kind == "stats" and stats is not None:
            st = op[1]
            stats.entries, stats.bad_lines, stats.truncated_tail = st.entries, st.bad_lines, st.truncated_tail
    if session is None:  # pragma: no cover - read_recording raises for empty files
        raise RecordingError(f"{path}: empty recording")
    _flush_records(session, pending_records, has_lines, on_record)
    return session


#: The key of an entry that is not a raw line of a text-named source (runs are grouped by source).
_OTHER = object()

#: What the reading side hands the session side, in order (see :func:`_replay_ops`).
_Op = tuple[Any, ...]


@dataclass
class _Block:
    """Consecutive raw lines of one source: numbers, texts and receive times."""

    ns: list[int]
    texts: list[str]
    ts: list[Any]
    #: The receive times of its decode lines, found by the reading process (None: not yet).
    recv: list[Any] | None = None
    #: The texts UTF-8 encoded and joined by newlines, as the reading process sends them
    #: (one bytes object pickles as a copy; 8,192 strings took most of the hand-over).
    data: bytes | None = None
    #: Sent without its texts and times (the feeding side takes its bulk parse): the span it
    #: was read from and its place there, to read it again (:func:`_whole_block`).
    at: tuple[int, int, int] | None = None

    def lines(self) -> list[str]:
        """The texts (decoded from ``data`` when sent that way: an exact round trip)."""
        assert self.at is None, "a block sent without its lines"
        return self.texts if self.data is None else self.data.decode("utf-8").split("\n")


def _replay_ops(path: str | os.PathLike[str], stats: ReadStats | None, bulk: bool,
                year_override: int | None = None, span: tuple[int, int] | None = None,
                known: _Known | None = None) -> Iterator[_Op]:
    """Read a recording into ordered operations: entries, new implicit sources, and blocks of
    raw lines with their bulk parse, made with the parser state this side can know (the year,
    the engine recognised from the source's first lines, no traceback open) and sent with it:
    ``("block", source, block, parse, engine, detected, year, cut_at)``. ``detected`` is the
    engine of the block's lines when this side takes it for the source's first block.

    ``span`` reads only those bytes (:func:`_ops_from_pool`); ``known`` is then what the
    feeding side knew of the sources begun before it, and a name it does not know is guessed
    (the year of the source begun last, the engine of the block's lines): the feeding side
    redoes a block whose guess was wrong. ``cut_at`` is the span's end for its last block
    (that source's lines may go on in the next span).
    """
    local = ReadStats()
    years: dict[str, int | None] = dict(known.years) if known is not None else {}
    engines: dict[str, Engine] = dict(known.engines) if known is not None else {}
    last_year = known.last_year if known is not None else None
    seen: set[str] = set()
    blocks = 0  # blocks made so far (a block's place in its span: _Block.at)
    block_src: str | None = None  # None: no block open (a source may be named "")
    # The open block: line numbers, receive times, and its texts in order, as runs read in C
    # (UTF-8, newline-joined: bytes) and as decoded entries gave them (lists of str).
    ns: list[int] = []
    ts: list[Any] = []
    parts: list[bytes | list[str]] = []
    recvs: list[Any] = []  # the receive times of the C runs' decode lines

    def flush(cut_at: int | None = None) -> Iterator[_Op]:
        nonlocal ns, ts, parts, recvs, blocks
        if not ns or block_src is None:
            return
        if all(type(part) is bytes for part in parts):
            data = b"\n".join(cast(list[bytes], parts))
            out = _Block(ns, [], ts, recvs, data)
            texts: list[str] | None = None
        else:
            texts = []
            for part in parts:
                texts.extend(part.decode("utf-8").split("\n") if isinstance(part, bytes) else part)
            out = _Block(ns, texts, ts)
        detected = None
        if block_src not in engines:
            detected = _detect_head(out.lines())
            engines[block_src] = detected
        engine = engines[block_src]
        parser = LineParser(year=years.get(block_src), engine=engine)
        piece = _bulk(out, parser) if bulk else None
        if piece is not None and (piece.tput or piece.prefill) and engine is Engine.UNKNOWN:
            engines[block_src] = Engine.SGLANG
        if span is not None:  # (it crosses to the feeding process)
            if piece is not None:
                # The feeding side takes its parse: the lines stay here (read again from the
                # file in the rare case that side must parse them itself). 438 MB of pickles
                # crossed for a 2M-line recording with the lines, 70 without.
                recv = out.recv if out.recv is not None else _decode_recv(out.lines(), ts)
                out = _Block(ns, [], [], recv, at=(span[0], span[1], blocks))
            elif texts is not None:
                out = _Block(ns, [], ts, _decode_recv(texts, ts), _packed(texts))
                if out.data is None:
                    out.texts = texts
        blocks += 1
        yield ("block", block_src, out, piece, engine, detected, parser.year, cut_at)
        ns, ts, parts, recvs = [], [], [], []

    def add_texts(texts: list[str]) -> None:
        if parts and type(parts[-1]) is list:
            parts[-1].extend(texts)
        else:
            parts.append(list(texts))

    def open_block(src: str) -> Iterator[_Op]:
        nonlocal block_src
        yield from flush()
        block_src = src
        if src not in years:
            # Lines before any source entry (a hand-made file): one implicit source. Or, read
            # from a span on, a source begun before it that the feeding side had not yet told.
            years[src] = None if span is None else last_year
            yield ("implicit", src)
        if src not in seen:
            seen.add(src)
            yield ("has_lines", src)

    def other_entry(entry: dict[str, Any]) -> Iterator[_Op]:
        """One entry that is not a raw line of a text-named source, the way lines used to go."""
        nonlocal block_src, last_year
        kind = entry["type"]
        if kind == "line":  # a hand-made file's source name that is not a string
            src = str(entry.get("src", ""))
            if src != block_src or len(ns) >= REPLAY_BLOCK:
                yield from open_block(src)
            n, text = entry.get("n", 0), entry.get("text", "")
            ns.append(n if type(n) is int else int(n))
            add_texts([text if type(text) is str else str(text)])
            ts.append(entry.get("t"))
            return
        yield from flush()
        if kind == "meta" and entry.get("event") == "source":
            name = str(entry.get("source", ""))
            year = entry.get("year") if year_override is None else year_override
            years[name] = year if isinstance(year, int) else None
            last_year = LineParser(year=years[name]).year
            engines.pop(name, None)
            seen.discard(name)
            block_src = None  # the next line, even of the same name, opens a block of this source
        yield ("entry", entry)

    def decoded(batch: list[dict[str, Any]]) -> Iterator[_Op]:
        # Runs of raw lines of one source are taken a run at a time:
        # a comprehension per field, not a loop turn per line (3 µs a line, most of report's time).
        keys = _run_keys(batch)
        at = 0
        for key, group in groupby(keys):
            count = len(list(group))
            run, at = batch[at:at + count], at + count
            if key is _OTHER:
                for entry in run:
                    yield from other_entry(entry)
                continue
            assert isinstance(key, str)
            while run:
                if key != block_src or len(ns) >= REPLAY_BLOCK:
                    yield from open_block(key)
                room = REPLAY_BLOCK - len(ns)
                part, run = run[:room], run[room:]
                part_ns = _field(part, "n", 0)
                texts = _field(part, "text", "")
                if set(map(type, part_ns)) != {int}:
                    part_ns = [int(n) for n in part_ns]
                if set(map(type, texts)) != {str}:
                    texts = [str(t) for t in texts]
                ns.extend(part_ns)
                add_texts(texts)
                ts.extend(_field(part, "t", None))

    p = Path(path)
    for chunk in _raw_chunks(p, local, span):
        if not isinstance(chunk, bytes):  # the header line
            yield from decoded(chunk)
            continue
        pos, size = 0, len(chunk)
        while pos < size:
            if _line_run is None:
                count, end = 0, size
            else:
                room = REPLAY_BLOCK - len(ns) if block_src is not None else 0
                count, end, src, run_ns, run_ts, data, recv = _line_run(chunk, pos, block_src, room, REPLAY_BLOCK)
            if count:
                local.entries += count
                if src != block_src or len(ns) >= REPLAY_BLOCK:
                    yield from open_block(src)
                ns.extend(run_ns)
                ts.extend(run_ts)
                parts.append(data)
                recvs.extend(recv)
            else:
                # (split at newlines only, as the file's lines)
                yield from decoded(_decode_lines(p, io.BytesIO(chunk[pos:end]).readlines(), local))
            pos = end
    yield from flush(span[1] if span is not None else None)
    if stats is not None:
        yield ("stats", local)


@dataclass(frozen=True)
class _Known:
    """What the feeding side knows of the sources begun so far, handed to a reading process."""

    years: dict[str, int | None]
    #: The engine each source's parser has (sources whose first block was read).
    engines: dict[str, Engine]
    #: The year of the source begun last (a guess for a source the feeding side has not told).
    last_year: int | None


#: Bytes of a big recording each reading process takes at a time (whole lines).
READ_SPAN = 8 << 20


def _read_span(path: str, span: tuple[int, int], with_stats: bool, year: int | None, known: _Known) -> list[_Op]:
    """A reading process's work: the operations of one span of the recording, parsed."""
    return list(_replay_ops(path, ReadStats() if with_stats else None, True, year, span, known))


def _ops_from_pool(path: Path, size: int, workers: int, stats: ReadStats | None, year: int | None,
                   known: Callable[[], _Known]) -> Iterator[_Op]:
    """:func:`_replay_ops` over spans of the recording, read and parsed by forked processes, one
    per core, while this one feeds the session; the operations in the file's order.

    A span's reading is handed what the feeding side knows when it starts (at most
    ``2 * workers`` spans ahead): the sources begun, their years and engines. A source begun in
    a span not yet fed is guessed, and a block whose guess was wrong is parsed again here (the
    year of the source begun last and the engine of its own lines are nearly always right).
    """
    from concurrent.futures.process import BrokenProcessPool

    from specmon.ingest.bulk import feeding_pool, line_ranges, windowed

    read = ReadStats()
    try:
        with feeding_pool(workers) as pool:
            # (known() is called as each span is handed out: what has been fed by then)
            argss = ((str(path), span, stats is not None, year, known())
                     for span in line_ranges(str(path), size, READ_SPAN))
            for ops in windowed(pool, _read_span, argss, 2 * workers):
                for op in ops:
                    if op[0] == "stats":
                        st = op[1]
                        read.entries += st.entries
                        read.bad_lines += st.bad_lines
                        read.truncated_tail = st.truncated_tail  # (the last span's)
                    else:
                        yield op
    except BrokenProcessPool as exc:  # a worker killed (the kernel's OOM killer, a signal)
        raise RecordingError(f"{path}: a process reading it in parallel stopped ({exc})") from exc
    if stats is not None:
        yield ("stats", read)


def _whole_block(path: Path, block: _Block, year: int | None, reread: dict[tuple[int, int], list[_Block]]
                 ) -> _Block:
    """A block sent without its lines, read again here from its span (the same reading makes the
    same blocks); the span's blocks are kept in ``reread`` for the next one."""
    if block.at is None:
        return block
    start, end, index = block.at
    if (start, end) not in reread:
        reread.clear()
        reread[start, end] = [op[2] for op in _replay_ops(path, None, False, year, (start, end),
                                                          _Known({}, {}, None)) if op[0] == "block"]
    whole = reread[start, end][index]
    if whole.ns != block.ns:  # pragma: no cover - the file changed under the report
        raise RecordingError(f"{path}: the recording changed while it was read")
    return whole


def _first_block(path: Path, block: _Block, src: str, cut_at: int | None) -> list[str]:
    """The lines of a source's first block as one reading of the whole file makes it: ``block``,
    and when it ends at a span's end, the lines of that source right after it."""
    lines = block.lines()
    if cut_at is None or len(lines) >= REPLAY_BLOCK:
        return lines
    span = (cut_at, path.stat().st_size)
    for op in _replay_ops(path, None, False, None, span, _Known({src: None}, {src: Engine.UNKNOWN}, None)):
        if op[0] == "has_lines" and op[1] == src:
            continue
        if op[0] == "block" and op[1] == src:
            lines = lines + op[2].lines()[:REPLAY_BLOCK - len(lines)]
        break
    return lines


def _detect_head(texts: list[str]) -> Engine:
    """The engine of a source's first lines, as ``summarize`` recognises a file's head."""
    head: list[str] = []
    size = 0
    for text in texts[:_HEAD_LINES]:
        size += len(text) + 1
        if size > _HEAD_BYTES:
            break
        head.append(text)
    return detect_engine(head)


def _packed(texts: list[str]) -> bytes | None:
    """The texts as one UTF-8 block, if that gives them back exactly (no newline inside a text,
    no lone surrogate); else None (they cross over as a list)."""
    try:
        data = "\n".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return None
    from specmon.ingest.bulk import count_newlines

    return data if count_newlines(data) == len(texts) - 1 else None


def _decode_recv(texts: list[str], ts: list[Any]) -> list[Any]:
    """The receive times of a block's decode lines (bulk_piece takes decode lines by this same test)."""
    # (in C: the test and the selection by map and compress)
    return list(compress(ts, map(contains, texts, repeat("Decode batch"))))


def _bulk(block: _Block, parser: LineParser) -> Any:
    """The bulk parse of a block (``decode_columns``), or None when it must be read line by line."""
    from specmon.ingest.bulk import decode_columns

    if block.data is not None:
        return decode_columns(block.data, parser.engine, parser.year)
    # One encode of the joined block instead of one per line (raw lines hold no newline;
    # a hand-made one that does, or a lone surrogate, is encoded line by line).
    data = _packed(block.texts)
    if data is None:
        data = b"\n".join(t.encode("utf-8", errors="replace") for t in block.texts)
    return decode_columns(data, parser.engine, parser.year)


#: Texts one of which every line the bulk parse of a block takes holds (decode, prefill, HTTP
#: access lines); a line with none of them may give a record of its own.
_BULK_LINE_TEXTS = ("Decode batch", "Prefill batch", "HTTP/")

#: The fewest lines worth a bulk parse of a block's tail.
BULK_TAIL_MIN = 256


def _apply_block(session: Session, parser: LineParser, block: _Block, piece: Any,
                 on_record: Callable[[float | None, ParsedRecord, Session], None] | None,
                 on_samples: SamplesCallback | None, bulk: bool = False) -> None:
    """Ingest a block of raw lines: its bulk parse when there is one, else line by line.

    A block without one (a line in it gives a record of its own: a source's first block, with
    the server's start, or a restart) is read line by line up to its last such line only, when
    enough plain stats lines follow it to be worth their bulk parse: the first 8,192-line block
    of a 2M-line SGLang recording went line by line whole, 80 ms of the feeding process.
    """
    if piece is None:
        lines = block.lines()
        cut = len(lines)
        if bulk and len(lines) >= BULK_TAIL_MIN:
            cut = _plain_tail(lines)
        parse = parser.parse
        for n, text, t in zip(block.ns[:cut], lines[:cut], block.ts[:cut], strict=True):
            rec = parse(text, n)
            session.lines += 1
            if rec is not None:
                session.ingest(rec)
                if on_record is not None:
                    on_record(t, rec, session)
        if cut < len(lines):
            # (in a traceback the line parser reads the lines after it otherwise: line by line)
            tail = _Block(block.ns[cut:], lines[cut:], block.ts[cut:])
            parsed = None if parser.in_traceback else _bulk(tail, parser)
            _apply_block(session, parser, tail, parsed, on_record, on_samples)
        return
    # The parser state the line path would leave: stats lines end a traceback and name the engine.
    if piece.tput or piece.prefill:
        parser.in_traceback = False
        if parser.engine is Engine.UNKNOWN:
            parser.engine = Engine.SGLANG
    session.count_lines("prefill", piece.prefill)
    if piece.tput:
        session.ingest_decode_columns(piece.ranks, piece.ts, piece.running, piece.tput,
                                      piece.acc_len, piece.acc_rate, block.ns[0], block.ns[-1])
        if on_samples is not None and session.current is not None:
            recv = block.recv if block.recv is not None else _decode_recv(block.lines(), block.ts)
            on_samples(piece.ts, recv, piece.tput, session.current.id)
    session.lines += len(block.ns)


def _plain_tail(lines: list[str]) -> int:
    """Where a block's lines that all hold one of _BULK_LINE_TEXTS begin, counted from its end;
    the block's length when fewer than BULK_TAIL_MIN of them end it."""
    decode, prefill, access = _BULK_LINE_TEXTS
    k = len(lines)
    while k > 0 and (decode in (line := lines[k - 1]) or prefill in line or access in line):
        k -= 1  # (three tests, not any() over a generator: a third of the time)
    return k if len(lines) - k >= BULK_TAIL_MIN else len(lines)


def _flush_records(session: Session, pending: list[tuple[str, dict[str, Any]]], has_lines: set[str],
                   on_record: Callable[[float | None, ParsedRecord, Session], None] | None = None) -> None:
    # Records only count for sources whose raw lines were not recorded (lines are authoritative).
    for src, entry in pending:
        if src in has_lines:
            continue
        try:
            rec = record_from_json(entry.get("rec") or {})
        except (ValueError, TypeError):
            continue
        session.ingest(rec)
        if on_record is not None:
            on_record(entry.get("t"), rec, session)
    pending.clear()


def write_lines_recording(path: str | os.PathLike[str], sources: Iterable[tuple[str, Iterable[str]]]) -> None:
    """Record whole log files as if they had been received now (tests, bug reports)."""
    session = Session()
    with Recorder(path, meta={"command": "import"}) as rec:
        ingest = RecordedIngest(session, rec)
        for name, lines in sources:
            ingest.begin_source(name)
            ingest.feed(list(lines))
        ingest.close()
