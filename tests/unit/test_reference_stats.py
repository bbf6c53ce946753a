"""The launch model and the replica model checked against statsmodels on generated data.

specmon computes both models itself (numpy and scipy only: statsmodels imports pandas, ~1 s,
which a ``summarize`` should not pay). Here statsmodels, a test dependency, is the reference:

* **The launch model** (:mod:`specmon.model.launches`) is a random-effects pooling of launch
  means, a method-of-moments estimator of the DerSimonian–Laird family (DerSimonian & Kacker
  2007, eq. 6, with every launch weighted equally). It is checked against
  ``statsmodels.stats.meta_analysis.combine_effects`` (DerSimonian–Laird, fixed effect),
  ``OLS`` (the t interval of launch means) and ``MixedLM`` (REML with a random intercept per
  launch, fitted to the samples themselves).
* **The replica model** (:mod:`specmon.experiment.stats.replica_effects`) is least squares on log launch
  means with a term per setting and effect-coded replicas: checked against ``OLS`` with
  patsy's own ``Sum`` coding, and its replicas' spread against ``MixedLM`` (replica as a random
  intercept) on complete balanced layouts.

Where the two differ by design, the test's docstring says why and what still holds (an
inequality in the conservative direction). docs/numbers.md ("Checked against a reference")
says the same for users.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np
import pandas as pd  # type: ignore[import-untyped]  # no stubs installed; a test-only dependency
import pytest
import statsmodels.formula.api as smf  # type: ignore[import-untyped]
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from statsmodels.stats.meta_analysis import _fit_tau_mm, combine_effects  # type: ignore[import-untyped]
from statsmodels.tools.sm_exceptions import ConvergenceWarning  # type: ignore[import-untyped]

from specmon.experiment.stats.replica_effects import BLOCKED, MIN_BLOCKED_DF, FleetLaunch, fit_fleet
from specmon.experiment.stats.rotation import assign
from specmon.model.launches import Launch, fit, launch_of

LEVELS = st.sampled_from([0.9, 0.95, 0.99, 0.995])


def _launches(means: Sequence[float], ses: Sequence[float], k: int = 20) -> list[Launch]:
    """Launches given by their means and within-launch errors (``k`` samples, ``k - 1`` df)."""
    return [Launch(m, s, float(k - 1), k, f"L{j}") for j, (m, s) in enumerate(zip(means, ses, strict=True))]


def _one_setting(launches: list[Launch]) -> tuple[float, float, float, tuple[float, float]]:
    """(mean, absolute τ², standard error, interval at 95%) of one setting under the launch model."""
    between, est = fit({"a": launches})
    e = est["a"]
    iv = e.interval(0.95)
    assert iv is not None
    return e.mean, between.tau2 * e.mean**2, e.se, iv


def _combine(effect: np.ndarray, variance: np.ndarray, use_t: bool = False) -> Any:
    """combine_effects with DerSimonian–Laird's τ². Its random-effects figures divide by
    ``variance + τ²``, and its τ² is not truncated: at τ² = −variance (launch means all equal) they are
    inf/NaN with a RuntimeWarning, and the fixed-effect figures are the ones to compare with."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return combine_effects(effect, variance, method_re="dl", use_t=use_t)


# ----------------------------------------------------------------- the launch model, one setting

launch_means = st.lists(st.floats(50.0, 150.0), min_size=2, max_size=10)


@settings(max_examples=150, deadline=None)
@given(means=launch_means, se=st.floats(0.01, 8.0), level=LEVELS)
def test_one_setting_with_equal_within_errors_is_dersimonian_laird(
        means: list[float], se: float, level: float) -> None:
    """With equal within-launch errors every weighting is equal, and the launch model is exactly
    DerSimonian–Laird with τ² truncated at 0 and a t interval on k − 1 df (combine_effects'
    ``use_t=True``): the random-effects interval while τ̂² > 0, the fixed-effect one at τ̂² = 0.

    statsmodels does not truncate its DL τ² at 0 (it keeps a negative value); the launch model
    does (a variance is not negative), so the comparison is with max(τ²_DL, 0).
    """
    launches = _launches(means, [se] * len(means))
    between, est = fit({"a": launches}, assumed_cv=0.05)
    e = est["a"]
    ref = _combine(np.array(means), np.full(len(means), se * se), use_t=True)
    assert e.mean == pytest.approx(ref.mean_effect_re if ref.tau2 > 0 else ref.mean_effect_fe, rel=1e-12)
    assert between.tau2 * e.mean**2 == pytest.approx(max(float(ref.tau2), 0.0), rel=1e-9, abs=1e-9 * se * se)
    ci_fe, ci_re, _, _ = ref.conf_int(alpha=1 - level, use_t=True)
    want = ci_re if ref.tau2 > 0 else ci_fe
    got = e.interval(level)
    assert got is not None
    assert got == pytest.approx(tuple(want), rel=1e-9)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(2, 10), level=LEVELS)
def test_one_setting_with_unequal_within_errors_is_the_equal_weight_moment_estimator(
        data: st.DataObject, n: int, level: float) -> None:
    """Launches are equal units whatever their length: τ² is DerSimonian & Kacker's method of
    moments with equal weights (statsmodels' ``_fit_tau_mm`` with weights 1, truncated at 0), and
    while τ̂² > 0 the interval is the plain t interval of the launch means (OLS on a constant;
    equal-weight Hartung–Knapp). At τ̂² = 0 the launch model keeps the larger of the two spreads
    (the launch means' and the within-launch errors'), so its interval holds the OLS one.

    DerSimonian–Laird proper (combine_effects' ``dl``) weights launches by 1/se², so its mean and
    τ² differ from these by design: a within-launch error rests on a few batch means of an
    autocorrelated series, too noisy to weight by, and the pooled spread describes the spread of
    unweighted launch means.
    """
    means = data.draw(st.lists(st.floats(50.0, 150.0), min_size=n, max_size=n))
    ses = data.draw(st.lists(st.floats(0.01, 8.0), min_size=n, max_size=n))
    mean, tau2, se, _ = _one_setting(_launches(means, ses))
    y, v = np.array(means), np.array(ses) ** 2
    ref_tau2 = max(float(_fit_tau_mm(y, v, np.ones(n))), 0.0)
    assert tau2 == pytest.approx(ref_tau2, rel=1e-9, abs=1e-9 * float(v.max()))
    ols = smf.ols("y ~ 1", pd.DataFrame({"y": y})).fit()
    assert mean == pytest.approx(float(ols.params.iloc[0]), rel=1e-12)
    _, est = fit({"a": _launches(means, ses)})
    lo, hi = (float(b) for b in ols.conf_int(alpha=1 - level).iloc[0])
    got = est["a"].interval(level)
    assert got is not None
    if ref_tau2 > 0:
        assert se == pytest.approx(float(ols.bse.iloc[0]), rel=1e-9)
        assert got == pytest.approx((lo, hi), rel=1e-9)
    else:
        assert got[0] <= lo * (1 + 1e-12) and got[1] >= hi * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(data=st.data(), n=st.integers(2, 10))
def test_launches_assumed_alike_are_the_fixed_effect_pooling(data: st.DataObject, n: int) -> None:
    """``--launch-cv 0`` says launches do not differ: the estimate is the inverse-variance
    (fixed-effect) pooling of the launch means, combine_effects' ``mean_effect_fe`` with its
    standard error. (statsmodels' interval treats the variances as known and uses the normal
    quantile; the launch model uses t on Welch–Satterthwaite df of the within-launch errors,
    wider, so only the estimate and its standard error are compared.)
    """
    means = data.draw(st.lists(st.floats(50.0, 150.0), min_size=n, max_size=n))
    ses = data.draw(st.lists(st.floats(0.01, 8.0), min_size=n, max_size=n))
    _, est = fit({"a": _launches(means, ses)}, assumed_cv=0.0)
    ref = _combine(np.array(means), np.array(ses) ** 2)
    assert est["a"].mean == pytest.approx(ref.mean_effect_fe, rel=1e-12)
    assert est["a"].se == pytest.approx(ref.sd_eff_w_fe, rel=1e-9)


# ------------------------------------------------------- the launch model, settings pooled


def _samples(rng: np.random.Generator, g: int, n: int, k: int, launch_cv: float, within_cv: float
             ) -> tuple[dict[Hashable, list[Launch]], pd.DataFrame]:
    """``g`` settings × ``n`` launches × ``k`` samples: the launches specmon reads (``launch_of``),
    and the samples divided by their setting's mean of launch means (the scale the launch model
    works on, ``m_ij / m̄_i``, here in percent: ``100 (x / m̄_i − 1)``, which keeps REML's optimiser
    away from variances of 1e-6), each launch's sample standard deviation exactly ``within_cv`` of it.
    """
    groups: dict[Hashable, list[Launch]] = {}
    rows = []
    for i in range(g):
        mu = rng.uniform(40.0, 160.0)
        launch_means = mu * (1 + launch_cv * rng.standard_normal(n))
        mbar = float(launch_means.mean())
        groups[i] = []
        for j, lm in enumerate(launch_means):
            z = rng.standard_normal(k)
            z = (z - z.mean()) / z.std(ddof=1)
            x = lm + within_cv * mbar * z
            launch = launch_of(x)
            assert launch is not None
            groups[i].append(launch)
            rows += [{"setting": i, "launch": f"{i}-{j}", "y": 100 * (v / mbar - 1)} for v in x]
    return groups, pd.DataFrame(rows)


def _mixedlm(df: pd.DataFrame, formula: str, group: str) -> object:
    with warnings.catch_warnings():
        # At the boundary (a variance of 0) REML warns that the Hessian is not positive definite.
        warnings.simplefilter("ignore", ConvergenceWarning)
        warnings.simplefilter("ignore", RuntimeWarning)
        warnings.simplefilter("ignore", UserWarning)
        # statsmodels says "xtol not used by MixedLM.fit", but passes it to scipy's Powell (the fit's
        # agreement goes from 1e-3 to 1e-7 with it).
        warnings.simplefilter("ignore", FutureWarning)
        # Powell's method: statsmodels' default (BFGS, then L-BFGS) stops short of the optimum or meets a
        # singular matrix on these small layouts when a variance is near 0; Powell converges on them.
        res = smf.mixedlm(formula, df, groups=df[group]).fit(reml=True, method="powell", xtol=1e-10, ftol=1e-12)
    assert res.converged
    return res


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), g=st.integers(1, 4), n=st.integers(2, 5), k=st.integers(3, 9),
       launch_cv=st.floats(0.0, 0.1), within_cv=st.floats(0.005, 0.1))
def test_settings_pooled_on_a_balanced_layout_are_mixedlm_reml(
        seed: int, g: int, n: int, k: int, launch_cv: float, within_cv: float) -> None:
    """Several settings share one launch variance. On a balanced layout (every setting ``n``
    launches of ``k`` samples, equal relative within-launch spread) the launch model's moment
    estimator is the ANOVA estimator, which REML equals while it is positive (a classic result
    for balanced one-way layouts): statsmodels' MixedLM, fitted to the samples with a random
    intercept per launch, gives the same τ² and the same standard error of every setting's mean.

    Two differences by design. MixedLM's intervals are normal; the launch model's are t on
    Satterthwaite df (so only standard errors are compared). At τ̂² = 0 REML pools the launch
    means' spread with the samples' into one residual variance; the launch model keeps the larger
    of the two, so its standard error is then at least MixedLM's. (MixedLM assumes independent
    samples within a launch, which decode lines are not: specmon's within-launch errors are batch
    means. Below 10 samples, as here, ``launch_of`` uses the plain sample error, as MixedLM does.)
    """
    rng = np.random.default_rng(seed)
    groups, df = _samples(rng, g, n, k, launch_cv, within_cv)
    between, est = fit(groups)
    assert between.estimated
    ref = _mixedlm(df, "y ~ 0 + C(setting)", "launch")
    ref_tau2 = float(ref.cov_re.iloc[0, 0]) / 1e4  # type: ignore[attr-defined]  # percent² -> fraction²
    ref_se = {i: float(ref.bse_fe.iloc[i]) / 100 for i in groups}  # type: ignore[attr-defined]
    # REML is found by an optimiser: agreement to its tolerance, relative to the variances in play.
    tol = 1e-5 * (between.ms_between + sum(v for v, _ in between.within_parts.values()))
    if between.tau2 > 0:
        assert between.tau2 == pytest.approx(ref_tau2, abs=tol)
        for i in groups:
            assert est[i].se / est[i].mean == pytest.approx(ref_se[i], rel=1e-5)
    else:
        assert ref_tau2 <= tol
        for i in groups:
            assert est[i].se / est[i].mean >= ref_se[i] * (1 - 1e-5)


# --------------------------------------------------------------------------- the replica model


def _fleet(seed: int, r: int, s: int, rounds: int, replica_cv: float, launch_cv: float
           ) -> tuple[list[FleetLaunch], pd.DataFrame]:
    """A parallel sweep's launches: the rotation's layout (or, for odd seeds, a random one, unbalanced),
    each launch's mean the setting's speed × its replica's × its own luck."""
    rng = np.random.default_rng(seed)
    replicas = [f"r{i}" for i in range(r)]
    speed = {x: rng.uniform(50.0, 120.0) for x in range(s)}
    rep = {n: math.exp(replica_cv * rng.standard_normal()) for n in replicas}
    out: list[FleetLaunch] = []
    rows = []
    for k in range(rounds):
        if seed % 2:
            layout = {n: int(rng.integers(0, s)) for n in replicas}
        else:
            layout = assign(replicas, list(range(s)), k, seed)
        for n, x in layout.items():
            m = speed[x] * rep[n] * math.exp(launch_cv * rng.standard_normal())
            se = m * rng.uniform(0.001, 0.02)
            out.append(FleetLaunch(n, x, k, Launch(m, se, 9.0, 100)))
            rows.append({"replica": n, "setting": x, "y": math.log(m)})
    return out, pd.DataFrame(rows)


@settings(max_examples=120, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), r=st.integers(2, 5), s=st.integers(2, 4), rounds=st.integers(1, 8),
       replica_cv=st.floats(0.0, 0.2), launch_cv=st.floats(0.001, 0.1), level=LEVELS)
def test_replica_effects_are_ols_with_sum_coded_replicas(
        seed: int, r: int, s: int, rounds: int, replica_cv: float, launch_cv: float, level: float) -> None:
    """Whenever the fleet fit removes replica effects, it is OLS of log launch means on the
    settings and the replicas in patsy's Sum (effect) coding: the same setting terms, covariance,
    residual df, every pairwise ratio's interval (a t test of the contrast), every setting's
    interval, and the residual variance behind the launch CV it reports."""
    launches, df = _fleet(seed, r, s, rounds, replica_cv, launch_cv)
    ff = fit_fleet(launches)
    if ff is None or ff.model != BLOCKED:
        return
    ols = smf.ols("y ~ 0 + C(setting) + C(replica, Sum)", df).fit()
    names = {x: f"C(setting)[{x}]" for x in ff.means}
    assert ff.df == ols.df_resid
    for x, name in names.items():
        assert math.log(ff.means[x]) == pytest.approx(float(ols.params[name]), rel=1e-9, abs=1e-9)
        lo, hi = (math.exp(float(b)) for b in ols.conf_int(alpha=1 - level).loc[name])
        assert ff.interval(x, level) == pytest.approx((lo, hi), rel=1e-9)
    within = float(np.mean([(x.launch.se / x.launch.mean) ** 2 for x in launches]))  # type: ignore[operator]
    assert ff.launch_cv == pytest.approx(math.sqrt(max(float(ols.scale) - within, 0.0)), rel=1e-6, abs=1e-9)
    settings_ = list(ff.means)
    for a in settings_:
        for b in settings_:
            if a == b:
                continue
            contrast = np.zeros(len(ols.params))
            contrast[list(ols.params.index).index(names[a])] = 1.0
            contrast[list(ols.params.index).index(names[b])] = -1.0
            t = ols.t_test(contrast)
            d = float(np.asarray(t.effect).ravel()[0])
            lo, hi = (float(v) for v in np.asarray(t.conf_int(alpha=1 - level)).ravel())
            pct, plo, phi = ff.ratio_pct(a, b, level)
            assert pct == pytest.approx(100 * math.expm1(d), rel=1e-9, abs=1e-9)
            assert (plo, phi) == pytest.approx((100 * math.expm1(lo), 100 * math.expm1(hi)), rel=1e-9, abs=1e-9)


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), r=st.integers(3, 6), s=st.integers(2, 4), reps=st.integers(1, 3),
       replica_cv=st.floats(0.0, 0.15), launch_cv=st.floats(0.005, 0.05))
def test_the_replicas_spread_on_complete_blocks_is_mixedlm_reml(
        seed: int, r: int, s: int, reps: int, replica_cv: float, launch_cv: float) -> None:
    """On a complete balanced layout (every replica runs every setting ``reps`` times) the replicas'
    spread the fleet fit reports is the ANOVA estimator (MS_replica − MS_error)/(settings · reps),
    which REML with the replica as a random intercept equals while it is positive: MixedLM's.

    (Before this check the fit subtracted the mean of the replica terms' estimation variances where
    their sum over r − 1 belongs, overstating the spread: at r = 3, by a third of MS_error/(s·reps).)
    The settings' differences are not compared with MixedLM: the fleet fit is the within-replica
    analysis by design (see the module's docstring); REML would also recover between-replica
    information, which on a complete balanced layout there is none of anyway.
    """
    # The fit removes replica effects once the layout leaves residual df to spare (see its module).
    assume(reps > 1 or r * s - (s + r - 1) >= MIN_BLOCKED_DF)
    rng = np.random.default_rng(seed)
    replicas = [f"r{i}" for i in range(r)]
    rep = {n: math.exp(replica_cv * rng.standard_normal()) for n in replicas}
    speed = {x: rng.uniform(50.0, 120.0) for x in range(s)}
    launches, rows = [], []
    for k in range(reps):
        for n in replicas:
            for x in range(s):
                m = speed[x] * rep[n] * math.exp(launch_cv * rng.standard_normal())
                launches.append(FleetLaunch(n, x, k, Launch(m, m * 0.001, 9.0, 100)))
                rows.append({"replica": n, "setting": x, "y": math.log(m)})
    ff = fit_fleet(launches)
    assert ff is not None and ff.model == BLOCKED and ff.replica_cv is not None
    df = pd.DataFrame(rows)
    ols = smf.ols("y ~ 0 + C(setting) + C(replica, Sum)", df).fit()
    ms_r = float(np.var(df.groupby("replica")["y"].mean(), ddof=1)) * s * reps
    anova = max((ms_r - float(ols.scale)) / (s * reps), 0.0)
    assert ff.replica_cv**2 == pytest.approx(anova, rel=1e-9, abs=1e-12)
    ref = _mixedlm(df, "y ~ 0 + C(setting)", "replica")
    ref_var = float(ref.cov_re.iloc[0, 0])  # type: ignore[attr-defined]
    tol = 2e-3 * ms_r / (s * reps) + 1e-12
    if anova > 20 * tol:
        assert anova == pytest.approx(ref_var, abs=tol)
    elif anova == 0:
        assert ref_var <= tol


def test_a_lopsided_layout_matches_ols() -> None:
    """The named case: one replica ran one setting 400 times, every other pair once. The fit solves
    by factorising X (lstsq, and R of X = QR for the covariance) rather than inverting X'X, whose
    condition number is the square of X's; the setting terms and an interval still agree with OLS."""
    launches, rows = [], []
    rng = np.random.default_rng(1)
    for n in ("a", "b", "c"):
        for x in range(3):
            for _ in range(400 if (n, x) == ("a", 0) else 1):
                m = 80.0 * (1 + 0.1 * x) * math.exp(0.02 * rng.standard_normal())
                launches.append(FleetLaunch(n, x, 0, Launch(m, m * 0.001, 9.0, 100)))
                rows.append({"replica": n, "setting": x, "y": math.log(m)})
    ff = fit_fleet(launches)
    assert ff is not None and ff.model == BLOCKED
    ols = smf.ols("y ~ 0 + C(setting) + C(replica, Sum)", pd.DataFrame(rows)).fit()
    for x in range(3):
        assert math.log(ff.means[x]) == pytest.approx(float(ols.params[f"C(setting)[{x}]"]), rel=1e-10)
    assert ff.ratio_pct(1, 0, 0.95)[1] == pytest.approx(
        100 * math.expm1(float(np.asarray(ols.t_test("C(setting)[1] - C(setting)[0] = 0").conf_int()).ravel()[0])),
        rel=1e-9)
