"""A source with nothing to read yet: the log a server is about to write (the demo's first start)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from specmon.sources.base import ConnectionState, SourceStatus

__all__ = ["PendingSource"]


class PendingSource:
    """A source with nothing to read yet: the log the server is about to write.

    The dashboard shows its name and "starting the server"; the first restart
    switches to the real tail (reading the new log from its start, so no line
    is read twice).
    """

    def __init__(self, name: str, detail: str = "waiting for the server to start") -> None:
        self.name = name
        self.status = SourceStatus(state=ConnectionState.CONNECTING, detail=detail)
        self._closed = asyncio.Event()

    async def batches(self) -> AsyncIterator[list[str]]:
        """Yield nothing; end when closed."""
        await self._closed.wait()
        return
        yield  # type: ignore[unreachable]  # never runs: its presence makes this an async generator

    async def close(self) -> None:
        """End."""
        self._closed.set()
        self.status.state = ConnectionState.ENDED
