"""Per-load schedules from a sweep's verdicts (issue 32): the rule, checked on simulated truth,
and the engines' own forms (vLLM's num_speculative_tokens_per_batch_size, SGLang's adaptive config).

The rule at each concurrency: the winner when separated; else the smallest K equivalent to the
fastest within the margin (0 when no speculation is among them); else the fastest by mean,
marked undecided. What a decided entry promises, checked against the simulator's expected
throughput: the K it names is truly within the margin of the truly best K at that load.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.engines import by_name
from specmon.engines.trtllm import draft_len_schedule, schedule_options, schedule_problem
from specmon.engines.vllm import spec_config_base, table_flag, table_keys
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.schedule import OFF, UNDECIDED, WINNER, Schedule, ScheduleEntry
from specmon.model.stopping import StoppingRule
from specmon.sim.sweepworld import SweepWorld

LOADS = (1, 4, 16, 64)


def sweep(seed: int, steps: tuple[int, ...] = (0, 1, 2, 3), loads: tuple[int, ...] = LOADS, **rule: object):
    world = SweepWorld(seed)
    plan = SweepPlan(steps, concurrency=loads, seed=seed, rule=StoppingRule(**rule),  # type: ignore[arg-type]
                     max_minutes=None, launch_cv=0.0)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, clock=world.clock,
                               sleep=world.sleep, load=world).run())
    return world, plan, result


@pytest.mark.parametrize("seed", [1, 2, 3, 6, 9])
def test_a_decided_entry_is_truly_within_the_margin_of_the_best_at_its_load(seed: int) -> None:
    world, plan, result = sweep(seed)
    (schedule,) = result.schedules()
    assert [e.concurrency for e in schedule.entries] == list(LOADS)
    margin = plan.rule.margin_pct / 100
    for e in schedule.entries:
        truth = {k: world.expected_at(k, None, e.concurrency) for k in plan.steps}
        best = max(truth, key=truth.__getitem__)
        if e.why == UNDECIDED:
            continue
        assert truth[e.steps] >= (1 - margin) * truth[best] - 1e-9, (e, truth)
        if e.why in (WINNER,) or (e.why == OFF and "winner" in e.note):
            assert e.steps == best, (e, truth)  # a separated winner is the true one
    # The simulator's batch model makes speculation a loss at high load: the schedule turns it off there.
    high = schedule.entries[-1]
    truth64 = {k: world.expected_at(k, None, 64) for k in plan.steps}
    assert max(truth64, key=truth64.__getitem__) == 0
    assert high.steps == 0 and high.why == OFF


def test_the_json_and_the_engines_forms_agree() -> None:
    _world, _plan, result = sweep(6)
    doc = result.to_json()
    (sched,) = doc["schedules"]
    entries = sched["entries"]
    assert [e["concurrency"] for e in entries] == list(LOADS)
    vllm = sched["vllm_speculative_config"]
    ranges = vllm["num_speculative_tokens_per_batch_size"]
    assert ranges[0][0] == 1 and vllm["num_speculative_tokens"] == max(e["steps"] for e in entries)
    for e in entries:  # every measured load falls in a range with its own K
        assert [k for lo, hi, k in ranges if lo <= e["concurrency"] <= hi] == [e["steps"]]
    slots = {int(k): v["candidate_steps"] for k, v in sched["sglang_adaptive_config"].items()}
    for e in entries:  # SGLang routes a batch to the nearest slot at or below it
        assert slots[max(s for s in slots if s <= e["concurrency"])] == [e["steps"]]


def test_one_concurrency_gives_no_schedule() -> None:
    assert sweep(2, loads=(1,))[2].schedules() == []
    assert sweep(2, loads=(1,))[2].to_json()["schedules"] == []


def _vllm_k(ranges: list[tuple[int, int, int]], max_k: int, batch: int) -> int:
    """vLLM 0.32's lookup (build_dynamic_sd_schedule_lookup): a batch takes its range's K, a gap the K before
    it, the tail the last K; never above num_speculative_tokens."""
    k = None
    for lo, hi, kk in sorted(ranges):
        if lo <= batch:
            k = kk
        if lo <= batch <= hi:
            break
    assert k is not None
    return min(k, max_k)


def _vllm_valid(ranges: list[tuple[int, int, int]]) -> bool:
    """vLLM's validate_and_normalize_dynamic_sd_schedule: positive, start <= end, sorted, no overlap, from 1."""
    prev = 0
    for lo, hi, k in ranges:
        if lo <= 0 or hi < lo or k < 0 or lo <= prev:
            return False
        prev = hi
    return bool(ranges) and ranges[0][0] == 1


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 512), st.integers(0, 7)), min_size=2, max_size=7,
                unique_by=lambda t: t[0]))
def test_ranges_are_what_vllm_accepts_and_give_each_load_its_k(points: list[tuple[int, int]]) -> None:
    points.sort()
    entries = tuple(ScheduleEntry(c, k, WINNER if k else OFF, k, "") for c, k in points)
    s = Schedule(entries)
    ranges = s.ranges
    assert _vllm_valid(ranges), ranges
    for c, k in points:
        if s.speculation_off:
            break
        assert _vllm_k(ranges, s.max_steps, c) == k
    # Between two measured loads the switch is at their geometric mean (never past the next load).
    for (c1, k1), (c2, k2) in zip(points, points[1:], strict=False):
        if k1 != k2 and not s.speculation_off:
            switch = next(lo for lo, _hi, kk in ranges if c1 < lo <= c2 and kk == k2)
            assert switch - 1 == min(c2 - 1, math.floor(math.sqrt(c1 * c2)))
    config = table_keys(ranges)
    assert (config is None) == s.speculation_off
    flag = table_flag(ranges, {"method": "eagle3", "model": "/m/d"})
    if flag is not None:
        doc = json.loads(flag.split(" ", 1)[1].strip("'"))
        assert doc["method"] == "eagle3" and doc["num_speculative_tokens_per_batch_size"] == [list(r) for r in ranges]


def test_an_undecided_load_is_said_and_never_called_a_finding() -> None:
    entries = (ScheduleEntry(1, 3, WINNER, 3, "the winner"), ScheduleEntry(16, 2, UNDECIDED, 2, "undecided"))
    s = Schedule(entries)
    assert not s.decided
    text = " ".join(s.describe())
    # Not "measure longer" (more samples of the same launches do not narrow a launch spread): what would decide.
    assert "Undecided at concurrency 16, the best by mean only (not a finding to deploy)" in text
    assert "measure longer" not in text and "more launches of the two leading settings would decide it" in text
    assert "Undecided at concurrency 1," not in text
    off = Schedule((ScheduleEntry(1, 0, OFF, 0, ""), ScheduleEntry(8, 0, OFF, 0, "")))
    assert table_flag(off.ranges) is None and "run without it" in "\n".join(off.describe())


def test_the_vllm_flag_keeps_the_profiles_method_and_model() -> None:
    from specmon.commands.sweep_output import schedule_context
    from specmon.control.launch import LaunchProfile

    vllm = LaunchProfile(engine="vllm", argv=[
        "vllm", "serve", "/m", "--speculative-config",
        '{"method": "eagle3", "model": "/drafts/e3", "num_speculative_tokens": {steps}}'],
        log="/tmp/v_{steps}.log", ready_marker="startup complete")
    base = spec_config_base(vllm.argv)
    assert base == {"method": "eagle3", "model": "/drafts/e3"}
    schedule = Schedule((ScheduleEntry(1, 3, WINNER, 3, ""), ScheduleEntry(16, 1, WINNER, 1, "")))
    flag = table_flag(schedule.ranges, base)
    assert flag is not None
    doc = json.loads(flag.removeprefix("--speculative-config ").strip("'"))
    assert doc == {"method": "eagle3", "model": "/drafts/e3", "num_speculative_tokens": 3,
                   "num_speculative_tokens_per_batch_size": [[1, 4, 3], [5, 16, 1]]}
    # Not JSON after its placeholders, or another engine: the flag says what to add instead.
    broken = vllm.model_copy(update={"argv": ["vllm", "serve", "/m", "--speculative-config", "{not json"]})
    assert spec_config_base(broken.argv) is None
    assert "add the method and the draft model" in "\n".join(schedule.describe())
    # The profile's own flags are kept in its engine's form, as printed.
    _, _, result = sweep(6)  # SweepWorld runs EAGLE3 top-k 1 settings: SGLang's adaptive mode takes them
    text = "\n".join(schedule.describe(**schedule_context(vllm, result)))
    assert '"model": "/drafts/e3"' in text and "add the method" not in text
    # No profile: every engine's form checks the swept setting; SGLang's takes EAGLE3 top-k 1.
    assert "SGLang: not offered" not in "\n".join(schedule.describe(**schedule_context(None, result)))
    # A top-k 2 setting is refused by SGLang's form, with its reason; another engine's profile shows it as is.
    refused = "\n".join(schedule.describe(setting=("EAGLE3", 2)))
    assert "SGLang: not offered: SGLang's adaptive mode runs top-k 1 only" in refused
    assert "SGLang: not offered" not in "\n".join(schedule.describe(own=by_name("vllm"), setting=("EAGLE3", 2)))


def test_the_report_carries_the_schedule_as_the_sweep_printed_it(tmp_path) -> None:  # type: ignore[no-untyped-def]
    from specmon.output.report import load_report, render_report
    from tests.unit.test_sweep_outcome import record

    _w, _p, result = sweep(6)
    path = tmp_path / "sweep.jsonl"
    record(path, result.to_json())
    data = load_report(path)
    (schedule,) = result.schedules()
    md = render_report(data, "markdown")
    part = md.split("## Schedule per load", 1)[1]
    assert " ".join(" ".join(schedule.describe()).split()) in " ".join(part.split())  # (wrapped within 80 columns)
    html = render_report(data, "html")
    assert "Schedule per load" in html and "num_speculative_tokens_per_batch_size" in html
    # Read back from the document it is the same schedule.
    assert Schedule.from_json(result.to_json()["schedules"][0]) == schedule


def test_a_real_vllm_running_a_schedule_is_its_own_configuration() -> None:
    """The real CPU vLLM kit (0.32.0) took a batch-size table and applied it (tests/data/real_logs/SOURCES.md):
    specmon names the run by its schedule, not by the cap the engine-init line prints (3 tokens), and
    its acceptance shows both regimes (K = 3 at concurrency 1, K = 1 at 8)."""
    from pathlib import Path

    from specmon.model.session import Session
    from specmon.parsing import parse_lines

    path = Path(__file__).resolve().parents[1] / "data" / "real_logs" / "vllm_v1_dynamic_sd_schedule_cpu_0_32.log"
    session = Session()
    with path.open(encoding="utf-8") as fh:
        for rec in parse_lines(fh):
            session.ingest(rec)
    used = [r for r in session.runs if r.used]
    assert len(used) == 1
    (run,) = used
    assert run.config is not None and run.label == "ngram schedule 1-2:3 3-64:1"
    assert dict(run.config.params) == {"schedule": "1-2:3 3-64:1"} and run.config.steps == 3
    assert max(run.accept_len) > 2.9 and min(run.accept_len) < 2.1  # K = 3 alone, then K = 1 at batch 8
    # The same engine with a fixed K is another configuration (another row).
    from specmon.model.session import RunConfig

    assert run.config != RunConfig(run.config.engine, "ngram", 3, None, 3, run.config.model)


def _trtllm_accepts(table: dict[int, int], max_draft_len: int) -> bool:
    """TensorRT-LLM's validate_draft_len_schedule_and_sort: thresholds >= 1, lengths >= 0, batch size 1
    present with the largest length, none above max_draft_len."""
    return (all(b >= 1 and k >= 0 for b, k in table.items()) and table.get(1) == max_draft_len
            and all(k <= max_draft_len for k in table.values()))


def _trtllm_k(table: dict[int, int], batch: int) -> int:
    """TensorRT-LLM's lookup (Drafter.get_draft_len_for_batch_size): the length at the largest threshold
    at or below the batch."""
    return table[max(b for b in table if b <= batch)]


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(1, 512), st.integers(0, 7)), min_size=2, max_size=7,
                unique_by=lambda t: t[0]))
def test_the_tensorrt_llm_schedule_is_what_it_accepts_or_says_why_not(points: list[tuple[int, int]]) -> None:
    """TensorRT-LLM takes a draft_len_schedule only with its largest length at batch size 1. A schedule
    that has it is printed as YAML that a YAML reader gives back as the engine's dict, which the engine's
    checks accept and whose lookup gives every measured load its K; one that has not is refused with
    the reason, in the text and the JSON, and no options are printed for it."""
    import yaml

    points.sort()
    s = Schedule(tuple(ScheduleEntry(c, k, WINNER if k else OFF, k, "") for c, k in points))
    text = "\n".join(s.describe())
    doc = s.to_json()
    table, problem, options = draft_len_schedule(s.ranges), schedule_problem(s.ranges), schedule_options(s.ranges)
    if s.speculation_off:
        assert table is None and options is None and "TensorRT-LLM" not in text
        return
    assert table is not None
    if points[0][1] == max(k for _c, k in points):
        assert problem is None and options is not None
        assert _trtllm_accepts(table, s.max_steps), table
        for c, k in points:
            assert _trtllm_k(table, c) == k
        read = yaml.safe_load(options)["speculative_config"]
        assert read == {"max_draft_len": s.max_steps, "draft_len_schedule": table}
        assert options in text and doc["trtllm_draft_len_schedule"] == {str(b): k for b, k in table.items()}
    else:
        assert problem is not None and options is None and not _trtllm_accepts(table, s.max_steps)
        assert f"TensorRT-LLM: not offered: {problem}" in text
        assert doc["trtllm_draft_len_schedule"] is None and doc["trtllm_problem"] == problem


def test_an_undecided_load_says_how_many_more_launches_would_decide_it() -> None:
    """Two loads where 2 and 3 steps (1.9% apart) cannot be told in two rounds: the schedule's undecided
    loads say what the sweep's own power calculation says would decide each (its needs_more), through
    the sweep's JSON as a report reads it."""
    from specmon.model.schedule import decide_from

    world = SweepWorld(5, launch_cv=0.05, restart_s=900.0, lines_per_poll=10)
    plan = SweepPlan((2, 3), (1, 4), order="launches", max_minutes=60, poll_s=10.0, restart_s=900.0, rounds=2)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                               sleep=world.sleep).run())
    (schedule,) = result.schedules()
    undecided = [e.concurrency for e in schedule.entries if not e.decided]
    assert undecided and result.needs_more
    by_load = {n.concurrency: n for n in result.needs_more}
    assert set(undecided) <= set(by_load)
    doc = result.to_json()
    decide = decide_from(doc["needs_more"])
    text = " ".join(" ".join(schedule.describe(decide=decide)).split())
    assert "measure longer" not in text
    for c in undecided:
        n = by_load[c]
        assert f"Undecided at concurrency {c}, the best by mean only (not a finding to deploy): {n.clause}." in text
        assert (f"about {n.launches_each} more launch" in n.clause and f"({n.restarts} restarts" in n.clause
                if n.reachable else "too close to decide" in n.clause)
