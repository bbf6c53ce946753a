"""The schedule deployed and measured against the best fixed setting at each load (issue 32, item 1).

On simulated truth (:class:`specmon.sim.sweepworld.SweepWorld` running a K-by-batch table as vLLM does),
and the vLLM profile rewriting: the table lands in the profile's own ``--speculative-config``, every other
flag as it was; what cannot take a schedule says why before anything restarts.
"""

from __future__ import annotations

import asyncio
import json
import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.control.launch import LaunchProfile
from specmon.engines.vllm import spec_config_at
from specmon.experiment.schedule_check import measure_schedule, schedule_profile
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.objective import parse_objective
from specmon.model.schedule import Schedule, ScheduleEntry
from specmon.model.stopping import StoppingRule
from specmon.sim.sweepworld import SweepWorld


def _vllm(tmp: Path, spec: str = '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": 4}',
          engine: str = "vllm", joined: bool = False) -> LaunchProfile:
    flag = [f"--speculative-config={spec}"] if joined else ["--speculative-config", spec]
    return LaunchProfile.model_validate({
        "mode": "managed", "engine": engine,
        "argv": ["/opt/vllm/bin/vllm", "serve", "/models/m", "--port", "{port}", *flag],
        "nospec_argv": ["/opt/vllm/bin/vllm", "serve", "/models/m", "--port", "{port}"],
        "log": str(tmp / "vllm_{steps}.log"), "pidfile": str(tmp / "vllm.pid"), "port": 8000,
        "health_url": "http://127.0.0.1:{port}/health"})


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(0, 6), min_size=2, max_size=5), st.booleans())
def test_the_table_lands_in_the_profiles_own_config_and_nothing_else_moves(ks: list[int], joined: bool) -> None:
    tmp = Path("/tmp/specmon-schedule-test")
    base = _vllm(tmp, joined=joined)
    loads = [4**i for i in range(len(ks))]
    sched = Schedule(tuple(ScheduleEntry(c, k, "winner", k, "") for c, k in zip(loads, ks, strict=True)))
    prof, why = schedule_profile(base, sched)
    if sched.speculation_off:
        assert prof is None and "no schedule" in why
        return
    assert prof is not None and why == ""
    found = spec_config_at(prof.argv)
    assert found is not None
    doc = json.loads(found[1])
    # The profile's method and window kept; the cap and the table vLLM validates.
    assert doc["method"] == "ngram" and doc["prompt_lookup_max"] == 4
    assert doc["num_speculative_tokens"] == max(ks)
    assert doc["num_speculative_tokens_per_batch_size"] == [list(r) for r in sched.ranges]
    others = [t for t in prof.argv if "speculative-config" not in t and not t.startswith("{")]
    assert others == [t for t in base.argv if "speculative-config" not in t and not t.startswith("{")]
    # The start command quotes it as one argument: nothing in the JSON reaches the shell as syntax.
    from specmon.commands.sweep_parts import _NoRunner
    from specmon.experiment.plan_restarter import PlanRestarter

    plan = PlanRestarter(prof, _NoRunner()).plan_for(max(ks))
    text = json.dumps(doc, separators=(", ", ": "))
    assert plan.argv is not None and (text in plan.argv or f"--speculative-config={text}" in plan.argv)
    assert shlex.quote(text) in plan.start.display or shlex.quote(f"--speculative-config={text}") in plan.start.display


@pytest.mark.parametrize(("engine", "spec", "why"), [
    ("sglang", '{"method": "ngram", "num_speculative_tokens": {steps}}', "SGLang reads its adaptive tiers"),
    ("vllm", '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": {prompt_lookup_max}}',
     "{prompt_lookup_max}"),
    ("vllm", "ngram-{steps}", "not a JSON object"),
])
def test_a_profile_that_cannot_take_the_table_says_why(tmp_path: Path, engine: str, spec: str, why: str) -> None:
    sched = Schedule((ScheduleEntry(1, 2, "winner", 2, ""), ScheduleEntry(16, 0, "off", 0, "")))
    prof, text = schedule_profile(_vllm(tmp_path, spec, engine), sched)
    assert prof is None and why in text


def _sweep_then_schedule(seed: int, objective: str = "tps") -> tuple[object, list[object], SweepWorld]:
    world = SweepWorld(seed, launch_cv=0.04, restart_s=600.0, lines_per_poll=10, requests=True)
    plan = SweepPlan((0, 2), (1, 64), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     launch_cv=0.05, resolve_pct=5.0, objective=parse_objective(objective))
    sweep = Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep)
    result = asyncio.run(sweep.run())
    (sched,) = result.schedules()
    before = len(world.restarts)
    measured, checks = asyncio.run(measure_schedule(
        plan, result, sched, launches=2, session=world.session, restart=world.schedule_restart(sched.ranges),
        load=world, clock=world.clock, sleep=world.sleep))
    # Two fresh launches at each of the two loads, every one at the schedule's cap.
    assert [s for s, _, _ in world.restarts[before:]] == [sched.max_steps] * 4
    assert measured.finished and all(len(c.launches()) == 2 for c in measured.cells)
    return sched, checks, world


@pytest.mark.parametrize("objective", ["tps", "itl-p50"])
def test_the_deployed_schedule_is_compared_with_the_best_fixed_setting_at_each_load(objective: str) -> None:
    sched, checks, _ = _sweep_then_schedule(7, objective)
    assert [c.concurrency for c in checks] == [e.concurrency for e in sched.entries]  # type: ignore[attr-defined]
    for check, entry in zip(checks, sched.entries, strict=True):  # type: ignore[attr-defined]
        doc = check.to_json()  # type: ignore[attr-defined]
        assert doc["schedule_launches"] == 2 and doc["change_ci95"] is not None
        lo, hi = doc["change_ci95"]
        assert lo <= doc["change_pct"] <= hi
        if entry.decided:
            # The schedule runs the best fixed setting's K there: the same server, so level within noise.
            assert doc["best_steps"] == entry.steps
            assert abs(doc["change_pct"]) < 15
        assert f"concurrency {entry.concurrency}: the schedule (K={entry.steps})" in doc["sentence"]
    # Speculation pays at 1 and not at 64 in the simulator: the schedule switches it off under load.
    assert [e.steps for e in sched.entries] in ([2, 0], [2, 2], [0, 0])  # type: ignore[attr-defined]


def test_a_schedule_worse_than_the_best_fixed_setting_is_called_worse() -> None:
    # Deploy the opposite of the verdicts (K=0 at 1, K=2 at 64): the comparison must see the loss.
    world = SweepWorld(3, launch_cv=0.03, restart_s=600.0, lines_per_poll=10)
    plan = SweepPlan((0, 2), (1, 64), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     launch_cv=0.05, resolve_pct=5.0)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                               sleep=world.sleep).run())
    truth = {c: {k: world.expected_at(k, None, c) for k in (0, 2)} for c in (1, 64)}
    wrong = Schedule(tuple(ScheduleEntry(c, min(truth[c], key=lambda k: truth[c][k]), "winner", 0, "")
                           for c in (1, 64)))
    _, checks = asyncio.run(measure_schedule(plan, result, wrong, launches=2, session=world.session,
                                             restart=world.schedule_restart(wrong.ranges), load=world,
                                             clock=world.clock, sleep=world.sleep))
    judged = 0
    for check in checks:
        gap = 100 * (min(truth[check.concurrency].values()) / max(truth[check.concurrency].values()) - 1)
        if gap < -10:  # 2 steps at 64 in flight: 26% below no speculation in the simulator
            judged += 1
            assert check.ci95 is not None and check.ci95[1] < 0, check.sentence
            assert "worse than" in check.sentence
        assert check.ci95 is not None and check.ci95[0] <= check.change_pct <= check.ci95[1]  # type: ignore[operator]
    assert judged == 1


def test_measure_schedule_is_refused_before_any_restart_where_it_cannot_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.unit.test_sweep_cli import run_cli

    cfg = tmp_path / "c.toml"
    argv = ["/opt/vllm/bin/vllm", "serve", "/m", "--port", "{port}", "--speculative-config",
            '{"method": "ngram", "num_speculative_tokens": {steps}}']
    cfg.write_text(
        "[profiles.v.launch]\n"
        f"engine = \"vllm\"\nargv = {json.dumps(argv)}\nnospec_argv = {json.dumps(argv[:5])}\n"
        f'log = "{tmp_path}/v_{{steps}}.log"\npidfile = "{tmp_path}/v.pid"\nport = 8000\nready_marker = "up"\n'
        "[profiles.s.launch]\n"
        f"engine = \"sglang\"\nargv = [\"/opt/sglang\", \"--steps\", \"{{steps}}\", \"--port\", \"{{port}}\"]\n"
        f'log = "{tmp_path}/s.log"\npidfile = "{tmp_path}/s.pid"\nport = 8001\nready_marker = "up"\n')
    cases = [
        (["v", "--concurrency", "1"], "two or more concurrencies"),
        (["v", "--concurrency", "1,16", "--no-load"], "leave out --no-load"),
        (["v", "--concurrency", "1,16", "--workload", "chat,code"], "one workload"),
        (["s", "--concurrency", "1,16"], "SGLang reads its adaptive tiers"),
    ]
    for extra, why in cases:
        code, out, err = run_cli(["sweep", *extra[:1], "--config", str(cfg), "--steps", "1,2", "--yes",
                                  "--measure-schedule", *extra[1:]], capsys)
        assert code == 2 and why in err and "restarting" not in err, (extra, err)
        assert "Traceback" not in err
    code, _, err = run_cli(["sweep", "--demo", "--concurrency", "1,16", "--measure-schedule"], capsys)
    assert code == 2 and "demo" in err
    adaptive = [
        (["v"], "SGLang's (--speculative-adaptive)"),
        (["s", "--compare-adaptive", "tiers.json"], "absolute"),
        (["s", "--no-load", "--compare-adaptive"], "leave out --no-load"),
    ]
    for extra, why in adaptive:
        flags = extra[1:] if "--compare-adaptive" in extra else [*extra[1:], "--compare-adaptive"]
        code, out, err = run_cli(["sweep", extra[0], "--config", str(cfg), "--steps", "1,2", "--yes", *flags], capsys)
        assert code == 2 and why in err and "restarting" not in err, (extra, err)
    cfg.write_text(cfg.read_text().replace('"/opt/sglang", ', '"/opt/sglang", "--speculative-algorithm", "NGRAM", '))
    code, _, err = run_cli(["sweep", "s", "--config", str(cfg), "--steps", "1,2", "--yes", "--compare-adaptive"],
                           capsys)
    assert code == 2 and "EAGLE and EAGLE3 only" in err


def test_the_engines_adaptive_controller_is_graded_by_its_regret_at_each_load() -> None:
    # The simulated controller settles on 3 steps at 1 and 16 in flight (SGLang's default tiers); the truth
    # there: 2.4% below the best fixed setting at 1, 19% below no speculation at 16.
    from specmon.experiment.schedule_check import measure_deployed

    world = SweepWorld(3, launch_cv=0.03, restart_s=600.0, lines_per_poll=10)
    plan = SweepPlan((0, 2, 3), (1, 16), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     launch_cv=0.05, resolve_pct=5.0)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                               sleep=world.sleep).run())
    table = [(c, c, world.adaptive_steps(c)) for c in (1, 16)]
    events: list[object] = []
    _, checks = asyncio.run(measure_deployed(plan, result, 3, [(1, None), (16, None)], launches=3, what="adaptive",
                                             session=world.session, restart=world.schedule_restart(table),
                                             load=world, clock=world.clock, sleep=world.sleep,
                                             on_event=events.append))
    # Its lines say what is measured (its runs announce their first tier: "3 steps"); its own one-setting
    # verdict is not said: the comparison is the answer.
    assert events and all(e.text.startswith("[adaptive] ") for e in events)  # type: ignore[attr-defined]
    assert not any(e.kind == "verdict" for e in events)  # type: ignore[attr-defined]
    assert any("launch(es) of each setting at each load, fixed in advance" in e.text for e in events)  # type: ignore[attr-defined]
    assert [c.concurrency for c in checks] == [1, 16]
    for check in checks:
        truth = 100 * (world.expected_at(world.adaptive_steps(check.concurrency), None, check.concurrency)
                       / max(world.expected_at(k, None, check.concurrency) for k in (0, 2, 3)) - 1)
        assert check.ci95 is not None and check.to_json()["what"] == "adaptive"
        assert check.sentence.startswith(f"concurrency {check.concurrency}: the adaptive controller is ")
        # The interval is about the truth (the launch luck of 3 launches aside: a wide margin).
        assert check.ci95[0] - 6 <= truth <= check.ci95[1] + 6, (truth, check.sentence)
        if truth < -10:
            assert "worse than" in check.sentence and check.ci95[1] < 0
