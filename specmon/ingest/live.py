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
import copy
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from specmon.ingest.bulk import bulk_piece
from specmon.ingest.feeding import feed_piece
from specmon.ingest.files import ingest_lines
from specmon.model.session import Run, Session, SessionEvent
from specmon.parsing import LineParser
from specmon.recording_format import source_entry
from specmon.smallfile import open_bytes
from specmon.sources.base import ConnectionState, LineSource
from specmon.sources.logfiles import LogFileError
from specmon.sources.recorded import RecordingSource as RecordingSource
from specmon.sources.replay import ReplayClock

__all__ = ["FeedInput", "Feeder", "RecordingSource", "ingest_batch", "recording_inputs"]

#: Lines parsed between two checks of the time slice.
_SUB_BATCH = 512
#: A state that began this many log seconds before the newest line read was read from the log's past.
BACKLOG_S = 30.0
#: Below this many lines a batch is parsed line by line (a live tail delivers a few at a time).
_BULK_MIN = 64


def ingest_batch(session: Session, parser: LineParser, lines: list[str], lineno: int) -> int:
    """Parse lines into the session, in bulk when there are many.

    A replay at max speed or a reconnect backlog is mostly stats and access lines:
    :mod:`specmon.ingest.bulk` reads those with the templates of the shared grammar
    (the path ``summarize`` uses) and hands the rest to this source's line parser,
    so the session ends up exactly as with :func:`specmon.ingest.files.ingest_lines`.
    Returns the next line number.
    """
    if len(lines) >= _BULK_MIN:
        # bulk works on bytes (it reads files); one join/encode is C speed.
        raw = "\n".join(lines).encode("utf-8", errors="surrogateescape")
        if raw.count(b"\n") == len(lines) - 1 and b"\r" not in raw:
            before = copy.deepcopy(parser)  # the state to read the batch again as records, if need be
            piece = bulk_piece(raw, parser.engine, parser.year, parser=parser)
            feed_piece(session, piece, lineno - 1,
                       lambda: bulk_piece(raw, before.engine, before.year, records=True, parser=before))
            session.lines += len(lines)
            return lineno + len(lines)
    return ingest_lines(session, parser, lines, lineno)


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
    """Consumes sources into a :class:`~specmon.model.session.Session`.

    Args:
        inputs: The sources, in order.
        warmup: Session warm-up (None = engine default).
        loop: Start again from the first input, in a new session, after the last ends.
        replay_clock: The clock pacing a replay (None for live sources).
        clock: Wall clock (injected in tests).
        slice_s: Longest stretch of parsing before the event loop gets a turn.
        perf: High-resolution timer for the slices.
        recorder: A :class:`~specmon.output.recording.Recorder`: every line read, and where each
            input begins, is recorded (``specmon replay RECORDING`` rebuilds the same table).
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
        recorder: Any = None,
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
        self._guard_said: object = None  # the collapse guard's last change the recording holds
        self._last_ts_wall: float | None = None
        self._closing = False
        self.recorder = recorder
        self._rec_source = ""
        self._rec_year: int | None = None
        #: (session, run, state) -> wall time specmon saw the state begin (None: it was already old).
        self._state_seen: dict[tuple[int, int, str], float | None] = {}

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

    async def _recorder_caught_up(self) -> None:
        """Wait (keys and the screen running) while the recorder's writer encodes its backlog.

        A backlog read faster than the writer thread records it would otherwise be held in
        memory whole; bounded, so a writer that stopped cannot stall the ingest for long.
        """
        rec = self.recorder
        for _ in range(400):  # 2 s at most
            if rec is None or rec.closed or rec.backlog < rec.max_backlog // 2:
                return
            await asyncio.sleep(0.005)

    async def _consume(self, inp: FeedInput) -> None:
        self.current = inp
        session = self.session
        if self.recorder is not None:
            self._rec_year = inp.year
            self._record_beginnings(session)
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
                if self.recorder is not None:
                    self.recorder.batch(self._rec_source, lineno, part)
                    if self.recorder.backlog >= self.recorder.max_backlog:
                        await self._recorder_caught_up()
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

    def _record_beginnings(self, session: Session) -> None:
        """Record every ``begin_source`` of ``session``, wherever it is called from.

        A restart's log switch begins a new input from outside the feeder (the
        switching source's ``on_begin``); replay must begin it at the same line.
        """
        if self._on_begin_source in session.source_listeners:
            return
        session.source_listeners.append(self._on_begin_source)

    def _on_begin_source(self, name: str, baseline: bool) -> None:
        self._rec_source = name
        if self.recorder is not None:
            self.recorder.source(name, baseline=baseline, year=self._rec_year)

    def drain_events(self) -> None:
        """Move the current source's messages (rotation, truncation, connection lost, stderr)
        into the event log.

        Called after every batch, and by the UI on its timer: a source that is
        reconnecting delivers no batch, but what it says must still be seen. A recording
        keeps them too (``meta`` ``source-event`` entries, with the source's ``lost`` and
        ``overlong`` counts so far): a report of the session can say what was lost and why.
        """
        self._record_guard()
        status = self.current.source.status
        if status.events:
            messages = list(status.events)
            status.events.clear()
            level = "error" if status.state is ConnectionState.FAILED else "warning"
            replay = self.replay_clock is not None
            for text in messages:
                # Specmon's own words: the wall clock live, the log's position in a replay.
                self.session.events.append(SessionEvent(0, self._last_ts if replay else None, level, text,
                                                        received=None if replay else self._clock()))
                if self.recorder is not None:
                    self.recorder.meta("source-event", source=self._rec_source or self.current.source.name,
                                       level=level, text=text, lost=status.lost, overlong=status.overlong)

    def _record_guard(self) -> None:
        """The recording keeps each change of the collapse guard (``meta`` ``acceptance``): a report, a
        replay or a script reads when the drafter stopped paying without running the rule again."""
        run = self.session.current
        change = run.guard.state if run is not None else None
        if change is None or change is self._guard_said or self.recorder is None:
            return
        self._guard_said = change
        assert run is not None
        self.recorder.meta("acceptance", run=run.id, collapsed=change.collapsed, recent_gain=round(change.recent, 4),
                           level_gain=round(change.level, 4), log_t=change.t)

    def stamp_events(self) -> None:
        """Give the log's newest events the wall time they were read at (live sources only).

        A replay's events keep their log time alone: there, the log's clock is the story.
        """
        if self.replay_clock is not None:
            return
        now = self._clock()
        for e in reversed(self.session.events):
            if e.received is not None:
                break
            e.received = now

    def state_since(self) -> float | None:
        """When the current run entered its state, on the wall clock — if specmon saw it happen.

        None in a replay, and for a state already old when it was read (a log read from its
        start): then only the log can tell how long it has lasted.
        """
        run = self.session.current
        if run is None or self.replay_clock is not None:
            return None
        return self._state_seen.get(self._state_key(run))

    def _state_key(self, run: Run) -> tuple[int, int, str]:
        # Ready and serving are one stretch for the header (both count from "ready").
        state = "up" if run.state.value in ("ready", "serving") else run.state.value
        return (id(self.session), run.id, state)

    def _note_state(self) -> None:
        run = self.session.current
        if run is None or self.replay_clock is not None:
            return
        key = self._state_key(run)
        if key in self._state_seen:
            return
        began = (run.ready_at or run.started_at) if run.state.value in ("ready", "serving") else (
            run.last_at if run.state.value in ("crashed", "stopped") else run.started_at)
        if began is None or self._last_ts is None or self._last_ts - began > BACKLOG_S:
            self._state_seen[key] = None
        else:
            # Seen live: now, less the little the log had already run in it (its lines came in one batch).
            self._state_seen[key] = self._clock() - max(0.0, self._last_ts - began)

    def _after_batch(self, inp: FeedInput) -> None:
        self.stamp_events()
        self.drain_events()
        run = self.session.current
        ts = run.last_at if run is not None else None
        if ts is not None and ts != self._last_ts:
            self._last_ts = ts
            self._last_ts_wall = self._clock()
        self._note_state()


# -- replaying a recording (its source: specmon/sources/recorded.py) ---------------------------------

def recording_inputs(path: str | Path, clock: ReplayClock, *, wall_clock: Callable[[], float] = time.time,
                     baseline: bool = False) -> list[FeedInput]:
    """One :class:`FeedInput` per input the recording began, in order (the live session's boundaries).

    Args:
        path: A recording (:func:`specmon.output.recording.is_recording`).
        clock: The replay clock.
        wall_clock: Wall clock.
        baseline: Make every input a baseline input (``--baseline RECORDING``).
    """
    inputs: list[FeedInput] = []
    offset = 0
    # Checked as a recording before; opened without blocking and checked again (a FIFO put in its place).
    with open_bytes(Path(path), "recording", LogFileError) as f:
        for raw in f:
            offset += len(raw)
            if (entry := source_entry(raw)) is None:
                continue
            year = entry.get("year") if isinstance(entry.get("year"), int) else None
            src = RecordingSource(path, offset, str(entry.get("source", "")), clock, year=year, wall_clock=wall_clock)
            inputs.append(FeedInput(src, baseline=baseline or bool(entry.get("baseline")), year=year))
    if not inputs:  # lines but no source entry (a hand-made file): one input
        inputs.append(FeedInput(RecordingSource(path, 0, str(path), clock, wall_clock=wall_clock), baseline=baseline))
    return inputs
