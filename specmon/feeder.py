"""Drive line sources into the parser and the session: the dashboard's ingest loop.

The feeder takes whole batches from a source and parses them in bulk, but
gives the event loop a turn every few milliseconds (``slice_s``): a replay at
max speed or a reconnect that delivers a million lines of backlog must not
stop keys or the screen. It never renders anything; the UI reads the session
on its own timer.

Sources are consumed in order (``--baseline`` files first); each starts a new
input in the session, with its own parser (a parser remembers the engine and
traceback context of one log). With ``loop`` the inputs are replayed again,
into a fresh session: pooling the same log twice would double the evidence.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from specmon.fastscan import Piece, _bulk
from specmon.ingest import ingest_lines
from specmon.parsing import LineParser
from specmon.records import Engine
from specmon.session import Session, SessionEvent
from specmon.sources.base import ConnectionState, LineSource
from specmon.sources.replay import ReplayClock

__all__ = ["FeedInput", "Feeder", "ingest_batch"]

#: Lines parsed between two checks of the time slice.
_SUB_BATCH = 512
#: Below this many lines a batch is parsed line by line (a live tail delivers a few at a time).
_BULK_MIN = 64


def ingest_batch(session: Session, parser: LineParser, lines: list[str], lineno: int) -> int:
    """Parse lines into the session, in bulk when they are only standard SGLang stats lines.

    A replay at max speed or a reconnect backlog is mostly decode, prefill and
    access lines: :mod:`specmon.fastscan` reads those as columns with one regular
    expression (the path ``summarize`` uses) and falls back to the line parser
    for anything else, so the session ends up exactly as with
    :func:`specmon.ingest.ingest_lines`. Returns the next line number.
    """
    if len(lines) >= _BULK_MIN and not parser.in_traceback:
        piece = _bulk_piece(lines, parser)
        if piece is not None:
            session.counts["prefill"] += piece.prefill
            if piece.tput:
                parser.engine = Engine.SGLANG  # only SGLang decode lines take the bulk path
                session.ingest_decode_columns(piece.ranks, piece.ts, piece.running, piece.tput,
                                              piece.acc_len, piece.acc_rate, lineno, lineno + len(lines) - 1)
            session.lines += len(lines)
            return lineno + len(lines)
    return ingest_lines(session, parser, lines, lineno)


def _bulk_piece(lines: list[str], parser: LineParser) -> Piece | None:
    # fastscan works on bytes (it reads files); one join/encode/split is C speed.
    raw = "\n".join(lines).encode("utf-8", errors="surrogateescape").split(b"\n")
    if len(raw) != len(lines):
        return None  # a line held a newline of its own: count lines the slow, exact way
    return _bulk(raw, parser.engine, parser.year)


@dataclass
class FeedInput:
    """One source to consume, and how.

    Attributes:
        source: The lines.
        baseline: Whether its runs are the baseline (``--baseline FILE``).
        year: Year for vLLM's year-less timestamps (a file's modification year); None = this year.
    """

    source: LineSource
    baseline: bool = False
    year: int | None = None


class Feeder:
    """Consumes sources into a :class:`~specmon.session.Session`.

    Args:
        inputs: The sources, in order.
        warmup: Session warm-up (None = engine default).
        loop: Start again from the first input, in a new session, after the last ends.
        replay_clock: The clock pacing a replay (None for live sources).
        clock: Wall clock (injected in tests).
        slice_s: Longest stretch of parsing before the event loop gets a turn.
        perf: High-resolution timer for the slices.
    """

    def __init__(
        self,
        inputs: Sequence[FeedInput],
        *,
        warmup: int | None = None,
        loop: bool = False,
        replay_clock: ReplayClock | None = None,
        clock: Callable[[], float] = time.time,
        slice_s: float = 0.002,
        perf: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not inputs:
            raise ValueError("a feeder needs at least one source")
        self.inputs = list(inputs)
        self.warmup = warmup
        self.loop = loop
        self.replay_clock = replay_clock
        self.session = Session(warmup=warmup)
        #: Bumped each time the session is replaced (loop): views keyed on it start over.
        self.generation = 0
        self.current: FeedInput = self.inputs[0]
        self.lines = 0  # lines ingested, over every loop
        self.loops = 0
        self.error: str | None = None
        self._clock = clock
        self._slice = slice_s
        self._perf = perf
        self._finished: asyncio.Event | None = None
        self._done = False
        self._last_ts: float | None = None
        self._last_ts_wall: float | None = None
        self._closing = False

    # -- state for the UI ---------------------------------------------------------------------

    @property
    def done(self) -> bool:
        """Whether every input has ended (never, with ``loop``, unless it failed)."""
        return self._done

    async def wait_finished(self) -> None:
        """Return when :attr:`done` (tests wait on this before a snapshot)."""
        if self._done:
            return
        if self._finished is None:
            self._finished = asyncio.Event()
        await self._finished.wait()

    @property
    def source(self) -> LineSource:
        """The source being read now (the last one, once done)."""
        return self.current.source

    def log_now(self) -> float | None:
        """How far the log has got, in log time.

        A paced replay says where its clock is; a live source adds the wall
        time since its last stamped line (a server loading weights for ten
        minutes prints little, but the elapsed time must move); a replay at
        max speed, or a finished one, is where its data ended.
        """
        rc = self.replay_clock
        if rc is not None:
            if rc.speed is not None and not self._done:
                now = rc.log_now()
                if now is not None:
                    return now
            return self._last_ts
        if self._last_ts is None or self._last_ts_wall is None:
            return None
        if self.source.status.state is not ConnectionState.LIVE:
            return self._last_ts
        return self._last_ts + max(0.0, self._clock() - self._last_ts_wall)

    # -- running ---------------------------------------------------------------------------------

    async def run(self) -> None:
        """Consume every input (again and again with ``loop``); returns when done or closed."""
        try:
            while True:
                for inp in self.inputs:
                    if self._closing:
                        return
                    await self._consume(inp)
                if not self.loop or self._closing:
                    return
                self.loops += 1
                self.session = Session(warmup=self.warmup)
                self.generation += 1
                self._last_ts = self._last_ts_wall = None
        finally:
            self._done = True
            if self._finished is not None:
                self._finished.set()

    async def close(self) -> None:
        """Stop reading and close the current source."""
        self._closing = True
        await self.current.source.close()

    async def _consume(self, inp: FeedInput) -> None:
        self.current = inp
        session = self.session
        session.begin_source(inp.source.name, baseline=inp.baseline)
        parser = LineParser(year=inp.year)
        batches = inp.source.batches()
        try:
            await self._ingest(inp, batches, session, parser)
        finally:
            # Leaving early (close) must still run the source's clean-up (its open file).
            aclose = getattr(batches, "aclose", None)
            if aclose is not None:
                await aclose()
        self._after_batch(inp)

    async def _ingest(self, inp: FeedInput, batches: AsyncIterator[list[str]], session: Session,
                      parser: LineParser) -> None:
        lineno = 1
        perf, budget = self._perf, self._slice
        started = perf()
        async for batch in batches:
            for i in range(0, len(batch), _SUB_BATCH):
                part = batch[i:i + _SUB_BATCH]
                lineno = ingest_batch(session, parser, part, lineno)
                self.lines += len(part)
                if perf() - started > budget:
                    # Give keys, timers and the screen a turn; then parse on.
                    self._after_batch(inp)
                    await asyncio.sleep(0)
                    started = perf()
            self._after_batch(inp)
            if self._closing:
                break

    def drain_events(self) -> None:
        """Move the current source's messages (rotation, truncation, connection lost, stderr)
        into the event log.

        Called after every batch, and by the UI on its timer: a source that is
        reconnecting delivers no batch, but what it says must still be seen.
        """
        status = self.current.source.status
        if status.events:
            messages = list(status.events)
            status.events.clear()
            level = "error" if status.state is ConnectionState.FAILED else "warning"
            for text in messages:
                self.session.events.append(SessionEvent(0, self._last_ts, level, text))

    def _after_batch(self, inp: FeedInput) -> None:
        self.drain_events()
        run = self.session.current
        ts = run.last_at if run is not None else None
        if ts is not None and ts != self._last_ts:
            self._last_ts = ts
            self._last_ts_wall = self._clock()
