"""Parallel A/B sweeps over replicas: the rotated layout, the replica-effects fit, and the runner.

The statistics are checked on simulated truth (replicas with their own speeds, launches with
their own luck) over many seeds; the runner on simulated replicas that restart at once.
"""

from __future__ import annotations

import asyncio
import math
from collections import Counter

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.fleet_sweep import FleetPlan, FleetSweep
from specmon.experiment.stats.replica_effects import (
    BLOCKED,
    POOLED,
    WINNER,
    FleetLaunch,
    adjusted_level,
    decide,
    fit_fleet,
)
from specmon.experiment.stats.rotation import assign
from specmon.experiment.sweep_plan import SweepError
from specmon.model.launches import launch_of
from tests.support.fleet_verdict import rounds_agree_with_launches
from tests.support.fleetsim import FleetWorld

# --------------------------------------------------------------------------- the layout


@settings(max_examples=200, deadline=None)
@given(r=st.integers(1, 12), s=st.integers(1, 6), seed=st.integers(0, 2**31), start=st.integers(0, 20))
def test_each_round_is_balanced_and_s_rounds_give_every_replica_every_setting(
        r: int, s: int, seed: int, start: int) -> None:
    replicas = [f"host-{i}" for i in range(r)]
    steps = list(range(s))
    seen: dict[str, list[int]] = {n: [] for n in replicas}
    for k in range(start, start + s):
        layout = assign(replicas, steps, k, seed)
        assert set(layout) == set(replicas)
        counts = Counter(layout.values())
        per = [counts.get(x, 0) for x in steps]
        assert max(per) - min(per) <= 1, (k, layout)
        for n, x in layout.items():
            seen[n].append(x)
    for n in replicas:
        assert sorted(seen[n]) == steps, (n, seen[n])
    assert assign(replicas, steps, start, seed) == assign(list(reversed(replicas)), steps, start, seed)


@settings(max_examples=200, deadline=None)
@given(r=st.integers(1, 8), s=st.integers(2, 5), seed=st.integers(0, 1000), k=st.integers(0, 10),
       data=st.data())
def test_a_barred_replica_never_gets_that_setting_and_sits_out_only_when_barred_from_all(
        r: int, s: int, seed: int, k: int, data: st.DataObject) -> None:
    replicas = [f"r{i}" for i in range(r)]
    steps = list(range(s))
    barred = {n: set(data.draw(st.lists(st.sampled_from(steps), max_size=s))) for n in replicas}
    layout = assign(replicas, steps, k, seed, barred)
    for n in replicas:
        if barred[n] >= set(steps):
            assert n not in layout
        else:
            assert layout[n] not in barred[n]


def test_the_layout_needs_settings_and_distinct_replicas() -> None:
    with pytest.raises(ValueError):
        assign(["a"], [], 0, 1)
    with pytest.raises(ValueError):
        assign(["a", "a"], [1, 2], 0, 1)


# --------------------------------------------------------------------------- the fit


def _campaign(seed: int, truth: dict[int, float], rounds: int, *, replicas: int = 4, replica_cv: float = 0.10,
              launch_cv: float = 0.05) -> list[FleetLaunch]:
    rng = np.random.default_rng(seed)
    names = [f"r{i}" for i in range(replicas)]
    b = {n: rng.normal(0.0, replica_cv) for n in names}
    out = []
    for k in range(rounds):
        for n, s in assign(names, list(truth), k, seed).items():
            mu = truth[s] * math.exp(b[n] + rng.normal(0.0, launch_cv))
            launch = launch_of(mu * (1 + rng.normal(0.0, 0.05, 40)))
            assert launch is not None
            out.append(FleetLaunch(n, s, k, launch))
    return out


@pytest.mark.parametrize(("rounds", "replicas", "model"), [(1, 4, POOLED), (2, 4, POOLED), (3, 4, BLOCKED),
                                                           (6, 4, BLOCKED), (3, 3, BLOCKED), (2, 6, BLOCKED)])
def test_95_percent_intervals_of_a_difference_cover_the_truth(rounds: int, replicas: int, model: str) -> None:
    truth = {0: 100.0, 2: 112.0, 3: 106.0}
    covered = 0
    seeds = 600
    for seed in range(seeds):
        ff = fit_fleet(_campaign(seed, truth, rounds, replicas=replicas))
        assert ff is not None and ff.model == model
        pct, lo, hi = ff.ratio_pct(2, 0, 0.95)
        assert lo is not None and hi is not None
        covered += lo <= 12.0 <= hi
    # 600 seeds: the standard error of a 95% coverage is 0.9%; the pooled model is conservative.
    assert covered / seeds >= 0.93, covered / seeds


def test_removing_replica_effects_takes_a_huge_replica_spread_out_of_the_comparison() -> None:
    truth = {1: 100.0, 2: 110.0}
    widths = []
    for cv in (0.0, 0.5):
        ff = fit_fleet(_campaign(7, truth, 4, replicas=4, replica_cv=cv, launch_cv=0.01))
        assert ff is not None and ff.model == BLOCKED
        pct, lo, hi = ff.ratio_pct(2, 1, 0.95)
        assert lo is not None and hi is not None and lo < 10.0 < hi
        widths.append(hi - lo)
        if cv:
            assert ff.replica_cv is not None and ff.replica_cv > 0.2
    assert widths[1] < 1.5 * widths[0] + 0.5  # the replicas' 50% spread does not widen it


def test_the_model_is_chosen_by_the_layout_not_by_the_values() -> None:
    truth = {0: 100.0, 2: 100.0, 3: 100.0}
    for seed in range(30):
        a = fit_fleet(_campaign(seed, truth, 2))
        b = fit_fleet(_campaign(seed + 1000, truth, 2, replica_cv=0.3))
        assert a is not None and b is not None and a.model == b.model == POOLED


def test_decide_names_a_clear_winner_and_calls_equal_settings_equivalent_only_within_the_margin() -> None:
    ff = fit_fleet(_campaign(3, {0: 100.0, 2: 140.0, 3: 120.0}, 6, launch_cv=0.02))
    assert ff is not None
    d = decide(ff, [0, 2, 3], level=adjusted_level(0.05, 6), margin_pct=1.0, last=False)
    assert d is not None and d.kind == WINNER and d.leader == 2 and set(d.slower) == {0, 3}
    ff = fit_fleet(_campaign(3, {0: 100.0, 2: 100.0}, 8, launch_cv=0.002, replica_cv=0.2))
    assert ff is not None
    d = decide(ff, [0, 2], level=adjusted_level(0.05, 8), margin_pct=2.0, last=True)
    assert d is not None and d.kind == "equivalent", (d, ff.ratio_pct(0, 2, 0.99))


# --------------------------------------------------------------------------- the runner


def _run(world: FleetWorld, plan: FleetPlan) -> tuple[object, list[str]]:
    events: list[str] = []
    sweep = FleetSweep(plan, world.arms(), clock=world.clock, sleep=world.sleep,
                       on_event=lambda e: events.append(f"{e.kind}: {e.text}"))
    return asyncio.run(sweep.run()), events


def test_a_clearly_faster_setting_is_named_and_every_round_restarts_every_replica() -> None:
    world = FleetWorld(5, {0: 100.0, 2: 130.0, 3: 112.0})
    result, events = _run(world, FleetPlan((0, 2, 3), samples=30, settle=2, seed=11))
    assert result.winner == 2, result.sentence()
    rounds = result.rounds_run
    for r in world.replicas:
        assert len(r.restarts) == rounds
    doc = result.to_json()
    assert doc["verdict"]["winner_steps"] == 2 and doc["verdict"]["rests_on"]
    assert len(doc["launches"]) == 4 * rounds and all(x["ok"] for x in doc["launches"])
    assert result.sentence().startswith("2 steps: +") and "over no speculation at concurrency 1" in result.sentence()
    assert "; faster than 3 steps by " in result.sentence() and "replica" in result.sentence()
    assert any(e.startswith("round: round 1:") for e in events)


def test_false_winners_among_equal_settings_stay_rare_over_many_seeds() -> None:
    wins = 0
    seeds = 120
    for seed in range(seeds):
        world = FleetWorld(seed, {1: 100.0, 2: 100.0, 3: 100.0}, replica_cv=0.15)
        result, _ = _run(world, FleetPlan((1, 2, 3), samples=20, settle=1, seed=seed, rounds=5))
        wins += result.winner is not None
    assert wins / seeds <= 0.06, wins


def test_a_replica_that_fails_to_start_a_setting_is_dropped_from_that_arm_and_the_sweep_goes_on() -> None:
    world = FleetWorld(2, {0: 100.0, 2: 130.0}, fail=frozenset({("r3", 2)}))
    result, events = _run(world, FleetPlan((0, 2), samples=20, settle=1, seed=4, rounds=4))
    r3 = next(r for r in world.replicas if r.name == "r3")
    assert r3.restarts.count(2) == 1, r3.restarts  # tried once, never again
    failed = [x for x in result.records if not x.ok]
    assert [(x.replica, x.steps) for x in failed] == [("r3", 2)]
    assert "restart failed" in failed[0].text
    assert any("r3: 2 steps: restart failed" in e and "dropped" in e for e in events)
    assert result.winner == 2, result.sentence()


def test_every_start_failing_ends_with_no_verdict_and_says_why() -> None:
    fail = frozenset((f"r{i}", s) for i in range(1, 5) for s in (0, 2))
    world = FleetWorld(2, {0: 100.0, 2: 130.0}, fail=fail)
    result, events = _run(world, FleetPlan((0, 2), samples=20, settle=1, seed=4, rounds=4))
    assert result.decision is None and result.sentence().startswith("Not enough data: no round gave")
    assert any("no replica could start no speculation, 2 steps" in e for e in events), events


def test_the_plan_refuses_nonsense() -> None:
    for kw in ({"steps": (2,)}, {"steps": (2, 2)}, {"steps": (1, 2), "samples": 2}, {"steps": (1, 2), "rounds": 0}):
        with pytest.raises(SweepError):
            FleetPlan(**kw)  # type: ignore[arg-type]


def test_no_verdict_while_a_setting_has_not_been_measured_even_when_the_others_differ_hugely() -> None:
    # One replica: the first two rounds measure two of the three settings.
    world = FleetWorld(1, {0: 100.0, 2: 300.0, 4: 50.0}, replicas=1, replica_cv=0.0)
    result, events = _run(world, FleetPlan((0, 2, 4), samples=20, settle=1, seed=3, rounds=6))
    order = [x.steps for x in result.records]
    assert sorted(order[:3]) == [0, 2, 4], order  # every setting before any verdict
    assert result.rounds_run >= 3 and result.winner == 2, (order, result.sentence())
    looks = [e for e in events if e.startswith("look: after round")]
    assert looks and all("— continue" in e for e in looks[:1]), looks


def test_a_setting_no_replica_can_start_is_left_out_and_said() -> None:
    fail = frozenset((f"r{i}", 4) for i in range(1, 5))
    world = FleetWorld(2, {0: 100.0, 2: 130.0, 4: 200.0}, fail=fail)
    result, events = _run(world, FleetPlan((0, 2, 4), samples=20, settle=1, seed=4, rounds=6))
    assert any("no replica could start 4 steps" in e for e in events), events
    assert result.winner == 2, result.sentence()
    assert all(x.ok == (x.steps != 4) for x in result.records)


def test_a_clearly_slower_setting_leaves_the_rotation_and_the_rounds_record_says_when_and_why() -> None:
    world = FleetWorld(3, {0: 100.0, 2: 103.0, 4: 55.0}, launch_cv=0.01)
    result, events = _run(world, FleetPlan((0, 2, 4), samples=30, settle=2, seed=5, rounds=6))
    doc = result.to_json()
    rounds_agree_with_launches(doc, (0, 2, 4))
    left = [(r["round"], x["steps"]) for r in doc["rounds"] for x in r["left_out"]]
    assert left and left[0][1] == 4 and doc["rounds"][left[0][0] - 1]["left_out"][0]["why"].startswith("slower than")
    assert doc["rounds_run"] > left[0][0], doc["rounds"]  # later rounds ran without it
    assert any("left out of the next rounds" in e and "4 steps" in e for e in events), events


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), truth=st.lists(st.floats(40.0, 160.0), min_size=2, max_size=4),
       replicas=st.integers(1, 5), fail_one=st.booleans())
def test_the_rounds_record_matches_the_launches_for_any_speeds_replicas_and_failures(
        seed: int, truth: list[float], replicas: int, fail_one: bool) -> None:
    steps = tuple(range(0, 2 * len(truth), 2))
    fail = frozenset({("r1", steps[-1])}) if fail_one else frozenset()
    world = FleetWorld(seed, dict(zip(steps, truth, strict=True)), replicas=replicas, fail=fail)
    result, _ = _run(world, FleetPlan(steps, samples=12, settle=1, seed=seed, rounds=4))
    rounds_agree_with_launches(result.to_json(), steps, barred=fail_one)


def test_the_reports_say_which_round_took_a_setting_out_and_stay_within_80_columns() -> None:
    from specmon.output.parallel_sweep import markdown_report, text_report

    world = FleetWorld(3, {0: 100.0, 2: 103.0, 4: 55.0}, launch_cv=0.01)
    result, _ = _run(world, FleetPlan((0, 2, 4), samples=30, settle=2, seed=5, rounds=6))
    doc = result.to_json()
    first = next(r for r in doc["rounds"] if r["left_out"])
    said = f"after round {first['round']}: left out of the later rounds: 4 steps (slower than"
    text = text_report(doc)
    assert said in " ".join(text.split()), text
    assert all(len(line) <= 80 for line in text.splitlines()), text
    assert said in markdown_report(doc)
    doc.pop("rounds")  # a document written before rounds were recorded still reports
    assert "left out of the later rounds" not in text_report(doc)
