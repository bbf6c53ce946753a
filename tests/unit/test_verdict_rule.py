"""The sweep's verdict: decided by the intervals (no fixed sample floor), exact t, named source."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sst

from specmon.experiment.sweep_result import analyses_from_cells, verdict_sources
from specmon.experiment.sweep_state import CellState, Segment
from specmon.model.stats import t_quantile
from specmon.model.stopping import StoppingRule, check_source, sweep_verdict


def _cell(steps: int, values: list[float], kind: str = "log", client: list[float] | None = None,
          log: list[float] | None = None) -> CellState:
    cell = CellState(steps, 1, status="done")
    cell.segments.append(Segment("t", None, None, throughput=list(values), kind=kind, log_throughput=log or []))
    if client is not None:
        cell.client.update(decode_tps=client, requests=len(client), seconds=10.0,
                           output_tokens=round(sum(client) / len(client) * 10.0))
    return cell


def _samples(mean: float, half95: float, n: int, seed: int) -> list[float]:
    """n samples whose iid 95% half-width is about ``half95``."""
    sd = half95 * math.sqrt(n) / float(sst.t.ppf(0.975, n - 1))
    rng = random.Random(seed)
    return [rng.gauss(mean, sd) for _ in range(n)]


def test_the_issue_case_is_decided_at_nine_samples() -> None:
    """Issue 13: 390.2 ± 22.9, 225.1 ± 10.3, 265.3 ± 10.9 tok/s at n = 9 each, which the old
    10-sample floor called "Not enough data". The intervals decide: no speculation is fastest."""
    cells = [_cell(0, _samples(390.2, 22.9, 9, 1)), _cell(1, _samples(225.1, 10.3, 9, 2)),
             _cell(3, _samples(265.3, 10.9, 9, 3))]
    v = sweep_verdict(analyses_from_cells(cells, 1), StoppingRule(), 1)
    assert v.best is not None and v.best.steps == 0 and v.separated
    assert "Not enough data" not in v.sentence


def test_two_samples_give_no_interval_and_no_verdict() -> None:
    cells = [_cell(0, [100.0, 101.0]), _cell(2, [120.0, 121.0])]
    v = sweep_verdict(analyses_from_cells(cells, 1), StoppingRule(), 1)
    assert v.best is None and not v.separated and "Not enough data" in v.sentence


def test_equivalent_within_the_margin_is_said_with_the_margin() -> None:
    rng = random.Random(4)
    a = [rng.gauss(100.0, 0.5) for _ in range(400)]
    b = [rng.gauss(100.05, 0.5) for _ in range(400)]
    # One launch each with no launch variance in the data: at launch CV 0 the margin decides.
    v = sweep_verdict(analyses_from_cells([_cell(0, a), _cell(2, b)], 1, launch_cv=0.0), StoppingRule(margin_pct=2.0), 1)
    assert not v.separated and v.equivalent and "equivalent within ±2%" in v.sentence
    assert v.to_json()["equivalent"] is True and v.to_json()["margin_pct"] == 2.0


@pytest.mark.parametrize("df", [1.0, 2.5, 3.7, 8.0, 40.5])
def test_t_quantile_is_exact_at_fractional_df(df: float) -> None:
    for p in (0.975, 0.995, 0.9975):
        assert t_quantile(p, df) == pytest.approx(float(sst.t.ppf(p, df)), rel=1e-12)
    assert t_quantile(0.975, 2.5) == pytest.approx(3.5747, abs=1e-4)  # the table said 3.7425


def test_the_verdict_names_its_source_and_the_others_view() -> None:
    rng = random.Random(5)
    fast = [rng.gauss(300, 5) for _ in range(200)]
    slow = [rng.gauss(250, 5) for _ in range(200)]
    cells = [_cell(0, slow, "counters", client=[262.0] * 5, log=[251.0] * 10),
             _cell(3, fast, "counters", client=[316.0] * 5, log=[299.0] * 10)]
    v = sweep_verdict(analyses_from_cells(cells, 1), StoppingRule(), 1)
    v = verdict_sources(v, cells, 1)
    assert v.source == "counters" and v.sources_agree is True
    assert "Rests on the engine's counters" in v.sentence and "client agrees" in v.sentence
    doc = v.to_json()
    assert doc["source"] == "counters" and {c["name"] for c in doc["checks"]} == {"log", "client"}
    # A client that ranks the other way is reported as disagreeing.
    cells[0].client.update(output_tokens=4000)  # 400 tok/s over its 10 s
    v2 = verdict_sources(sweep_verdict(analyses_from_cells(cells, 1), StoppingRule(), 1), cells, 1)
    assert v2.sources_agree is False and "client disagrees" in v2.sentence  # by rank, or by differences when not separated


def test_log_only_sweeps_say_so() -> None:
    cells = [_cell(0, [100.0 + i % 3 for i in range(30)]), _cell(2, [110.0 + i % 3 for i in range(30)])]
    v = verdict_sources(sweep_verdict(analyses_from_cells(cells, 1), StoppingRule(), 1), cells, 1)
    assert v.source == "log" and v.checks == () and "Rests on the server log" in v.sentence


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 6), st.floats(10, 1000), min_size=1, max_size=5),
       st.floats(0.2, 5.0))
def test_a_source_that_differs_only_in_level_agrees_and_says_its_level(primary: dict[int, float],
                                                                       scale: float) -> None:
    """The client's per-request speed is another level than the server's throughput: the same
    ranking and the same relative differences agree, whatever the level ("client DISAGREES ...
    within 25.5%" was said of a client that named the same winner)."""
    other = {k: v * scale for k, v in primary.items()}
    best = max(primary, key=lambda k: primary[k])
    c = check_source("client", other, primary, verdict_best=best, separated=True, tolerance_pct=10.0)
    assert c.agrees and c.max_gap_pct == pytest.approx(0.0, abs=1e-9)
    assert c.level_pct == pytest.approx((scale - 1) * 100, rel=1e-9)
    words = c.phrase("the log")
    assert words.startswith("client agrees (the same fastest setting")
    assert ("above" in words or "below" in words) == (abs(scale - 1) * 100 >= 1.0)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.integers(0, 6), st.floats(10, 1000), min_size=2, max_size=5),
       st.integers(0, 6), st.floats(0.3, 3.0), st.floats(0.2, 5.0))
def test_relative_differences_decide_and_a_other_winner_disagrees(primary: dict[int, float], moved: int,
                                                                  factor: float, scale: float) -> None:
    """One setting's speed moved by ``factor`` in the other source (and the whole source scaled):
    the gap is that setting's change relative to the verdict's best, and a source whose fastest
    setting is another disagrees, in words that say so."""
    best = max(primary, key=lambda k: primary[k])
    other = {k: v * scale * (factor if k == moved else 1.0) for k, v in primary.items()}
    c = check_source("client", other, primary, verdict_best=best, separated=True, tolerance_pct=10.0)
    theirs = max(other, key=lambda k: other[k])
    if math.isclose(other[best], other[theirs], rel_tol=1e-9):
        theirs = best  # a tie at the top, to rounding, includes the verdict's best (check_source's rule)
    if moved == best or moved not in primary:
        expected = 0.0 if moved not in primary else max(
            abs(other[k] / other[best] - primary[k] / primary[best]) * 100 for k in primary)
    else:
        expected = abs(factor - 1) * primary[moved] / primary[best] * 100
    assert c.max_gap_pct == pytest.approx(expected, rel=1e-6, abs=1e-6)
    if abs(expected - 10.0) > 1e-6:  # at the tolerance itself, rounding decides either way
        assert c.agrees == (theirs == best and expected <= 10.0)
    if theirs != best:
        assert c.phrase().startswith("client disagrees: it ranks")
    elif not c.agrees:
        assert "points apart" in c.phrase()


def test_a_tie_at_the_top_to_rounding_names_the_verdicts_best_too() -> None:
    # Hypothesis found it: two settings 1e-13 apart, the client at a fifth of the level; the scaled
    # means round to a tie and the tie went to the other key, "not the same fastest setting".
    primary = {0: 999.9999999999999, 1: 1000.0}
    other = {k: v * 0.2 for k, v in primary.items()}
    c = check_source("client", other, primary, verdict_best=1, separated=True, tolerance_pct=10.0)
    assert c.same_best and c.agrees
    # A real difference at the top is not a tie: the source names another fastest, and disagrees.
    c2 = check_source("client", {0: 201.0, 1: 200.0}, primary, verdict_best=1, separated=True)
    assert not c2.same_best and not c2.agrees
