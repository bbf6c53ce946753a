"""Simulated replicas for parallel sweeps: known speeds, replica and launch effects, instant restarts.

Each replica has its own session (as its log feeds one) and its own speed factor; each restart
draws a launch factor; each decode line is the launch's speed with per-line noise. The shared
clock moves when the sweep sleeps, and every running replica writes the lines that time holds.
"""

from __future__ import annotations

import asyncio
import math
import random

from specmon.control.load import LoadReport, RequestResult
from specmon.experiment.fleet_sweep import Arm
from specmon.experiment.sweep_plan import RestartOutcome
from specmon.model.session import Session
from specmon.records import Config, Decode, Engine


class SimReplica:
    def __init__(self, world: FleetWorld, name: str, factor: float) -> None:
        self.world = world
        self.name = name
        self.factor = factor
        self.session = Session()
        self.mean: float | None = None
        self.steps: int | None = None
        self.next_line = 0.0
        self.line = 0
        self.restarts: list[int] = []
        self.loaded = False
        self.requests = 0

    async def restart(self, steps: int, dims: object = None) -> RestartOutcome:
        self.restarts.append(steps)
        self.mean = None
        await asyncio.sleep(0)
        if (self.name, steps) in self.world.fail:
            return RestartOutcome(False, f"specmon-start result=failed reason=exited (replica {self.name})")
        w = self.world
        self.session.begin_source(f"{self.name} launch {len(self.restarts)}")
        self.line += 1
        on = steps > 0
        self.session.ingest(Config(self.line, w.now, None, engine=Engine.SGLANG, algorithm="EAGLE3" if on else None,
                                   steps=steps, topk=1 if on else None, draft_tokens=steps + 1 if on else None))
        self.steps = steps
        self.mean = w.truth[steps] * self.factor * math.exp(w.rng.gauss(0.0, w.launch_cv))
        self.next_line = w.now
        return RestartOutcome(True, "ready")

    def advance(self) -> None:
        w = self.world
        while self.mean is not None and self.loaded and self.next_line <= w.now:
            self.next_line += w.line_s
            self.line += 1
            tps = self.mean * (1.0 + w.rng.gauss(0.0, w.line_cv))
            self.session.ingest(Decode(self.line, self.next_line, "TP0", running_req=1, accept_len=2.0,
                                       accept_rate=0.5, gen_throughput=max(tps, 0.1)))

    # the load, per replica
    async def start(self, concurrency: int, workload: str | None = None) -> None:
        self.loaded = True
        self.next_line = max(self.next_line, self.world.now)

    async def stop(self) -> LoadReport | None:
        was = self.loaded
        self.loaded = False
        if not was:
            return None
        done = RequestResult(0, 0, True, self.world.now, 1.0, output_tokens=10)
        return LoadReport(1, self.world.now - 1.0, self.world.now, results=[done])


class FleetWorld:
    """``replicas`` simulated replicas; ``truth`` the steps' tok/s at an average replica."""

    def __init__(self, seed: int, truth: dict[int, float], *, replicas: int = 4, replica_cv: float = 0.10,
                 launch_cv: float = 0.05, line_cv: float = 0.05, line_s: float = 1.0,
                 fail: frozenset[tuple[str, int]] = frozenset()) -> None:
        self.rng = random.Random(seed)
        self.truth = truth
        self.launch_cv = launch_cv
        self.line_cv = line_cv
        self.line_s = line_s
        self.fail = fail
        self.now = 0.0
        self.replicas = [SimReplica(self, f"r{i + 1}", math.exp(self.rng.gauss(0.0, replica_cv)))
                         for i in range(replicas)]

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        # Several launches sleep at once: time moves by the poll, spread over the sleepers.
        self.now += seconds / max(1, sum(1 for r in self.replicas if r.loaded))
        for r in self.replicas:
            r.advance()
        await asyncio.sleep(0)

    def arms(self) -> list[Arm]:
        return [Arm(r.name, r.restart, r.session, r) for r in self.replicas]
