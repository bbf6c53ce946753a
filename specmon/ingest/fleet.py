"""Feeding a fleet: one follower and one session per replica log, each on its own.

Each replica is what ``specmon watch PATH`` builds for one log — a
:class:`~specmon.sources.local.LocalTailSource` read by a :class:`~specmon.ingest.live.Feeder`
into its own :class:`~specmon.model.session.Session` — run as its own task. The feeders give
the event loop a turn every few milliseconds of parsing, so a replica with a big backlog
does not hold up the others; one whose reading fails (an unreadable file, a reader error)
becomes that replica's state (:attr:`Replica.error`), never the others' problem.

:meth:`Fleet.inputs` hands the model (:mod:`specmon.model.fleet`) what it reads of each
replica, a few times a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from specmon.ingest.live import Feeder, FeedInput
from specmon.model.fleet import ReplicaInput, ReplicaState, short_names
from specmon.sources.base import ConnectionState
from specmon.sources.lines import DEFAULT_MAX_LINE
from specmon.sources.local import LocalTailSource

__all__ = ["Fleet", "Replica"]

#: The stats-line kinds a session counts: a change in their total is a new sample.
_SAMPLE_KINDS = ("decode", "engine_stats", "spec")


@dataclass(eq=False)
class Replica:
    """One replica: its log, its follower and feeder, and what went wrong reading it.

    Attributes:
        name: Short name (what differs between the fleet's paths).
        path: The log, as given.
        source: Its follower.
        feeder: Its feeder (its session is ``feeder.session``).
        error: Why reading stopped, when it did (a reader error).
        task: The task that feeds it.
        samples_seen: Stats lines counted at the last look.
        last_sample_at: Wall time a new stats line was last seen (never after the log's mtime).
    """

    name: str
    path: str
    source: LocalTailSource
    feeder: Feeder
    error: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    samples_seen: int = 0
    last_sample_at: float | None = None


class Fleet:
    """The replicas of a fleet view, each fed on its own.

    Args:
        paths: The logs, one per replica (need not exist yet).
        lines: Start each with its last ``lines`` lines (None: the whole file).
        max_line: Longest line kept, in bytes (None: 1 MiB).
        warmup: Samples excluded at the start of each run (None: the engine's).
        clock: Wall clock.
        poll_interval: Seconds between two looks at a quiet log.
    """

    def __init__(self, paths: Sequence[str | Path], *, lines: int | None = None, max_line: int | None = None,
                 warmup: int | None = None, clock: Callable[[], float] = time.time,
                 poll_interval: float = 0.2) -> None:
        if not paths:
            raise ValueError("a fleet needs at least one log")
        texts = [str(p) for p in paths]
        self.clock = clock
        self.replicas: list[Replica] = []
        for name, path in zip(short_names(texts), texts, strict=True):
            source = LocalTailSource(path, lines=lines, clock=clock, max_line=max_line or DEFAULT_MAX_LINE,
                                     poll_interval=poll_interval)
            feeder = Feeder([FeedInput(source)], warmup=warmup, clock=clock)
            self.replicas.append(Replica(name, path, source, feeder))
        self._closed = False

    async def run(self) -> None:
        """Feed every replica until :meth:`close` (returns when all have stopped)."""
        tasks = []
        for replica in self.replicas:
            replica.task = asyncio.create_task(self._feed(replica), name=f"fleet feed {replica.name}")
            tasks.append(replica.task)
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()

    async def _feed(self, replica: Replica) -> None:
        try:
            await replica.feeder.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # one replica's failure is its own state, not the fleet's end
            replica.error = f"reading stopped: {type(exc).__name__}: {exc}"

    async def close(self) -> None:
        """Stop every follower and wait (briefly) for the feeders to end."""
        if self._closed:
            return
        self._closed = True
        for replica in self.replicas:
            with contextlib.suppress(Exception):
                await replica.feeder.close()
        tasks = [r.task for r in self.replicas if r.task is not None and not r.task.done()]
        if tasks:
            _, pending = await asyncio.wait(tasks, timeout=2.0)
            for task in pending:
                task.cancel()

    def inputs(self) -> list[ReplicaInput]:
        """What the fleet model reads of each replica now (a few times a second)."""
        now = self.clock()
        return [self._input(r, now) for r in self.replicas]

    def _input(self, replica: Replica, now: float) -> ReplicaInput:
        feeder = replica.feeder
        feeder.drain_events()  # the source's sentences (rotation, removal) into its event log
        session = feeder.session
        seen = sum(session.counts.get(kind, 0) for kind in _SAMPLE_KINDS)
        if seen != replica.samples_seen:
            replica.samples_seen = seen
            # A sample was written no later than the log's last change: a log read from its start
            # is as old as its modification time says, not as new as the reading.
            try:
                mtime = os.stat(replica.source.path).st_mtime
            except OSError:
                mtime = now
            replica.last_sample_at = min(now, mtime)
        status = replica.source.status
        problem: ReplicaState | None = None
        detail = status.detail
        if replica.error is not None:
            problem, detail = ReplicaState.UNREADABLE, replica.error
        elif status.state is ConnectionState.FAILED:
            problem = ReplicaState.UNREADABLE
        elif status.state is ConnectionState.CONNECTING and detail:
            # LocalTailSource says "file not found: ..." while it waits for the file, and why it
            # cannot open or stat one that exists (permissions, a directory).
            problem = ReplicaState.MISSING if detail.startswith("file not found") else ReplicaState.UNREADABLE
        return ReplicaInput(name=replica.name, path=replica.path, session=session, lines=feeder.lines,
                            last_sample_at=replica.last_sample_at, problem=problem, detail=detail)
