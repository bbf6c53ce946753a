"""Follow a remote log over SSH, losing and repeating no line across drops, rotation and truncation.

How it reads
    On the first connection the source ``stat``\\ s the file (device, inode,
    size S) and reads the last N lines *of the first S bytes* with one bounded
    command. It then runs a small fixed POSIX ``sh`` helper on the host
    (``remote_tail.sh``, shipped in this package, started with ``exec sh -c
    <script> specmon-tail <quoted args>`` so it dies with the channel) that
    follows the file **by identity and byte offset**: it holds the file open,
    polls its size, sends new bytes with ``dd`` and says, in the same stream
    and in the order it happened, which file (device:inode) the bytes belong
    to and at which offset they start. Each data frame repeats up to 64 bytes
    before the offset, so the client checks that the file is still the one it
    was reading (an inode number reused by a new file, a file truncated and
    regrown between two polls). Nothing depends on parsing ``tail -F``'s
    stderr notices, which raced the new file's bytes.

What it tracks
    The file identity (device, inode) and the byte offset just past the last
    *complete* line delivered (a partial last line is held back until its
    newline arrives, and re-read whole after a drop).

Rotation (``mv log log.1`` + a new ``log``)
    The helper notices the path names another file, reads the old one (still
    open) to its end, says so, and only then starts the new one at byte 0.
    After a drop it first looks the old file up by inode (the path itself,
    else a file next to it, e.g. ``log.1``), finishes it from the saved
    offset, then moves on to the new one. No line is lost or doubled. The client
    also keeps its place in the chain of rotated files: the helper sends each opened
    file's mtime (``A``) and the finished file's (``R``), and a reconnect between two
    files, or after the file being read was destroyed (``G``), goes on from there with
    the files already read excluded, instead of jumping to the path.

Truncation
    The open file's size fell below the offset: reading starts again at 0 and
    an event says so.

The one exception: bytes destroyed on the host before they were read
    When the file read before a drop no longer exists anywhere (deleted, or
    rotated away and deleted), or was truncated, while disconnected, what was
    written to it after the saved offset is gone from the host. The source
    reports it: an event and a :class:`Loss` entry (which file, from which
    offset, and how many bytes when the host could still tell), counted in
    ``status.lost``. Likewise a file truncated within one poll (0.2 s) of a
    write loses that write; the truncation itself is reported.

Reconnecting
    On a lost connection it retries with full-jitter exponential backoff
    (base 1 s, factor 2, cap 30 s; ``status.retry_at`` drives the header's
    countdown). Authentication, host-key and configuration failures are never
    retried, nor is a log path that names a directory: the source goes to
    ``FAILED`` with one sentence in ``status.detail``.

Status
    ``bytes`` (all log bytes received), ``lines``, ``last_line_at`` (so a
    silent server is visible), ``latency_ms`` (round trip of a small ``stat``
    exec, repeated every ``probe_interval`` seconds), ``attempts``,
    ``retry_at``, ``lost`` and ``overlong`` (lines cut to the line cap).
    Every connection change and the exact commands run on the host (the
    helper's arguments) are appended to ``events``.

Remote requirements: a POSIX ``sh``, GNU coreutils (``stat -c``, ``dd
iflag=skip_bytes``, ``head -c``, ``sleep 0.2``) and ``find -inum``: any Linux host.

Beside this module: the helper and its command (``ssh_helper``), the frames it sends
(``ssh_frames``), the channel's session (``ssh_channel``), what following can end in (``ssh_follow``), the backoff (``ssh_backoff``),
the header's status line (``ssh_status``) and the source built from ``specmon connect``'s
options (``ssh_options``).
"""

from __future__ import annotations

import asyncio
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import cast

import asyncssh

from specmon.sources.base import ConnectionState, SourceStatus
from specmon.sources.lines import DEFAULT_MAX_LINE, LineSplitter
from specmon.sources.preface import parse_grep, preface_command
from specmon.sources.ssh_backoff import Backoff
from specmon.sources.ssh_channel import _ERR, _OUT, _WAKE, _TailSession
from specmon.sources.ssh_follow import Loss, _Fatal, _FileInfo, _Lost, _Restart
from specmon.sources.ssh_frames import Frame, FrameReader, ProtocolError
from specmon.sources.ssh_helper import (
    _MTIME,
    POLL_INTERVAL,
    SEEN_KEPT,
    helper_script,
    tail_command,
    tail_command_summary,
)
from specmon.sources.ssh_status import status_line
from specmon.ssh.connect import ErrorKind, SSHError, SSHLink, SSHTarget, connect

__all__ = [
    "Backoff", "Frame", "FrameReader", "Loss", "SSHTailSource", "helper_script", "status_line", "tail_command",
]

DEFAULT_LINES = 1000
_MAX_BATCH_BYTES = 1 << 20


def _stdout(result: asyncssh.SSHCompletedProcess) -> bytes:
    """A command's stdout as bytes (commands run with ``encoding=None``)."""
    out = result.stdout
    if isinstance(out, str):
        return out.encode("utf-8", "surrogateescape")
    return bytes(out or b"")


class SSHTailSource:
    """A :class:`~specmon.sources.base.LineSource` that tails a file on an SSH host.

    Connections are opened inside :meth:`batches`, never in the constructor,
    so the source can be built before the app's event loop runs.

    Args:
        target: Where to connect (see :func:`specmon.ssh.connect.target_from_options`).
        path: The remote log file; ``None`` to use the newest match of ``log_glob``.
        log_glob: Remote glob (``~/`` allowed) used when ``path`` is None.
        lines: History lines shown on the first connection; None = whole file.
        backoff: Reconnect delays.
        clock: Wall clock for ``last_line_at`` / ``retry_at``.
        sleep: Awaitable sleep used for the backoff (injected in tests).
        probe_interval: Seconds between latency/liveness probes.
        poll_interval: Seconds between two size checks of the file on the host.
        max_line: Longest line delivered, in bytes; longer lines are cut (and counted).
    """

    def __init__(
        self,
        target: SSHTarget,
        path: str | None,
        *,
        log_glob: str | None = None,
        lines: int | None = DEFAULT_LINES,
        backoff: Backoff | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        probe_interval: float = 15.0,
        poll_interval: float = POLL_INTERVAL,
        max_line: int = DEFAULT_MAX_LINE,
    ) -> None:
        if path is None and not log_glob:
            raise ValueError("SSHTailSource needs a path or a log_glob")
        self.target = target
        self.path = path
        self.log_glob = log_glob
        self.name = f"{target.label}:{path or log_glob}"
        self.status = SourceStatus()
        self.losses: list[Loss] = []
        self._lines = lines
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._sleep = sleep
        self._probe_interval = probe_interval
        self._poll = poll_interval
        self._split = LineSplitter(max_line=max_line)
        self._err = LineSplitter()
        self._identity: tuple[int, int] | None = None
        self._reading = ""  # the name the current file was opened by (e.g. server.log.1)
        self._positioned = False
        self._missing_said = False
        self._closed = asyncio.Event()
        self._link: SSHLink | None = None
        self._queue: asyncio.Queue[tuple[int, object]] | None = None
        self._data: Frame | None = None  # a D frame waiting for its K
        self._resumed = False  # no data yet since the helper (re)started
        # Between two files of the rotation chain (an R frame, its next O not yet seen):
        # the finished file's mtime, so a reconnect goes on from there, not from the path.
        self._after: str | None = None
        self._seen: list[tuple[int, int]] = []  # rotated files read to their end, newest last
        self._opened_mtime: str | None = None  # the current file's mtime when the helper opened it (A)
        self._birth: str | None = None  # the current file's birth time, where the host can tell (A)
        self._modified_at: float | None = None  # see modified_at()
        # A name that never answered and does not resolve is a mistake, said at once; once answered, a drop.
        self.answered = False
        self.failure_kind: ErrorKind | None = None  # the SSH error that failed the source for good

    @property
    def position(self) -> tuple[int | None, int]:
        """``(inode, offset)``: the file and byte offset the next resume starts from."""
        return (self._identity[1] if self._identity else None), self._split.offset

    def modified_at(self) -> float | None:
        """When the log last changed, as far as this source knows (None: not read yet).

        The host's modification time when the history was read, then the moment new bytes
        arrived: lines read as history are as old as the file says, not as new as the reading.
        """
        return self._modified_at

    @property
    def max_line(self) -> int:
        """The line cap: longest line delivered, in bytes."""
        return self._split.max_line

    @property
    def identity(self) -> tuple[int, int] | None:
        """``(device, inode)`` of the file being read, when known."""
        return self._identity

    # -- the LineSource protocol ---------------------------------------------

    async def batches(self) -> AsyncIterator[list[str]]:
        """Yield lists of complete lines until :meth:`close` or a fatal error."""
        try:
            while not self._closed.is_set():
                self.status.state = (
                    ConnectionState.RECONNECTING if self.status.attempts else ConnectionState.CONNECTING
                )
                self.status.retry_at = None
                self.status.detail = f"connecting to {self.target.label}"
                try:
                    link = await self._until_closed(connect(self.target))
                except SSHError as exc:
                    if exc.kind is ErrorKind.UNKNOWN_NAME and not self.answered:
                        self.failure_kind = exc.kind
                        self._fail(f"{exc}: check the spelling and the network, or give its address or an "
                                   "~/.ssh/config Host alias (not retried: this name never answered)")
                        return
                    if not exc.retryable:
                        self.failure_kind = exc.kind
                        self._fail(str(exc))
                        return
                    if not await self._wait_retry(str(exc)):
                        return
                    continue
                if link is None:
                    return  # closed while connecting
                self.answered = True
                self._link = link
                reason: str | None = None
                try:
                    while reason is None:
                        try:
                            async for batch in self._follow(link.conn):
                                yield batch
                            reason = "the remote tail ended"
                        except _Restart:
                            continue  # same connection, new position
                except _Fatal as exc:
                    self._fail(str(exc))
                    return
                except _Lost as exc:
                    reason = str(exc)
                except ProtocolError as exc:
                    reason = f"the remote helper sent {exc}"
                except (asyncssh.Error, OSError) as exc:
                    reason = f"connection lost: {getattr(exc, 'reason', None) or str(exc) or type(exc).__name__}"
                finally:
                    self._link = None
                    link.close()
                if self._closed.is_set():
                    return
                self._split.drop_pending()  # re-read a held-back partial line whole
                self._err.reset()
                if not await self._wait_retry(reason):
                    return
        finally:
            if self._link is not None:
                self._link.close()
                self._link = None
            if self.status.state is not ConnectionState.FAILED:
                self.status.state = ConnectionState.ENDED
                self.status.retry_at = None

    async def close(self) -> None:
        """Stop following and close the connection (the remote helper exits with it)."""
        self._closed.set()
        if self._queue is not None:
            self._queue.put_nowait((_WAKE, None))
        if self._link is not None:
            self._link.close()
        if self.status.state is not ConnectionState.FAILED:
            self.status.state = ConnectionState.ENDED
            self.status.retry_at = None

    # -- connection lifecycle -------------------------------------------------

    def _event(self, message: str) -> None:
        self.status.events.append(message)

    def _fail(self, message: str) -> None:
        self.status.state = ConnectionState.FAILED
        self.status.detail = message
        self.status.retry_at = None
        self._event(message)

    async def _until_closed(self, awaitable: Awaitable[SSHLink]) -> SSHLink | None:
        """Await ``awaitable`` unless :meth:`close` comes first (then cancel it)."""
        task = asyncio.ensure_future(awaitable)
        closer = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({task, closer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            closer.cancel()
        if not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
            return None
        return task.result()

    async def _wait_retry(self, reason: str) -> bool:
        """Show the countdown and sleep the backoff delay; False if closed meanwhile."""
        self.status.attempts += 1
        delay = self._backoff.delay(self.status.attempts)
        self.status.state = ConnectionState.RECONNECTING
        self.status.retry_at = self._clock() + delay
        self.status.detail = f"{reason}; retrying in {delay:.1f}s (attempt {self.status.attempts})"
        self._event(self.status.detail)
        sleeper = asyncio.ensure_future(self._sleep(delay))
        closer = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait({sleeper, closer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            sleeper.cancel()
            closer.cancel()
        return not self._closed.is_set()

    # -- remote commands ----------------------------------------------------------

    async def _run(self, conn: asyncssh.SSHClientConnection, command: str) -> asyncssh.SSHCompletedProcess:
        """Run a short command; output as bytes (logs need not be UTF-8)."""
        return await conn.run(command, check=False, encoding=None, timeout=60)

    async def _stat(self, conn: asyncssh.SSHClientConnection, path: str) -> _FileInfo | None:
        """``(device, inode, size)`` of the file, or None when it does not exist; measures latency.

        Raises:
            _Fatal: the path names a directory or something else that is not a file.
        """
        started = time.monotonic()
        result = await self._run(conn, shlex.join(["stat", "-L", "-c", "%d %i %s %Y %F", "--", path]))
        self.status.latency_ms = (time.monotonic() - started) * 1000.0
        if result.exit_status != 0:
            return None
        try:
            dev, inode, size, mtime, kind = _stdout(result).decode("utf-8", "replace").split(" ", 4)
            info = _FileInfo(int(dev), int(inode), int(size), float(mtime))
        except ValueError:
            raise _Fatal(f"unexpected output from stat on {self.target.label}: {result.stdout!r}") from None
        kind = kind.strip()
        if kind == "directory":
            raise _Fatal(self._not_a_file("a directory"))
        if "regular" not in kind:
            raise _Fatal(self._not_a_file(f"not a regular file ({kind})"))
        return info

    def _not_a_file(self, what: str) -> str:
        return (
            f"{self.path} on {self.target.label} is {what}, not a log file: "
            f"pass the log itself, e.g. specmon connect {self.target.label} --log {self.path}/server.log"
            if what == "a directory"
            else f"{self.path} on {self.target.label} is {what}: pass the server's log file with --log"
        )

    async def _discover(self, conn: asyncssh.SSHClientConnection) -> str:
        """The newest regular file matching ``log_glob`` on the host."""
        assert self.log_glob is not None
        pattern = self.log_glob
        if pattern.startswith("~/"):
            pattern = pattern[2:]  # remote commands start in the home directory
        # The glob must be expanded by the remote shell, so it is passed as $1 and
        # left unquoted *inside* the script (IFS= stops word splitting).
        script = 'IFS=; for f in $1; do [ -f "$f" ] && stat -L -c "%Y %n" -- "$f"; done; true'
        result = await self._run(conn, shlex.join(["sh", "-c", script, "sh", pattern]))
        best: tuple[int, str] | None = None
        for line in _stdout(result).decode("utf-8", "replace").splitlines():
            mtime, _, name = line.partition(" ")
            if mtime.isdigit() and name and (best is None or int(mtime) > best[0]):
                best = (int(mtime), name)
        if best is None:
            raise _Fatal(
                f"no file on {self.target.label} matches {self.log_glob!r}. Pass the log explicitly: "
                f"specmon connect {self.target.label} --log /path/to/server.log "
                "(or set 'log' in the profile)"
            )
        self._event(f"newest file matching {self.log_glob!r}: {best[1]}")
        return best[1]

    async def _preface(self, conn: asyncssh.SSHClientConnection, path: str, start: int) -> list[str]:
        """The latest launch's configuration lines above a window that starts mid-log (specmon.sources.preface)."""
        if start <= 0:
            return []
        result = await self._run(conn, preface_command(path, start))
        lines = parse_grep(_stdout(result), self._split.max_line)
        if lines:
            self._event(f"started {start:,} bytes into {path}: read its last configuration lines ({len(lines)}) "
                        "before the history")
        return lines

    async def _history(self, conn: asyncssh.SSHClientConnection, path: str, size: int) -> tuple[bytes, int]:
        """The last ``lines`` lines within the first ``size`` bytes, and where they start.

        Reading a bounded window from the end keeps this cheap on huge logs and
        exact while the file grows (``head -c`` stops at the snapshot size).
        """
        count = self._lines
        if count is None:
            return b"", 0
        if count == 0 or size == 0:
            return b"", size
        window = max(1 << 20, count * 1024)
        first = max(1, size - window + 1)  # 1-based, as tail -c +K counts
        length = size - first + 1
        q = shlex.quote(path)
        result = await self._run(conn, f"tail -c +{first} -- {q} | head -c {length} | tail -n {count}")
        data = _stdout(result) if result.exit_status == 0 else b""
        if first > 1 and len(data) == length:
            # The window holds fewer than `count` lines; its first one may be cut.
            newline = data.find(b"\n")
            data = data[newline + 1 :] if newline >= 0 else b""
        return data, size - len(data)

    # -- following ----------------------------------------------------------------

    async def _follow(self, conn: asyncssh.SSHClientConnection) -> AsyncIterator[list[str]]:
        """Position, then stream the helper's frames until the channel ends."""
        if self.path is None:
            self.path = await self._discover(conn)
            self.name = f"{self.target.label}:{self.path}"
        path = self.path
        first: list[str] = []
        if not self._positioned:
            info = await self._stat(conn, path)
            self._positioned = True
            if info is not None:
                self._modified_at = info.mtime
                data, start = await self._history(conn, path, info.size)
                self._identity = (info.dev, info.inode)
                self._reading = path
                self._split.reset(start)
                self.status.bytes += len(data)
                first = [*await self._preface(conn, path, start), *self._split.feed(data)]
        elif self._identity is not None:
            self._event(f"resuming {path} at byte {self._split.offset}")
        offset = self._split.read_position
        after = self._after if self._identity is None else self._opened_mtime
        command = tail_command(path, offset, self._identity, self._poll, after=after, seen=self._seen,
                               birth=self._birth)
        self._event(f"running on {self.target.label}: {tail_command_summary(path, offset, self._identity, after)}")
        queue: asyncio.Queue[tuple[int, object]] = asyncio.Queue()
        self._queue = queue
        frames = FrameReader()
        self._data = None
        self._resumed = self._identity is not None and offset > 0
        chan, created = await conn.create_session(lambda: _TailSession(queue), command, encoding=None)
        session = cast(_TailSession, created)
        self.status.state = ConnectionState.LIVE
        self.status.retry_at = None
        self.status.detail = f"following {path}"
        connected_at = time.monotonic()
        probe = asyncio.ensure_future(self._probe(conn, path, connected_at))
        try:
            if first:
                self._deliver(first)
                yield first
            while True:
                kind, payload = await queue.get()
                items = [(kind, payload)]
                size = len(cast(bytes, payload)) if kind == _OUT else 0
                while size < _MAX_BATCH_BYTES and not queue.empty():
                    item = queue.get_nowait()
                    items.append(item)
                    if item[0] == _OUT:
                        size += len(cast(bytes, item[1]))
                lines: list[str] = []
                ended: tuple[int, object] | None = None
                restart = False
                for kind, payload in items:
                    if kind == _OUT:
                        data = cast(bytes, payload)
                        session.consumed(len(data))
                        if restart:
                            continue
                        try:
                            for frame in frames.feed(data):
                                lines.extend(self._on_frame(frame, path))
                        except _Restart:
                            restart = True
                        if frames.noise:
                            for text in frames.noise.decode("utf-8", "replace").splitlines():
                                self._event(f"remote: {text}")
                            frames.noise = b""
                    elif kind == _ERR:
                        data = cast(bytes, payload)
                        session.consumed(len(data))
                        for text in self._err.feed(data):
                            self._event(f"remote: {text}")
                    else:
                        ended = (kind, payload)
                        break
                if lines:
                    self._deliver(lines)
                    yield lines
                if restart:
                    raise _Restart
                if ended is not None:
                    self._ended(ended, session)
                    return
        finally:
            probe.cancel()
            self._queue = None
            chan.close()

    def _lose(self, reason: str, offset: int, size: int | None) -> None:
        """Report bytes the host no longer has (the one case lines can go missing)."""
        self.losses.append(Loss(self._reading or self.path or "", self._identity, offset, size, reason))
        self.status.lost += 1
        self._event(reason)

    def _on_frame(self, frame: Frame, path: str) -> list[str]:
        """Apply one helper frame to the position; return the lines it completes."""
        kind, fields = frame.kind, frame.fields
        if kind == "D":
            self._data = frame
            return []
        if kind == "K":
            data, self._data = self._data, None
            if data is None:
                raise ProtocolError("a count without data")
            return self._on_data(data.fields[0], data.body[: fields[0]], path)
        if kind == "O":
            dev, ino, offset = fields[:3]
            name = frame.body.decode("utf-8", "replace")
            if offset != self._split.read_position:
                raise ProtocolError(f"resumed at {offset}, expected {self._split.read_position}")
            if self._identity is not None and (dev, ino) != self._identity and offset == 0 and self._reading:
                self._event(f"{path} is a new file: following it from its start")
            elif name != path and offset:
                self._event(f"{path} was rotated while disconnected: reading the rest of {name} first")
            elif name != path:
                self._event(f"reading {name} (rotated meanwhile) before the new {path}")
            self._identity = (dev, ino)
            self._reading = name
            self._after = None
            self._opened_mtime = self._birth = None  # its A frame follows
            if (dev, ino) in self._seen:  # an inode number reused by a new file
                self._seen.remove((dev, ino))
            if self._missing_said:
                self._missing_said = False
                self.status.detail = f"following {path}"
            return []
        if kind == "A":
            mtime, _, birth = frame.body.decode("ascii", "replace").partition(" ")
            self._opened_mtime = mtime if _MTIME.fullmatch(mtime) else None
            self._birth = birth if _MTIME.fullmatch(birth) else None
            return []
        if kind == "T":
            self._on_truncated(fields[0], path)
            return []
        if kind == "R":
            lines: list[str] = []
            rest = self._split.take_pending()
            if rest is not None:
                lines.append(rest)  # the rotated file's unterminated last line: it will not grow
            self._event(f"{self._reading or path} was rotated away after byte {fields[2]}: read to its end")
            mtime = frame.body.decode("ascii", "replace")
            self._after = mtime if _MTIME.fullmatch(mtime) else None
            if self._identity is not None:
                self._seen = [*self._seen, self._identity][-SEEN_KEPT:]
            self._identity = None
            self._split.reset(0)
            return lines
        if kind == "G":
            self._lose(
                f"{self._reading or path} (read up to byte {fields[2]} before the connection dropped) "
                "no longer exists on the host: lines written to it after that are lost; "
                f"going on with the files written after it, then {path}",
                fields[2], None,
            )
            self._identity = None
            # Still on the chain: a drop before the next O goes on from the lost file's mtime.
            self._after, self._opened_mtime = self._opened_mtime, None
            self._reading = ""
            self._split.reset(0)
            return []
        if kind in ("M", "U"):
            what = "file not found" if kind == "M" else "cannot read"
            self.status.detail = f"{what}: {path} on {self.target.label} (waiting for it)"
            self._missing_said = True
            self._event(self.status.detail)
            return []
        if kind == "X":
            what = "a directory" if frame.body == b"directory" else "not a regular file"
            raise _Fatal(self._not_a_file(what))
        return []  # H: a heartbeat

    def _on_truncated(self, size: int, path: str) -> None:
        offset = self._split.offset
        pending = self._split.pending_length
        if self._resumed:
            self._lose(
                f"{path} was truncated while disconnected (size {size} < offset {offset}): "
                "lines written to it before the truncation are lost; reading it again from the start",
                offset, None,
            )
        else:
            detail = f" ({pending} bytes of an unfinished line are lost)" if pending else ""
            self._event(f"{path} was truncated (size {size} < offset {offset}): reading it from the start{detail}")
            if pending:
                self.losses.append(Loss(self._reading or path, self._identity, offset, pending, "truncated"))
                self.status.lost += 1
        self._resumed = False
        self._split.reset(0)

    def _on_data(self, start: int, data: bytes, path: str) -> list[str]:
        """Bytes ``[start, start + len(data))``: check the overlap, feed the rest."""
        position = self._split.read_position
        overlap = position - start
        if overlap < 0 or overlap > 64:
            raise ProtocolError(f"data at {start}, expected {position}")
        if len(data) < overlap:
            return []  # the file shrank during the read: a T frame follows
        known = self._split.recent
        check = min(overlap, len(known))
        if data[overlap - check : overlap] != known[len(known) - check :]:
            # Same identity, other bytes before our offset: the file was replaced (inode
            # reused) or truncated and rewritten between two polls. Start it again.
            # The file keeps its identity: read that file (wherever it is now) from 0.
            self._lose(
                f"{self._reading or path} changed before byte {position} (replaced, or truncated and "
                "rewritten): reading it again from the start; lines written to the old content after "
                "that may be lost",
                self._split.offset, None,
            )
            self._split.reset(0)
            raise _Restart
        self._resumed = False
        new = data[overlap:]
        if new:
            self._modified_at = self._clock()  # written no earlier than the poll before this one
        self.status.bytes += len(new)
        before = self._split.overlong
        lines = self._split.feed(new)
        if self._split.overlong != before:
            self.status.overlong = self._split.overlong
            if before == 0:
                self._event(
                    f"a line of {self._split.longest:,} bytes was cut to {self._split.max_line:,} bytes "
                    "(the line cap); later over-long lines are counted in the status line"
                )
        return lines

    def _ended(self, ended: tuple[int, object], session: _TailSession) -> None:
        """Classify the end of the follow channel."""
        kind, exc = ended
        if kind == _WAKE or self._closed.is_set():
            return
        if isinstance(exc, asyncssh.Error):
            raise _Lost(f"connection lost: {exc.reason}")
        if isinstance(exc, BaseException):
            raise _Lost(f"connection lost: {exc}")
        if session.exit_status == 127:
            raise _Fatal(f"'sh' or a tool it needs was not found on {self.target.label}")
        how = f"signal {session.exit_signal}" if session.exit_signal else f"status {session.exit_status}"
        raise _Lost(f"the remote tail exited ({how})")

    def _deliver(self, lines: list[str]) -> None:
        self.status.lines += len(lines)
        self.status.last_line_at = self._clock()
        self.status.attempts = 0  # data flows again: the next drop starts a fresh backoff

    async def _probe(self, conn: asyncssh.SSHClientConnection, path: str, connected_at: float) -> None:
        """Every ``probe_interval`` s: measure latency (a silent log still shows a live link)."""
        while True:
            await asyncio.sleep(self._probe_interval)
            try:
                await self._stat(conn, path)
            except (OSError, asyncssh.Error, _Fatal):
                return  # the follow channel will report the loss (or the helper the directory)
            if time.monotonic() - connected_at >= self._backoff.cap:
                self.status.attempts = 0  # stable for a while: forget past failures
