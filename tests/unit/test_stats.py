"""Statistics against hand-computed values, and the honesty of the interval on autocorrelated data."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.model.stats import (
    batch_means,
    difference,
    quantile,
    ratio,
    summarize,
    t975,
    t_quantile,
)


@pytest.mark.parametrize(("df", "expected"), [(1, 12.706), (3, 3.182), (10, 2.228), (30, 2.042),
                                              (60, 2.000), (120, 1.980), (1e9, 1.960)])
def test_t975_table_values(df: float, expected: float) -> None:
    assert t975(df) == pytest.approx(expected, abs=1e-3)  # printed tables round to 3 decimals


@pytest.mark.parametrize(("p", "df", "expected"), [
    (0.975, 2.5, 3.574655),     # the old interpolated table said 3.7425 here (+4.7%)
    (0.975, 1.0, 12.706205),
    (0.975, 7.3, 2.345067),
    (0.975, 1.5, 6.016663),
    (0.975, 1e7, 1.959964),
    (0.975, math.inf, 1.959964),  # the standard normal
    (0.9975, 3.0, 7.453319),
    (0.9975, 4.6, 5.039558),
    (0.9975, math.inf, 2.807034),
])
def test_t_quantile_exact_values_at_fractional_df(p: float, df: float, expected: float) -> None:
    assert t_quantile(p, df) == pytest.approx(expected, abs=2e-6)


def _t_cdf(x: float, df: float) -> float:
    """P(T <= x) for x >= 0, by Simpson's rule on the density (independent of scipy)."""
    log_c = math.lgamma((df + 1) / 2) - math.lgamma(df / 2) - 0.5 * math.log(df * math.pi)
    steps = 4000
    h = x / steps
    total = 0.0
    for i in range(steps + 1):
        w = 1 if i in (0, steps) else (4 if i % 2 else 2)
        t = i * h
        total += w * math.exp(log_c - (df + 1) / 2 * math.log1p(t * t / df))
    return 0.5 + total * h / 3


@settings(max_examples=60, deadline=None)
@given(df=st.floats(min_value=1.0, max_value=400.0), p=st.floats(min_value=0.6, max_value=0.999))
def test_t_quantile_inverts_the_t_distribution(df: float, p: float) -> None:
    q = t_quantile(p, df)
    assert _t_cdf(q, df) == pytest.approx(p, abs=1e-7)
    assert t_quantile(1 - p, df) == pytest.approx(-q, rel=1e-12)  # symmetric


def test_closed_forms_at_one_and_two_df() -> None:
    for p in (0.6, 0.9, 0.975, 0.9975):
        assert t_quantile(p, 1) == pytest.approx(math.tan(math.pi * (p - 0.5)), rel=1e-12)  # Cauchy
        assert t_quantile(p, 2) == pytest.approx((2 * p - 1) / math.sqrt(2 * p * (1 - p)), rel=1e-12)


def test_t975_decreases_with_df_and_no_df_means_no_interval() -> None:
    values = [t975(d) for d in (1, 1.5, 2, 5, 29.5, 31, 45, 90, 500, 10_000, math.inf)]
    assert values == sorted(values, reverse=True)
    assert t975(0) == math.inf and t975(-1) == math.inf and t975(math.nan) == math.inf
    with pytest.raises(ValueError, match="probability"):
        t_quantile(1.0, 5)


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
    assert s.ci95_low == pytest.approx(8.5 - 3.1824463 * se)
    assert s.ci95_high == pytest.approx(8.5 + 3.1824463 * se)


def test_summarize_small_samples() -> None:
    assert summarize([]) is None
    one = summarize([5.0])
    assert one is not None and one.ci95_low is None and one.median == 5.0
    three = summarize([1.0, 2.0, 3.0])
    assert three is not None and three.batches == 3
    assert three.ci95_low == pytest.approx(2 - 4.3026527 * 1 / math.sqrt(3))


def test_ratio_against_exact_number_hand_computed() -> None:
    a = summarize([float(i) for i in range(1, 17)])
    assert a is not None
    r = ratio(a, 8.5 / 1.1)  # a is 10% faster than this number
    assert r is not None
    assert r.pct == pytest.approx(10.0)
    half = 3.182446 * (a.se / a.mean) * 1.1 * 100
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


@settings(max_examples=300, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e6, 1e6, width=32), st.sampled_from([0.0, 1.5, 88.25, -0.0])),
                min_size=1, max_size=400),
       st.sampled_from(["f", "d", "list", "ndarray"]))
def test_summary_quantiles_are_numpy_s_of_the_samples_and_leave_them_as_they_were(values: list[float],
                                                                                  form: str) -> None:
    """The quantiles are taken from a sorted copy (half the time of numpy's partition): the
    same numbers, to the bit, as np.quantile on the samples, whatever form they come in
    (float32 ones sorted in their own width); a caller's array is not reordered; the mean and
    spread are numpy's up to the order of summation (the spread is summed a chunk at a time,
    so that no temporary is as long as the run)."""
    from array import array

    import numpy as np

    given_values = {"f": lambda: array("f", values), "d": lambda: array("d", values), "list": lambda: list(values),
                    "ndarray": lambda: np.array(values, dtype=np.float64)}[form]()
    x = np.asarray(array("f", values) if form == "f" else values, dtype=np.float64)
    before = np.array(given_values, dtype=np.float64, copy=True)
    s = summarize(given_values)
    assert s is not None
    expected = [float(v) for v in np.quantile(x, (0.1, 0.5, 0.9))]
    assert [s.p10, s.median, s.p90] == expected
    assert s.mean == pytest.approx(float(x.mean()), rel=1e-12, abs=1e-9)
    assert s.sd == pytest.approx(float(x.std(ddof=1)) if len(x) > 1 else 0.0, rel=1e-12, abs=1e-9)
    assert np.array_equal(np.array(given_values, dtype=np.float64), before)  # the caller's order kept
    if form == "f":  # the analysis's own float32 copy, sorted in place: the same figures
        own = np.array(values, dtype=np.float32)
        t = summarize(own, scratch=True)
        assert t is not None and [t.p10, t.median, t.p90] == expected and t.batches == s.batches
        assert t.mean == pytest.approx(s.mean, rel=1e-12, abs=1e-9)
        assert t.sd == pytest.approx(s.sd, rel=1e-12, abs=1e-9)
        if s.ci95_low is not None:
            assert t.ci95_low == pytest.approx(s.ci95_low, rel=1e-9, abs=1e-6)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0, 1, 2, 3, 7, 255, 65535, 65536, 4_000_000_000]),
                          st.floats(1.0, 500.0, width=32)), min_size=1, max_size=300),
       st.integers(1, 3))
def test_the_concurrency_breakdown_has_each_level_present_with_its_own_samples(samples: list[tuple[int, float]],
                                                                               runs: int) -> None:
    """Levels found by counting (small ones) or by numpy's unique (large ones): the same levels,
    each summarised over exactly its samples, across runs."""
    from array import array

    import numpy as np

    from specmon.model.analysis import _concurrency_breakdown
    from specmon.model.session import Run

    rs = []
    for k in range(runs):
        part = samples[k::runs]
        r = Run(id=k + 1, source="x", first_line=1)
        r.throughput.extend(array("f", [t for _, t in part]))
        r.concurrency.extend(array("I", [c for c, _ in part]))
        rs.append(r)
    got = _concurrency_breakdown(rs)
    conc = np.concatenate([np.frombuffer(r.concurrency, dtype=np.uint32) for r in rs if len(r.throughput)])
    tp = np.concatenate([np.frombuffer(r.throughput, dtype=np.float32) for r in rs if len(r.throughput)])
    assert sorted(got) == sorted(int(c) for c in set(conc.tolist()))
    for c, summary in got.items():
        assert summary == summarize(tp[conc == c])
    # A run's throughput summary given for reuse: the same breakdown (one run at one level takes it as is).
    from specmon.model.analysis import summarize_runs

    for r in rs:
        assert _concurrency_breakdown([r], summarize_runs([r], "throughput")) == _concurrency_breakdown([r])


def test_the_kept_t975_values_are_scipys() -> None:
    """Every value of specmon/model/t975.f64 is what scipy's stdtrit gives here (to 4e-16: the
    file is made by the scipy of its day, and a later one may differ in the last bit)."""
    from specmon.model import t975_table

    kept, now = t975_table.values(), t975_table.computed()
    assert len(kept) == t975_table.LARGEST
    assert all(math.isclose(k, c, rel_tol=4e-16) for k, c in zip(kept, now, strict=True))


@pytest.mark.parametrize("df", [1.0, 2.0, 24.0, 446.0, 1095.0, 20_000.0])
def test_whole_df_at_0975_come_from_the_file_and_the_rest_from_scipy(df: float) -> None:
    from scipy.special import stdtrit

    from specmon.model import t975_table

    assert t_quantile(0.975, df) == t975_table.values()[int(df) - 1] == t975(df)
    assert math.isclose(t_quantile(0.975, df), float(stdtrit(df, 0.975)), rel_tol=4e-16)
    for p, d in ((0.975, df + 0.5), (0.975, 20_001.0), (0.9975, df), (0.025, df)):
        assert t_quantile(p, d) == float(stdtrit(d, p))


def test_a_summary_of_one_configuration_does_not_import_scipy() -> None:
    """In a fresh process (this one has scipy): the intervals of a single configuration's summary."""
    import subprocess
    import sys
    from pathlib import Path

    log = Path(__file__).resolve().parents[2] / "sample_logs" / "sim_eagle3_2step.log"
    code = ("import io, sys, contextlib\n"
            "from specmon.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            f"    rc = main(['summarize', {str(log)!r}, '--format', 'json'])\n"
            "print(rc, 'ci95_low' in out.getvalue(), 'scipy.special' in sys.modules)\n")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert got.stdout.split() == ["0", "True", "False"]

