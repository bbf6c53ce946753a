"""Session recordings: everything a session saw, appended to a JSONL file as it happens.

The format (entry types and their fields, the header's name and version) is
:mod:`specmon.recording_format`; reading is :mod:`~specmon.output.recording_reader`,
replaying into a session :mod:`~specmon.output.recording_replay`. This module writes.

Crash safety: entries are buffered in memory and written by a background
thread every ``flush_interval`` seconds (0.5 s by default) and at close, with
one ``write`` of whole lines each time, to a file opened in append mode. A
killed process therefore loses at most the last interval, and the file stays
valid up to its last complete line; the reader ignores a truncated last line.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import threading
import time
import weakref
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from specmon import __version__, paths
from specmon.model.session import Run, Session
from specmon.output.recording_reader import is_recording as is_recording
from specmon.parsing import LineParser
from specmon.recording_format import FORMAT, LINE_HEAD, VERSION
from specmon.recording_format import RecordingError as RecordingError
from specmon.records import ParsedRecord
from specmon.redact import redact_line

# RecordingError and is_recording, imported "as" themselves above, stay importable from here:
# the dashboard and the control commands take them with the recorder.

#: Most seconds between two writes to disk (the issue allows losing at most one second).
DEFAULT_FLUSH_INTERVAL = 0.5

__all__ = [
    "RecordedIngest", "Recorder", "RecordingError", "is_recording", "new_recording_path", "write_lines_recording",
]


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

#: Raw lines a recorder holds before its reader must wait (a few tenths of a second of the
#: writer thread's work: a close then writes them within the exit's second).
MAX_BACKLOG_LINES = 20_000


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
        head = f'{LINE_HEAD}{_quoted(self.source)},"n":'
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
        #: Set to make the writer thread flush before its interval (a backlog of raw lines).
        self._wake = threading.Event()
        #: Raw lines queued by :meth:`batch` and not yet taken by a flush.
        self._backlog = 0
        #: The backlog at which a reader waits for the writer (:attr:`backlog`).
        self.max_backlog = MAX_BACKLOG_LINES
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
            self._backlog += len(lines)
            backlog = self._backlog
        if backlog >= self.max_backlog // 2:
            self._wake.set()  # the writer flushes now, not at its next interval

    @property
    def backlog(self) -> int:
        """Raw lines queued and not yet encoded: a reader at or above :data:`MAX_BACKLOG_LINES`
        waits for the writer (:class:`specmon.ingest.live.Feeder`), so a backlog read faster than
        it is recorded never sits in memory whole (1.5M lines caught up: 804 MB peak, measured)."""
        return self._backlog

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
                self._backlog = 0
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
        while not self._stop.is_set():
            self._wake.wait(self._interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            self.flush()

    def close(self) -> None:
        """Write an ``end`` entry, flush and close the file (idempotent)."""
        if self._fd is None:
            return
        self.meta("end")
        self._stop.set()
        self._wake.set()
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


def write_lines_recording(path: str | os.PathLike[str], sources: Iterable[tuple[str, Iterable[str]]]) -> None:
    """Record whole log files as if they had been received now (tests, bug reports)."""
    session = Session()
    with Recorder(path, meta={"command": "import"}) as rec:
        ingest = RecordedIngest(session, rec)
        for name, lines in sources:
            ingest.begin_source(name)
            ingest.feed(list(lines))
        ingest.close()
