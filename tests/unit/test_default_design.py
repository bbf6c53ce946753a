"""The default sweep's launch design: its stated budget, what would decide an undecided ending, the demo's defaults.

The power calculation behind "what would decide it" is checked the way it is meant: that many
more launches, drawn from a known truth with the launch spread measured, are judged by the
verdict's own two-level model at its own level, and the share that decide is about the stated
power.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.cli import build_parser
from specmon.commands.plan_layers import sweep_plan_of as _plan
from specmon.control.demo import DEMO_LAUNCH_CV, DEMO_SWEEP_STEPS
from specmon.experiment.rounds import plan_budget
from specmon.experiment.stats.design import POWER, closing_advice, launch_spread2, more_launches
from specmon.experiment.sweep_plan import SweepEvent, SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.launches import Launch, fit
from specmon.model.stopping import StoppingRule
from specmon.sim.model import DEFAULT_MODEL, SpecConfig, launch_speed
from specmon.sim.sweepworld import SweepWorld

LEVEL = StoppingRule().test_level  # 0.995: the verdict's adjusted level with five looks


def _launches(rng: random.Random, mean: float, r: int, cv: float, within: float) -> list[Launch]:
    """``r`` launches of a setting whose true mean is ``mean``: the simulator's launch factor, a within error."""
    out = []
    for j in range(r):
        mu = mean * launch_speed(rng, cv)
        out.append(Launch(mu * (1 + within * rng.gauss(0, 1)), mu * within, 20.0, 400, f"l{j}"))
    return out


@pytest.mark.parametrize(("a", "b", "cv"), [(2, 0, 0.05), (2, 5, 0.03), (0, 1, 0.08)])
def test_the_launches_named_decide_about_as_often_as_stated(a: int, b: int, cv: float) -> None:
    # The simulator's truth for two step counts, its launch factor at launch CV `cv`.
    ta = DEFAULT_MODEL.expected_throughput(SpecConfig.make(a))
    tb = DEFAULT_MODEL.expected_throughput(SpecConfig.make(b))
    within = 0.005
    k, kind = more_launches(ta / tb - 1, cv**2 + within**2, 3, 3, 4.0, LEVEL, margin=0.01)
    assert kind == "separate" and 1 <= k <= 200
    rng = random.Random(zlib_seed := a * 100 + b)
    runs, decided = 600, 0
    for _ in range(runs):
        _, est = fit({"a": _launches(rng, ta, 3 + k, cv, within), "b": _launches(rng, tb, 3 + k, cv, within)})
        _, lo, _ = est["a"].difference(est["b"], LEVEL)
        decided += lo is not None and lo > 0
    assert abs(decided / runs - POWER) < 0.07, (zlib_seed, k, decided / runs)
    # One launch fewer of each would fall short of the power asked for (k is the smallest).
    assert more_launches(ta / tb - 1, cv**2 + within**2, 3 + k - 1, 3 + k - 1, 4.0 + 2 * (k - 1), LEVEL,
                         margin=0.01)[0] >= 1


@settings(max_examples=150, deadline=None)
@given(st.floats(0.001, 0.5), st.floats(0.0001, 0.05), st.integers(1, 30), st.integers(1, 30),
       st.sampled_from([2.0, 10.0, math.inf]))
def test_more_launches_is_the_smallest_count_that_reaches_the_power(diff: float, s2: float, ra: int, rb: int,
                                                                     df0: float) -> None:
    k, kind = more_launches(diff, s2, ra, rb, df0, LEVEL, margin=0.01)
    assert k >= 0
    if k > 200:
        return  # out of reach: said as such
    # A wider spread or a smaller difference never needs fewer launches.
    assert more_launches(diff, 2 * s2, ra, rb, df0, LEVEL, margin=0.01)[0] >= k or kind == "equivalent"
    if kind == "separate" and k > 0:
        se = math.sqrt(s2 * ((1 + diff) ** 2 / (ra + k - 1) + 1 / (rb + k - 1)))
        from specmon.model.stats import t_quantile

        df = df0 + 2 * (k - 1) if math.isfinite(df0) else math.inf
        t = t_quantile(1 - (1 - LEVEL) / 2, max(df, 1.0))
        assert diff / se - t < t_quantile(POWER, math.inf) + 1e-9


def _demo_plan(*argv: str) -> SweepPlan:
    return _plan(build_parser().parse_args(["sweep", "--demo", *argv]))


def test_the_default_sweep_is_the_launch_design_and_the_demo_states_its_world() -> None:
    p = _demo_plan("--steps", "0,2")
    assert p.order == "launches" and p.launch_cv == 0.05  # assumed until launches are measured
    assert "100× faster" in p.clock and p.sample_rate == 100.0
    assert _demo_plan("--steps", "0,2", "--strategy", "guided").order == "given"
    assert _demo_plan("--steps", "0,2", "--order", "random").order == "random"
    args = build_parser().parse_args(["sweep", "--demo"])
    assert not hasattr(args, "steps") and not hasattr(args, "order")  # only what was typed: the plan's layers
    assert _demo_plan().steps == DEMO_SWEEP_STEPS  # the demo's settings come from DEMO_SWEEP_STEPS
    assert DEMO_SWEEP_STEPS == (0, 1, 2, 5, 10) and 0 < DEMO_LAUNCH_CV <= 0.05


def test_the_budget_is_stated_before_the_first_restart_and_holds() -> None:
    p = SweepPlan(DEMO_SWEEP_STEPS, order="launches", max_minutes=0.4, poll_s=0.1, settle=2, restart_s=1.0,
                  sample_rate=100.0, clock="the demo's")
    stated = plan_budget(p)
    assert stated is not None and stated.restarts == 16 * len(DEMO_SWEEP_STEPS)
    assert stated.text.startswith("budget: at most 80 restarts (16 rounds of 5 settings), about ")
    assert "(the demo's)" in stated.text and "1.0 s a restart" in stated.text
    assert plan_budget(SweepPlan((0, 2))) is None  # one launch per setting: no rounds to bound
    world = SweepWorld(2, launch_cv=DEMO_LAUNCH_CV, restart_s=1.0, lines_per_poll=10)
    events: list[SweepEvent] = []
    sweep = Sweep(p, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep, on_event=events.append)
    result = asyncio.run(sweep.run())
    first = next(e.text for e in events if e.kind == "plan" and e.text.startswith("plan: "))
    assert "budget: at most 80 restarts" in first
    assert result.restarts <= stated.restarts
    # The demo's default names the simulated truth's best setting, each setting launched twice or more.
    v = result.verdict
    assert v is not None and v.separated and v.best is not None and v.best.steps == 2
    assert all(len(c.launches()) >= 2 for c in result.cells)
    assert result.needs_more == [] and closing_advice(result.needs_more) == []


def test_an_undecided_ending_says_which_two_how_many_more_and_how_long() -> None:
    # 2 and 3 steps are 1.9% apart in the simulated truth: a sweep capped at a few rounds cannot tell them.
    world = SweepWorld(5, launch_cv=0.05, restart_s=900.0, lines_per_poll=10)
    p = SweepPlan((2, 3), order="launches", max_minutes=60, poll_s=10.0, settle=2, restart_s=900.0, rounds=3)
    events: list[SweepEvent] = []
    sweep = Sweep(p, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep, on_event=events.append)
    result = asyncio.run(sweep.run())
    v = result.verdict
    assert v is not None and not v.separated and not v.equivalent
    assert v.best is not None and v.runner_up is not None
    [more] = result.needs_more
    assert (more.a, more.b) == (v.best.label, v.runner_up.label)
    a, b = v.best.estimate, v.runner_up.estimate
    assert a is not None and b is not None
    s2, df0 = launch_spread2(a, b)
    k, kind = more_launches(a.mean / b.mean - 1, s2, len(a.launches), len(b.launches), df0, v.level, margin=0.01)
    assert more.launches_each == max(1, min(k, 200)) and more.kind == kind
    # Its time is at this sweep's measured restarts (900 s on the world's clock) and launch length.
    assert more.restart_s == pytest.approx(900.0)
    assert more.seconds == pytest.approx(2 * more.launches_each * (more.restart_s + more.launch_s))
    assert more.text.startswith("What would decide it: ") and v.best.label in more.text
    assert "measure longer" not in more.text
    assert [e.text for e in events if e.kind == "advice"] == [more.text]
    doc = result.to_json()
    assert doc["needs_more"][0]["launches_each"] == more.launches_each
    assert doc["needs_more"][0]["hours"] == pytest.approx(more.hours, abs=1e-3)


def test_the_demo_with_no_options_names_the_truths_best(tmp_path: Path) -> None:
    """The suite's seed of ``bench/bench_demo_default.py``: the real command, its simulated server restarted
    for every launch; the ten seeds and their wall times are in bench/RESULTS.md."""
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    proc = subprocess.run([sys.executable, "-m", "specmon", "sweep", "--demo", "--seed", "3", "--format", "json",
                           "--no-record", "--finish", "last"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    v = doc["verdict"]
    assert v["separated"] and v["best_steps"] == 2, v["sentence"]
    assert [r["steps"] for r in doc["runs"]] == list(DEMO_SWEEP_STEPS)
    assert all(r["launches"] >= 2 for r in doc["runs"]) and doc["needs_more"] == []
    # Stated on screen: the simulated server's launch spread, and the budget before the first restart.
    err = proc.stderr
    assert f"differ by a {100 * DEMO_LAUNCH_CV:g}% launch spread" in err
    first_plan = next(line for line in err.splitlines() if line.startswith("sweep: plan: "))
    assert "budget: at most 80 restarts (16 rounds of 5 settings)" in first_plan
    assert "the simulated server runs 100× faster than a real one" in first_plan
    assert err.index(first_plan) < err.index("start: cd ")
    assert doc["restarts"] <= 80


def test_the_budget_before_the_first_restart_uses_the_hosts_remembered_restarts(tmp_path: Path) -> None:
    from specmon.control.eta import EtaStore
    from specmon.experiment.rounds import known_restart_s

    store = EtaStore(tmp_path / "restart_times.json")
    assert known_restart_s(store, "gpu-box") is None and known_restart_s(None, "gpu-box") is None
    store.record("gpu-box", {"stopping": 10.0, "starting": 20.0, "loading": 600.0, "capturing": 270.0})
    store.record("gpu-box", {"stopping": 30.0, "starting": 20.0, "loading": 500.0, "capturing": 250.0})
    known = known_restart_s(EtaStore(tmp_path / "restart_times.json"), "gpu-box")
    assert known == pytest.approx(20.0 + 20.0 + 550.0 + 260.0)  # each phase's median, summed
    stated = plan_budget(SweepPlan((0, 2), order="launches", restart_s=known))
    assert stated is not None and "at 14.2 minutes a restart" in stated.text and stated.restarts == 32


def test_what_would_decide_says_whether_the_spread_was_measured_or_assumed() -> None:
    # One launch of each: the spread is the assumed launch CV, and the sentence says so.
    world = SweepWorld(1, launch_cv=0.05, restart_s=60.0, lines_per_poll=10)
    p = SweepPlan((2, 3), order="given", max_minutes=60, poll_s=10.0, settle=2)
    result = asyncio.run(Sweep(p, session=world.session, restart=world.restart, load=world, clock=world.clock,
                               sleep=world.sleep).run())
    v = result.verdict
    assert v is not None and not v.separated and not v.equivalent  # 1.9% apart: one launch each cannot tell
    [more] = result.needs_more
    assert not more.measured and "assumed: no setting was launched twice" in more.text
    assert more.spread_pct == pytest.approx(100 * math.sqrt(0.05**2 + sum(
        (x.se / x.mean) ** 2 for e in (v.best.estimate, v.runner_up.estimate) if e is not None  # type: ignore[union-attr]
        for x in e.launches if x.se is not None) / 2), rel=1e-6)
    assert more.to_json()["spread_measured"] is False


def test_an_undecided_objective_says_what_would_decide_it_in_its_own_terms() -> None:
    from specmon.model.objective import parse_objective

    # 2 and 3 steps, 1.9% apart in tok/s: two fixed rounds of ITL p50 cannot tell them.
    world = SweepWorld(4, launch_cv=0.05, restart_s=600.0, lines_per_poll=10, requests=True)
    p = SweepPlan((2, 3), (1,), order="launches", max_minutes=60, poll_s=10.0, launch_cv=0.05, rounds=2,
                  objective=parse_objective("itl-p50"))
    result = asyncio.run(Sweep(p, session=world.session, restart=world.restart, load=world, clock=world.clock,
                               sleep=world.sleep).run())
    [ov] = result.objective_verdicts
    assert not ov.separated and not ov.equivalent and ov.diff_pct is not None
    [more] = result.needs_more
    assert ov.best is not None and ov.runner_up is not None and (more.a, more.b) == (ov.best.label, ov.runner_up.label)
    assert more.what == "ITL p50" and more.measured and more.launches_each >= 1
    assert more.diff_pct == pytest.approx(abs(ov.diff_pct[0]))  # the objective's own difference
    assert (f"{abs(ov.diff_pct[0]):+.1f}% in ITL p50 seen" in more.text if more.reachable
            else f"{abs(ov.diff_pct[0]):.1f}% apart in ITL p50" in more.text)
