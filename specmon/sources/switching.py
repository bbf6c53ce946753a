"""A line source that follows one log, and another one when a restart says so (:class:`SwitchingSource`)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

from specmon.sources.base import LineSource, SourceStatus

#: ``(path, from_start) -> LineSource``: a local or SSH tail of ``path``, read
#: from its start (a new or truncated log) or from its current end.
SourceFactory = Callable[[str, bool], LineSource]


class SwitchingSource:
    """A line source that follows one log, and another one when a restart says so.

    The dashboard reads one source; a restart may move the server's output to a
    new file (``sim_{steps}step.log``) or truncate the old one. :meth:`switch`
    closes the current tail and opens the next through the injected factory.
    Lines the old tail had already read are still delivered first; then
    ``on_begin(name)`` is called — the dashboard starts a new input in its
    session there — and the new log's lines follow.

    Args:
        first: The source followed at first.
        factory: Builds the next one: ``(path, from_start) -> LineSource``.
        on_begin: Called with the new source's name before its first line.
    """

    def __init__(self, first: LineSource, factory: SourceFactory,
                 on_begin: Callable[[str], None] | None = None) -> None:
        self._inner = first
        self._factory = factory
        self.on_begin = on_begin
        self._changed = asyncio.Event()
        self._closed = False
        self.switches = 0

    @property
    def name(self) -> str:
        """The current log's name (the header shows it)."""
        return self._inner.name

    @property
    def status(self) -> SourceStatus:
        """The current tail's status."""
        return self._inner.status

    @property
    def inner(self) -> LineSource:
        """The source followed now."""
        return self._inner

    async def batches(self) -> AsyncIterator[list[str]]:
        """Lines of the current log; after a switch, of the next (until :meth:`close`)."""
        while not self._closed:
            inner = self._inner
            gen = inner.batches()
            try:
                async for batch in gen:
                    yield batch
            finally:
                aclose = getattr(gen, "aclose", None)
                if aclose is not None:
                    await aclose()
            if self._is_closed():
                return
            if inner is self._inner:
                # The tail ended by itself (a failed source): wait for a switch or the end.
                self._changed.clear()
                await self._changed.wait()
                if self._is_closed():
                    return
            if self.on_begin is not None:
                self.on_begin(self._inner.name)

    def _is_closed(self) -> bool:
        # A method, not the attribute: close() runs while batches() awaits, which a
        # narrowed ``self._closed`` (False since the loop test) would hide from mypy.
        return self._closed

    async def switch(self, path: str, from_start: bool) -> None:
        """Follow ``path`` from now on (from its start, or from its current end)."""
        if self._closed:
            return
        old = self._inner
        self._inner = self._factory(path, from_start)
        self.switches += 1
        self._changed.set()
        await old.close()

    async def close(self) -> None:
        """Stop following."""
        self._closed = True
        self._changed.set()
        await self._inner.close()
