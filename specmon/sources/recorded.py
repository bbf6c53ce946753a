"""The recorded lines of one input of a recording, as a line source (replay of a recording).

A recording (:mod:`specmon.output.recording`) is JSONL: ``line`` entries hold the raw lines
as received, ``meta``/``source`` entries mark where each input began. This source yields
one input's lines, paced by their own log timestamps on a shared :class:`ReplayClock`.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

from specmon.recording_format import line_text, source_entry
from specmon.smallfile import InputError, open_input
from specmon.sources.base import ConnectionState, SourceStatus
from specmon.sources.replay import ReplayClock, line_time

__all__ = ["RecordingSource"]


class RecordingSource:
    """The recorded lines of one input of a recording, paced by their log timestamps.

    Args:
        path: The recording.
        offset: Where the input's lines start in the file (after its ``source`` entry).
        name: The recorded source name.
        clock: The replay clock shared by the whole replay.
        year: Year for year-less timestamps (as recorded).
        wall_clock: Wall clock for ``status.last_line_at``.
        max_batch: Most lines in one batch.
    """

    def __init__(self, path: str | Path, offset: int, name: str, clock: ReplayClock, *, year: int | None = None,
                 wall_clock: Callable[[], float] = time.time, max_batch: int = 4096) -> None:
        self.path = Path(path)
        self.offset = offset
        self.name = name
        self.clock = clock
        self.year = year if year is not None else time.gmtime().tm_year
        self.status = SourceStatus()
        self._wall = wall_clock
        self._max = max_batch
        self._closed = False

    async def close(self) -> None:
        """Stop (the current batch is the last)."""
        self._closed = True
        self.status.state = ConnectionState.ENDED

    def _deliver(self, lines: list[str]) -> list[str]:
        self.status.lines += len(lines)
        self.status.last_line_at = self._wall()
        for text in reversed(lines[-64:]):
            ts = line_time(text, self.year)
            if ts is not None:
                self.clock.note(ts)
                break
        return lines

    async def batches(self) -> AsyncIterator[list[str]]:
        """Yield the input's lines until the next input of the recording begins."""
        self._closed = False
        self.status.state = ConnectionState.LIVE
        self.status.detail = f"replaying {self.path}"
        clock, jumped = self.clock, False
        out: list[str] = []
        damaged = 0
        try:
            # Without blocking, its type checked once open: a FIFO put in its place is a sentence.
            fd, _ = open_input(self.path, "recording")
        except OSError as exc:
            self.status.state = ConnectionState.FAILED
            self.status.detail = str(exc) if isinstance(exc, InputError) else f"{self.path}: {exc.strerror or exc}"
            return
        f = os.fdopen(fd, "rb")
        try:
            f.seek(self.offset)
            for raw in f:
                if self._closed:
                    return
                if source_entry(raw) is not None:  # the next input begins
                    break
                try:
                    text = line_text(raw)
                except ValueError:
                    # A truncated last line (the recorder was killed) is expected; damage
                    # in the middle is counted and said once, at the end.
                    damaged += raw.endswith(b"\n")
                    continue
                if text is None:
                    continue
                if clock.speed is not None:
                    ts = line_time(text, self.year)
                    if ts is not None:
                        if not jumped or clock.log_now() is None:
                            clock.jump(ts)
                            jumped = True
                        elif ts > (clock.log_now() or ts):
                            if out:
                                yield self._deliver(out)
                                out = []
                            await clock.wait_until(ts)
                out.append(text)
                if len(out) >= self._max:
                    await clock.wait_running()
                    yield self._deliver(out)
                    out = []
            if out:
                yield self._deliver(out)
        finally:
            f.close()
            if damaged:
                self.status.events.append(f"{self.path}: {damaged} damaged recording entr"
                                          f"{'y' if damaged == 1 else 'ies'} skipped")
        self.status.state = ConnectionState.ENDED
        self.status.detail = f"replay of {self.path} finished"
