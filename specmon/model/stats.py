"""Statistics that stay honest on autocorrelated per-batch data.

Consecutive decode batches are not independent: the same requests, the same
context lengths and the same acceptance luck carry from one log line to the
next. A naive ``1.96 * sd / sqrt(n)`` interval is then far too narrow. We use
*non-overlapping batch means*: cut the series into ``k`` consecutive batches
of ``b ≈ sqrt(n)`` samples, treat the batch means as roughly independent and
build a Student-t interval on them with ``k - 1`` degrees of freedom.

Comparisons (speed-up against a baseline, best against runner-up) use the
batch-mean standard errors with Welch–Satterthwaite degrees of freedom; a
speed-up ratio's interval comes from the delta method.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from specmon.model import t975_table

#: Below this many samples no interval is given: two numbers are not a distribution.
MIN_SAMPLES_FOR_CI = 3
#: From this many samples on, the interval is built on batch means.
MIN_SAMPLES_FOR_BATCHING = 10

def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom; every interval uses it.

    ``df`` may be fractional (Welch–Satterthwaite degrees of freedom are) and
    infinite (the standard normal). The value is exact to double precision:
    :func:`scipy.special.stdtrit`, the routine ``scipy.stats.t.ppf`` itself
    calls, without the 0.4 s import of :mod:`scipy.stats` or its ~50 µs per
    call. It replaced an interpolated table that gave 3.7425 at 2.5 degrees of
    freedom where the exact value is 3.5747, so the dashboard's and the
    sweep's intervals disagreed for the same data. At p = 0.975 and a whole
    ``df`` up to 20,000 (all a summary of one configuration asks for) the value
    is stdtrit's own, read from the file :mod:`specmon.model.t975_table` keeps,
    without importing scipy (0.1 s of each ``summarize``).

    Args:
        p: A probability in (0, 1), e.g. 0.975 for a two-sided 95% interval.
        df: Degrees of freedom; ``<= 0`` or NaN means "no interval" (infinite).

    Raises:
        ValueError: ``p`` is not in (0, 1).
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"probability must be in (0, 1), got {p}")
    if df <= 0 or math.isnan(df):
        return math.inf
    if p == 0.975 and df <= t975_table.LARGEST and df == int(df):
        # scipy's own values at whole df, kept in a file (specmon/model/t975_table.py): a summary
        # of one configuration asks for nothing else, and need not import scipy.special for it.
        return t975_table.values()[int(df) - 1]
    # Imported here: scipy.special costs ~0.1 s, and importing this module (every command does)
    # should not pay it before an interval is asked for.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


def t975(df: float) -> float:
    """``t_quantile(0.975, df)``: the two-sided 95% critical value (df may be fractional)."""
    return t_quantile(0.975, df)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (the "type 7" definition numpy and R use by default)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = (n - 1) * q
    lo = int(math.floor(pos))
    hi = min(lo + 1, n - 1)
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo))


def as_array(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """Samples as float64 (a compact ``array('f')`` is viewed without a copy, then widened)."""
    if isinstance(values, np.ndarray):
        return values.astype(np.float64, copy=False)
    if isinstance(values, array) and values.typecode in ("f", "d"):
        view = np.frombuffer(values, dtype=np.float32 if values.typecode == "f" else np.float64)
        return view.astype(np.float64)
    return np.asarray(values, dtype=np.float64)


def own_samples(values: Sequence[float] | np.ndarray) -> np.ndarray:
    """A fresh copy of the samples in their own width: float32 for a compact ``array('f')``.

    The analysis of a big run needs a copy it may sort; float32 values widened to float64
    keep their order and value, so sorting the narrow copy gives the same order statistics
    at half the memory (a run of 3M samples: 12 MB instead of 24 MB per metric).
    """
    if isinstance(values, np.ndarray):
        return np.array(values, dtype=np.float32 if values.dtype == np.float32 else np.float64)
    if isinstance(values, array) and values.typecode in ("f", "d"):
        return np.array(np.frombuffer(values, dtype=np.float32 if values.typecode == "f" else np.float64))
    return np.asarray(values, dtype=np.float64)


#: Samples widened to float64 at a time when a spread is summed (a bounded temporary: 2 MB).
_CHUNK = 1 << 18


def _sum_sq_dev(x: np.ndarray, mean: float) -> float:
    """Σ (x - mean)² in float64, a chunk at a time: no temporary as long as the samples."""
    total = 0.0
    for i in range(0, len(x), _CHUNK):
        d = x[i:i + _CHUNK].astype(np.float64) - mean
        total += float(np.dot(d, d))
    return total


class TwoLevel(Protocol):
    """What :class:`Summary` needs of a two-level estimate (``specmon.model.launches.Estimate``)."""

    def difference(self, other: Any, level: float) -> tuple[float, float | None, float | None]:
        """``self − other`` with its interval at ``level``."""
        ...

    def ratio_pct(self, other: Any, level: float) -> tuple[float, float | None, float | None]:
        """``self / other − 1`` in percent with its interval at ``level``."""
        ...


@dataclass(frozen=True, slots=True)
class Summary:
    """Distribution of one metric over the samples of a run.

    ``se`` and ``df`` describe the uncertainty of the *mean* (from batch means
    when there are enough samples); ``ci95_low``/``ci95_high`` are None when
    there are too few samples to say anything.
    """

    n: int
    mean: float
    median: float
    p10: float
    p90: float
    sd: float
    se: float | None
    df: float | None
    ci95_low: float | None
    ci95_high: float | None
    batches: int  # number of batch means behind the interval (n when unbatched; launches under ``model``)
    #: The two-level estimate behind ``mean``/``se``/``df`` (:class:`specmon.model.launches.Estimate`), when
    #: the summary comes from the launch model: differences and ratios then share its pooled
    #: between-launch term instead of treating the two summaries as independent.
    model: TwoLevel | None = None

    @property
    def ci_half_width(self) -> float | None:
        """Half the width of the 95% interval, or None."""
        if self.ci95_low is None or self.ci95_high is None:
            return None
        return (self.ci95_high - self.ci95_low) / 2

    def to_json(self) -> dict[str, float | int | None]:
        """The summary as JSON-ready numbers, rounded to what the logs can support."""

        def r(x: float | None, nd: int = 4) -> float | None:
            return None if x is None or math.isnan(x) else round(x, nd)

        return {
            "n": self.n, "mean": r(self.mean), "median": r(self.median), "p10": r(self.p10),
            "p90": r(self.p90), "sd": r(self.sd), "ci95_low": r(self.ci95_low),
            "ci95_high": r(self.ci95_high), "batches": self.batches,
        }


def batch_means(values: Sequence[float] | np.ndarray) -> list[float]:
    """Means of ``k`` consecutive, equal, non-overlapping batches of ``b = floor(sqrt(n))``.

    The oldest ``n mod b`` samples are left out of the batching (not of the mean):
    every batch must have the same size for their means to be exchangeable.
    """
    x = values if isinstance(values, np.ndarray) and values.dtype == np.float32 else as_array(values)
    n = len(x)
    if n == 0:
        return []
    b = max(1, math.isqrt(n))
    k = n // b
    means: list[float] = x[n - k * b:].reshape(k, b).mean(axis=1, dtype=np.float64).tolist()
    return means


def sorted_quantiles(ordered: np.ndarray, qs: Sequence[float]) -> np.ndarray:
    """``np.quantile(ordered, qs)`` (its default, linear method) of data already sorted, to the bit.

    np.quantile partitions its input even when it is sorted (18 ms of the 7 summaries of a
    2M-line SGLang log) and, through np.unique, imports numpy.ma (14 ms) on its first call.
    This takes the neighbours of each virtual index by position and interpolates them with
    numpy's own steps, in its order: index (n - 1) * q, floor, the last value past n - 1,
    then a + (b - a) * t, or b - (b - a) * (1 - t) where t >= 0.5. Data with a NaN (sorted to
    the end) is left to np.quantile.
    """
    n = len(ordered)
    if n == 0 or np.isnan(ordered[-1]):
        return np.asarray(np.quantile(ordered, qs))
    virtual = (n - 1) * np.asarray(qs, dtype=np.float64)
    below = np.floor(virtual)
    above = below + 1
    last = virtual >= n - 1
    below[last] = above[last] = -1
    t = virtual - below
    # Widened before the arithmetic: float32 samples interpolate as their float64 values do.
    a = ordered[below.astype(np.intp)].astype(np.float64)
    b = ordered[above.astype(np.intp)].astype(np.float64)
    diff = b - a
    out: np.ndarray = np.add(a, diff * t)
    np.subtract(b, diff * (1 - t), out=out, where=t >= 0.5)
    return out


def summarize(values: Sequence[float] | np.ndarray, *, scratch: bool = False) -> Summary | None:
    """Mean, median, p10/p90 and a 95% batch-means interval; None for no samples.

    ``scratch``: ``values`` is the caller's temporary, which may be sorted in place (a copy of
    millions of samples less at the analysis's peak: the dashboard under a flood).
    """
    x = values if isinstance(values, np.ndarray) and values.dtype == np.float32 else as_array(values)
    n = len(x)
    if n == 0:
        return None
    # Summed in float64 whatever the samples' width; the spread a chunk at a time (a temporary
    # as long as the run was most of the dashboard's peak memory under a flood).
    mean = float(np.mean(x, dtype=np.float64))
    sd = math.sqrt(_sum_sq_dev(x, mean) / (n - 1)) if n > 1 else 0.0
    se = df = lo = hi = None
    batches = n
    if n >= MIN_SAMPLES_FOR_BATCHING:
        bm = np.asarray(batch_means(x))
        batches = len(bm)
        se = float(bm.std(ddof=1)) / math.sqrt(batches)
        df = float(batches - 1)
    elif n >= MIN_SAMPLES_FOR_CI:
        # Too few to batch: the iid interval is the best on offer, and is marked by batches == n.
        se = sd / math.sqrt(n)
        df = float(n - 1)
    # The quantiles of a sorted copy: the same order statistics, so the same numbers, and
    # numpy's vectorised sort and a partition of sorted data (1.2M samples: 7.5 + 2.6 ms) cost
    # half the partition of unsorted data (21 ms). Sorted in place when x is our own copy (the
    # run's float32 column made float64), after everything that reads it in order.
    if x is values and not scratch:
        ordered = np.sort(x)  # the caller's samples are left as they were
    else:
        x.sort()
        ordered = x
    p10, median, p90 = (float(v) for v in sorted_quantiles(ordered, (0.1, 0.5, 0.9)))
    if se is not None and df is not None:
        half = t975(df) * se
        lo, hi = mean - half, mean + half
    return Summary(n, mean, median, p10, p90, sd, se, df, lo, hi, batches)


@dataclass(frozen=True, slots=True)
class Ratio:
    """``a / b - 1`` in percent with its 95% interval (None when it cannot be given)."""

    pct: float
    ci95_low: float | None
    ci95_high: float | None

    @property
    def excludes_zero(self) -> bool:
        """Whether the interval lies entirely on one side of zero."""
        return (self.ci95_low is not None and self.ci95_high is not None
                and (self.ci95_low > 0 or self.ci95_high < 0))

    def to_json(self) -> dict[str, float | None]:
        """JSON-ready numbers, in percent."""
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 2)
        return {"pct": r(self.pct), "ci95_low": r(self.ci95_low), "ci95_high": r(self.ci95_high)}


def welch_df(se_a: float, df_a: float | None, se_b: float, df_b: float | None) -> float | None:
    """Welch–Satterthwaite degrees of freedom for a difference of two means."""
    va, vb = se_a ** 2, se_b ** 2
    num = (va + vb) ** 2
    den = 0.0
    if va > 0:
        if not df_a:
            return None
        den += va ** 2 / df_a
    if vb > 0:
        if not df_b:
            return None
        den += vb ** 2 / df_b
    if den == 0:
        return None
    return num / den


def ratio(a: Summary, b: Summary | float) -> Ratio | None:
    """Relative difference of ``a``'s mean against ``b`` (a summary, or an exact number).

    Uses the delta method on the ratio of means; ``b`` given as a plain number
    (``--baseline-tps 88.8``) is taken as exact.
    """
    if a.model is not None and (not isinstance(b, Summary) or b.model is not None):
        # Both from the launch model (or an exact reference): its interval, with shared terms.
        if (b.mean if isinstance(b, Summary) else b) <= 0:
            return None
        pct, lo, hi = a.model.ratio_pct(b.model if isinstance(b, Summary) else float(b), 0.95)
        return Ratio(pct, lo, hi)
    if isinstance(b, Summary):
        mb, se_b, df_b = b.mean, b.se, b.df
    else:
        mb, se_b, df_b = float(b), 0.0, None
    if mb <= 0 or math.isnan(mb):
        return None
    r = a.mean / mb
    pct = (r - 1) * 100
    if a.se is None or se_b is None:
        return Ratio(pct, None, None)
    rel_a, rel_b = a.se / a.mean if a.mean else math.inf, se_b / mb
    se_r = abs(r) * math.sqrt(rel_a ** 2 + rel_b ** 2)
    df = welch_df(rel_a, a.df, rel_b, df_b)
    if df is None or math.isinf(se_r):
        return Ratio(pct, None, None)
    half = t975(df) * se_r * 100
    return Ratio(pct, pct - half, pct + half)


def difference(a: Summary, b: Summary) -> tuple[float, float | None, float | None]:
    """``a.mean - b.mean`` with its Welch 95% interval (None bounds when it cannot be given)."""
    if a.model is not None and b.model is not None:
        return a.model.difference(b.model, 0.95)
    d = a.mean - b.mean
    if a.se is None or b.se is None:
        return d, None, None
    df = welch_df(a.se, a.df, b.se, b.df)
    if df is None:
        return d, None, None
    half = t975(df) * math.sqrt(a.se ** 2 + b.se ** 2)
    return d, d - half, d + half
