"""The follow channel's client session: its events on a queue, in arrival order, with flow control.

When the consumer (parser, UI) falls behind, reading the channel pauses and SSH's own
flow control slows the host's sender; it resumes once the queue has drained.
"""

from __future__ import annotations

import asyncio

import asyncssh

_PAUSE_ABOVE = 8 << 20  # stop reading the channel when this much is queued
_RESUME_BELOW = 1 << 20

#: Kinds of queue items: stdout bytes, stderr bytes, the channel closed, a wake-up (the source closing).
_OUT, _ERR, _CLOSED, _WAKE = range(4)


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
