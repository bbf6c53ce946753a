"""The cost model recovers the simulator's known costs and flags what does not fit."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.ingest.summarize import ingest_files
from specmon.model.analysis import analyze
from specmon.model.costmodel import build_cost_model
from specmon.model.session import Session
from specmon.records import Config, Decode, Engine, EngineStats, Spec
from specmon.sim.model import DEFAULT_MODEL, SpecConfig

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = sorted(str(p) for p in (ROOT / "sample_logs").glob("sim_eagle3_*.log"))


@pytest.fixture(scope="module")
def campaign_view():
    view = build_cost_model(analyze(ingest_files(CAMPAIGN).runs))
    assert view is not None
    return view


def test_fit_recovers_the_simulated_costs(campaign_view) -> None:
    fit = campaign_view.fit
    m = DEFAULT_MODEL
    # The simulator: cycle(s) = verify_base + verify_per_token·(s+1) + draft_step·s.
    true_slope = m.verify_per_token_ms + m.draft_step_ms
    true_base = m.verify_base_ms + m.verify_per_token_ms
    assert fit.per_step_ms == pytest.approx(true_slope, rel=0.05)
    assert fit.base_ms == pytest.approx(true_base, rel=0.05)
    assert fit.plain_ms == pytest.approx(m.plain_step_ms, rel=0.03)
    assert fit.points == 5
    for p in campaign_view.points:
        assert p.cycle_ms == pytest.approx(m.cycle_ms(SpecConfig.make(p.steps)), rel=0.04)
        assert not p.disagrees


def test_marginal_value_of_one_more_step(campaign_view) -> None:
    by = {m.steps: m for m in campaign_view.marginals}
    # 1 -> 2 pays off, 2 -> 3 does not: the campaign's optimum is 2 steps.
    assert by[1].pays_off is True and by[1].change_pct > 5
    assert by[2].pays_off is False and by[2].change_pct < 0
    # Break-even of 2 -> 3 is accept_len(2) * per_step / cycle(2).
    p2 = next(p for p in campaign_view.points if p.steps == 2)
    assert by[2].breakeven == pytest.approx(p2.tokens_per_cycle * campaign_view.fit.per_step_ms / p2.cycle_ms)
    # The acceptance of position 3 read from the accept-length growth is the simulator's.
    assert by[2].acceptance == pytest.approx(DEFAULT_MODEL.acceptance[2], abs=0.03)
    assert by[2].source == "accept length"
    # Past the last measured step count nothing is known: the threshold is still stated.
    assert by[10].acceptance is None and by[10].pays_off is None and 0 < by[10].breakeven < 1
    assert campaign_view.model_best_steps == 2
    text = "\n".join(campaign_view.lines())
    assert "2→3 steps: position 3 must be accepted ≥" in text and "does not pay off" in text
    assert campaign_view.to_json()["fit"]["per_step_ms"] == pytest.approx(campaign_view.fit.per_step_ms, abs=1e-3)


def _session(rows: dict[int, tuple[float, float | None]], per_position: dict[int, tuple[float, ...]] | None = None,
             engine: Engine = Engine.SGLANG, n: int = 60) -> Session:
    """A session with one run per step count: (throughput, accept length), small noise."""
    s = Session(warmup=0)
    line = 0
    for steps, (tps, acc) in rows.items():
        s.begin_source(f"run{steps}")
        line += 1
        s.ingest(Config(line, None, None, engine=engine, algorithm="EAGLE3" if steps else None, steps=steps,
                        topk=1 if steps else None, draft_tokens=steps + 1 if steps else None))
        for i in range(n):
            line += 1
            wiggle = (i % 5 - 2) * 0.2
            if engine is Engine.VLLM:
                s.ingest(EngineStats(line, None, None, gen_throughput=tps + wiggle, running=1))
                if acc is not None:
                    s.ingest(Spec(line, None, None, mean_acceptance_length=acc, accepted=10, drafted=20,
                                  per_position=(per_position or {}).get(steps)))
            else:
                s.ingest(Decode(line, None, None, running_req=1, gen_throughput=tps + wiggle, accept_len=acc,
                                accept_rate=None if acc is None else (acc - 1) / steps))
    return s


def _exact(steps: int) -> tuple[float, float | None]:
    spec = SpecConfig.make(steps)
    return DEFAULT_MODEL.expected_throughput(spec), (DEFAULT_MODEL.expected_accept_len(spec) if steps else None)


def test_a_configuration_off_the_model_is_flagged() -> None:
    rows = {s: _exact(s) for s in (0, 1, 2, 3, 5)}
    tps, acc = rows[5]
    rows[5] = (tps * 0.85, acc)  # 5 steps lost 15%: say, no CUDA graph at that size
    # Exact rows of one launch each: at launch CV 0 their intervals are the within-launch ones.
    view = build_cost_model(analyze(_session(rows).runs, launch_cv=0.0))
    assert view is not None
    flagged = [p.steps for p in view.points if p.disagrees]
    assert flagged == [5]
    assert any("EAGLE3 5 steps" in d and "the model predicts" in d for d in view.disagreements)
    assert "≠" in "\n".join(view.lines())


def test_exact_model_data_fits_perfectly() -> None:
    view = build_cost_model(analyze(_session({s: _exact(s) for s in (0, 1, 2, 3, 5)}).runs))
    assert view is not None and not view.disagreements
    for p in view.points:
        assert abs(p.residual_pct) < 0.5


def test_logged_per_position_acceptance_is_used_and_checked() -> None:
    pp = {2: (0.65, 0.45), 3: (0.65, 0.45, 0.23)}
    rows = {0: (88.8, None), 2: (94.0, 2.10), 3: (91.7, 2.33)}
    view = build_cost_model(analyze(_session(rows, pp, engine=Engine.VLLM).runs))
    assert view is not None
    assert view.acceptance[1][0] == pytest.approx(0.65) and view.acceptance[1][1] == "per-position"
    assert view.acceptance[3][0] == pytest.approx(0.23) and view.acceptance[3][1] == "per-position"
    assert not view.disagreements
    # Rates that do not add up to the logged accept length are called out.
    bad = {2: (0.30, 0.10), 3: (0.65, 0.45, 0.23)}
    view = build_cost_model(analyze(_session(rows, bad, engine=Engine.VLLM).runs))
    assert view is not None
    assert any("adds up to 1.40" in d for d in view.disagreements)


def test_too_little_to_fit() -> None:
    assert build_cost_model(analyze(Session().runs)) is None
    view = build_cost_model(analyze(_session({0: (88.8, None), 2: (94.0, 2.1)}).runs))
    assert view is not None and view.fit is None and not view.marginals
    assert any("at least two speculative step counts" in n for n in view.notes)
    assert [p.steps for p in view.points] == [0, 2]
    assert view.points[1].cycle_ms == pytest.approx(1000 * 2.1 / 94.0, rel=0.01)
