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
import math
import random
import statistics
from collections import Counter

import pytest

from specmon.control.sweep import Sweep, SweepPlan
from specmon.model.stats import t975
from specmon.model.stopping import t_quantile
from specmon.sim.model import DEFAULT_MODEL, SpecConfig
from tests.support.sweepsim import CAMPAIGN, SEEDS, SimWorld, line_sampler, run_sweep


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
