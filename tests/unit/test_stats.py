"""Statistics against hand-computed values, and the honesty of the interval on autocorrelated data."""

from __future__ import annotations

import math
import random

import pytest

from specmon.model.stats import (
    batch_means,
    difference,
    quantile,
    ratio,
    summarize,
    t975,
)


@pytest.mark.parametrize(("df", "expected"), [(1, 12.706), (3, 3.182), (10, 2.228), (30, 2.042),
                                              (60, 2.000), (120, 1.980), (1e9, 1.960)])
def test_t975_table_values(df: float, expected: float) -> None:
    assert t975(df) == pytest.approx(expected, abs=1e-3)


def test_t975_interpolates_monotonically() -> None:
    values = [t975(d) for d in (1, 1.5, 2, 5, 29.5, 31, 45, 90, 500, 10_000)]
    assert values == sorted(values, reverse=True)


def test_quantile_type7() -> None:
    assert quantile([1, 2, 3, 4], 0.5) == 2.5
    assert quantile(list(range(1, 11)), 0.1) == pytest.approx(1.9)
    assert quantile(list(range(1, 11)), 0.9) == pytest.approx(9.1)
    assert math.isnan(quantile([], 0.5))


def test_batch_means_equal_batches_drop_oldest_remainder() -> None:
    assert batch_means([float(i) for i in range(1, 17)]) == [2.5, 6.5, 10.5, 14.5]
    # 18 values: b = 4, k = 4, the two oldest values are left out of the batching.
    assert batch_means([float(i) for i in range(1, 19)]) == [4.5, 8.5, 12.5, 16.5]


def test_summarize_hand_computed() -> None:
    s = summarize([float(i) for i in range(1, 17)])
    assert s is not None
    assert s.n == 16 and s.mean == 8.5 and s.median == 8.5
    assert s.batches == 4 and s.df == 3
    se = math.sqrt(80 / 3) / 2  # sd of [2.5, 6.5, 10.5, 14.5] over sqrt(4)
    assert s.se == pytest.approx(se)
    assert s.ci95_low == pytest.approx(8.5 - 3.182 * se)
    assert s.ci95_high == pytest.approx(8.5 + 3.182 * se)


def test_summarize_small_samples() -> None:
    assert summarize([]) is None
    one = summarize([5.0])
    assert one is not None and one.ci95_low is None and one.median == 5.0
    three = summarize([1.0, 2.0, 3.0])
    assert three is not None and three.batches == 3
    assert three.ci95_low == pytest.approx(2 - 4.303 * 1 / math.sqrt(3))


def test_ratio_against_exact_number_hand_computed() -> None:
    a = summarize([float(i) for i in range(1, 17)])
    assert a is not None
    r = ratio(a, 8.5 / 1.1)  # a is 10% faster than this number
    assert r is not None
    assert r.pct == pytest.approx(10.0)
    half = 3.182 * (a.se / a.mean) * 1.1 * 100
    assert r.ci95_low == pytest.approx(10 - half, rel=1e-3)
    assert r.ci95_high == pytest.approx(10 + half, rel=1e-3)


def test_difference_welch() -> None:
    a = summarize([10.0, 11.0, 12.0])
    b = summarize([1.0, 2.0, 3.0])
    assert a is not None and b is not None
    d, lo, hi = difference(a, b)
    assert d == pytest.approx(9.0)
    se = math.sqrt(2 / 3)
    # equal variances and sizes: Welch df = 4
    assert lo == pytest.approx(9 - 2.776 * se, rel=1e-3)
    assert hi == pytest.approx(9 + 2.776 * se, rel=1e-3)


def _ar1(rng: random.Random, n: int, phi: float) -> list[float]:
    x, out = 0.0, []
    for _ in range(n):
        x = phi * x + rng.gauss(0, 1)
        out.append(x)
    return out


def test_batch_means_interval_is_honest_on_autocorrelated_data() -> None:
    """On AR(1) data with strong autocorrelation, the naive iid interval covers the true
    mean far less than 95% of the time; the batch-means interval stays close to 95%."""
    rng = random.Random(20261129)
    trials, covered_bm, covered_iid = 300, 0, 0
    for _ in range(trials):
        xs = _ar1(rng, 1600, 0.8)
        s = summarize(xs)
        assert s is not None and s.ci95_low is not None and s.ci95_high is not None
        covered_bm += s.ci95_low <= 0.0 <= s.ci95_high
        half_iid = 1.96 * s.sd / math.sqrt(s.n)
        covered_iid += abs(s.mean) <= half_iid
    assert covered_bm / trials >= 0.88
    assert covered_iid / trials <= 0.65
