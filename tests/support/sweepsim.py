"""The simulated sweep world: the cost model run as a sweep, with known truth."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable

from specmon.experiment.sweep_plan import RestartOutcome, SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_run import Sweep
from specmon.model.session import Session
from specmon.model.stopping import StoppingRule
from specmon.records import Config, Decode, Engine
from specmon.sim.model import SpecConfig

# One law of decode lines for the tests and the bench: the simulator's own.
from specmon.sim.sweepworld import line_sampler

SEEDS = range(100)
CAMPAIGN = (0, 1, 2, 3, 5)


class SimWorld:
    """A simulated server for the sweep: restarts are instant, ``sleep`` makes decode lines.

    Args:
        seed: Seeds everything.
        alias: Step counts that really behave like another (``{3: 2}``: "3 steps" is 2 steps).
        lines_per_poll: Decode lines produced by each sweep poll.
        fail_steps: Step counts whose restart fails.
    """

    def __init__(self, seed: int, *, alias: dict[int, int] | None = None, lines_per_poll: int = 50,
                 fail_steps: frozenset[int] = frozenset()) -> None:
        self.rng = random.Random(seed)
        self.session = Session()
        self.now = 0.0
        self.log_time = 1.77e9
        self.line = 0
        self.alias = alias or {}
        self.lines_per_poll = lines_per_poll
        self.fail_steps = fail_steps
        self.restarts: list[int] = []
        self.sampler: Callable[[], tuple[float | None, float | None, float]] | None = None

    def clock(self) -> float:
        return self.now

    async def restart(self, steps: int) -> RestartOutcome:
        self.restarts.append(steps)
        self.sampler = None
        if steps in self.fail_steps:
            return RestartOutcome(False, "specmon-start result=failed reason=command-not-found")
        self.session.begin_source(f"sim launch {len(self.restarts)}")
        on = steps > 0
        self.line += 1
        self.session.ingest(Config(self.line, self.log_time, None, engine=Engine.SGLANG,
                                   algorithm="EAGLE3" if on else None, steps=steps,
                                   topk=1 if on else None, draft_tokens=steps + 1 if on else None))
        self.sampler = line_sampler(SpecConfig.make(self.alias.get(steps, steps)), self.rng)
        return RestartOutcome(True, "ready")

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.sampler is None:
            return
        for _ in range(self.lines_per_poll):
            accept_len, accept_rate, tps = self.sampler()
            self.log_time += 0.9
            self.line += 1
            self.session.ingest(Decode(self.line, self.log_time, "TP0", running_req=1, accept_len=accept_len,
                                       accept_rate=accept_rate, gen_throughput=tps))


def run_sweep(seed: int, *, steps: tuple[int, ...] = CAMPAIGN, alias: dict[int, int] | None = None,
              order: str = "given", rule: StoppingRule | None = None, launch_cv: float = 0.0,
              **world: object) -> SweepResult:
    """One whole sweep in the simulated world.

    This world's launches are alike (every restart runs at the model's speed), so the sweep is
    told so (``launch_cv=0``): the sample rule's guarantees are what these tests hold it to.
    """
    w = SimWorld(seed, alias=alias, **world)  # type: ignore[arg-type]
    plan = SweepPlan(steps, order=order, seed=seed, rule=rule or StoppingRule(), max_minutes=None,
                     launch_cv=launch_cv)
    sweep = Sweep(plan, session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep)
    return asyncio.run(sweep.run())


# --------------------------------------------------------------------------- the sampler
