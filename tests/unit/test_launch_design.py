"""The sweep's launch design: extend or relaunch, the plan, the rounds, through the real sweep runner."""

from __future__ import annotations

import asyncio
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.rounds import effective_rule, look_rounds
from specmon.experiment.stats.design import Noise, extend, launch_samples, plan, reschedule
from specmon.experiment.sweep_plan import SweepEvent, SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.sim.sweepworld import SweepWorld


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(1, 5000), min_size=1, max_size=8), st.floats(1e-4, 0.1), st.floats(0.1, 10.0),
       st.floats(1.0, 3600.0), st.integers(3, 5000))
def test_without_launch_variance_a_launch_is_always_extended(ns: list[int], w: float, rate: float,
                                                             restart: float, m: int) -> None:
    assert extend(Noise(0.0, w, rate, restart), ns, m)


def test_extend_until_a_relaunch_removes_more_variance_per_second() -> None:
    noise = Noise(0.05**2, 0.01, 1.0, 600.0)
    m = launch_samples(noise, 40, 1600)
    assert m == round(math.sqrt(600 * 1.0 * 0.01 / 0.05**2))  # sqrt(R rate w / tau²) = 49
    assert extend(noise, [m // 2], m)  # half-way through the optimal length: keep going
    assert not extend(noise, [20 * m], m)  # far past it: another start buys more
    # A costlier restart makes longer launches worth it.
    assert launch_samples(Noise(0.05**2, 0.01, 1.0, 2400.0), 40, 1600) == 2 * m


def test_the_plan_line_says_launches_minutes_and_total() -> None:
    p = plan(5.0, Noise(0.05**2, 0.01, 1.0, 600.0), 4, 0.995, 40, 1600)
    assert p.launches >= 2 and p.samples == 49
    assert p.text.startswith("to resolve ±5% with launch CV 5.0% and within-launch noise 1.3% per minute: ")
    assert f"{p.launches} launches × 49 s per setting" in p.text and "in all (4 settings, 10.0 minutes a restart)" in p.text
    # With no launch variance: one long launch per setting, as the single-launch sweep.
    one = plan(5.0, Noise(0.0, 0.01, 1.0, 600.0), 4, 0.995, 40, 1600)
    assert one.launches == 1


@settings(max_examples=100, deadline=None)
@given(st.integers(3, 12), st.integers(1, 6), st.integers(1, 40), st.data())
def test_rescheduling_keeps_the_number_of_looks_and_the_past(last: int, k: int, needed: int,
                                                            data: st.DataObject) -> None:
    looks = look_rounds(last, k)
    assert list(looks) == sorted(set(looks)) and looks[-1] == last and looks[0] >= 2
    assert look_rounds(1, k) == (1,)
    done = data.draw(st.sampled_from(looks))
    new = reschedule(looks, done, needed, 16)
    assert len(new) == len(looks)
    assert list(new) == sorted(set(new))
    assert [r for r in new if r <= done] == [r for r in looks if r <= done]
    assert new[-1] >= looks[-1] and new[-1] <= max(16, looks[-1])


def _campaign(seed: int, cv: float, events: list[SweepEvent] | None = None) -> tuple[Sweep, SweepWorld]:
    world = SweepWorld(seed, launch_cv=cv, restart_s=600.0, lines_per_poll=10)
    plan_ = SweepPlan((0, 2), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0, settle=2,
                      launch_cv=0.05, resolve_pct=5.0)
    sweep = Sweep(plan_, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep, on_event=events.append if events is not None else None)
    asyncio.run(sweep.run())
    return sweep, world


def test_the_runner_relaunches_interleaved_and_the_verdict_names_its_launches() -> None:
    events: list[SweepEvent] = []
    sweep, world = _campaign(3, 0.05, events)
    result = sweep.result()
    v = result.verdict
    assert v is not None
    plans = [e.text for e in events if e.kind == "plan" and e.text.startswith("plan: to resolve ±5%")]
    assert len(plans) >= 2  # before measuring, and updated after the rounds
    launched = [s for s, _, _ in world.restarts]
    assert launched.count(0) >= 2 and launched.count(2) >= 2  # baseline and leader started again
    # Rounds alternate direction: 0, 2 | 2, 0 | 0, 2 ...
    assert launched[:4] == [0, 2, 2, 0]
    counts = {r.label: len(r.runs) for r in v.analysis.rows}
    assert f"Rests on {sum(counts.values())} launches" in v.sentence
    doc = result.to_json()
    assert [r["launches"] for r in doc["runs"]] == [len(c.launches()) for c in result.cells]
    assert all(r["interval_covers"] == f"{r['launches']} launches" for r in doc["runs"])
    assert "estimated from 2 settings measured in 2+ launches" in v.sentence
    # The verdict tests at the launch design's level (its looks are rounds).
    judge, looks = effective_rule(StoppingRule(), 5.0, 0.05, 600.0)
    assert v.level == pytest.approx(judge.test_level) and len(looks) == StoppingRule().looks


def test_no_launch_variance_said_is_the_single_launch_sweep() -> None:
    # --launch-cv 0: a new launch never pays; one launch per setting, judged at the end.
    world = SweepWorld(4, restart_s=600.0, lines_per_poll=10)
    plan_ = SweepPlan((0, 2), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0, launch_cv=0.0,
                      resolve_pct=5.0)
    sweep = Sweep(plan_, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep)
    result = asyncio.run(sweep.run())
    assert result.verdict is not None and result.verdict.separated and result.verdict.best.steps == 2  # type: ignore[union-attr]
    assert [len(c.launches()) for c in result.cells] == [1, 1]


def test_the_command_line_options(capsys: pytest.CaptureFixture[str]) -> None:
    from specmon.cli import build_parser
    from specmon.commands.plan_layers import sweep_plan_of as _plan

    parser = build_parser()
    args = parser.parse_args(["sweep", "--demo", "--steps", "0,2", "--resolve-pct", "4", "--launch-cv", "8"])
    p = _plan(args)
    assert p.order == "launches" and p.resolve_pct == 4.0 and p.launch_cv == pytest.approx(0.08)
    assert p.identity()["launch_cv"] == pytest.approx(0.08) and p.identity()["resolve_pct"] == 4.0
    # Left alone: the launch design (the default), with the default assumed launch CV; --order given is
    # the one-launch sample sweep (and an old state file's identity).
    plain = _plan(parser.parse_args(["sweep", "--demo", "--steps", "0,2"]))
    assert plain.order == "launches" and plain.launch_cv == 0.05 and "launch_cv" not in plain.identity()
    given_ = _plan(parser.parse_args(["sweep", "--demo", "--steps", "0,2", "--order", "given"]))
    assert given_.order == "given" and given_.resolve_pct is None
    for argv in (["summarize", "x.log", "--launch-cv", "100"], ["summarize", "x.log", "--launch-cv", "-1"],
                 ["report", "r.jsonl", "--launch-cv", "nan"], ["sweep", "--demo", "--resolve-pct", "0"]):
        with pytest.raises(SystemExit):
            parser.parse_args(argv)
        assert "--launch-cv" in capsys.readouterr().err or "--resolve-pct" in argv
