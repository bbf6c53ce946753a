"""The best-arm launch design (specmon.experiment.stats.bai): who is launched, when it is judged, at what level.

The selection is checked on the class of inputs (any means and launch counts): the warm-up
launches every undecided setting until it has two launches, after it a round launches the leader
and the challenger whose upper bound on ``challenger − leader`` is highest, and no more. The
level is the union bound over the looks. And the design through the real sweep runner on the
simulated world: the clearly slower settings get fewer launches than the two contenders.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
from collections import Counter
from collections.abc import Hashable
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.rounds import effective_rule, plan_budget
from specmon.experiment.stats import bai
from specmon.experiment.stats.design import Noise, budget, expected_restarts, summaries
from specmon.experiment.sweep_plan import SweepEvent, SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.launches import Launch
from specmon.model.stats import Summary
from specmon.model.stopping import StoppingRule, adjusted_difference
from specmon.sim.model import launch_speed
from specmon.sim.sweepworld import SweepWorld


def _sums(means: dict[str, float], counts: dict[Hashable, int], seed: int) -> dict[Hashable, Summary]:
    rng = random.Random(seed)
    groups: dict[Hashable, list[Launch]] = {}
    for k, m in means.items():
        groups[k] = [Launch(m * launch_speed(rng, 0.05), m * 0.004, 20.0, 400, f"{k}{j}") for j in range(counts[k])]
    _, sums = summaries({k: v for k, v in groups.items() if v}, 0.05)
    return sums


settings_st = st.dictionaries(st.sampled_from("abcdef"), st.floats(50.0, 150.0), min_size=2, max_size=6)


@given(means=settings_st, data=st.data())
@settings(max_examples=60, deadline=None)
def test_after_the_warm_up_a_round_launches_the_leader_and_the_most_ambiguous_challenger(
        means: dict[str, float], data: st.DataObject) -> None:
    keys = list(means)
    counts: dict[Hashable, int] = {k: data.draw(st.integers(bai.WARMUP, 8)) for k in keys}
    active = data.draw(st.lists(st.sampled_from(keys), unique=True, min_size=1))
    sums = _sums(means, counts, data.draw(st.integers(0, 10**6)))
    level = 0.995
    rnd = data.draw(st.integers(bai.WARMUP + 1, 40))
    pick = bai.to_launch(active, counts, sums, None, rnd, level)
    leader = max(sums, key=lambda k: sums[k].mean)
    rivals = [k for k in active if k != leader]
    assert len(pick) == len(set(pick)) <= 2
    if not rivals:
        assert pick == [] or pick == [leader]
        return
    assert leader in pick and len(pick) == 2
    rival = next(k for k in pick if k != leader)
    assert rival in active
    # The challenger's upper bound on (challenger − leader) is the highest of every undecided rival's.
    high = {k: adjusted_difference(sums[k], sums[leader], level).high for k in rivals}
    assert high[rival] == max(high.values())  # type: ignore[type-var]


@given(means=settings_st, data=st.data())
@settings(max_examples=40, deadline=None)
def test_the_warm_up_launches_every_undecided_setting_until_it_has_two(means: dict[str, float],
                                                                          data: st.DataObject) -> None:
    keys = list(means)
    counts: dict[Hashable, int] = {k: data.draw(st.integers(0, 4)) for k in keys}
    active = data.draw(st.lists(st.sampled_from(keys), unique=True, min_size=1))
    sums = _sums(means, counts, 1)
    rnd = data.draw(st.integers(1, 40))
    pick = bai.to_launch(active, counts, sums, None, rnd, 0.995)
    short = {k for k in active if counts[k] < bai.WARMUP}
    if short:
        assert set(pick) == short
        # Rounds alternate direction, so a slow drift favours no setting.
        again = bai.to_launch(active, counts, sums, None, rnd + 1, 0.995)
        assert again == list(reversed(pick))


@given(last=st.integers(1, 80), looks=st.integers(1, 20))
def test_the_looks_are_fixed_increasing_and_end_at_the_last_round(last: int, looks: int) -> None:
    r = bai.look_rounds(last, looks)
    assert r[-1] == max(last, 1)
    assert list(r) == sorted(set(r)) and len(r) <= looks
    assert all(x >= min(bai.WARMUP, last) for x in r)


@given(k=st.integers(1, 30), alpha=st.floats(0.001, 0.2))
def test_each_test_is_at_most_alpha_over_the_looks(k: int, alpha: float) -> None:
    rule = bai.rule_for(StoppingRule(alpha=alpha), tuple(range(2, 2 + k)))
    # The union bound over K simultaneous looks per pair: K tests at 1 − level each stay within alpha.
    assert k * (1 - rule.test_level) <= alpha * (1 + 1e-9)
    if k % 2 == 0:
        assert abs(k * (1 - rule.test_level) - alpha) < 1e-9


def test_the_verdict_and_the_rounds_use_the_same_rule() -> None:
    rule, looks = effective_rule(StoppingRule(), 5.0, 0.05, 900.0, None, bai.NAME)
    assert looks == bai.look_rounds()
    assert rule.test_level == bai.rule_for(StoppingRule(), looks).test_level


@given(settings_n=st.integers(2, 12), rounds=st.integers(1, 60), groups=st.integers(1, 3))
def test_the_budget_counts_the_warm_up_then_two_a_round(settings_n: int, rounds: int, groups: int) -> None:
    noise = Noise(0.0025, 0.01, 1.0, 900.0)
    b = budget(noise, settings_n * groups, rounds, 40, 1600, pairs=(bai.WARMUP, 2 * groups))
    per_round = min(2 * groups, settings_n * groups)
    assert b.restarts == settings_n * groups * min(bai.WARMUP, rounds) + per_round * max(0, rounds - bai.WARMUP)
    assert b.restarts <= settings_n * groups * rounds
    assert "closest challenger" in b.text


@given(settings_n=st.integers(2, 8), loads=st.integers(1, 3))
def test_the_budget_confirmed_before_the_first_restart_is_the_best_arm_designs_own(settings_n: int,
                                                                                     loads: int) -> None:
    # The count a user says yes to ("Restart the server up to N times?") is the design's own, not the other's.
    plan = SweepPlan(tuple(range(settings_n)), tuple(range(1, loads + 1)), order="launches", resolve_pct=5.0,
                     design=bai.NAME)
    stated = plan_budget(plan)
    assert stated is not None and stated.pairs == (bai.WARMUP, 2 * loads)
    cells = settings_n * loads
    last = bai.look_rounds()[-1]
    assert stated.rounds == last
    assert stated.restarts == cells * bai.WARMUP + min(2 * loads, cells) * (last - bai.WARMUP)
    today = plan_budget(replace(plan, design="today"))
    assert today is not None and today.pairs is None and today.restarts == cells * today.rounds


@given(launches=st.integers(1, 80), settings_n=st.integers(1, 12), loads=st.integers(1, 3))
def test_the_expected_restarts_are_the_warm_up_then_the_two_closest_and_never_over_the_budget(
        launches: int, settings_n: int, loads: int) -> None:
    cells = settings_n * loads
    pairs = (bai.WARMUP, 2 * loads)
    n = expected_restarts(launches, cells, pairs)
    assert n == cells * bai.WARMUP + min(2 * loads, cells) * max(0, launches - bai.WARMUP)
    assert expected_restarts(launches + 1, cells, pairs) >= n  # more launches a setting: never fewer restarts
    assert expected_restarts(launches, cells) == cells * launches  # every setting each round
    rounds = max(launches, bai.WARMUP)
    assert n <= budget(Noise(0.0025, 0.01, 1.0, 900.0), cells, rounds, 40, 1600, pairs=pairs).restarts


def test_through_the_sweep_runner_slower_settings_get_fewer_launches() -> None:
    # The seeds' campaign on the simulated world (its own truth: 2 steps fastest, 10 steps far behind).
    world = SweepWorld(0, launch_cv=0.05, restart_s=900.0, lines_per_poll=10)
    plan = SweepPlan((0, 1, 2, 5, 10), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     settle=2, launch_cv=0.05, resolve_pct=5.0, design=bai.NAME)  # (sweep --design bai)
    assert plan.identity()["design"] == bai.NAME  # a resumed sweep keeps its design
    events: list[SweepEvent] = []
    sweep = Sweep(plan, session=world.session, restart=world.restart, load=world,  # type: ignore[arg-type]
                  clock=world.clock, sleep=world.sleep, on_event=events.append)
    result = asyncio.run(sweep.run())
    # Stated before the first restart and once running: the same most, and what is likely, for this design.
    stated = plan_budget(plan)
    assert stated is not None and result.restarts <= stated.restarts
    first = next(e.text for e in events if e.kind == "plan" and e.text.startswith("plan: "))
    assert f"budget: at most {stated.restarts} restarts" in first
    m = re.search(r"(\d+) launches × .* of each of the two closest settings, about (\d+) restarts and .* expected",
                  first)
    assert m is not None, first
    assert int(m[2]) == expected_restarts(int(m[1]), len(plan.settings), (bai.WARMUP, 2))
    per = {c.steps: len(c.launches()) for c in result.cells}
    assert all(n >= bai.WARMUP for n in per.values())
    truth = {k: world.expected(k) for k in per}
    best = max(truth, key=lambda k: truth[k])
    far = min(truth, key=lambda k: truth[k])
    # The far slower setting leaves after its warm-up; the leader gets the most launches.
    assert per[far] == bai.WARMUP
    assert per[best] == max(per.values())
    assert result.restarts == sum(per.values())
    v = result.verdict
    assert v is not None and v.level == bai.rule_for(StoppingRule(), bai.look_rounds()).test_level
    assert not (v.separated and v.best is not None and v.best.steps != best)


@given(open_n=st.integers(2, 6), data=st.data())
def test_a_parallel_round_fills_with_the_two_contenders_after_the_warm_up(open_n: int, data: st.DataObject) -> None:
    open_settings: list[Hashable] = list(range(open_n))
    launches: dict[Hashable, int] = {s: data.draw(st.integers(0, 6)) for s in open_settings}
    leader = data.draw(st.sampled_from(open_settings))
    upper: dict[Hashable, float | None] = {
        s: data.draw(st.one_of(st.none(), st.floats(-50, 50))) for s in open_settings if s != leader}
    pick = bai.fleet_pick(open_settings, launches, leader, upper)
    if any(n < bai.WARMUP for n in launches.values()):
        assert pick == open_settings
    else:
        assert pick[0] == leader and len(pick) == 2
        scores = {s: math.inf if v is None else v for s, v in upper.items()}
        assert scores[pick[1]] == max(scores.values())


def test_a_parallel_sweep_with_the_best_arm_design_names_the_faster_in_fewer_launches() -> None:
    from specmon.experiment.fleet_sweep import FleetPlan, FleetSweep
    from tests.support.fleetsim import FleetWorld

    truth = {0: 100.0, 2: 112.0, 3: 106.0, 6: 90.0}
    total: dict[str, int] = {}
    for design in ("today", bai.NAME):
        total[design] = 0
        for seed in (5, 6, 7):
            world = FleetWorld(seed, truth, replica_cv=0.03)
            sweep = FleetSweep(FleetPlan((0, 2, 3, 6), samples=30, settle=2, seed=11, rounds=12, design=design),
                               world.arms(), clock=world.clock, sleep=world.sleep)
            result = asyncio.run(sweep.run())
            assert result.winner in (2, None), result.sentence()
            launches = Counter(int(x["steps"]) for x in result.to_json()["launches"])
            total[design] += sum(launches.values())
            if design == bai.NAME:
                # After the warm-up the replicas fill with the contenders, not the far slower one.
                assert launches[6] < min(launches[2], launches[3])
    assert total[bai.NAME] < total["today"], total


def _bai_sweep(plan: SweepPlan, world: SweepWorld) -> object:
    sweep = Sweep(replace(plan, design=bai.NAME), session=world.session, restart=world.restart,  # type: ignore[arg-type]
                  load=world, clock=world.clock, sleep=world.sleep)
    return asyncio.run(sweep.run())


def test_per_load_each_load_has_its_own_contenders() -> None:
    world = SweepWorld(3, launch_cv=0.03, restart_s=900.0, lines_per_poll=10)
    plan = SweepPlan((0, 2, 10), (1, 4), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     settle=2, launch_cv=0.05, resolve_pct=5.0)
    result = _bai_sweep(plan, world)
    cells = result.cells  # type: ignore[attr-defined]
    assert {c.concurrency for c in cells} == {1, 4}
    for conc in (1, 4):
        per = {c.steps: len(c.launches()) for c in cells if c.concurrency == conc}
        # 10 steps is far behind at either load: it leaves after the warm-up; the contenders go on.
        assert per[10] == bai.WARMUP and max(per.values()) > bai.WARMUP
    for v in result.verdicts:  # type: ignore[attr-defined]
        assert not (v.separated and v.best is not None and v.best.steps == 10)


def test_on_an_objective_the_objectives_own_launches_pick_the_contenders() -> None:
    from specmon.model.objective import parse_objective

    world = SweepWorld(4, launch_cv=0.03, restart_s=600.0, lines_per_poll=10, requests=True)
    plan = SweepPlan((0, 2, 10), (1,), order="launches", max_minutes=60, poll_s=10.0, launch_cv=0.05,
                     resolve_pct=5.0, objective=parse_objective("itl-p50"))
    result = _bai_sweep(plan, world)
    per = {c.steps: len(c.launches()) for c in result.cells}  # type: ignore[attr-defined]
    assert per[10] == bai.WARMUP
    [ov] = result.objective_verdicts  # type: ignore[attr-defined]
    assert ov.level == bai.rule_for(StoppingRule(), bai.look_rounds()).test_level
    assert not (ov.separated and ov.best is not None and ov.best.label.endswith("10 steps"))
