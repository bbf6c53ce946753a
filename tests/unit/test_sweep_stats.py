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
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.stats import Summary, difference, summarize, t975, t_quantile, welch_df
from specmon.model.stopping import adjusted_difference
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


def test_t_quantile_known_values_at_the_rules_levels() -> None:
    # Two-sided 99.5% (the rule's level at alpha 0.05, 5 looks): standard table values.
    for df, expected in ((3, 7.453), (5, 4.773), (10, 3.581), (30, 3.030)):
        assert t_quantile(0.9975, df) == pytest.approx(expected, abs=1e-3)
    assert t_quantile(0.9975, math.inf) == pytest.approx(2.807, abs=1e-3)
    for df in (1, 2.5, 7.3, 30, 1e6):
        assert t975(df) == t_quantile(0.975, df)


def _summary(mean: float, se: float, df: float) -> Summary:
    return Summary(n=100, mean=mean, median=mean, p10=mean, p90=mean, sd=se * 10, se=se, df=df,
                   ci95_low=None, ci95_high=None, batches=int(df) + 1)


@settings(max_examples=80, deadline=None)
@given(se_a=st.floats(0.01, 10.0), se_b=st.floats(0.01, 10.0), df_a=st.floats(2.0, 60.0), df_b=st.floats(2.0, 60.0))
def test_dashboard_and_sweep_intervals_use_one_quantile(se_a: float, se_b: float, df_a: float, df_b: float) -> None:
    """The dashboard's Welch interval (model/stats.py) and the sweep's (model/stopping.py) at the same
    level are the same numbers, at fractional Welch degrees of freedom too: one quantile function."""
    a, b = _summary(94.0, se_a, df_a), _summary(91.7, se_b, df_b)
    d, lo, hi = difference(a, b)
    adj = adjusted_difference(a, b, 0.95)
    assert (adj.diff, adj.low, adj.high) == (d, lo, hi)
    df = welch_df(se_a, df_a, se_b, df_b)
    assert df is not None and lo is not None
    assert d - lo == pytest.approx(t_quantile(0.975, df) * math.hypot(se_a, se_b), rel=1e-12)


def test_summaries_use_the_exact_quantile_at_their_df() -> None:
    rng = random.Random(5)
    for n in (3, 5, 12, 40, 500):
        s = summarize([rng.gauss(90.0, 5.0) for _ in range(n)])
        assert s is not None and s.se is not None and s.df is not None and s.ci95_low is not None
        assert s.mean - s.ci95_low == pytest.approx(t_quantile(0.975, s.df) * s.se, rel=1e-12)


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
