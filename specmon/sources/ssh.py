"""Follow a remote log over SSH, surviving network drops without losing or repeating lines.

How it reads
    On the first connection the source ``stat``\\ s the file (inode, size S),
    reads the last N lines *of the first S bytes* with one bounded command, and
    then follows from byte S with ``exec tail -c +S+1 -F -- <path>`` on one
    channel. That is ``tail -F -n N`` split in two so the byte offset of
    every delivered line is known exactly. ``exec`` makes the remote tail die
    with the channel's shell; nothing relies on signals (OpenSSH refuses them
    for root sessions).

What it tracks
    The byte offset just past the last *complete* line delivered (a partial
    last line is held back until its newline arrives) and the file's inode.

Reconnecting
    On a lost connection it retries with full-jitter exponential backoff
    (base 1 s, factor 2, cap 30 s; ``status.retry_at`` drives the header's
    countdown). After reconnecting it ``stat``\\ s the file again:

    * same inode, size >= offset, and the last 64 bytes before the offset
      unchanged: resume with ``tail -c +offset+1 -F``. No line is lost and none
      is delivered twice (the held-back partial line is re-read whole).
    * same inode number but those bytes differ (deleted and recreated: inode
      numbers get reused): read the new file from 0, with an event.
    * another inode (rotated while away): the old file is looked for by inode
      next to the log (``server.log.1`` etc.). If found, what was written to it
      after the offset is delivered first ("recovered N lines" event); if not,
      an event says lines may be missing. Then the new file is read from 0.
    * size < offset (truncated while away): read again from 0, with an event.
    * file missing: an event; ``tail -F`` waits for it to reappear.

    Authentication, host-key and configuration failures are never retried:
    the source goes to ``FAILED`` with the explanation in ``status.detail``.

Rotation while connected
    ``tail -F`` follows it and reports it on stderr ("has been replaced",
    "file truncated", "has appeared"); the source then resets its offset to 0
    and learns the new inode. stdout and stderr travel as separate streams,
    so this reset is best effort: if the link also drops within moments of a
    rotation, the resume position may be off by what arrived in between (the
    reconnect checks above still catch a shrunken or replaced file).

Status
    ``bytes`` (all bytes received), ``lines``, ``last_line_at`` (so a silent
    server is visible), ``latency_ms`` (round trip of a small ``stat`` exec,
    repeated every ``probe_interval`` seconds, which also proves the link is
    alive), ``attempts`` and ``retry_at``. Remote stderr lines and every
    connection change are appended to ``events``; the exact commands run on
    the host are announced there before they run.

Remote requirements: a POSIX shell with GNU-style ``stat -c``, ``tail -F``,
``head -c`` and ``find -inum`` (any Linux host).
"""

from __future__ import annotations

import asyncio
import posixpath
import random
import shlex
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, cast

import asyncssh

from specmon.sources.base import ConnectionState, SourceStatus
from specmon.sources.lines import LineSplitter
from specmon.ssh.connect import SSHError, SSHLink, SSHTarget, connect, target_from_options

if TYPE_CHECKING:
    from specmon.sources.base import LogProfile
    from specmon.ssh.connect import HostProfile

    class RemoteLogProfile(HostProfile, LogProfile, Protocol):
        """Where the host is and where its log is: what ``specmon connect`` reads."""

__all__ = ["Backoff", "SSHTailSource", "build_ssh_source", "status_line", "tail_command"]

DEFAULT_LINES = 1000
_MAX_BATCH_BYTES = 1 << 20
_PAUSE_ABOVE = 8 << 20  # stop reading the channel when this much is queued
_RESUME_BELOW = 1 << 20
_MAX_RECOVER_BYTES = 64 << 20


class Backoff:
    """Full-jitter exponential backoff: ``uniform(0, min(cap, base * factor**(n-1)))``.

    Args:
        base: Ceiling of the first delay, seconds.
        factor: Growth of the ceiling per attempt.
        cap: Largest ceiling.
        rand: ``random.random``-like function (injected in tests).
    """

    def __init__(
        self,
        base: float = 1.0,
        factor: float = 2.0,
        cap: float = 30.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.base = base
        self.factor = factor
        self.cap = cap
        self._rand = rand

    def ceiling(self, attempt: int) -> float:
        """Largest delay before attempt ``attempt`` (1-based)."""
        return min(self.cap, self.base * self.factor ** max(0, attempt - 1))

    def delay(self, attempt: int) -> float:
        """A random delay in ``[0, ceiling(attempt)]``."""
        return self._rand() * self.ceiling(attempt)


def tail_command(path: str, offset: int) -> str:
    """The follow command: from byte ``offset`` (0-based) of ``path``, forever.

    >>> tail_command("/var/log/my server.log", 0)
    "exec tail -c +1 -F -- '/var/log/my server.log'"
    """
    return f"exec tail -c +{offset + 1} -F -- {shlex.quote(path)}"


_OUT, _ERR, _CLOSED, _WAKE = range(4)


def _stdout_bytes(out: bytes | str | None) -> bytes:
    """A command's output run with ``encoding=None``: asyncssh types it ``bytes | str``."""
    if isinstance(out, str):  # not with encoding=None; encoded rather than lost if it ever is
        return out.encode("utf-8", "surrogateescape")
    return out or b""


class _TailSession(asyncssh.SSHClientSession[bytes]):
    """Puts channel events on a queue in arrival order, with flow control."""

    def __init__(self, queue: asyncio.Queue[tuple[int, object]]) -> None:
        self._queue = queue
        self._chan: asyncssh.SSHClientChannel[bytes] | None = None
        self._queued = 0
        self._paused = False
        self.exit_status: int | None = None
        self.exit_signal: str | None = None

    def connection_made(self, chan: asyncssh.SSHClientChannel[bytes]) -> None:
        self._chan = chan

    def data_received(self, data: bytes, datatype: asyncssh.DataType) -> None:
        kind = _ERR if datatype == asyncssh.EXTENDED_DATA_STDERR else _OUT
        self._queue.put_nowait((kind, data))
        self._queued += len(data)
        if self._queued > _PAUSE_ABOVE and not self._paused and self._chan is not None:
            # The consumer (parser/UI) is behind: let SSH flow control slow the sender.
            self._chan.pause_reading()
            self._paused = True

    def consumed(self, size: int) -> None:
        """Account for bytes taken off the queue; resume reading when drained."""
        self._queued -= size
        if self._paused and self._queued < _RESUME_BELOW and self._chan is not None:
            self._chan.resume_reading()
            self._paused = False

    def exit_status_received(self, status: int) -> None:
        self.exit_status = status

    def exit_signal_received(self, signal: str, core_dumped: bool, msg: str, lang: str) -> None:
        self.exit_signal = signal

    def connection_lost(self, exc: Exception | None) -> None:
        self._queue.put_nowait((_CLOSED, exc))


@dataclass(slots=True)
class _FileInfo:
    inode: int
    size: int


class _Fatal(Exception):
    """A problem reconnecting cannot fix (missing ``tail``, no log found)."""


class _Lost(Exception):
    """The follow channel ended; reconnect."""


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
    ) -> None:
        if path is None and not log_glob:
            raise ValueError("SSHTailSource needs a path or a log_glob")
        self.target = target
        self.path = path
        self.log_glob = log_glob
        self.name = f"{target.label}:{path or log_glob}"
        self.status = SourceStatus()
        self._lines = lines
        self._backoff = backoff or Backoff()
        self._clock = clock
        self._sleep = sleep
        self._probe_interval = probe_interval
        self._split = LineSplitter()
        self._err = LineSplitter()
        self._inode: int | None = None
        self._positioned = False
        self._closed = asyncio.Event()
        self._link: SSHLink | None = None
        self._queue: asyncio.Queue[tuple[int, object]] | None = None
        self._tasks: set[asyncio.Task[None]] = set()  # fire-and-forget work, kept referenced

    @property
    def position(self) -> tuple[int | None, int]:
        """``(inode, offset)``: the file and byte offset the next resume starts from."""
        return self._inode, self._split.offset

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
                    if not exc.retryable:
                        self._fail(str(exc))
                        return
                    if not await self._wait_retry(str(exc)):
                        return
                    continue
                if link is None:
                    return  # closed while connecting
                self._link = link
                try:
                    async for batch in self._follow(link.conn):
                        yield batch
                    reason = "the remote tail ended"
                except _Fatal as exc:
                    self._fail(str(exc))
                    return
                except _Lost as exc:
                    reason = str(exc)
                except (asyncssh.Error, OSError) as exc:
                    reason = f"connection lost: {getattr(exc, 'reason', None) or exc}"
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
        """Stop following and close the connection (the remote tail exits with it)."""
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
        """``(inode, size)`` of the file, or None when it does not exist; measures latency."""
        started = time.monotonic()
        result = await self._run(conn, shlex.join(["stat", "-L", "-c", "%i %s", "--", path]))
        self.status.latency_ms = (time.monotonic() - started) * 1000.0
        if result.exit_status != 0:
            return None
        try:
            inode, size = _stdout_bytes(result.stdout).split()
            return _FileInfo(int(inode), int(size))
        except ValueError:
            raise _Fatal(f"unexpected output from stat on {self.target.label}: {result.stdout!r}") from None

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
        for line in _stdout_bytes(result.stdout).decode("utf-8", "replace").splitlines():
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
        data = _stdout_bytes(result.stdout) if result.exit_status == 0 else b""
        if first > 1 and len(data) == length:
            # The window holds fewer than `count` lines; its first one may be cut.
            newline = data.find(b"\n")
            data = data[newline + 1 :] if newline >= 0 else b""
        return data, size - len(data)

    async def _recover_rotated(self, conn: asyncssh.SSHClientConnection, path: str) -> list[str]:
        """Deliver what the rotated-away old file got after our offset, if it can be found."""
        offset, inode = self._split.offset, self._inode
        if inode is None:
            self._event(f"{path} changed while disconnected; lines written meanwhile may be missing")
            return []
        directory = posixpath.dirname(path) or "."
        if directory.startswith("-"):
            directory = "./" + directory
        found = await self._run(
            conn, shlex.join(["find", directory, "-maxdepth", "1", "-inum", str(inode), "-type", "f"])
        )
        names = _stdout_bytes(found.stdout).decode("utf-8", "replace").splitlines()
        if not names:
            self._event(
                f"{path} was rotated while disconnected and the old file is gone: "
                f"lines written to it after byte {offset} may be missing"
            )
            return []
        old = names[0]
        result = await self._run(
            conn, f"tail -c +{offset + 1} -- {shlex.quote(old)} | head -c {_MAX_RECOVER_BYTES}"
        )
        data = _stdout_bytes(result.stdout)
        self.status.bytes += len(data)
        recover = LineSplitter(offset)
        lines = recover.feed(data)
        if recover.pending:
            lines.append(recover.pending.decode(recover.encoding, errors="replace"))
        self._event(f"{path} was rotated while disconnected: recovered {len(lines)} lines from {old}")
        return lines

    async def _position(self, conn: asyncssh.SSHClientConnection, path: str) -> list[str]:
        """Decide where to follow from; return lines to deliver first (history/recovered)."""
        info = await self._stat(conn, path)
        if not self._positioned:
            self._positioned = True
            if info is None:
                self._split.reset(0)
                self._inode = None
                return []
            data, start = await self._history(conn, path, info.size)
            self._inode = info.inode
            self._split.reset(start)
            self.status.bytes += len(data)
            return self._split.feed(data)
        offset = self._split.offset
        if info is None:
            lines = await self._recover_rotated(conn, path)
            self._event(f"{path} is missing after reconnecting; waiting for it to reappear")
            self._split.reset(0)
            self._inode = None
            return lines
        if self._inode is not None and info.inode != self._inode:
            lines = await self._recover_rotated(conn, path)
            self._event(f"{path} is a new file: following it from its start")
            self._split.reset(0)
            self._inode = info.inode
            return lines
        self._inode = info.inode
        if info.size < offset:
            self._event(
                f"{path} was truncated while disconnected (size {info.size} < offset {offset}): "
                "reading it again from the start; lines written before the truncation may be missing"
            )
            self._split.reset(0)
            return []
        if not await self._same_content(conn, path):
            # Same inode number but other bytes: the file was deleted and recreated (inode
            # reused) or rewritten. The old content is gone; say so rather than skip silently.
            self._event(
                f"{path} was replaced while disconnected (its content before byte {offset} changed): "
                "following the new file from its start; lines written to the old one may be missing"
            )
            self._split.reset(0)
            return []
        self._event(f"resuming {path} at byte {offset}")
        return []

    async def _same_content(self, conn: asyncssh.SSHClientConnection, path: str) -> bool:
        """Do the bytes just before the offset still match what was delivered?"""
        known = self._split.tail
        if not known:
            return True  # nothing to compare (e.g. resumed at 0)
        start = self._split.offset - len(known) + 1
        result = await self._run(conn, f"tail -c +{start} -- {shlex.quote(path)} | head -c {len(known)}")
        return result.exit_status == 0 and _stdout_bytes(result.stdout) == known

    # -- following ----------------------------------------------------------------

    async def _follow(self, conn: asyncssh.SSHClientConnection) -> AsyncIterator[list[str]]:
        """Position, then stream the tail channel until it ends."""
        if self.path is None:
            self.path = await self._discover(conn)
            self.name = f"{self.target.label}:{self.path}"
        path = self.path
        first = await self._position(conn, path)
        command = tail_command(path, self._split.read_position)
        self._event(f"running on {self.target.label}: {command}")
        queue: asyncio.Queue[tuple[int, object]] = asyncio.Queue()
        self._queue = queue
        session = _TailSession(queue)
        chan, _ = await conn.create_session(lambda: session, command, encoding=None)
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
                size = len(payload) if kind == _OUT else 0  # type: ignore[arg-type]
                while size < _MAX_BATCH_BYTES and not queue.empty():
                    item = queue.get_nowait()
                    items.append(item)
                    if item[0] == _OUT:
                        size += len(item[1])  # type: ignore[arg-type]
                lines: list[str] = []
                ended: tuple[int, object] | None = None
                for kind, payload in items:
                    if kind == _OUT:
                        data = cast(bytes, payload)  # _OUT and _ERR events carry the bytes received
                        session.consumed(len(data))
                        self.status.bytes += len(data)
                        lines.extend(self._split.feed(data))
                    elif kind == _ERR:
                        data = cast(bytes, payload)  # _OUT and _ERR events carry the bytes received
                        session.consumed(len(data))
                        for text in self._err.feed(data):
                            self._stderr_line(text, conn)
                    else:
                        ended = (kind, payload)
                        break
                if lines:
                    self._deliver(lines)
                    yield lines
                if ended is not None:
                    self._ended(ended, session)
                    return
        finally:
            probe.cancel()
            self._queue = None
            chan.close()

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
            raise _Fatal(f"'tail' was not found on {self.target.label}")
        how = f"signal {session.exit_signal}" if session.exit_signal else f"status {session.exit_status}"
        raise _Lost(f"the remote tail exited ({how})")

    def _deliver(self, lines: list[str]) -> None:
        self.status.lines += len(lines)
        self.status.last_line_at = self._clock()
        self.status.attempts = 0  # data flows again: the next drop starts a fresh backoff

    def _stderr_line(self, text: str, conn: asyncssh.SSHClientConnection) -> None:
        """Turn ``tail -F``'s stderr into events and state; keep the offset right."""
        self._event(f"remote: {text}")
        lowered = text.lower()
        path = self.path or ""
        if "no such file" in lowered or "cannot open" in lowered or "has become inaccessible" in lowered:
            self.status.detail = f"file not found: {path} (waiting for it to appear)"
        elif "has appeared" in lowered or "has been replaced" in lowered or "file truncated" in lowered:
            # tail now reads the (new or truncated) file from its start: so do our
            # offsets. GNU tail reports a rename+recreate as either message, so the
            # inode is learned again in both cases.
            self._split.reset(0)
            self._inode = None
            self.status.detail = f"following {path}"
            task = asyncio.ensure_future(self._learn_inode(conn, path))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _learn_inode(self, conn: asyncssh.SSHClientConnection, path: str) -> None:
        """After tail switched files, record the new inode for the next resume."""
        try:
            info = await self._stat(conn, path)
        except (OSError, asyncssh.Error, _Fatal):
            return
        if info is not None and self._inode is None:
            self._inode = info.inode

    async def _probe(self, conn: asyncssh.SSHClientConnection, path: str, connected_at: float) -> None:
        """Every ``probe_interval`` s: measure latency (a silent log still shows a live link)."""
        while True:
            await asyncio.sleep(self._probe_interval)
            try:
                info = await self._stat(conn, path)
            except (OSError, asyncssh.Error, _Fatal):
                return  # the follow channel will report the loss
            if info is not None and self._inode is None:
                self._inode = info.inode
            if time.monotonic() - connected_at >= self._backoff.cap:
                self.status.attempts = 0  # stable for a while: forget past failures


def build_ssh_source(
    destination: str | None,
    *,
    log: str | None = None,
    profile: RemoteLogProfile | None = None,
    port: int | None = None,
    identity: str | None = None,
    jump: str | None = None,
    ssh_config: str | None = None,
    lines: int | None = None,
) -> SSHTailSource:
    """Build the source for ``specmon connect`` from CLI options and a profile.

    Options win over the profile. Nothing is connected here.

    Args:
        destination: ``[USER@]HOST[:PORT]`` or an ssh alias; None = the profile's host.
        log: ``--log PATH``; else the profile's ``log``; else its ``log_glob``.
        profile: The selected profile, if any.
        port: ``-p/--port``.
        identity: ``-i/--identity``.
        jump: ``-J/--jump``.
        ssh_config: An OpenSSH client config file instead of ``~/.ssh/config``.
        lines: History lines to show first (default: profile's, else 1000).

    Raises:
        ValueError: no host, no log and no glob, or invalid values; the message
            says exactly what to pass.
    """
    target = target_from_options(
        destination, profile=profile, port=port, identity=identity, jump=jump, ssh_config=ssh_config
    )
    path = log or (profile.log if profile else None)
    glob = profile.log_glob if profile else None
    if not path and not glob:
        raise ValueError(
            f"which log? pass it: specmon connect {target.label} --log /path/to/server.log "
            "(or set 'log' or 'log_glob' in a profile)"
        )
    if path is not None and (not path.strip() or any(ord(c) < 32 or c == "\x7f" for c in path)):
        raise ValueError(f"invalid log path {path!r}")
    if lines is None:
        lines = profile.lines if profile and profile.lines is not None else DEFAULT_LINES
    return SSHTailSource(target, path, log_glob=None if path else glob, lines=lines)


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"  # unreachable; keeps type checkers calm


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"


def status_line(status: SourceStatus, now: float) -> str:
    """One line for the header: state, latency, bytes, time since the last line.

    Works for any source's :class:`SourceStatus` (pure; the UI calls it on its
    timer with ``now = time.time()``), e.g.
    ``live · 12 ms · 1.2 MB · 3,042 lines · last line 4s ago`` or
    ``reconnecting in 7s (attempt 3) · connection lost: ...``.
    """
    parts: list[str] = []
    state = status.state
    if state is ConnectionState.RECONNECTING and status.retry_at is not None:
        parts.append(f"reconnecting in {max(0.0, status.retry_at - now):.0f}s (attempt {status.attempts})")
    else:
        parts.append(state.value)
    if state is ConnectionState.LIVE and status.latency_ms is not None:
        parts.append(f"{status.latency_ms:.0f} ms")
    parts.append(_size(status.bytes))
    parts.append(f"{status.lines:,} lines")
    if status.last_line_at is None:
        parts.append("no line yet")
    else:
        parts.append(f"last line {_ago(now - status.last_line_at)} ago")
    if (state is not ConnectionState.LIVE or not status.detail.startswith("following")) and status.detail:
        # The reason (countdown already shown) or a warning such as a missing file.
        parts.append(status.detail.split("; retrying in", 1)[0])
    return " · ".join(parts)
