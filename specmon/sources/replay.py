"""Replay saved logs as if they were being written now, paced by their own timestamps.

A :class:`ReplayClock` maps log time to wall time: at speed 1 a line stamped
ten seconds after the previous one is delivered ten seconds later; at speed 60
a ten-minute weight load passes in ten seconds; at ``speed=None`` ("max")
lines are delivered as fast as the consumer takes them. The clock is shared by
the :class:`ReplaySource` of every file in one replay, so pausing or changing
the speed from the dashboard acts on the whole replay.

Lines without a timestamp (tqdm progress bars, traceback lines) are delivered
with the stamped line before them. Timestamps that go backwards (several ranks
writing at once) are delivered at once. Each file starts its own time line:
the clock jumps to the first timestamp of the next file instead of waiting
for the gap between two logs written on different days.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path

from specmon.grammar.common import strip_ansi, strip_outer
from specmon.grammar.prefix import read_prefix
from specmon.sources.base import ConnectionState, SourceStatus
from specmon.sources.logfiles import LogFileError, check_readable, file_year, head_lines, iter_line_batches

__all__ = ["ReplayClock", "ReplaySource", "SPEED_STEPS", "first_time", "line_time", "speed_text", "time_ordered"]

#: The speeds the faster/slower keys step through; None is "as fast as possible".
SPEED_STEPS: tuple[float | None, ...] = (0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0,
                                         1000.0, None)
#: Below this, a "timestamp" is a bare time of day with no date: useless for pacing.
_PLAUSIBLE_EPOCH = 1e8
#: Longest wait between two checks of pause and speed (a key must act within this).
_MAX_NAP_S = 0.25


def speed_text(speed: float | None) -> str:
    """``10×``, ``0.5×`` or ``max``."""
    if speed is None:
        return "max"
    return f"{speed:g}×"


def line_time(text: str, year: int) -> float | None:
    """The timestamp a log line starts with (epoch seconds, naive time read as UTC), or None.

    Only the head of the line is read: a time inside the message (a tqdm
    ``[02:31<03:02]``) is not the line's time.
    """
    head = text[:96]
    if "\x1b" in head:
        head = strip_ansi(head)
    head, outer = strip_outer(head)
    if outer is not None:
        return outer
    ts, _ = read_prefix(head[:48], year)
    if ts is None or ts < _PLAUSIBLE_EPOCH:
        return None
    return ts


def first_time(path: str | Path, *, head_bytes: int = 1 << 20) -> float | None:
    """The time of the first stamped line in a log's head, or None (none there, unreadable)."""
    try:
        head = head_lines(path, head_bytes)
    except LogFileError:
        return None  # the source says why when it is replayed
    year = file_year(path)
    for text in head:
        ts = line_time(text, year)
        if ts is not None:
            return ts
    return None


def time_ordered(paths: Sequence[str | Path], times: Callable[[str | Path], float | None] = first_time,
                 ) -> list[str | Path]:
    """The logs in the order their servers wrote them: by first timestamp, not argument order.

    A shell glob (``sim_eagle3_*.log``) or a user's list puts ``10step`` before ``1step`` and
    a later restart before an earlier one; replaying them so would show the runs out of their
    real order. Files with no time of their own (recordings, unstamped logs) keep their place;
    the stamped ones are sorted among the places they hold (ties keep argument order).
    """
    stamped = [(t, i) for i, p in enumerate(paths) if (t := times(p)) is not None]
    out = list(paths)
    for slot, (_, i) in zip(sorted(i for _, i in stamped), sorted(stamped), strict=True):
        out[slot] = paths[i]
    return out


class ReplayClock:
    """Log time for a replay: pausable, with a speed that can change while it runs.

    Args:
        speed: Log seconds per wall second; None replays as fast as possible.
        monotonic: Wall clock (injected in tests).
        sleep: Awaitable sleep (injected in tests).
    """

    def __init__(
        self,
        speed: float | None = 1.0,
        *,
        monotonic: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
    ) -> None:
        self._speed = speed
        self._mono = monotonic
        self._sleep = sleep
        self._paused = False
        self._base_log: float | None = None
        self._base_wall = monotonic()
        self._changed: asyncio.Event | None = None

    # -- state -------------------------------------------------------------------------------

    @property
    def speed(self) -> float | None:
        """Current speed (None = max)."""
        return self._speed

    @property
    def paused(self) -> bool:
        """Whether the replay is paused."""
        return self._paused

    def log_now(self) -> float | None:
        """The log time the replay has reached, or None before the first timestamp."""
        if self._base_log is None:
            return None
        if self._paused or self._speed is None:
            return self._base_log
        return self._base_log + (self._mono() - self._base_wall) * self._speed

    def jump(self, ts: float) -> None:
        """Make ``ts`` the log time now (start of a file, first timestamp)."""
        self._base_log = ts
        self._base_wall = self._mono()

    def note(self, ts: float) -> None:
        """At max speed, remember the last delivered time (log time follows the data)."""
        if self._speed is None:
            self._base_log = ts

    # -- control -------------------------------------------------------------------------------

    def _rebase(self) -> None:
        now = self.log_now()
        if now is not None:
            self._base_log = now
        self._base_wall = self._mono()

    def _poke(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    def set_speed(self, speed: float | None) -> None:
        """Change the speed from now on (log time does not jump)."""
        self._rebase()
        self._speed = speed
        self._poke()

    def faster(self) -> float | None:
        """Step to the next faster speed; returns the new speed."""
        self.set_speed(_step(self._speed, +1))
        return self._speed

    def slower(self) -> float | None:
        """Step to the next slower speed; returns the new speed."""
        self.set_speed(_step(self._speed, -1))
        return self._speed

    def pause(self) -> None:
        """Stop log time; sources stop delivering."""
        if not self._paused:
            self._rebase()
            self._paused = True
            self._poke()

    def resume(self) -> None:
        """Let log time run again from where it stopped."""
        if self._paused:
            self._base_wall = self._mono()
            self._paused = False
            self._poke()

    def toggle(self) -> bool:
        """Pause or resume; returns whether paused now."""
        if self._paused:
            self.resume()
        else:
            self.pause()
        return self._paused

    # -- waiting -------------------------------------------------------------------------------

    async def _nap(self, seconds: float) -> None:
        """Sleep up to ``seconds``, waking early on pause, resume or a speed change."""
        if self._changed is None:
            self._changed = asyncio.Event()
        changed = asyncio.ensure_future(self._changed.wait())
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        try:
            await asyncio.wait({changed, sleeper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            changed.cancel()
            sleeper.cancel()

    async def wait_running(self) -> None:
        """Return when the replay is not paused."""
        while self._paused:
            await self._nap(3600.0)

    async def wait_until(self, ts: float) -> None:
        """Return when log time reaches ``ts`` (at once at max speed), honouring pauses."""
        while True:
            if self._paused:
                await self._nap(3600.0)
                continue
            now = self.log_now()
            if self._speed is None or now is None:
                return
            delta = (ts - now) / self._speed
            if delta <= 0:
                return
            await self._nap(min(delta, _MAX_NAP_S))


def _step(speed: float | None, direction: int) -> float | None:
    steps = SPEED_STEPS
    if speed is None:
        index = len(steps) - 1
    else:
        # The first step at or above the current speed (a speed given on the command line
        # need not be a step: from 3× slower is 2×, faster is 5×).
        index = next((i for i, s in enumerate(steps) if s is not None and s >= speed), len(steps) - 2)
        if steps[index] != speed and direction > 0:
            return steps[index]
    return steps[max(0, min(len(steps) - 1, index + direction))]


class ReplaySource:
    """A :class:`~specmon.sources.base.LineSource` that replays one log file.

    Iterating :meth:`batches` again replays the file again from its start
    (``--loop``).

    Args:
        path: The log file.
        clock: The replay clock shared by every file of one replay.
        max_batch: Most lines in one batch at max speed.
        wall_clock: Wall clock for ``status.last_line_at``.
    """

    def __init__(
        self,
        path: str | Path,
        clock: ReplayClock,
        *,
        max_batch: int = 4096,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self.path = Path(path)
        self.name = str(path)
        self.clock = clock
        self.status = SourceStatus()
        self.year = file_year(self.path)
        self._max_batch = max_batch
        self._wall = wall_clock
        self._closed = False
        self._jumped = False

    async def close(self) -> None:
        """Stop the replay (the current batch is the last)."""
        self._closed = True
        if self.status.state is not ConnectionState.FAILED:
            self.status.state = ConnectionState.ENDED

    def _deliver(self, lines: list[str]) -> list[str]:
        self.status.lines += len(lines)
        self.status.bytes += sum(map(len, lines)) + len(lines)
        self.status.last_line_at = self._wall()
        return lines

    async def batches(self) -> AsyncIterator[list[str]]:
        """Yield the file's lines, paced by the clock; ends at the end of the file."""
        self._closed = False
        try:
            check_readable(self.path)
        except LogFileError as exc:
            self.status.state = ConnectionState.FAILED
            self.status.detail = str(exc)
            self.status.events.append(str(exc))
            return
        self.status.state = ConnectionState.LIVE
        self.status.detail = f"replaying {self.path}"
        self._jumped = False  # the clock jumps to this file's first timestamp
        try:
            for chunk in iter_line_batches(self.path):
                # A turn for the loop per chunk read (a megabyte): a huge line being skipped, or
                # a file read at max speed, never holds the keys.
                await asyncio.sleep(0)
                i, n = 0, len(chunk)
                while i < n:
                    if self._closed:
                        return
                    await self.clock.wait_running()
                    if self.clock.speed is None:
                        out = chunk[i:i + self._max_batch]
                        i += len(out)
                        self._note_last_time(out)
                        yield self._deliver(out)
                        continue
                    j, due = self._due(chunk, i)
                    if j > i:
                        out = chunk[i:j]
                        i = j
                        yield self._deliver(out)
                    elif due is not None:
                        await self.clock.wait_until(due)
        except LogFileError as exc:
            self.status.state = ConnectionState.FAILED
            self.status.detail = str(exc)
            self.status.events.append(str(exc))
            return
        if self.status.state is not ConnectionState.FAILED:
            self.status.state = ConnectionState.ENDED
            self.status.detail = f"replay of {self.path} finished"

    def _note_last_time(self, lines: list[str]) -> None:
        # Only the last stamped line of a batch: switching from max back to a paced speed
        # must continue from where the data is, not from where pacing stopped.
        for text in reversed(lines[-64:]):
            ts = line_time(text, self.year)
            if ts is not None:
                self.clock.note(ts)
                self._jumped = True
                return

    def _due(self, chunk: list[str], i: int) -> tuple[int, float | None]:
        """How far lines from ``i`` on are due now: (end index, time of the first line not due)."""
        clock = self.clock
        now = clock.log_now()
        j, n = i, len(chunk)
        limit = i + self._max_batch
        while j < n and j < limit:
            ts = line_time(chunk[j], self.year)
            if ts is not None:
                if not self._jumped or now is None:
                    clock.jump(ts)
                    now = ts
                    self._jumped = True
                elif ts > now:
                    return j, ts
            j += 1
        return j, None
