"""Two levels of noise: between server launches, and within one launch.

Two starts of the very same configuration run at different speeds (vLLM issue
53436: 7.5-19.7% run-to-run CV with speculation at low concurrency; specmon's
own proof run: the same settings 9-16% apart between a sweep and a reference
run). The samples of one launch say how well *that launch* is known; the
launches say how well the *configuration* is known. So the unit of evidence
is the launch, and every interval here has both parts:

* **Within a launch**: the launch's mean and its batch-means standard error
  (:func:`specmon.model.stats.batch_means`, as before), with ``k - 1`` degrees
  of freedom.
* **Between launches**: a one-way random-effects model on the relative scale,
  ``m_ij = mu_i * (1 + u_ij) + e_ij`` with ``Var(u) = tau²`` shared by every
  configuration (a launch CV is a property of the host and engine, not of one
  step count). ``tau²`` is estimated by the method of moments (the ANOVA
  estimator with known within-launch variances) pooled over every
  configuration measured in two or more launches: the launch means' spread
  around their configuration's mean, less what the within-launch errors
  explain. Its degrees of freedom are ``Σ (n_i - 1)`` over launches, never
  samples.
* **No replicate anywhere**: ``tau²`` cannot be estimated, and a within-launch
  interval would claim far too much. An *assumed* launch CV is used instead
  (``--launch-cv``, 5% by default: below the 7.5-19.7% of vLLM issue 53436
  and the 9-16% specmon measured itself, so the default is generous to the
  data, never to a verdict), and every text says the interval rests on it.

A configuration's estimate is the plain mean of its launch means (each launch
one unit, whatever its length), and its variance ``(tau² m² + mean se²) / n``.
The variance is a linear combination of independent mean squares (the pooled
between-launch mean square and each launch's within-launch square), so the
degrees of freedom of an interval — for one configuration, a difference or a
ratio, where the pooled term is shared — are Satterthwaite's, and the
quantile is scipy's Student t (:func:`specmon.model.stats.t_quantile`).

statsmodels' ``MixedLM`` was not used: it fits raw samples as independent
given the launch, which the autocorrelated decode lines are not (that is why
the within part uses batch means), and it cannot take the known within-launch
variances this model conditions on; its import alone (~1 s with pandas) would
double a ``summarize``. The estimator is arithmetic; the distributions are scipy's.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from specmon.model import t975_table
from specmon.model.stats import (
    MIN_SAMPLES_FOR_BATCHING,
    MIN_SAMPLES_FOR_CI,
    Summary,
    as_array,
    batch_means,
    t_quantile,
)

#: The launch CV assumed when no configuration was measured in two launches (a fraction).
DEFAULT_LAUNCH_CV = 0.05

#: A variance as named parts: key -> (value, degrees of freedom). Parts with the same key are
#: the same random quantity (the pooled between-launch mean square, one launch's within-launch
#: square), so combining two variances adds their values under one key before Satterthwaite.
Parts = dict[Hashable, tuple[float, float]]


@dataclass(frozen=True, slots=True)
class Launch:
    """One server launch of a configuration: its mean and the within-launch error of that mean.

    Attributes:
        mean: Mean throughput of the launch's counted samples.
        se: Batch-means standard error of that mean (None below 3 samples).
        df: Its degrees of freedom (batches - 1).
        n: Counted samples.
        name: What the launch is called in texts (a run, a sweep visit).
    """

    mean: float
    se: float | None
    df: float | None
    n: int
    name: str = ""


def launch_of(values: Sequence[float] | np.ndarray, name: str = "") -> Launch | None:
    """A launch from its samples: the mean and a batch-means standard error (None for no samples).

    The same numbers :func:`specmon.model.stats.summarize` gives for the mean,
    without its quantiles (the costly part on a long run).
    """
    x = as_array(values)
    n = len(x)
    if n == 0:
        return None
    mean = float(x.mean())
    if n >= MIN_SAMPLES_FOR_BATCHING:
        bm = np.asarray(batch_means(x))
        return Launch(mean, float(bm.std(ddof=1)) / math.sqrt(len(bm)), float(len(bm) - 1), n, name)
    if n >= MIN_SAMPLES_FOR_CI:
        return Launch(mean, float(x.std(ddof=1)) / math.sqrt(n), float(n - 1), n, name)
    return Launch(mean, None, None, n, name)


@dataclass(frozen=True, slots=True)
class Between:
    """The between-launch part, pooled over configurations.

    Attributes:
        tau2: Relative between-launch variance (a launch CV of 5% is 0.0025), truncated at 0.
        df: Degrees of freedom of the estimate (Σ (n_i − 1)); ``inf`` when assumed.
        estimated: True when estimated from replicated configurations, False when assumed.
        replicated: Configurations measured in two or more launches.
        assumed_cv: The launch CV assumed when nothing is replicated (a fraction).
        ms_between: The pooled mean square of relative launch deviations (estimated only).
        within_parts: The within-launch squares the estimate subtracts, as :data:`Parts`
            already divided by ``df`` (estimated only).
    """

    tau2: float
    df: float
    estimated: bool
    replicated: int = 0
    assumed_cv: float = DEFAULT_LAUNCH_CV
    ms_between: float = 0.0
    within_parts: Mapping[Hashable, tuple[float, float]] = field(default_factory=dict)

    @property
    def cv(self) -> float:
        """The launch CV in use (a fraction)."""
        return math.sqrt(max(self.tau2, 0.0))

    def describe(self) -> str:
        """``launch CV 4.1% estimated from 3 settings (4 df)`` or ``assumed launch CV 5%``."""
        if not self.estimated and self.assumed_cv == 0:
            return "launches assumed alike (launch CV 0)"
        if self.estimated:
            return (f"launch CV {100 * self.cv:.1f}% estimated from {self.replicated} "
                    f"setting{'s' if self.replicated != 1 else ''} measured in 2+ launches ({self.df:g} df)")
        return f"assumed launch CV {100 * self.assumed_cv:g}%"


def fit_between(groups: Mapping[Hashable, Sequence[Launch]], assumed_cv: float = DEFAULT_LAUNCH_CV) -> Between:
    """Estimate the between-launch variance, pooled over the configurations in ``groups``.

    Method of moments on the relative scale: for a configuration with ``n``
    launches, unweighted mean ``m̄`` and relative deviations ``r_j = m_j / m̄ − 1``,
    ``E[Σ r_j²] = (n − 1) τ² + (n − 1)/n Σ s_j²`` where ``s_j = se_j / m̄``. Summing
    over configurations and dividing by ``D = Σ (n − 1)`` gives ``τ̂² = MS_b − W̄``,
    truncated at 0.

    Args:
        groups: Each configuration's launches (key: any name of the configuration).
        assumed_cv: Used when no configuration has two launches (a fraction, >= 0).

    Raises:
        ValueError: ``assumed_cv`` is negative or not finite.
    """
    if not (assumed_cv >= 0 and math.isfinite(assumed_cv)):
        raise ValueError(f"the assumed launch CV must be a fraction >= 0, not {assumed_cv!r}")
    dof = 0
    ss = 0.0
    raw: dict[Hashable, tuple[float, float]] = {}
    replicated = 0
    for key, launches in groups.items():
        ls = usable(launches)
        n = len(ls)
        if n < 2:
            continue
        m = sum(x.mean for x in ls) / n
        if m <= 0:
            continue
        replicated += 1
        dof += n - 1
        ss += sum((x.mean / m - 1.0) ** 2 for x in ls)
        for j, x in enumerate(ls):
            assert x.se is not None
            raw[(key, j)] = ((n - 1) / n * (x.se / m) ** 2, _df(x))
    if dof == 0 or assumed_cv == 0:
        # Nothing replicated, or the user says launches do not differ (``--launch-cv 0``): the
        # assumption stands, and replicates are pooled as if one long launch.
        return Between(assumed_cv**2, math.inf, False, replicated, assumed_cv)
    ms_b = ss / dof
    within = {k: (v / dof, d) for k, (v, d) in raw.items()}
    tau2 = ms_b - sum(v for v, _ in within.values())
    return Between(max(tau2, 0.0), float(dof), True, replicated, assumed_cv, ms_b, within)


def usable(launches: Sequence[Launch]) -> list[Launch]:
    """The launches with a within-launch error (3+ samples): the others are too short to count."""
    return [x for x in launches if x.se is not None and x.mean > 0]


def _df(x: Launch) -> float:
    return x.df if x.df else math.inf


@dataclass(frozen=True, slots=True)
class Estimate:
    """A configuration's mean over its launches, with a variance in named parts (relative scale).

    Attributes:
        mean: Mean of the launch means.
        launches: The launches it rests on.
        parts: The relative variance ``Var(mean) / mean²`` as :data:`Parts`.
        between: The between-launch model it was made with.
    """

    mean: float
    launches: tuple[Launch, ...]
    parts: Parts
    between: Between

    @property
    def rel_var(self) -> float:
        """``Var(mean) / mean²``."""
        return max(sum(v for v, _ in self.parts.values()), 0.0)

    @property
    def se(self) -> float:
        """Standard error of the mean (tok/s)."""
        return self.mean * math.sqrt(self.rel_var)

    @property
    def df(self) -> float | None:
        """Satterthwaite degrees of freedom (None without parts).

        A variance of exactly 0 (every sample alike) keeps the smallest df of its parts, so the
        interval is the point itself, as :func:`specmon.model.stats.summarize` gives it.
        """
        df = satterthwaite(self.parts)
        if df is None and self.parts and sum(v for v, _ in self.parts.values()) == 0:
            return min(d for _, d in self.parts.values())
        return df

    def interval(self, level: float = 0.95) -> tuple[float, float] | None:
        """Two-sided interval of the mean at ``level``."""
        df = self.df
        if df is None:
            return None
        half = t_quantile(1 - (1 - level) / 2, whole_df(df)) * self.se
        return self.mean - half, self.mean + half

    def covers(self) -> str:
        """What the interval covers: ``3 launches`` or ``1 launch + assumed launch CV 5%``."""
        n = len(self.launches)
        text = f"{n} launch{'es' if n != 1 else ''}"
        if not self.between.estimated:
            cv = self.between.assumed_cv
            text += f" + assumed launch CV {100 * cv:g}%" if cv else " (launches assumed alike: launch CV 0)"
        return text

    def difference(self, other: Estimate, level: float) -> tuple[float, float | None, float | None]:
        """``self.mean − other.mean`` with its interval at ``level`` (tok/s)."""
        d = self.mean - other.mean
        parts = combine((self.parts, self.mean**2), (other.parts, other.mean**2))
        return _interval(d, parts, level)

    def ratio_pct(self, other: Estimate | float, level: float) -> tuple[float, float | None, float | None]:
        """``self.mean / other.mean − 1`` in percent with its interval (delta method on the ratio).

        ``other`` may be an exact number (``--baseline-tps``).
        """
        mb = other.mean if isinstance(other, Estimate) else float(other)
        r = self.mean / mb
        terms: list[tuple[Parts, float]] = [(self.parts, 1.0)]
        if isinstance(other, Estimate):
            terms.append((other.parts, 1.0))
        parts = combine(*terms, scale=(100 * r) ** 2)
        return _interval((r - 1) * 100, parts, level)


def combine(*terms: tuple[Parts, float], scale: float = 1.0) -> Parts:
    """Sum variances given as parts, each multiplied by its factor (shared keys add up)."""
    out: Parts = {}
    for parts, k in terms:
        for key, (v, df) in parts.items():
            old = out.get(key)
            out[key] = ((old[0] if old else 0.0) + k * scale * v, df)
    return out


def satterthwaite(parts: Parts) -> float | None:
    """Satterthwaite's degrees of freedom of ``Σ parts`` (None when the sum is not positive)."""
    total = sum(v for v, _ in parts.values())
    if not total > 0:
        return None
    den = sum(v * v / df for v, df in parts.values() if v and math.isfinite(df))
    return math.inf if den == 0 else total * total / den


def whole_df(df: float) -> float:
    """Satterthwaite's degrees of freedom rounded *down* to a whole number, at most 20,000.

    Conservative (a t quantile falls as df grows), as statistical packages that round
    Satterthwaite's df do; and a whole df at 95% is read from scipy's own values kept in a
    file (:mod:`specmon.model.t975_table`), so a ``summarize`` still does not import scipy
    (0.1 s). Below 1 the fraction is kept (an interval on less than one df is scipy's to give).
    """
    if df < 1:
        return df
    if df >= t975_table.LARGEST:  # also infinite (a variance all of known parts)
        return float(t975_table.LARGEST)
    near = round(df)
    whole = near if abs(df - near) <= 1e-9 * max(1.0, df) else math.floor(df)
    return float(min(whole, t975_table.LARGEST))


def _interval(d: float, parts: Parts, level: float) -> tuple[float, float | None, float | None]:
    df = satterthwaite(parts)
    if df is None:
        return d, None, None
    half = t_quantile(1 - (1 - level) / 2, whole_df(df)) * math.sqrt(sum(v for v, _ in parts.values()))
    return d, d - half, d + half


def estimate(key: Hashable, launches: Sequence[Launch], between: Between) -> Estimate | None:
    """A configuration's estimate under ``between`` (None without a launch that has an error).

    Args:
        key: The configuration's key as given to :func:`fit_between` (its own
            within-launch squares are then shared with the pooled estimate's).
        launches: Its launches.
        between: The pooled between-launch part.
    """
    ls = usable(launches)
    n = len(ls)
    if n == 0:
        return None
    m = sum(x.mean for x in ls) / n
    if between.estimated:
        # Launches as equal units: the pooled MS_b describes the spread of unweighted launch means.
        weights = [1.0 / n] * n
    else:
        # A known launch variance: inverse-variance weights (at launch CV 0, longer launches count
        # more, as the samples pooled into one launch would).
        raw = [1.0 / (between.tau2 * m * m + x.se**2) if between.tau2 * m * m + x.se**2 > 0 else 1.0  # type: ignore[operator]
               for x in ls]
        weights = [w / sum(raw) for w in raw]
        m = sum(w * x.mean for w, x in zip(weights, ls, strict=True))
    parts: Parts = {}
    for j, (w, x) in enumerate(zip(weights, ls, strict=True)):
        assert x.se is not None
        parts[(key, j)] = ((w * x.se / m) ** 2, _df(x))
    if between.estimated:
        if between.tau2 > 0:
            # τ̂² = MS_b − W̄, kept as its parts: a difference of two settings shares MS_b.
            parts["between"] = (between.ms_between / n, between.df)
            for k, (v, df) in between.within_parts.items():
                old = parts.get(k)
                parts[k] = ((old[0] if old else 0.0) - v / n, df)
        else:
            # The launch means agree better than their within-launch errors predict: by chance, as
            # often as not (with 2 df, 8% of the time at a true launch CV of 5%). Truncating τ̂² to 0
            # would hand the interval the within-launch degrees of freedom and claim far too much;
            # the spread of the launch means is still the evidence, with its D degrees of freedom.
            own = sum((x.se / m) ** 2 for x in ls if x.se is not None) / n
            parts = {"between": (max(between.ms_between, own) / n, between.df)}
    elif between.tau2 > 0:
        parts["assumed"] = (between.tau2 * sum(w * w for w in weights), math.inf)
    return Estimate(m, tuple(ls), parts, between)


def fit(groups: Mapping[Hashable, Sequence[Launch]], assumed_cv: float = DEFAULT_LAUNCH_CV
        ) -> tuple[Between, dict[Hashable, Estimate]]:
    """:func:`fit_between` and every configuration's :func:`estimate`."""
    between = fit_between(groups, assumed_cv)
    out = {}
    for key, ls in groups.items():
        est = estimate(key, ls, between)
        if est is not None:
            out[key] = est
    return between, out


def as_summary(est: Estimate, base: Summary) -> Summary:
    """``base`` (the pooled samples' distribution) with the mean and 95% interval of ``est``.

    The median and percentiles stay the samples'; the mean, standard error,
    degrees of freedom and interval become the two-level model's, and the
    estimate rides along (``Summary.model``) so that differences and ratios
    share the pooled between-launch term.
    """
    df = est.df
    lo = hi = None
    if df is not None:
        iv = est.interval(0.95)
        if iv is not None:
            lo, hi = iv
    return Summary(base.n, est.mean, base.median, base.p10, base.p90, base.sd, est.se if df is not None else None,
                   df, lo, hi, len(est.launches), model=est)


def rests_on(estimates: Sequence[tuple[str, Estimate]], between: Between) -> str:
    """``Rests on 5 launches (2 of 2 steps, 3 of 3 steps); launch CV 4.1% estimated from ...``."""
    total = sum(len(e.launches) for _, e in estimates)
    counts = {len(e.launches) for _, e in estimates}
    # Said short where it can be: the sentence is the dashboard's answer, whole at 80x24.
    each = (f"{counts.pop()} per setting" if len(counts) == 1 and len(estimates) > 1
            else ", ".join(f"{len(e.launches)} of {name}" for name, e in estimates))
    text = f"Rests on {total} launch{'es' if total != 1 else ''} ({each}); {between.describe()}"
    if not between.estimated and between.replicated:
        text += " (given: the replicated settings' launches are pooled as one)"
    elif not between.estimated and between.assumed_cv > 0:
        text += " (no setting was launched twice: an assumption)"
    return text + "."
