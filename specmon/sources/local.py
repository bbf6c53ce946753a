"""Follow a log file on this machine the way ``tail -F`` does.

:class:`LocalTailSource` polls the file (``stat`` every ``poll_interval``
seconds, 0.2 by default) rather than using inotify: it works the same on every
filesystem (NFS, overlay, bind mounts in containers) and a log that grows a few
times a second needs nothing faster. It handles

* a file that does not exist yet (waits for it; the header says so),
* rotation: the path now names another inode. The old file is read to its end
  first, its unterminated last line (if any) is released as a line, then the
  new file is followed from its start,
* truncation: the size dropped below what was read. Reading restarts at 0 and
  an event says so (lines written and truncated between two polls are lost:
  nothing can recover them),
* a FIFO (a named pipe, as log shippers use): read as a stream from what is written after
  it opens (``--lines`` has no past to show), opened and read without ever blocking
  (``O_NONBLOCK``: no writer yet, or none any more, is an empty poll; a new writer is read
  on). A character device, a socket or a block device is refused with one sentence: a
  ``/dev/zero`` never ends and would hold a core.

The path is opened through :func:`specmon.smallfile.open_input`, so nothing here can block in
``open`` whatever the path names.

Reads are plain non-blocking-enough ``os.read`` calls on the event loop, one read of at most
``chunk_size`` bytes per step, with a yield to the loop between steps, so a multi-gigabyte file
read from the start never freezes the UI, nor does a line that never ends (a sparse file's
gigabytes of NULs, a FIFO fed by ``cat /dev/zero``): it is read on a chunk a step, only its
first ``max_line`` bytes kept, and delivered cut and counted (``status.overlong``, an event the
first time) as the SSH tail does.
"""

from __future__ import annotations

import asyncio
import glob
import os
import stat
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

from specmon.smallfile import InputError, open_input
from specmon.sources.base import ConnectionState, LogProfile, SourceStatus
from specmon.sources.lines import DEFAULT_MAX_LINE, LineSplitter
from specmon.sources.preface import local_preface

__all__ = ["LocalTailSource", "build_local_source", "newest_match", "start_of_last_lines"]

_BLOCK = 64 * 1024


def newest_match(pattern: str) -> Path | None:
    """Return the most recently modified regular file matching a glob, or None.

    ``~`` is expanded; ``**`` matches directories recursively.
    """
    best: tuple[float, str] | None = None
    for name in glob.glob(os.path.expanduser(pattern), recursive=True):
        try:
            info = os.stat(name)
        except OSError:
            continue  # vanished between glob and stat
        if not os.path.isfile(name):
            continue
        if best is None or info.st_mtime > best[0]:
            best = (info.st_mtime, name)
    return Path(best[1]) if best else None


def start_of_last_lines(fd: int, size: int, count: int, limit: int | None = None) -> int:
    """Byte offset where the last ``count`` lines of a file start (like ``tail -n``).

    An unterminated last line counts as a line, as with ``tail``. Reads
    backwards in blocks, so it is cheap on huge files. ``limit``: scan at most this
    many bytes back (``count`` lines of at most the line cap each); a file whose last
    ``limit`` bytes hold fewer newlines starts there. Without it a huge file with no
    newline (a sparse 4 GB file, a binary dump) was read whole, backwards, at open.
    """
    if count <= 0:
        return size
    floor = 0 if limit is None else max(0, size - limit)
    position = size
    # A final newline ends the last line; it does not start an empty one.
    skip_final = True
    seen = 0
    while position > floor:
        start = max(floor, position - _BLOCK)
        block = os.pread(fd, position - start, start)
        index = len(block)
        while True:
            index = block.rfind(b"\n", 0, index)
            if index < 0:
                break
            if skip_final and start + index == size - 1:
                skip_final = False
                continue
            skip_final = False
            seen += 1
            if seen == count:
                return start + index + 1
        skip_final = False
        position = start
    return floor


class LocalTailSource:
    """A :class:`~specmon.sources.base.LineSource` that follows a local file.

    Args:
        path: The log file (need not exist yet).
        lines: Start with the last ``lines`` lines; ``None`` reads the whole file.
        poll_interval: Seconds between two checks for new data.
        chunk_size: Most bytes read for one batch.
        clock: Wall clock for ``status.last_line_at`` (injected in tests).
        sleep: Awaitable sleep (injected in tests).
        max_line: Longest line delivered, in bytes; longer lines are cut (and counted).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        lines: int | None = None,
        poll_interval: float = 0.2,
        chunk_size: int = 1 << 20,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        self.path = Path(path).expanduser()
        self.name = str(self.path)
        self.status = SourceStatus()
        self.max_line = max_line  # a restart's new log is tailed with the same cap
        self._lines = lines
        self._poll = poll_interval
        self._chunk = chunk_size
        self._clock = clock
        self._sleep = sleep
        self._fd: int | None = None
        self._inode: tuple[int, int] | None = None  # (st_dev, st_ino) of the open file
        self._stream = False  # the open file is a FIFO: read as it comes, no offsets, no truncation
        self._split = LineSplitter(max_line=max_line)
        self._closed = asyncio.Event()
        self._first_open = True
        self._preface: list[str] = []  # configuration lines found above the first window, delivered first
        self._more = False  # the last read completed no line and more may follow: read on after a yield
        self._said_long = False  # the first over-long line was said in an event (later ones: counted)

    # -- the LineSource protocol ---------------------------------------------

    async def batches(self) -> AsyncIterator[list[str]]:
        """Yield lists of complete lines as the file grows; ends after :meth:`close`."""
        try:
            while not self._closed.is_set():
                batch = self._step()
                if batch:
                    self._deliver(batch)
                    yield batch
                    # More may be waiting (a big file): read on without sleeping.
                    continue
                if self._more:
                    # A line longer than a chunk, still being read: the loop's turn, then read on.
                    await asyncio.sleep(0)
                    continue
                await self._wait(self._poll)
        finally:
            self._close_fd()
            if self.status.state is not ConnectionState.FAILED:
                self.status.state = ConnectionState.ENDED

    async def close(self) -> None:
        """Stop following and close the file."""
        self._closed.set()
        self._close_fd()
        if self.status.state is not ConnectionState.FAILED:
            self.status.state = ConnectionState.ENDED

    # -- internals -------------------------------------------------------------

    async def _wait(self, seconds: float) -> None:
        """Sleep, but wake at once when closed."""
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        closer = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({sleeper, closer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            closer.cancel()

    def modified_at(self) -> float | None:
        """The log's modification time now (None: it cannot be stat'ed)."""
        try:
            return os.stat(self.path).st_mtime
        except OSError:
            return None

    def _deliver(self, batch: list[str]) -> None:
        self.status.lines += len(batch)
        self.status.last_line_at = self._clock()

    def _event(self, message: str) -> None:
        self.status.events.append(message)

    def _close_fd(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def _step(self) -> list[str]:
        """One poll: read what is new, then look for rotation or truncation."""
        if self._fd is None and not self._open():
            return []
        assert self._fd is not None
        out = self._read_available()
        if self._preface:
            out, self._preface = [*self._preface, *out], []
        if out or self._more:
            return out
        # Nothing new in the open file: has the path moved on to another file?
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as exc:
            self._set_waiting(f"cannot stat {self.path}: {exc.strerror}")
            return []
        if info is None or (info.st_dev, info.st_ino) != self._inode:
            out = self._read_available()  # the writer may have added a last bit
            if out or self._more:
                return out  # the old file is read to its end first, a step at a time
            rest = self._split.take_pending()
            self.status.overlong = self._split.overlong  # (the old file's last line may have been cut)
            self._close_fd()
            if info is None:
                self._event(f"{self.path} was removed or renamed; waiting for a new file")
                self._set_waiting(f"file not found: {self.path} (waiting for it)")
            else:
                self._event(f"{self.path} was rotated: following the new file from its start")
            tail = [rest] if rest is not None else []
            self._split.reset(0)
            if info is not None:
                self._open()
            return tail
        size = os.fstat(self._fd).st_size
        if not self._stream and size < self._split.read_position:
            self._event(
                f"{self.path} was truncated (size {size} < {self._split.read_position} read): "
                "reading again from the start"
            )
            self._split.reset(0)
        return []

    def _open(self) -> bool:
        """Open the path if it exists; position according to ``lines`` on the first open."""
        try:
            fd, info = open_input(self.path, "log file", stream=True,
                                  hint="pass the log file (a FIFO is followed as a stream)")
        except FileNotFoundError:
            self._set_waiting(f"file not found: {self.path} (waiting for it)")
            return False
        except InputError as exc:
            # A directory, a device, a socket: said, never read (a /dev/zero never ends).
            detail = str(exc) + (": pass the log itself" if self.path.is_dir() else "")
            self._set_waiting(detail)
            if self._first_open:
                # At start-up this is a mistake to say and stop at; later (the log replaced by
                # a directory) it is shown and polled like a missing file.
                self.status.state = ConnectionState.FAILED
                self._closed.set()
            return False
        except OSError as exc:
            # Permission errors may be fixed by the user while we wait: keep polling.
            self._set_waiting(f"cannot open {self.path}: {exc.strerror}")
            return False
        self._fd = fd
        self._inode = (info.st_dev, info.st_ino)
        self._stream = stat.S_ISFIFO(info.st_mode)
        start = 0
        if self._first_open and self._lines is not None and not self._stream:
            # Bounded: the last N lines shown are at most N line caps long (longer lines are cut).
            start = start_of_last_lines(fd, info.st_size, self._lines, self._lines * (self._split.max_line + 1))
            # The window starts mid-log: the latest launch's configuration lines above it come first.
            self._preface = local_preface(fd, start, self._split.max_line)
            if self._preface:
                self._event(f"started {start:,} bytes into {self.path}: read its last configuration lines "
                            f"({len(self._preface)}) before the last {self._lines:,} lines")
        self._first_open = False
        self._split.reset(start)
        self.status.state = ConnectionState.LIVE
        self.status.detail = f"following {self.path}" + (" (a FIFO: read as it is written)" if self._stream else "")
        return True

    def _set_waiting(self, detail: str) -> None:
        if self.status.detail != detail:
            self.status.detail = detail
        self.status.state = ConnectionState.CONNECTING

    def _read_available(self) -> list[str]:
        """Read up to ``chunk_size`` new bytes at a time; return the lines they complete.

        A line longer than one chunk is read on within the step, as it always was, until it
        completes or the data ends, but only up to the line cap: past it (a sparse file's
        gigabytes of NULs, a FIFO fed by ``cat /dev/zero``) the step ends with ``_more`` set and
        the next one reads on after the loop's turn. Reading on within the step held the loop for
        as long as such a line lasted: ``watch`` of a sparse multi-gigabyte file was deaf to ``q``
        and SIGTERM. (One read a step for every line, the first form of this, left a fleet's
        followers of four busy llama-servers minutes behind in 2 of 3 real runs.)
        """
        assert self._fd is not None
        self._more = False
        split = self._split
        while True:
            if self._stream:
                try:
                    data = os.read(self._fd, self._chunk)
                except BlockingIOError:  # a writer, nothing written yet
                    return []
            else:
                data = os.pread(self._fd, self._chunk, split.read_position)
            if not data:  # (a FIFO: no writer now; one that comes later is read on)
                return []
            self.status.bytes += len(data)
            before = split.overlong
            lines = split.feed(data)
            if split.overlong != before:
                self.status.overlong = split.overlong
            if not self._said_long and (split.overlong != before or split.pending_length > split.max_line):
                # Said once, as the SSH tail does; the status line counts every line cut.
                self._said_long = True
                if split.overlong != before:
                    said = f"a line of {split.longest:,} bytes was cut to {split.max_line:,} bytes (the line cap)"
                else:
                    said = (f"a line longer than the line cap ({split.max_line:,} bytes) is being read, no "
                            f"newline yet after {split.pending_length:,} bytes: only its first "
                            f"{split.max_line:,} bytes are kept")
                self._event(said + "; later over-long lines are counted in the status line")
            if lines:
                return lines
            if split.pending_length > split.max_line:
                self._more = True  # an over-long line: the loop's turn, then the next chunk
                return []


def build_local_source(
    path: str | None,
    *,
    profile: LogProfile | None = None,
    lines: int | None = None,
    line_cap: int | None = None,
) -> LocalTailSource:
    """Build the source for ``specmon watch`` from CLI options and a profile.

    The path is the argument, else the profile's ``log``, else the newest file
    matching its ``log_glob``.

    Args:
        path: ``specmon watch PATH``; None to take it from the profile.
        profile: The selected profile, if any.
        lines: Start with the last ``lines`` lines (default: the profile's,
            else the whole file).
        line_cap: Longest line kept, in bytes (default: the profile's, else 1 MiB).

    Raises:
        ValueError: no path can be found; the message says what to pass.
    """
    chosen = path or (profile.log if profile else None)
    if not chosen and profile is not None and profile.log_glob:
        match = newest_match(profile.log_glob)
        if match is None:
            raise ValueError(
                f"no file matches {profile.log_glob!r}: pass the log, e.g. specmon watch /path/to/server.log"
            )
        chosen = str(match)
    if not chosen:
        raise ValueError("which log? pass it: specmon watch /path/to/server.log (or set 'log' in a profile)")
    if lines is None and profile is not None:
        lines = profile.lines
    if line_cap is None:
        line_cap = profile.line_cap if profile is not None and profile.line_cap is not None else DEFAULT_MAX_LINE
    return LocalTailSource(chosen, lines=lines, max_line=line_cap)
