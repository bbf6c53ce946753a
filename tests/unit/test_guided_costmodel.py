"""One cost model: the guided search's cycle line is the cost-model panel's, a robust line that one odd
chain cannot bend."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.stats.guided import Measurement, Setting, Surrogate, guided_search
from specmon.model.costmodel import Measured, cost_model_of
from specmon.sim.model import DEFAULT_MODEL, SpecConfig

steps_sets = st.sets(st.integers(1, 12), min_size=2, max_size=8).map(sorted)


@settings(max_examples=100, deadline=None)
@given(steps=steps_sets, data=st.data(), concurrency=st.integers(1, 16))
def test_guided_fits_the_line_the_cost_model_panel_shows(steps: list[int], data: st.DataObject,
                                                         concurrency: int) -> None:
    """Any measured chains (noisy, or with a setting off the model): the guided search's base and
    per-step cost are the cost model's own (costmodel.fit_cycle), as the report and dashboard draw it."""
    tps = data.draw(st.lists(st.floats(10.0, 500.0), min_size=len(steps), max_size=len(steps)))
    acc = data.draw(st.lists(st.floats(1.0, 6.0), min_size=len(steps), max_size=len(steps)))
    measured = [Measurement(Setting.chain(s), t, 1.0, a, concurrency) for s, t, a in zip(steps, tps, acc, strict=True)]
    guided = Surrogate(measured).line
    panel = cost_model_of([Measured(s, f"{s}", t, 1.0, a, None, concurrency)
                           for s, t, a in zip(steps, tps, acc, strict=True)])
    assert guided is not None and panel is not None and panel.fit is not None
    assert (guided.base_ms, guided.per_step_ms) == (panel.fit.base_ms, panel.fit.per_step_ms)


@settings(max_examples=100, deadline=None)
@given(steps=st.sets(st.integers(1, 12), min_size=4, max_size=8).map(sorted), data=st.data(),
       base=st.floats(5.0, 40.0), per_step=st.floats(0.2, 5.0), off=st.floats(0.3, 3.0))
def test_one_chain_off_the_model_does_not_move_the_others_predictions(
        steps: list[int], data: st.DataObject, base: float, per_step: float, off: float) -> None:
    """Chains on a true line, one of them off it by any factor (a missing CUDA graph at one size):
    with four chains or more the repeated median recovers the line exactly, so every other chain's
    predicted throughput is its measured one. (A least-squares line, the guided search's own before,
    was dragged by the odd one.)"""
    odd = data.draw(st.sampled_from(steps))
    acc = {s: 1.0 + 0.7 * s / (1 + 0.3 * s) for s in steps}
    cycle = {s: (base + per_step * s) * (off if s == odd else 1.0) for s in steps}
    measured = [Measurement(Setting.chain(s), 1000.0 * acc[s] / cycle[s], 0.0, acc[s]) for s in steps]
    model = Surrogate(measured)
    assert model.line is not None
    assert abs(model.line.per_step_ms - per_step) <= 1e-9 * (1 + per_step)
    assert abs(model.line.base_ms - base) <= 1e-9 * (1 + base)
    for s in steps:
        if s != odd:
            assert abs(model.predict(Setting.chain(s)).tps - 1000.0 * acc[s] / cycle[s]) < 1e-6  # type: ignore[operator]


def test_a_space_of_trees_only_is_still_searched() -> None:
    """No chain is ever measured, so the cost model's line is not known: the search fits every term
    jointly (least squares) as before, and without noise still ends on the true best tree."""
    model = replace(DEFAULT_MODEL, topk_accept_gain=0.5)
    space = [Setting(s, k, d) for s in range(2, 6) for k in (2, 4) for d in (s + 2, 2 * s + 1)]

    def measure(x: Setting) -> Measurement:
        spec = SpecConfig.make(x.steps, x.topk, x.draft_tokens)
        return Measurement(x, model.expected_throughput(spec), 0.0, model.expected_accept_len(spec))

    truth = max(space, key=lambda x: measure(x).tps)
    result = guided_search(space, measure)
    assert Surrogate(result.measured).line is None
    assert result.best.setting == truth
