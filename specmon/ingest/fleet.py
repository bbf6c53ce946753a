"""Feeding a fleet: one follower and one session per replica log, each on its own.

Each replica is what ``specmon watch PATH`` (or ``specmon connect`` of one server) builds for
one log — a follower (:class:`~specmon.sources.local.LocalTailSource` on this machine,
:class:`~specmon.sources.ssh.SSHTailSource` on a host) read by a
:class:`~specmon.ingest.live.Feeder` into its own :class:`~specmon.model.session.Session` —
run as its own task. The feeders give the event loop a turn every few milliseconds of parsing,
so a replica with a big backlog does not hold up the others; one whose reading fails (an
unreadable file, a lost host, a reader error) becomes that replica's state, never the others'
problem.

:meth:`Fleet.inputs` hands the model (:mod:`specmon.model.fleet`) what it reads of each
replica, a few times a second.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from specmon.ingest.live import Feeder, FeedInput
from specmon.model.fleet import ReplicaInput, ReplicaState, short_names
from specmon.sources.base import ConnectionState
from specmon.sources.lines import DEFAULT_MAX_LINE
from specmon.sources.local import LocalTailSource

if TYPE_CHECKING:
    from specmon.sources.metrics_feed import MetricsFeed
    from specmon.sources.ssh import SSHTailSource

__all__ = ["Fleet", "Member", "Replica"]

#: The stats-line kinds a session counts: a change in their total is a new sample.
_SAMPLE_KINDS = ("decode", "engine_stats", "spec")


@dataclass(frozen=True, slots=True)
class Member:
    """A replica to follow: its name, where its log is (as the user wrote it) and its follower.

    Attributes:
        name: Short name shown in the fleet view.
        where: The log, as given (``gpu-1:/data/vllm.log`` for a host's).
        source: Its follower, not started yet.
        metrics: Its engine's ``/metrics`` (None: the log alone), not started yet.
    """

    name: str
    where: str
    source: LocalTailSource | SSHTailSource
    metrics: MetricsFeed | None = None


@dataclass(eq=False)
class Replica:
    """One replica: its log, its follower and feeder, and what went wrong reading it.

    Attributes:
        name: Short name (what differs between the fleet's paths).
        path: The log, as given (``HOST:PATH`` for a host's).
        source: Its follower (on this machine, or over SSH).
        feeder: Its feeder (its session is ``feeder.session``).
        error: Why reading stopped, when it did (a reader error).
        task: The task that feeds it.
        samples_seen: Stats lines counted at the last look.
        last_sample_at: Wall time a new stats line was last seen (never after the log's mtime).
    """

    name: str
    path: str
    source: LocalTailSource | SSHTailSource
    feeder: Feeder
    error: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)
    samples_seen: int = 0
    last_sample_at: float | None = None
    metrics: MetricsFeed | None = None
    metrics_task: asyncio.Task[None] | None = field(default=None, repr=False)


class Fleet:
    """The replicas of a fleet view, each fed on its own.

    Args:
        members: The replicas: name, log and follower each (:meth:`local` builds them for local logs).
        warmup: Samples excluded at the start of each run (None: the engine's).
        clock: Wall clock.
    """

    def __init__(self, members: Sequence[Member], *, warmup: int | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        if not members:
            raise ValueError("a fleet needs at least one log")
        self.clock = clock
        self.replicas = [Replica(m.name, m.where, m.source, Feeder([FeedInput(m.source)], warmup=warmup, clock=clock),
                                 metrics=m.metrics)
                         for m in members]
        self._closed = False

    @classmethod
    def local(cls, paths: Sequence[str | Path], *, lines: int | None = None, max_line: int | None = None,
              warmup: int | None = None, clock: Callable[[], float] = time.time, poll_interval: float = 0.2) -> Fleet:
        """A fleet of logs on this machine (``specmon watch A B ...``).

        Args:
            paths: The logs, one per replica (need not exist yet).
            lines: Start each with its last ``lines`` lines (None: the whole file).
            max_line: Longest line kept, in bytes (None: 1 MiB).
            warmup: Samples excluded at the start of each run (None: the engine's).
            clock: Wall clock.
            poll_interval: Seconds between two looks at a quiet log.
        """
        texts = [str(p) for p in paths]
        return cls([Member(name, path, LocalTailSource(path, lines=lines, clock=clock,
                                                       max_line=max_line or DEFAULT_MAX_LINE, poll_interval=poll_interval))
                    for name, path in zip(short_names(texts), texts, strict=True)], warmup=warmup, clock=clock)

    async def run(self) -> None:
        """Feed every replica until :meth:`close` (returns when all have stopped)."""
        tasks = []
        for replica in self.replicas:
            replica.task = asyncio.create_task(self._feed(replica), name=f"fleet feed {replica.name}")
            tasks.append(replica.task)
            if replica.metrics is not None:  # its own task: a scrape never waits for parsing, nor it for one
                replica.metrics_task = asyncio.create_task(replica.metrics.run(), name=f"fleet metrics {replica.name}")
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            for replica in self.replicas:
                if replica.metrics_task is not None:
                    replica.metrics_task.cancel()

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
            if replica.metrics is not None:
                with contextlib.suppress(Exception):
                    await replica.metrics.close()
        tasks = [t for r in self.replicas for t in (r.task, r.metrics_task) if t is not None and not t.done()]
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
            modified = replica.source.modified_at()
            replica.last_sample_at = now if modified is None else min(now, modified)
        status = replica.source.status
        detail = status.detail
        problem = _problem(status.state, detail, remote=not isinstance(replica.source, LocalTailSource))
        if replica.error is not None:
            problem, detail = ReplicaState.UNREADABLE, replica.error
        feed = replica.metrics
        return ReplicaInput(name=replica.name, path=replica.path, session=session, lines=feeder.lines,
                            last_sample_at=replica.last_sample_at, problem=problem, detail=detail,
                            metrics_refused=feed.refused if feed is not None else 0,
                            metrics_detail=feed.reason() if feed is not None else "")


def _problem(state: ConnectionState, detail: str, *, remote: bool) -> ReplicaState | None:
    """What keeps a replica's log from being read now, from its follower's state and sentence."""
    # Both followers say "file not found: ..." while they wait for the file, and "cannot read" or
    # why they cannot open one that exists (permissions, a directory); the SSH follower says so
    # while its link is up.
    waiting = state in (ConnectionState.CONNECTING, ConnectionState.LIVE) and detail.endswith("(waiting for it)")
    if detail.startswith("file not found") and (waiting or state is ConnectionState.CONNECTING):
        return ReplicaState.MISSING
    if remote:
        if state is ConnectionState.RECONNECTING:
            return ReplicaState.UNREACHABLE  # the link dropped: "connection lost ...; retrying in 4.0s"
        if state is ConnectionState.FAILED:
            # Given up: authentication, the host key, not a regular file: the sentence says which.
            if "not a log file" in detail:
                return ReplicaState.UNREADABLE
            return ReplicaState.MISSING if detail.startswith("no file on") else ReplicaState.UNREACHABLE
        return ReplicaState.UNREADABLE if waiting else None
    if state is ConnectionState.FAILED:
        return ReplicaState.UNREADABLE
    if state is ConnectionState.CONNECTING and detail:
        return ReplicaState.UNREADABLE
    return None
