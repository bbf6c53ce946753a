"""The two-level model (launches within settings): properties of the estimator, and its error rates
on seeded simulated launches with known truth."""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.model.analysis import analyze
from specmon.model.launches import Launch, as_summary, fit, fit_between, launch_of
from specmon.model.session import Session
from specmon.model.stats import summarize, t975
from specmon.records import Config, Decode, Engine
from specmon.sim.model import SpecConfig, launch_speed
from specmon.sim.sweepworld import line_sampler

samples = st.lists(st.floats(min_value=20.0, max_value=200.0, allow_nan=False), min_size=3, max_size=400)


@settings(max_examples=60, deadline=None)
@given(samples)
def test_one_launch_at_launch_cv_0_is_the_old_interval(values: list[float]) -> None:
    old = summarize(values)
    assert old is not None
    x = launch_of(values)
    assert x is not None
    _, est = fit({"a": [x]}, 0.0)
    new = as_summary(est["a"], old)
    assert new.mean == pytest.approx(old.mean, rel=1e-12)
    if old.ci95_low is None:
        assert new.ci95_low is None
    else:
        assert new.ci95_low == pytest.approx(old.ci95_low, rel=1e-9, abs=1e-9)
        assert new.ci95_high == pytest.approx(old.ci95_high, rel=1e-9, abs=1e-9)
    assert est["a"].covers() == "1 launch (launches assumed alike: launch CV 0)"


launch = st.builds(lambda m, r, k: Launch(m, m * r, float(k), 100),
                   st.floats(50.0, 150.0), st.floats(0.001, 0.05), st.integers(2, 30))
configs = st.lists(st.lists(launch, min_size=1, max_size=5), min_size=1, max_size=4)


@settings(max_examples=80, deadline=None)
@given(configs, st.floats(0.1, 10.0), st.randoms(use_true_random=False))
def test_scale_order_and_names_do_not_matter(groups: list[list[Launch]], c: float, rnd: random.Random) -> None:
    base_b, base = fit({i: g for i, g in enumerate(groups)}, 0.05)
    # Tokens per second in other units (a faster host, a batch of c): relative quantities stay.
    scaled = {i: [Launch(x.mean * c, x.se * c, x.df, x.n) for x in g] for i, g in enumerate(groups)}  # type: ignore[operator]
    sc_b, sc = fit(scaled, 0.05)
    assert sc_b.tau2 == pytest.approx(base_b.tau2, rel=1e-9, abs=1e-15)
    for i in base:
        assert sc[i].mean == pytest.approx(c * base[i].mean, rel=1e-9)
        assert sc[i].se == pytest.approx(c * base[i].se, rel=1e-9, abs=1e-12)
    # Launches listed in another order, settings under other names: the same estimates.
    names = [f"s{j}" for j in range(len(groups))]
    rnd.shuffle(names)
    shuffled = {names[i]: rnd.sample(g, len(g)) for i, g in enumerate(groups)}
    sh_b, sh = fit(shuffled, 0.05)
    assert sh_b.tau2 == pytest.approx(base_b.tau2, rel=1e-9, abs=1e-15)
    for i in base:
        assert sh[names[i]].mean == pytest.approx(base[i].mean, rel=1e-9)
        assert sh[names[i]].se == pytest.approx(base[i].se, rel=1e-6, abs=1e-12)
        assert (sh[names[i]].df or 0) == pytest.approx(base[i].df or 0, rel=1e-6)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.lists(st.floats(80.0, 120.0), min_size=2, max_size=6), min_size=1, max_size=4),
       st.floats(0.0005, 0.02))
def test_pooled_estimate_is_the_anova_estimator_with_equal_errors(means: list[list[float]], s: float) -> None:
    # Every launch's relative error s: W̄ = s², so τ̂² = MS_b − s² with MS_b the pooled spread of
    # relative launch deviations, on Σ(n_i − 1) degrees of freedom (launches, not samples).
    groups = {i: [Launch(m, s * (sum(ms) / len(ms)), 9.0, 100) for m in ms] for i, ms in enumerate(means)}
    b = fit_between(groups, 0.05)
    dof = sum(len(ms) - 1 for ms in means)
    ss = sum((m / (sum(ms) / len(ms)) - 1) ** 2 for ms in means for m in ms)
    assert b.estimated and b.df == dof
    assert b.tau2 == pytest.approx(max(0.0, ss / dof - s * s), rel=1e-9, abs=1e-15)


def test_identical_samples_and_known_variances_still_give_an_interval() -> None:
    # Every sample alike, one launch, an assumed launch CV: the variance is all known (infinite df).
    _, est = fit({"a": [Launch(100.0, 0.0, 9.0, 100)]}, 0.05)
    lo, hi = est["a"].interval()  # type: ignore[misc]
    assert hi - lo == pytest.approx(2 * t975(20_000) * 5.0)
    _, est0 = fit({"a": [Launch(100.0, 0.0, 9.0, 100)]}, 0.0)
    assert est0["a"].interval() == (100.0, 100.0)


def test_no_replicate_adds_the_assumed_launch_cv_and_says_so() -> None:
    x = Launch(100.0, 0.5, 20.0, 400)
    b, est = fit({"a": [x], "b": [Launch(104.0, 0.5, 20.0, 400)]}, 0.05)
    assert not b.estimated and b.describe() == "assumed launch CV 5%"
    e = est["a"]
    assert e.covers() == "1 launch + assumed launch CV 5%"
    # Var = se² + (0.05 m)²; Satterthwaite df of it with the assumed part known (rounded down:
    # here past 20,000, so the table's last value).
    var = 0.5**2 + 5.0**2
    df = var**2 / (0.5**4 / 20.0)
    assert e.df == pytest.approx(df)
    lo, hi = e.interval()  # type: ignore[misc]
    assert hi - lo == pytest.approx(2 * t975(min(math.floor(df), 20_000)) * math.sqrt(var), rel=1e-9)
    d, dlo, dhi = est["b"].difference(e, 0.95)
    assert d == pytest.approx(4.0) and dlo is not None and dlo < 0 < dhi  # type: ignore[operator]


def _session(seed: int, cv: float, launches: int, lines: int = 120) -> Session:
    """Two truly equal settings (2 steps, and 3 steps slowed to 2 steps' speed), ``launches`` starts each."""
    rng = random.Random(seed)
    s = Session(warmup=0)
    line = 0
    for j in range(launches):
        for steps in (2, 3):
            spec = SpecConfig.make(2)  # both run like 2 steps: equal truth under two names
            sampler = line_sampler(spec, random.Random(rng.random()))
            f = launch_speed(rng, cv)
            s.begin_source(f"launch {j} of {steps}")
            line += 1
            s.ingest(Config(line, None, None, engine=Engine.SGLANG, algorithm="EAGLE3", steps=steps, topk=1,
                            draft_tokens=steps + 1))
            for _ in range(lines):
                line += 1
                s.ingest(Decode(line, None, "TP0", running_req=1, gen_throughput=sampler()[2] * f))
    return s


@pytest.mark.parametrize(("cv", "launches"), [(0.05, 2), (0.05, 3), (0.10, 3)])
def test_equal_settings_are_rarely_called_different(cv: float, launches: int) -> None:
    seeds = range(150)
    new = old = 0
    for seed in seeds:
        runs = _session(seed, cv, launches).runs
        new += analyze(runs).verdict.separated
        # Before: samples pooled within each setting as if the launches were one (launch CV 0).
        old += analyze(runs, launch_cv=0.0).verdict.separated
    assert new / len(seeds) <= 0.09  # nominal 5%; 150 seeds: 9% is 2 standard errors above
    assert old / len(seeds) >= 0.3  # the within-launch interval alone calls most of them different
