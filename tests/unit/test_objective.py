"""Objectives beyond tok/s (issue 32, item 3): reading them, one launch's value, the verdict, the sweep.

The latency objectives are carried as rates (a latency's reciprocal) through the launch model;
these tests check the class of inputs (generated percentiles, limits, request sets) and the
sweep on simulated truth (:class:`specmon.sim.sweepworld.SweepWorld` with client requests).
"""

from __future__ import annotations

import asyncio
import math
import random
from dataclasses import dataclass

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.stats.design import summaries
from specmon.experiment.sweep_plan import SweepError, SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.launches import Launch
from specmon.model.objective import (
    Objective,
    ObjectiveError,
    launch_value,
    objective_verdict,
    parse_objective,
    request_figures,
)
from specmon.model.schedule import schedules_from
from specmon.model.stopping import StoppingRule
from specmon.sim.sweepworld import SweepWorld

# --------------------------------------------------------------------------- reading


@given(st.sampled_from(["itl", "ttft"]), st.integers(1, 99), st.sampled_from(["", ".5", ".9"]))
def test_any_percentile_reads_back_to_its_own_spelling(kind: str, whole: int, frac: str) -> None:
    text = f"{kind}-p{whole}{frac}"
    obj = parse_objective(text.upper() if whole % 2 else text)
    assert obj.kind == kind and obj.quantile == pytest.approx(float(f"{whole}{frac}") / 100)
    assert parse_objective(obj.token) == obj
    assert obj.lower_is_better and obj.unit == "ms"
    # Three requests beyond the percentile, at least 10: a p99 launch needs 300.
    tail = min(obj.quantile, 1 - obj.quantile)  # type: ignore[operator]
    assert obj.min_requests() >= 10 and obj.min_requests() * tail >= 3 - 1e-9


@given(st.one_of(st.none(), st.floats(1, 1e5)), st.one_of(st.none(), st.floats(0.5, 1e4)))
def test_goodput_limits_read_back(ttft: float | None, itl: float | None) -> None:
    parts = ([f"ttft={ttft!r}"] if ttft is not None else []) + ([f"itl={itl!r}"] if itl is not None else [])
    if not parts:
        with pytest.raises(ObjectiveError, match="needs its limits"):
            parse_objective("goodput")
        return
    obj = parse_objective("goodput:" + ",".join(parts))
    assert (obj.ttft_ms, obj.itl_ms) == (ttft, itl) and not obj.lower_is_better
    assert parse_objective(obj.token).kind == "goodput"


@pytest.mark.parametrize("text", ["latency", "itl-p100", "itl-p0", "itl-50", "goodput:ttft=-3", "goodput:ttft=x",
                                  "goodput:ttft=5,ttft=6", "goodput:e2e=5", "goodput:ttft=nan", "ttft-p"])
def test_what_is_not_an_objective_says_what_is(text: str) -> None:
    with pytest.raises(ObjectiveError) as err:
        parse_objective(text)
    assert repr(text) in str(err.value) or text in str(err.value)


def test_the_command_line_refuses_an_objective_with_the_accepted_forms(capsys: pytest.CaptureFixture[str]) -> None:
    from specmon.cli import main

    with pytest.raises(SystemExit) as ex:
        main(["sweep", "--demo", "--objective", "itl-median"])
    assert ex.value.code == 2
    err = capsys.readouterr().err
    assert "itl-pQ" in err and "Traceback" not in err


def test_a_latency_objective_needs_launches_and_the_grid() -> None:
    itl = parse_objective("itl-p50")
    with pytest.raises(SweepError, match="--order launches"):
        SweepPlan((0, 2), order="given", objective=itl)
    with pytest.raises(SweepError, match="guided"):
        SweepPlan((0, 2), order="given", strategy="guided", objective=itl)
    plan = SweepPlan((0, 2), order="launches", objective=itl)
    assert plan.identity()["objective"] == "itl-p50"
    assert "objective" not in SweepPlan((0, 2)).identity()  # a tok/s sweep's state files stay as they were
    world = SweepWorld(1)
    with pytest.raises(SweepError, match="--no-load"):
        Sweep(plan, session=world.session, restart=world.restart, load=None)


# --------------------------------------------------------------------------- one launch


@dataclass
class Req:
    ok: bool
    started_at: float
    latency_s: float
    ttft_s: float | None
    output_tokens: int
    timed: bool = True


@given(st.integers(1, 8), st.lists(st.tuples(st.floats(0.001, 5), st.floats(0.0005, 0.2), st.integers(1, 600),
                                             st.booleans(), st.booleans()), min_size=0, max_size=60),
       st.sampled_from([1.0, 100.0]))
def test_request_figures_leave_the_first_wave_out_and_time_per_token(
        conc: int, raw: list[tuple[float, float, int, bool, bool]], scale: float) -> None:
    reqs = [Req(ok, float(i), ttft + itl * (n - 1), ttft, n, timed)
            for i, (ttft, itl, n, ok, timed) in enumerate(raw)]
    random.Random(len(raw)).shuffle(reqs)  # results arrive in completion order
    out = request_figures(reqs, conc, scale)
    assert len(out) == max(0, len(raw) - conc)
    for (ok, ttft, itl), (t0, i0, n, ok0, timed) in zip(out, raw[conc:], strict=True):
        assert ok == ok0
        if not ok0 or not timed:  # failed, or its chunks came in one burst: nothing to time
            assert ttft is None and itl is None
            continue
        assert ttft == pytest.approx(t0 * scale)
        if n >= 2 and i0 * (n - 1) > 0:
            assert itl == pytest.approx(i0 * scale, rel=1e-6)
        else:
            assert itl is None


def test_a_launch_counts_only_with_requests_enough_for_its_percentile() -> None:
    p99 = parse_objective("itl-p99")
    few = [(True, 0.1, 0.02)] * (p99.min_requests() - 1)
    assert launch_value(p99, few, 60.0) is None
    x = launch_value(p99, few + [(True, 0.1, 0.02)], 60.0)
    assert x is not None and p99.shown(x.mean) == pytest.approx(20.0) and x.se == pytest.approx(0.0, abs=1e-9)


@given(st.lists(st.floats(0.005, 0.5), min_size=10, max_size=200), st.sampled_from([0.5, 0.9]))
def test_a_percentile_of_latency_is_read_as_the_rate_at_the_other_tail(itls: list[float], q: float) -> None:
    obj = Objective("itl", q)
    x = launch_value(obj, [(True, 0.1, v) for v in itls], 60.0)
    if len(itls) < obj.min_requests():
        assert x is None
        return
    assert x is not None
    ms = obj.shown(x.mean)
    # The Harrell-Davis estimate (a weighted mean of the order statistics) lies within the sample's range,
    # and a latency twice as long everywhere reads twice as long.
    assert 1000 * min(itls) - 1e-6 <= ms <= 1000 * max(itls) + 1e-6
    y = launch_value(obj, [(True, 0.1, 2 * v) for v in itls], 60.0)
    assert y is not None and obj.shown(y.mean) == pytest.approx(2 * ms, rel=1e-6)
    assert y.se == pytest.approx(x.se / 2, rel=1e-6, abs=1e-12)  # type: ignore[operator]


def test_a_percentile_estimate_lands_near_the_true_one() -> None:
    rng = np.random.default_rng(4)
    for q, true_ms in ((0.5, 20.0), (0.9, 20.0 * math.exp(0.3 * 1.2816))):
        obj = Objective("itl", q)
        hits = 0
        for _ in range(200):
            itls = 0.020 * np.exp(rng.normal(0, 0.3, 400))
            x = launch_value(obj, [(True, 0.1, float(v)) for v in itls], 60.0)
            assert x is not None and x.se is not None
            # The within-launch error covers the truth about as often as a 95% interval should.
            lo, hi = obj.shown_interval(x.mean - 1.96 * x.se, x.mean + 1.96 * x.se)  # type: ignore[misc]
            hits += lo <= true_ms <= hi
        assert 0.88 <= hits / 200 <= 0.995, (q, hits)


def test_goodput_counts_requests_within_both_limits_a_second() -> None:
    obj = parse_objective("goodput:ttft=200,itl=30")
    reqs = ([(True, 0.1, 0.02)] * 6 + [(True, 0.3, 0.02)] * 2 + [(True, 0.1, 0.05)] * 2
            + [(False, None, None)] * 2 + [(True, 0.1, None)] * 2)
    x = launch_value(obj, reqs, 4.0)
    assert x is not None and x.mean == pytest.approx(6 / 4.0) and x.n == len(reqs)
    # Untimed requests (a burst) are completed work of unknown latency: the share is taken among the timed.
    y = launch_value(obj, reqs + [(True, None, None)] * 14, 4.0)
    assert y is not None and y.mean == pytest.approx(6 / 12 * 26 / 4.0)
    none = launch_value(obj, [(True, 1.0, 0.02)] * 12, 4.0)
    assert none is not None and 0 < none.mean < 1 / 4.0  # half a request: still a rate, below any real one


# --------------------------------------------------------------------------- the verdict


def _launches(rng: random.Random, itl_ms: float, k: int, cv: float) -> list[Launch]:
    obj = Objective("itl", 0.5)
    out = []
    for _ in range(k):
        f = math.exp(rng.gauss(0, cv))
        reqs = [(True, 0.1, itl_ms * f * math.exp(rng.gauss(0, 0.1)) / 1000) for _ in range(40)]
        x = launch_value(obj, reqs, 60.0)
        assert x is not None
        out.append(x)
    return out


def test_the_verdict_names_the_lowest_latency_in_milliseconds_with_what_it_rests_on() -> None:
    rng = random.Random(5)
    obj = Objective("itl", 0.5)
    groups = {"a": _launches(rng, 20.0, 4, 0.03), "b": _launches(rng, 30.0, 4, 0.03)}
    _, sums = summaries(groups, 0.05)
    v = objective_verdict(obj, sums, {"a": "2 steps", "b": "no speculation"}, {"a": 2, "b": 0}, level=0.995,
                          margin_pct=1.0, concurrency=4)
    assert v.separated and v.winner_steps == 2 and v.best is not None and v.best.value == pytest.approx(20, rel=0.1)
    assert v.rows[1].vs_best_pct == pytest.approx(50, rel=0.2)  # 30 ms is 50% above 20 ms
    assert v.diff_pct is not None and v.diff_pct[0] == pytest.approx(-33.3, abs=4)
    assert "lowest ITL p50 at concurrency 4: 20." in v.sentence and "lower than no speculation" in v.sentence
    assert "Rests on 8 launches (4 per setting)" in v.sentence
    doc = v.to_json()
    assert doc["objective"] == "itl-p50" and doc["winner_steps"] == 2 and doc["unit"] == "ms"
    assert doc["best_ci95"][0] <= doc["best_value"] <= doc["best_ci95"][1]


def test_equal_latencies_are_rarely_called_different() -> None:
    # 200 pairs of equal settings, 3 launches each at a 5% launch CV: the adjusted level's promise.
    obj = Objective("itl", 0.5)
    rng = random.Random(11)
    called = 0
    for _ in range(200):
        _, sums = summaries({"a": _launches(rng, 20.0, 3, 0.05), "b": _launches(rng, 20.0, 3, 0.05)}, 0.05)
        v = objective_verdict(obj, sums, {"a": "a", "b": "b"}, {"a": 1, "b": 2}, level=0.995, margin_pct=1.0)
        called += v.separated
    assert called <= 4  # 1% of 200 is the level; four allows the chance of a few


def test_a_schedule_follows_the_objective_verdicts() -> None:
    rng = random.Random(2)
    obj = Objective("itl", 0.5)
    verdicts = []
    for conc, (spec_ms, plain_ms) in {1: (15.0, 25.0), 16: (40.0, 30.0)}.items():
        _, sums = summaries({"s": _launches(rng, spec_ms, 4, 0.03), "p": _launches(rng, plain_ms, 4, 0.03)}, 0.05)
        verdicts.append(objective_verdict(obj, sums, {"s": "2 steps", "p": "no speculation"}, {"s": 2, "p": 0},
                                          level=0.995, margin_pct=1.0, concurrency=conc))
    (sched,) = schedules_from(verdicts)
    assert [(e.concurrency, e.steps, e.why) for e in sched.entries] == [(1, 2, "winner"), (16, 0, "off")]


# --------------------------------------------------------------------------- the sweep on simulated truth


def _objective_sweep(seed: int, steps: tuple[int, ...], obj: str, alias: dict[int, int] | None = None,
                     concurrency: tuple[int, ...] = (1,)) -> tuple[Sweep, SweepWorld]:
    world = SweepWorld(seed, launch_cv=0.05, restart_s=600.0, lines_per_poll=10, requests=True, alias=alias)
    plan = SweepPlan(steps, concurrency, order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     launch_cv=0.05, resolve_pct=5.0, objective=parse_objective(obj))
    sweep = Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep)
    asyncio.run(sweep.run())
    return sweep, world


@settings(max_examples=6, deadline=None)
@given(st.integers(0, 10_000))
def test_an_itl_sweep_names_the_truly_lower_latency_or_no_one(seed: int) -> None:
    sweep, world = _objective_sweep(seed, (0, 2), "itl-p50")
    result = sweep.result()
    (ov,) = result.objective_verdicts
    truth = {s: world.request_truth(s, 1)[0] for s in (0, 2)}
    best_true = min(truth, key=lambda s: truth[s])
    if ov.separated:
        assert ov.winner_steps == best_true
        assert result.winner() == (best_true, ())
    # Every launch counted had the requests its objective needs, after its first wave.
    assert all(x.n >= 10 for c in result.cells for x in c.objective_launches(sweep.plan.objective))
    doc = result.to_json()
    assert doc["objective_verdict"]["objective"] == "itl-p50" and doc["objective"]["unit"] == "ms"
    assert all(r["objective"]["requests_counted"] > 0 for r in doc["runs"])


def test_equal_settings_under_a_goodput_objective_are_not_called_different() -> None:
    # "3 steps" runs exactly like 2: whatever the draws, the sweep must not name one of them (12 seeds).
    for seed in range(12):
        sweep, _ = _objective_sweep(seed, (2, 3), "goodput:itl=12", alias={3: 2})
        (ov,) = sweep.result().objective_verdicts
        assert not ov.separated, ov.sentence


def test_the_state_file_keeps_the_requests_and_a_resume_reads_them(tmp_path: object) -> None:
    from pathlib import Path

    from specmon.experiment.sweep_state import CellState

    sweep, _ = _objective_sweep(3, (0, 2), "ttft-p90")
    for cell in sweep.cells:
        back = CellState.from_json(cell.to_json())
        assert back.requests == cell.requests > 0
        assert [x.mean for x in back.objective_launches(sweep.plan.objective)] == pytest.approx(
            [x.mean for x in cell.objective_launches(sweep.plan.objective)], rel=1e-4)
    assert isinstance(tmp_path, Path)


def test_the_report_of_the_recording_says_what_the_sweep_decided_on(tmp_path: object) -> None:
    from pathlib import Path

    from specmon.output.report import load_report, render_report
    from tests.unit.test_sweep_outcome import record

    assert isinstance(tmp_path, Path)
    sweep, _ = _objective_sweep(2, (0, 2), "itl-p50")
    doc = sweep.result().to_json()
    check = {"concurrency": 1, "what": "schedule", "sentence": "concurrency 1: the schedule (K=2) is level with "
             "the best fixed setting, <b>x</b>: throughput +0.1% (95% CI -3.0…+3.2%); 2 launches"}
    path = tmp_path / "sweep.jsonl"
    record(path, {**doc, "schedule_check": [check]})
    data = load_report(path)
    md = render_report(data, "markdown")
    part = " ".join(md.split("## Decided on the objective", 1)[1].split())  # (wrapped within 80 columns)
    (ov,) = doc["objective_verdicts"]
    assert "ITL p50 at concurrency 1 (lower is better)" in part and ov["sentence"] in part
    assert "Deployed against the best fixed setting at each load:" in part and "concurrency 1: the schedule" in part
    html = render_report(data, "html")
    assert "Decided on the objective" in html and "<b>x</b>" not in html  # server text is data, never markup


def _objective_doc(labels: list[str], values: list[float], conc: int) -> dict[str, object]:
    return {"name": "goodput (TTFT ≤ 500 ms, ITL ≤ 50 ms)", "unit": "req/s", "lower_is_better": False,
            "concurrency": conc, "workload": labels[0],
            "rows": [{"label": lab, "launches": 16, "requests": 99_999, "value": values[i],
                      "ci95": [values[i], values[i + 1]], "vs_best_pct": None if i == 0 else -values[i]}
                     for i, lab in enumerate(labels[:5])]}


@given(st.lists(st.text(min_size=1, max_size=60), min_size=1, max_size=6),
       st.lists(st.floats(1e-3, 1e7), min_size=6, max_size=6), st.integers(1, 100_000))
def test_the_objective_table_fits_80_columns_whatever_the_labels_and_numbers(
        labels: list[str], values: list[float], conc: int) -> None:
    from rich.cells import cell_len

    from specmon.output.objective import objective_lines

    for line in objective_lines(_objective_doc(labels, values, conc)):
        assert cell_len(line) <= 80, line
        assert "\x1b" not in line and "\n" not in line


#: A setting's name as a log prints it: words of letters, digits and punctuation ("EAGLE3 2 steps, top-k 4").
_words = st.lists(st.text(st.sampled_from("abcdefgXYZ0123456789-_.,"), min_size=1, max_size=14), min_size=1,
                  max_size=5).map(" ".join)


@given(st.lists(_words, min_size=1, max_size=6), st.lists(st.floats(1e-3, 1e7), min_size=6, max_size=6),
       st.integers(1, 100_000), st.sampled_from([80, 60]))
def test_every_word_of_the_objective_table_is_whole_and_a_dropped_column_is_said(
        labels: list[str], values: list[float], conc: int, width: int) -> None:
    """Labels wrap between words (the table cut them at 18 characters: "EAGLE3 2 steps, to"); a column
    that does not fit is dropped, and a note says which."""
    import re

    from specmon.output.objective import objective_lines

    lines = objective_lines(_objective_doc(labels, values, conc), width=width)
    words = {w for line in lines for w in re.split(r"[\s│┃┏┓┗┛┡┩└┘┌┐╇┳┻┴┬━─┼╋]+", line) if w}
    for label in [*labels[:5], "goodput", "concurrency", "req/s", "setting"]:
        for w in label.split():
            assert w in words, (w, lines)
    text = " ".join(" ".join(lines).split())
    for header in ("launches", "requests", "95% CI (launch)", "vs best"):
        shown = all(w in words for w in header.split())
        assert shown or re.search(rf"Not shown at {width} columns: [^(]*{re.escape(header)}", text), lines
    assert all(len(line) <= width for line in lines)


def test_a_long_setting_name_wraps_whole() -> None:
    from specmon.output.objective import objective_lines

    doc = _objective_doc(["EAGLE3 2 steps, top-k 4", "no speculation"], [10.7, 11.4, 11.5, 12.0, 12.1, 13.0], 1)
    text = "\n".join(objective_lines(doc))
    assert "EAGLE3 2 steps, top-k 4" in text  # whole on its line at 80 columns (it was cut at 18 characters)
    narrow = "\n".join(objective_lines(doc, width=40))
    assert {"EAGLE3", "top-k"} <= set(narrow.split()) and "Not shown at 40 columns:" in narrow


def test_a_launch_too_short_for_its_percentile_is_said_and_not_counted() -> None:
    # p99 needs 300 requests a launch; half a simulated minute gives about 10 at concurrency 1.
    from specmon.experiment.sweep_plan import SweepEvent

    world = SweepWorld(1, launch_cv=0.05, restart_s=600.0, lines_per_poll=10, requests=True)
    plan = SweepPlan((0, 2), (1,), order="launches", rule=StoppingRule(), max_minutes=0.5, poll_s=10.0,
                     launch_cv=0.05, resolve_pct=50.0, objective=parse_objective("itl-p99"))
    events: list[SweepEvent] = []
    sweep = Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep, on_event=events.append)
    result = asyncio.run(sweep.run())
    short = [e.text for e in events if "fewer than the 300 its ITL p99 needs: not counted" in e.text]
    assert len(short) == len(world.restarts) >= 2
    (ov,) = result.objective_verdicts
    assert ov.best is None and not ov.separated and "needs 300 requests" in ov.sentence
    assert result.winner() is None


def test_the_background_load_counts_the_timed_requests_a_latency_launch_waits_for() -> None:
    from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver
    from specmon.control.load_report import RequestResult

    load = BackgroundLoad(LoadDriver(LoadConfig(base_url="http://127.0.0.1:9")))
    spread = RequestResult(0, 0, True, 0.0, 2.0, 0.1, 50, chunks=40, first_token_s=0.1, last_token_s=1.9)
    burst = RequestResult(1, 0, True, 0.0, 2.0, 1.95, 50, chunks=40, first_token_s=1.95, last_token_s=1.99)
    failed = RequestResult(2, 0, False, 0.0, 0.5)
    for r in (spread, burst, failed, spread):
        load._count(r)
    assert (load.completed, load.timed) == (4, 2)
