"""The simulator's cost model reproduces the real Kimi-K2.5 EAGLE-3 campaign (DESIGN.md)."""

from __future__ import annotations

import random
import statistics

import pytest

from specmon.sim.model import (
    DEFAULT_MODEL,
    AcceptSampler,
    CostModel,
    SpecConfig,
    SpecConfigError,
    expected_throughput,
    sample_batch,
)

# Written out here, not imported: these are the real campaign's numbers (DESIGN.md).
CAMPAIGN = {0: 88.8, 1: 85.1, 2: 94.0, 5: 86.7, 10: 60.0}


@pytest.mark.parametrize(("steps", "target"), sorted(CAMPAIGN.items()))
def test_expected_throughput_matches_campaign(steps: int, target: float) -> None:
    assert expected_throughput(steps) == pytest.approx(target, rel=0.015)


def test_two_steps_is_best_and_three_sits_between() -> None:
    thr = {s: expected_throughput(s) for s in range(0, 11)}
    assert max(thr, key=thr.__getitem__) == 2
    assert thr[5] < thr[3] < thr[2]
    assert thr[0] < thr[3]  # 3 steps still beats no speculation
    assert 90.5 <= thr[3] <= 92.5


def test_measured_costs() -> None:
    m = DEFAULT_MODEL
    assert m.cycle_ms(SpecConfig.make(0)) == pytest.approx(11.3, abs=0.05)
    # Verify alone (cycle minus drafting) at 2, 3 and 6 draft tokens, as measured.
    for tokens, measured in ((2, 17.4), (3, 18.7), (6, 21.7)):
        spec = SpecConfig.make(tokens - 1)
        verify = m.cycle_ms(spec) - m.draft_step_ms * spec.steps
        assert verify == pytest.approx(measured, abs=0.15)
    assert m.verify_per_token_ms == pytest.approx(1.1, abs=0.1)


def test_accept_length_rises_slowly_with_depth() -> None:
    lengths = [DEFAULT_MODEL.expected_accept_len(SpecConfig.make(s)) for s in range(1, 11)]
    assert lengths == sorted(lengths)
    assert lengths[1] == pytest.approx(2.1, abs=0.05)  # 2 steps
    assert 2.5 <= lengths[9] <= 2.95  # 10 steps
    probs = DEFAULT_MODEL.position_acceptance(SpecConfig.make(10))
    assert list(probs) == sorted(probs, reverse=True)  # decays with depth


def test_accept_rate_is_2026_semantics() -> None:
    spec = SpecConfig.make(2)
    rate = DEFAULT_MODEL.expected_accept_rate(spec)
    assert rate == pytest.approx((DEFAULT_MODEL.expected_accept_len(spec) - 1) / 2)


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 5, 10])
def test_sampled_means_are_within_noise(steps: int) -> None:
    rng = random.Random(1234 + steps)
    noise = DEFAULT_MODEL.noise(rng)
    samples = [DEFAULT_MODEL.sample_batch(steps, rng, noise) for _ in range(500)]
    thr = [s.gen_throughput for s in samples]
    expected = expected_throughput(steps)
    # Noise is autocorrelated, so allow ~4 naive standard errors plus a little.
    se = statistics.stdev(thr) / len(thr) ** 0.5
    assert abs(statistics.fmean(thr) - expected) < 4 * se * 1.5
    if steps:
        acc = statistics.fmean(s.accept_len for s in samples if s.accept_len is not None)
        assert acc == pytest.approx(DEFAULT_MODEL.expected_accept_len(SpecConfig.make(steps)), rel=0.02)
    else:
        assert all(s.accept_len is None and s.accept_rate is None for s in samples)


def test_per_line_throughput_swings_widely_in_one_configuration() -> None:
    rng = random.Random(7)
    noise = DEFAULT_MODEL.noise(rng)
    thr = sorted(DEFAULT_MODEL.sample_batch(0, rng, noise).gen_throughput for _ in range(500))
    # The campaign saw 58-88 tok/s inside one configuration: single readings decide nothing.
    assert thr[0] < 66
    assert thr[-1] > 92
    assert thr[475] - thr[25] > 12  # 5th to 95th percentile
    assert thr[0] > 30 and thr[-1] < 130
    # With speculation the accept length adds its own spread.
    rng2 = random.Random(7)
    noise2 = DEFAULT_MODEL.noise(rng2)
    spec = [DEFAULT_MODEL.sample_batch(2, rng2, noise2).gen_throughput for _ in range(500)]
    assert statistics.stdev(spec) > statistics.stdev(thr)


def test_noise_is_mean_one_and_a_little_autocorrelated() -> None:
    noise = DEFAULT_MODEL.noise(random.Random(99))
    xs = [noise.next() for _ in range(20000)]
    mean = statistics.fmean(xs)
    assert mean == pytest.approx(1.0, abs=0.005)
    num = sum((a - mean) * (b - mean) for a, b in zip(xs, xs[1:], strict=False))
    den = sum((a - mean) ** 2 for a in xs)
    # Independent noise would give |r| < 0.02 here; dips are independent, the drift is not.
    assert 0.05 < num / den < 0.5
    assert min(xs) > 0.2


def test_sampling_is_deterministic_for_a_seed() -> None:
    def run(seed: int) -> list[tuple[float | None, float | None, float]]:
        rng = random.Random(seed)
        return [sample_batch(3, rng) for _ in range(50)]

    assert run(5) == run(5)
    assert run(5) != run(6)


def test_accept_sampler_matches_distribution() -> None:
    spec = SpecConfig.make(5)
    sampler = AcceptSampler(DEFAULT_MODEL, spec)
    rng = random.Random(3)
    draws = [sampler.draw(rng) for _ in range(40000)]
    assert set(draws) <= set(range(1, 7))
    assert statistics.fmean(draws) == pytest.approx(DEFAULT_MODEL.expected_accept_len(spec), rel=0.01)
    assert AcceptSampler(DEFAULT_MODEL, SpecConfig.make(0)).draw(rng) == 1


def test_batching_raises_throughput_and_shrinks_the_speculation_gain() -> None:
    m = DEFAULT_MODEL
    base = [m.expected_throughput(0, b) for b in (1, 2, 4, 8, 16, 32)]
    assert base == sorted(base)
    gains = [m.expected_throughput(2, b) / m.expected_throughput(0, b) for b in (1, 2, 4, 8, 16, 32)]
    assert gains == sorted(gains, reverse=True)
    assert gains[0] > 1.05 and gains[-1] < 1.0
    assert m.cuda_graph(m.cuda_graph_max_bs) and not m.cuda_graph(m.cuda_graph_max_bs + 1)


def test_batch_sample_accounts_for_every_request() -> None:
    rng = random.Random(11)
    s = DEFAULT_MODEL.sample_batch(2, rng, batch=4)
    assert s.tokens >= 4 * DEFAULT_MODEL.decode_log_interval
    assert s.accept_len == pytest.approx(s.tokens / (4 * DEFAULT_MODEL.decode_log_interval))
    assert s.gen_throughput == pytest.approx(s.tokens / s.elapsed_s)


def test_spec_config_validation() -> None:
    assert SpecConfig.make(None) == SpecConfig(0, 1, 0)
    assert not SpecConfig.make(0).enabled
    # topk 1 is a chain: SGLang forces draft tokens to steps + 1.
    assert SpecConfig.make(3, 1, 9) == SpecConfig(3, 1, 4)
    assert SpecConfig.make(3, 4, 8) == SpecConfig(3, 4, 8)
    for bad in ((-1, None, None), (3, 0, None), (3, 4, 1), (3, 4, 14), (40, None, None)):
        with pytest.raises(SpecConfigError):
            SpecConfig.make(*bad)


def test_tree_drafting_accepts_more_but_costs_more() -> None:
    chain, tree = SpecConfig.make(3), SpecConfig.make(3, 4, 8)
    m = CostModel()
    assert m.expected_accept_len(tree) > m.expected_accept_len(chain)
    assert m.cycle_ms(tree) > m.cycle_ms(chain)
