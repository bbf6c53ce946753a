"""Feeding a fleet from Prometheus: one poll every few seconds, one replica per ``instance`` label.

:class:`PromFleet` is the Prometheus-backed counterpart of :class:`specmon.ingest.fleet.Fleet`
(``run``, ``close``, ``inputs``): its worker asks :class:`~specmon.sources.prometheus_fleet.PrometheusFleetSource`
for every instance's rates, and :meth:`PromFleet.inputs` hands the fleet model
(:mod:`specmon.model.fleet`) one :class:`~specmon.model.fleet.RateInput` per instance. The
view's refresh only reads what the last poll left: a Prometheus that is slow or down never
holds it up (a poll is bounded by the source's timeout, and its failure is every replica's
state, their last figures kept).

What a replica's configuration is, Prometheus does not say for every engine. vLLM's
per-position counter has one series per draft position from start-up on, so counting them
gives its draft tokens (the method stays unknown: said in the label); otherwise the
configuration is "unknown config" and the replica is pooled and compared with none.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from specmon.engines import adapter
from specmon.model.fleet import RateInput, ReplicaInput, ReplicaState
from specmon.records import Engine
from specmon.sources.prometheus_fleet import InstanceFigures, Poll, PrometheusFleetSource

__all__ = ["MAX_RATE_SAMPLES", "PromFleet", "config_of"]

#: Non-overlapping windows kept per replica (a day of one-minute windows, and then some).
MAX_RATE_SAMPLES = 20_000

#: One number for every RateInput ever made: the model's cache tells them apart by it.
_versions = itertools.count(1)


def config_of(engine: Engine | None, spec_tokens: int | None) -> tuple[str, Hashable | None]:
    """(label, grouping key) of a replica's configuration, as far as Prometheus tells it.

    Only what the counters show: vLLM's count of per-position series is its draft tokens; no
    such series at all means it exports no speculative counters. The method (EAGLE, n-gram)
    never shows, and for other engines nothing does: "unknown config", grouped with none.
    """
    # An engine whose per-position series exist from start-up (vLLM's): their count is its draft tokens.
    if engine is not None and adapter(engine).positions_from_start:
        if spec_tokens is None:
            return "no spec counters", ("prometheus", engine.value, None)
        return (f"{spec_tokens} spec token{'s' if spec_tokens != 1 else ''} (method unknown)",
                ("prometheus", engine.value, spec_tokens))
    return "unknown config", None


def _clock_text(t: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(t))


@dataclass(eq=False)
class _Instance:
    """What the fleet keeps of one instance between polls."""

    name: str
    first_seen: float
    engine: Engine | None = None
    spec_tokens: int | None = None
    figures: InstanceFigures = field(default_factory=InstanceFigures)
    figures_at: float | None = None
    state: ReplicaState = ReplicaState.NO_DATA
    state_text: str = "no data yet"
    detail: str = ""
    tps_samples: list[float] = field(default_factory=list)
    al_samples: list[float] = field(default_factory=list)
    last_sample_at: float | None = None
    missing_since: float | None = None
    down_since: float | None = None
    made: RateInput | None = None


class PromFleet:
    """The replicas Prometheus knows for a selector, polled every ``interval_s`` seconds.

    Args:
        source: Asks Prometheus.
        interval_s: Seconds from one poll's start to the next's.
        clock: Wall clock (the header's ages).
    """

    def __init__(self, source: PrometheusFleetSource, *, interval_s: float = 5.0,
                 clock: Callable[[], float] = time.time) -> None:
        self.source = source
        self.interval_s = interval_s
        self.clock = clock
        #: Instances by label, in the order first seen (a new one does not move the others' rows).
        self.instances: dict[str, _Instance] = {}
        self.last_poll: Poll | None = None
        self.last_answer_at: float | None = None
        self.polls = 0
        self._stop = asyncio.Event()

    # -- polling ------------------------------------------------------------------------------------

    async def run(self) -> None:
        """Poll until :meth:`close`."""
        try:
            while not self._stop.is_set():
                poll = await self.source.poll()
                self.take(poll)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._stop.wait(), max(0.0, self.interval_s - poll.took_s))
        finally:
            await self.source.close()

    async def close(self) -> None:
        """Stop polling (the worker closes the HTTP connections as it ends)."""
        self._stop.set()

    def take(self, poll: Poll) -> None:
        """Take one poll's answer into every replica's state."""
        self.polls += 1
        self.last_poll = poll
        if not poll.ok:
            since = f"; figures as of {_clock_text(self.last_answer_at)}" if self.last_answer_at else ""
            for inst in self.instances.values():
                self._set(inst, ReplicaState.UNREADABLE, "no answer", f"{poll.problem}{since}")
            return
        self.last_answer_at = poll.at
        window = self.source.window_s
        for name in sorted(poll.instances):
            if name not in self.instances:
                self.instances[name] = _Instance(name, poll.at)
        for name, inst in self.instances.items():
            figures = poll.instances.get(name)
            if figures is None:
                if inst.missing_since is None:
                    inst.missing_since = poll.at
                self._set(inst, ReplicaState.MISSING, "gone",
                          f"no series since {_clock_text(inst.missing_since)} (its target was removed, or its "
                          f"series went stale); figures as of {_clock_text(inst.figures_at or inst.first_seen)}")
                continue
            inst.missing_since = None
            if figures.engine is not None:
                if (figures.engine, figures.spec_tokens) != (inst.engine, inst.spec_tokens):
                    # First sight, or a new engine or setting (a restart): its windows start over, the
                    # first one a whole window later. The window before may mix both settings, and
                    # Prometheus's rate() of a series younger than its window divides what it saw by the
                    # whole window (measured here: 230 tok/s for 400 in the first 4 s window of a new
                    # exporter, which pulled a run's mean of 5 windows down to 366).
                    inst.engine, inst.spec_tokens = figures.engine, figures.spec_tokens
                    inst.tps_samples, inst.al_samples = [], []
                    inst.last_sample_at = poll.at
                inst.figures, inst.figures_at = figures, poll.at
            if figures.up is not None and figures.up == 0:
                if inst.down_since is None:
                    inst.down_since = poll.at
                self._set(inst, ReplicaState.DOWN, "down",
                          f"Prometheus cannot scrape it (up = 0) since {_clock_text(inst.down_since)}; "
                          f"figures as of {_clock_text(inst.figures_at or inst.first_seen)}")
                continue
            inst.down_since = None
            if figures.engine is None:
                self._set(inst, ReplicaState.NO_DATA, "no data yet",
                          "Prometheus scrapes it (up = 1), but it exports none of the counters specmon reads "
                          "(vLLM's, llama.cpp's)")
                continue
            tps = figures.tps
            if tps is not None and tps > 0 and (inst.last_sample_at is None or poll.at - inst.last_sample_at >= window):
                # One sample per whole window: windows that do not overlap (idle ones left out, as a
                # log's idle batches are).
                inst.last_sample_at = poll.at
                inst.tps_samples.append(tps)
                if figures.accept_len is not None:
                    inst.al_samples.append(figures.accept_len)
                for samples in (inst.tps_samples, inst.al_samples):
                    if len(samples) > MAX_RATE_SAMPLES:
                        del samples[: len(samples) - MAX_RATE_SAMPLES]
                inst.made = None
            if tps is None or tps == 0:
                self._set(inst, ReplicaState.QUIET, "idle", f"no tokens generated over the last {window}s")
            else:
                self._set(inst, ReplicaState.LIVE, "live", "")
            inst.made = None  # its figures are this poll's

    @staticmethod
    def _set(inst: _Instance, state: ReplicaState, text: str, detail: str) -> None:
        if (inst.state, inst.state_text, inst.detail) != (state, text, detail):
            inst.state, inst.state_text, inst.detail = state, text, detail
            inst.made = None

    # -- what the model reads ----------------------------------------------------------------------------

    def inputs(self) -> list[ReplicaInput]:
        """One input per instance ever seen, in the order first seen (a few times a second: cheap)."""
        return [self._input(inst) for inst in self.instances.values()]

    def _input(self, inst: _Instance) -> ReplicaInput:
        if inst.made is None:
            f = inst.figures
            label, key = config_of(inst.engine, inst.spec_tokens)
            inst.made = RateInput(
                version=next(_versions), engine=inst.engine.value if inst.engine else Engine.UNKNOWN.value,
                config=label if inst.engine is not None else "—", config_key=key if inst.engine is not None else None,
                state=inst.state, state_text=inst.state_text, detail=inst.detail, tps=f.tps,
                accept_len=f.accept_len, accept_rate=f.accept_rate, tps_samples=tuple(inst.tps_samples),
                accept_len_samples=tuple(inst.al_samples))
        return ReplicaInput(name=inst.name or "(no instance label)", path=inst.name, session=None, source="prom",
                            rates=inst.made)

    def status_text(self) -> str:
        """The header's line: where the fleet is read from, and how the last poll went."""
        where = f"Prometheus {self.source.url} {self.source.selector.promql()}, rates over {self.source.window_s}s"
        poll = self.last_poll
        if poll is None:
            return f"{where}: asking…"
        now = self.clock()
        if poll.ok:
            text = f"{where}: answered {max(0, int(now - poll.at))}s ago in {poll.took_s:.1f} s"
            if not poll.instances:
                text += " — no instance matches the selector"
            if poll.dropped:
                text += f" ({poll.dropped} instances beyond the first {len(poll.instances)} left out)"
            return text
        last = (f"last answer {max(0, int(now - self.last_answer_at))}s ago" if self.last_answer_at is not None
                else "no answer yet")
        return f"{where}: {poll.problem} ({last})"
