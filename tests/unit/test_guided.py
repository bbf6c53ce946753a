"""The guided search: its optimistic bound is a real bound, and it finds the grid's answer with fewer restarts."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.stats.guided import (
    Measurement,
    Setting,
    _chain_marginals_upper,
    guided_search,
    initial_design,
    neighbours,
)
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig

decreasing = st.lists(st.floats(0.0, 1.0), min_size=2, max_size=12).map(lambda xs: sorted(xs, reverse=True))


@given(marg=decreasing, data=st.data())
def test_the_optimistic_accept_length_bounds_every_unmeasured_depth(marg: list[float], data: st.DataObject) -> None:
    depth = len(marg)
    measured_depths = data.draw(st.sets(st.integers(1, depth), min_size=1))
    accept = {d: 1.0 + sum(marg[:d]) for d in range(depth + 1)}
    measured = [Measurement(Setting.chain(d), 100.0, 1.0, accept[d]) for d in sorted(measured_depths)]
    upper = _chain_marginals_upper(measured, depth)
    for d in range(1, depth + 1):
        assert 1.0 + sum(upper[:d]) >= accept[d] - 1e-9, (d, measured_depths)


def world(rng: random.Random) -> CostModel:
    scale, cut = rng.uniform(0.6, 1.3), rng.randint(1, 9)
    acc = tuple(min(0.97, scale * 0.8 * 0.82 ** k) * (1.0 if k < cut else 0.05) for k in range(16))
    return replace(DEFAULT_MODEL, acceptance=acc, draft_step_ms=rng.uniform(0.5, 4.0),
                   verify_per_token_ms=rng.uniform(0.3, 1.8))


def exact(model: CostModel) -> Callable[[Setting], Measurement]:
    def measure(s: Setting) -> Measurement:
        spec = SpecConfig.make(s.steps, s.topk, s.draft_tokens or None)
        return Measurement(s, model.expected_throughput(spec), 0.0, model.expected_accept_len(spec))
    return measure


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), max_steps=st.integers(3, 16))
def test_without_noise_the_chain_search_finds_the_true_best(seed: int, max_steps: int) -> None:
    model = world(random.Random(seed))
    space = [Setting.chain(s) for s in range(max_steps + 1)]
    measure = exact(model)
    truth = max(space, key=lambda s: measure(s).tps)
    result = guided_search(space, measure)
    assert result.best.setting == truth
    assert result.restarts <= len(space)
    assert len({m.setting for m in result.measured}) == result.restarts  # never the same setting twice


def test_on_average_it_restarts_less_than_the_grid() -> None:
    rng = random.Random(5)
    space = [Setting.chain(s) for s in range(11)]
    restarts = [guided_search(space, exact(world(rng))).restarts for _ in range(50)]
    assert sum(restarts) / len(restarts) < 0.8 * len(space)


def test_tree_settings_stay_candidates_until_a_tree_is_measured() -> None:
    # A deployment where branches pay: the chain-only measurements cannot know it.
    model = replace(DEFAULT_MODEL, topk_accept_gain=0.9, topk_draft_growth=0.0, verify_per_token_ms=0.2)
    space = [Setting.chain(s) for s in range(6)] + [Setting(s, 4, 2 * s + 1) for s in range(2, 6)]
    result = guided_search(space, exact(model))
    assert any(not m.setting.is_chain for m in result.measured)


def test_initial_design_and_neighbours() -> None:
    space = [Setting.chain(s) for s in range(11)]
    assert [s.steps for s in initial_design(space)] == [0, 1, 6, 10]
    assert sorted(n.steps for n in neighbours(Setting.chain(4), space)) == [3, 5]
    assert [n.steps for n in neighbours(Setting.chain(0), space)] == [1]
    tree = Setting(3, 2, 7)
    assert Setting(3, 1, 4) in neighbours(tree, [*space, tree, Setting(3, 2, 5)])


def test_an_empty_space_is_an_error() -> None:
    with pytest.raises(ValueError, match="empty"):
        guided_search([], exact(DEFAULT_MODEL))
