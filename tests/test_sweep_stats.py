"""The sweep's sequential stopping rule on simulated data with known truth (seeded, no server).

The world below is the simulator's cost model (``specmon.sim.model``) run
in-process: a restart ingests the configuration line a real server prints,
and every ``sleep`` of the sweep produces decode lines drawn from the model —
the same per-line distribution as ``CostModel.sample_batch`` (checked below),
drawn faster by sampling the 40-cycle token total from its exact
distribution. The truth is known: 2 steps is fastest (94.0 tok/s), 3 steps
second (91.7), no speculation 88.8.

This file holds the campaign test (the verdict must pick 2 steps, separated,
in >= 95 of 100 seeds); ``test_sweep_stats_equal.py`` holds the equal-settings
test.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import math
import random
import statistics
from collections import Counter
from collections.abc import Callable

import pytest

from specmon.control.sweep import RestartOutcome, Sweep, SweepPlan, SweepResult
from specmon.records import Config, Decode, Engine
from specmon.model.stopping import StoppingRule, t_quantile
from specmon.model.session import Session
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig
from specmon.model.stats import t975

SEEDS = range(100)
CAMPAIGN = (0, 1, 2, 3, 5)


def line_sampler(spec: SpecConfig, rng: random.Random,
                 model: CostModel = DEFAULT_MODEL) -> Callable[[], tuple[float | None, float | None, float]]:
    """Decode lines of ``spec``: ``(accept_len, accept_rate, gen_throughput)`` per call.

    Same law as ``model.sample_batch``: the tokens of one line are the sum of
    ``decode_log_interval`` independent cycles, each drawn from
    ``model.accept_distribution``; the exact distribution of that sum is
    computed once by convolution, so a line costs one draw instead of 40.
    The machine noise is the model's own AR(1)-plus-dips process.
    """
    cycles = model.decode_log_interval
    one = model.accept_distribution(spec) if spec.enabled else (1.0,)
    total = [1.0]
    for _ in range(cycles):
        nxt = [0.0] * (len(total) + len(one) - 1)
        for i, a in enumerate(total):
            if a:
                for j, b in enumerate(one):
                    nxt[i + j] += a * b
        total = nxt
    cum = list(itertools.accumulate(total))
    cycle_s = model.cycle_ms(spec) / 1000.0
    noise = model.noise(rng)

    def sample() -> tuple[float | None, float | None, float]:
        factor = noise.next()
        tokens = cycles + bisect.bisect_right(cum, rng.random() * cum[-1])  # drafts accepted + 1 per cycle
        elapsed = cycles * cycle_s / factor
        if not spec.enabled:
            return None, None, tokens / elapsed
        accept_len = tokens / cycles
        return accept_len, (accept_len - 1) / (spec.draft_tokens - 1), tokens / elapsed

    return sample


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
              order: str = "given", rule: StoppingRule | None = None, **world: object) -> SweepResult:
    """One whole sweep in the simulated world."""
    w = SimWorld(seed, alias=alias, **world)  # type: ignore[arg-type]
    plan = SweepPlan(steps, order=order, seed=seed, rule=rule or StoppingRule(), max_minutes=None)
    sweep = Sweep(plan, session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep)
    return asyncio.run(sweep.run())


# --------------------------------------------------------------------------- the sampler


def test_fast_sampler_has_the_models_distribution() -> None:
    rng = random.Random(11)
    spec = SpecConfig.make(2)
    fast = line_sampler(spec, rng)
    ours = [fast()[2] for _ in range(20000)]
    noise = DEFAULT_MODEL.noise(rng)
    theirs = [DEFAULT_MODEL.sample_batch(spec, rng, noise).gen_throughput for _ in range(20000)]
    assert statistics.mean(ours) == pytest.approx(DEFAULT_MODEL.expected_throughput(spec), rel=0.01)
    assert statistics.mean(ours) == pytest.approx(statistics.mean(theirs), rel=0.01)
    assert statistics.stdev(ours) == pytest.approx(statistics.stdev(theirs), rel=0.05)


def test_t_quantile_matches_the_table_and_known_values() -> None:
    for df in (1, 2, 3, 4, 5, 7, 10, 20, 30):
        assert t_quantile(0.975, df) == pytest.approx(t975(df), abs=2e-3)
    # Two-sided 99.5% (the rule's level at alpha 0.05, 5 looks): standard table values.
    for df, expected in ((3, 7.453), (5, 4.773), (10, 3.581), (30, 3.030)):
        assert t_quantile(0.9975, df) == pytest.approx(expected, abs=2e-3)
    assert t_quantile(0.9975, math.inf) == pytest.approx(2.807, abs=1e-3)


# --------------------------------------------------------------------------- the campaign


def test_campaign_picks_two_steps_in_at_least_95_of_100_seeds() -> None:
    outcomes: Counter[tuple[int | None, bool]] = Counter()
    for seed in SEEDS:
        v = run_sweep(seed).verdict
        assert v is not None
        outcomes[(v.best.steps if v.best else None, v.separated)] += 1
    picked = outcomes[(2, True)]
    print(f"campaign: 2 steps picked and separated in {picked}/100 seeds; all outcomes {dict(outcomes)}")
    assert picked >= 95
    # A wrong winner must be rare too (not just a missing one).
    assert sum(n for (best, sep), n in outcomes.items() if sep and best != 2) <= 2


def test_clear_losers_stop_early_and_close_ones_need_more() -> None:
    result = run_sweep(3)
    by_steps = {c.steps: c for c in result.cells}
    # 1 and 5 steps are clearly slower than the leader: they stop at an early look.
    assert by_steps[1].reason == "slower" and by_steps[1].n < 400
    assert by_steps[5].reason == "slower" and by_steps[5].n < 400
    # 3 steps is within 2.5% of 2 steps, 5 steps 8% below: the close call takes longer.
    assert by_steps[3].n > by_steps[5].n
    # The fastest setting is measured until precise (it is what everything else is judged against).
    assert by_steps[2].reason in ("precise", "budget") and by_steps[2].n >= 600
    assert result.finished
    doc = result.to_json()
    assert doc["verdict"]["best_steps"] == 2 and doc["verdict"]["separated"] is True
    assert 3.0 < doc["verdict"]["speedup_pct"] < 9.0  # truth +5.9%
    lo, hi = doc["verdict"]["speedup_ci95"]
    assert lo < 5.9 < hi


@pytest.mark.parametrize("order", ["random", "interleave"])
def test_other_orders_reach_the_same_verdict(order: str) -> None:
    hits = 0
    for seed in range(10):
        v = run_sweep(seed, order=order).verdict
        assert v is not None
        hits += v.best is not None and v.best.steps == 2 and v.separated
    assert hits >= 9


def test_random_order_is_seeded_and_interleave_alternates() -> None:
    a = SweepPlan(CAMPAIGN, order="random", seed=5).ordered_cells(5)
    b = SweepPlan(CAMPAIGN, order="random", seed=5).ordered_cells(5)
    assert a == b and sorted(a) == sorted((s, 1) for s in CAMPAIGN) and a != [(s, 1) for s in CAMPAIGN]
    w = SimWorld(1)
    plan = SweepPlan((0, 2), order="interleave", seed=1, max_minutes=None)
    asyncio.run(Sweep(plan, session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep).run())
    # Rounds alternate direction: 0, 2 | 2, 0 | 0, 2 ... (consecutive visits of one setting share a launch).
    assert w.restarts[:3] == [0, 2, 0] or w.restarts[:2] == [0, 2]
    assert len(w.restarts) >= 3
