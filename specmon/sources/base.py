"""The one protocol every line source follows: SSH tail, local tail, replay, simulator.

A source yields *batches* of complete lines (a list per read, never a partial
line) from an async iterator, and keeps a :class:`SourceStatus` up to date that
the UI polls on its timer. Batching matters: a burst of 50,000 lines arrives as
a few lists, not 50,000 awaits.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol, runtime_checkable


class ConnectionState(str, Enum):
    """Where a source stands."""

    CONNECTING = "connecting"
    LIVE = "live"
    RECONNECTING = "reconnecting"  # waiting for the next attempt (see retry_at)
    ENDED = "ended"  # the input ended (replay finished, file closed)
    FAILED = "failed"  # gave up: authentication, host key, missing file, ...


@dataclass(slots=True)
class SourceStatus:
    """Latest-value state of a source, read by the UI at its refresh rate."""

    state: ConnectionState = ConnectionState.CONNECTING
    detail: str = ""  # a human sentence: "file not found: /x/server.log"
    lines: int = 0  # complete lines delivered so far
    bytes: int = 0  # bytes received so far
    last_line_at: float | None = None  # time.time() of the last delivered line
    retry_at: float | None = None  # time.time() of the next reconnect attempt
    attempts: int = 0  # consecutive failed attempts
    latency_ms: float | None = None  # round trip, where the source can measure it
    lost: int = 0  # reports of bytes destroyed on the host before they could be read
    overlong: int = 0  # lines longer than the line cap, delivered cut to it
    events: list[str] = field(default_factory=list)  # messages for the event log (stderr, ...)


class LogProfile(Protocol):
    """What a tail reads from a profile (:class:`specmon.config.Profile` has these).

    A protocol, not the config model: sources sit below the config, which also
    holds launch profiles (control), so they name only the fields they read.
    """

    @property
    def log(self) -> str | None: ...
    @property
    def log_glob(self) -> str | None: ...
    @property
    def lines(self) -> int | None: ...
    @property
    def line_cap(self) -> int | None: ...


@runtime_checkable
class LineSource(Protocol):
    """A source of complete log lines."""

    # Read-only for readers of a source (a property or a plain attribute both satisfy it):
    # a source that follows another (the switching source) forwards the current one's.
    @property
    def name(self) -> str:
        """What the header shows: ``host:path``, a file path, ``replay: a.log``."""
        ...

    @property
    def status(self) -> SourceStatus:
        """Connection state, as the header and event log show it."""
        ...

    def batches(self) -> AsyncIterator[list[str]]:
        """Yield lists of complete lines, without their line endings, in order."""
        ...

    async def close(self) -> None:
        """Stop reading and release the connection or file."""
        ...


async def stop_reading(source: LineSource | None, task: asyncio.Task[Any] | None, timeout: float = 5.0) -> None:
    """Close a source, then give the task that reads it ``timeout`` seconds to end.

    A task that does not end in time is cancelled; one that failed is not re-raised:
    stopping a tail must never turn a restart or a sweep into a traceback.
    """
    if source is not None:
        await source.close()
    if task is None:
        return
    try:
        await asyncio.wait_for(task, timeout)
    except (TimeoutError, asyncio.CancelledError):
        task.cancel()
    except Exception:
        pass
