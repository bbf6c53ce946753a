"""Which evidence a sweep buys next: more time in this launch, or another launch.

With two levels of noise (:mod:`specmon.model.launches`) a setting's mean has
relative variance ``(1/r²) Σ_j (τ² + w / n_j)`` over its ``r`` launches of
``n_j`` samples, where ``τ²`` is the between-launch variance and ``w`` the
within-launch variance of one sample's worth (a launch of ``n`` samples has a
mean known to ``w / n``; ``w`` already includes the autocorrelation, as it is
read from batch-means errors). More samples shrink only ``w / n``; a new launch
shrinks both but costs a restart. So:

* **Extend or relaunch** (:func:`extend`): keep measuring this launch while a
  second of it removes more variance than a second spent on a new launch
  (restart included) would. With ``τ² = 0`` a new launch never pays, and the
  sweep is the single-launch sweep it always was.
* **Launch length** (:func:`launch_samples`): the classic two-stage optimum
  ``m* = sqrt(R · rate · w / τ²)`` samples per launch for a restart of ``R``
  seconds.
* **The plan** (:func:`plan`): how many launches of ``m*`` samples each setting
  needs for the difference of two settings to be resolved to ``±X%`` at the
  sweep's adjusted level, and the time that takes.
* **Rounds** (:func:`judge_round`, :func:`to_launch`): settings are launched
  in rounds, in alternating order so that slow drift cannot favour one; after
  each round every setting still measured is judged with the stopping rule
  (Bonferroni over its planned rounds, as the sample rule does over its looks),
  and the leader and the baseline are launched again even when already decided.

Everything here is pure: the sweep runner (:mod:`specmon.control.rounds`) and
the fast simulated campaigns of ``bench/bench_launches.py`` call the same
functions.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass

from specmon.model.launches import Between, Launch, as_summary, fit, usable
from specmon.model.stats import Summary, t_quantile
from specmon.model.stopping import BUDGET, CONTINUE, Decision, StoppingRule

#: Within-launch variance of one sample's worth assumed before any launch was measured
#: (relative, per sample): the simulated Kimi campaign's decode lines give about 0.02.
DEFAULT_WITHIN_PER_SAMPLE = 0.02
#: The most launches per setting a plan asks for (beyond that the answer is "not separated").
MAX_LAUNCHES = 16


@dataclass(frozen=True, slots=True)
class Noise:
    """What the design knows of the noise and the costs.

    Attributes:
        tau2: Between-launch relative variance (launch CV squared).
        within: Within-launch relative variance per sample (``w``).
        rate: Counted samples per second of measuring.
        restart_s: Seconds a restart costs (the profile's measured start time).
    """

    tau2: float
    within: float
    rate: float
    restart_s: float

    @property
    def launch_cv(self) -> float:
        """The launch CV (a fraction)."""
        return math.sqrt(max(self.tau2, 0.0))

    def minute_noise(self) -> float:
        """Relative standard error of a one-minute launch's mean (within-launch noise only)."""
        return math.sqrt(self.within / max(self.rate * 60.0, 1e-9))


def within_per_sample(launches: Sequence[Launch]) -> float | None:
    """``w``: the mean of ``(se / mean)² · n`` over launches with an error (None without any)."""
    vals = [(x.se / x.mean) ** 2 * x.n for x in usable(launches) if x.se is not None]
    return sum(vals) / len(vals) if vals else None


def launch_samples(noise: Noise, lo: int, hi: int) -> int:
    """Samples per launch that minimise variance per second: ``sqrt(R · rate · w / τ²)``, within ``[lo, hi]``."""
    if noise.tau2 <= 0:
        return hi
    m = math.sqrt(noise.restart_s * noise.rate * noise.within / noise.tau2)
    return int(min(hi, max(lo, round(m))))


def _rel_var(tau2: float, within: float, ns: Sequence[int]) -> float:
    r = len(ns)
    return sum(tau2 + within / max(n, 1) for n in ns) / (r * r)


def extend(noise: Noise, ns: Sequence[int], m_new: int) -> bool:
    """Whether another second of the current launch (the last of ``ns``) buys more than a new launch.

    Args:
        noise: The current estimates.
        ns: Samples of each launch of this setting so far; the last one is running.
        m_new: Samples a new launch would get (:func:`launch_samples`).

    Returns:
        True to keep measuring this launch, False when a relaunch shrinks the
        setting's variance more per second spent.
    """
    if noise.tau2 <= 0:
        return True
    r = len(ns)
    cur = max(ns[-1], 1)
    # d Var / d second of the running launch: w / (r² n²) per sample, rate samples a second.
    gain_extend = noise.within / (r * r * cur * cur) * noise.rate
    now = _rel_var(noise.tau2, noise.within, ns)
    after = _rel_var(noise.tau2, noise.within, [*ns, m_new])
    gain_relaunch = (now - after) / (noise.restart_s + m_new / noise.rate)
    return gain_extend >= gain_relaunch


@dataclass(frozen=True, slots=True)
class Plan:
    """How much a sweep expects to measure (see :func:`plan`)."""

    resolve_pct: float
    launches: int
    samples: int
    seconds_per_setting: float
    total_s: float
    noise: Noise
    settings: int

    @property
    def text(self) -> str:
        """``to resolve ±3% with launch CV 5% and within-launch noise 1.1%/min: 6 launches × 2.0 minutes ...``."""
        each = self.samples / self.noise.rate
        return (f"to resolve ±{self.resolve_pct:g}% with launch CV {100 * self.noise.launch_cv:.1f}% and "
                f"within-launch noise {100 * self.noise.minute_noise():.1f}% per minute: "
                f"{self.launches} launch{'es' if self.launches != 1 else ''} × {_duration(each, 1)} per setting, "
                f"about {_duration(self.total_s)} in all ({self.settings} settings, "
                f"{_duration(self.noise.restart_s, 1)} a restart)")


def _duration(s: float, digits: int = 0) -> str:
    """``4.3 h``, ``26 min`` (``0.8 minutes`` with a digit), ``25 s``."""
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.{digits}f} {'minutes' if digits else 'min'}"
    return f"{s:.0f} s"


def plan(resolve_pct: float, noise: Noise, settings: int, level: float, lo: int, hi: int) -> Plan:
    """Launches and samples per setting for a difference of two settings to be known to ``±resolve_pct``.

    The half-width of the difference of two settings with ``r`` launches of
    ``m`` samples each is ``z · sqrt(2 (τ² + w/m) / r)`` at the test's level
    (a normal quantile: the degrees of freedom are not known before measuring;
    the verdict uses Student's t with the ones it gets).
    """
    m = launch_samples(noise, lo, hi)
    z = t_quantile(1 - (1 - level) / 2, math.inf)
    per = noise.tau2 + noise.within / m
    x = resolve_pct / 100.0
    r = max(2 if noise.tau2 > 0 else 1, math.ceil(2 * z * z * per / (x * x)))
    r = min(r, MAX_LAUNCHES)
    if noise.tau2 <= 0:
        # No launch variance: one launch, long enough (the single-launch sweep).
        need = math.ceil(2 * z * z * noise.within / (x * x))
        m, r = int(min(hi, max(lo, need))), 1
    secs = r * (noise.restart_s + m / noise.rate)
    return Plan(resolve_pct, r, m, secs, secs * settings, noise, settings)


def summaries(groups: Mapping[Hashable, Sequence[Launch]], launch_cv: float,
              bases: Mapping[Hashable, Summary | None] | None = None) -> tuple[Between, dict[Hashable, Summary]]:
    """Two-level summaries of the settings one verdict compares (as :func:`~specmon.model.analysis.assemble`).

    Args:
        groups: Each setting's launches.
        launch_cv: Assumed while no setting has two launches.
        bases: Each setting's pooled-sample summary (median, percentiles); without
            one, a summary is made from the launches alone.
    """
    between, estimates = fit(groups, launch_cv)
    out: dict[Hashable, Summary] = {}
    for key, ls in groups.items():
        base = (bases or {}).get(key)
        est = estimates.get(key)
        if base is None and est is not None:
            n = sum(x.n for x in est.launches)
            base = Summary(n, est.mean, est.mean, est.mean, est.mean, 0.0, None, None, None, None, len(ls))
        if base is not None:
            out[key] = as_summary(est, base) if est is not None else base
    return between, out


#: Why a setting stopped in the launch design, beyond the sample rule's reasons.
LEADER = "leader"


def judge_round(rule: StoppingRule, sums: Mapping[Hashable, Summary], active: Sequence[Hashable], *,
                last: bool, names: Mapping[Hashable, str] | None = None) -> dict[Hashable, Decision]:
    """Judge every setting still measured after a round of launches.

    Each setting is tested against the leader with the rule's adjusted level
    (:meth:`StoppingRule.decide`); the rule's looks are the planned rounds, so
    the union bound over them holds as it does for sample looks. When every
    other setting has stopped, the one left is the leader and stops too.

    Args:
        rule: The stopping rule (``looks`` = the planned rounds).
        sums: Two-level summaries of every setting of the group (:func:`summaries`).
        active: The settings still measured.
        last: The last planned round: whatever is undecided stops on the budget.
        names: Names for the sentences.
    """
    names = names or {}
    out: dict[Hashable, Decision] = {}
    for key in active:
        this = sums.get(key)
        if this is None:
            continue
        others = {k: s for k, s in sums.items() if k != key}
        d = rule.decide(this, others, budget_spent=last, label=names.get(key, str(key)), names=names)
        if d.reason == BUDGET:  # the budget here is rounds of launches, not samples
            d = Decision(True, BUDGET, None, f"{names.get(key, str(key))}: the planned rounds of launches are spent")
        out[key] = d
    going = [k for k in active if not (k in out and out[k].stop)]
    if len(going) == 1 and len(sums) > 1 and not last:
        k = going[0]
        if all(d.reason != CONTINUE for kk, d in out.items() if kk != k):
            out[k] = Decision(True, LEADER, None, f"{names.get(k, str(k))} is the one setting left")
    return out


def reschedule(looks: Sequence[int], done: int, needed: int, cap: int = MAX_LAUNCHES) -> tuple[int, ...]:
    """The look rounds after round ``done``, stretched when the plan now needs more launches.

    The number of looks stays the same (the Bonferroni split is fixed before
    measuring); only the rounds of the looks still to come move, and they move
    on what the *variance* estimates say (the plan), never on the difference
    seen so far — re-estimating the sample size from the noise, not peeking.

    Args:
        looks: The look rounds so far planned, increasing.
        done: The round just judged (a look).
        needed: Launches per setting the updated plan asks for.
        cap: The most rounds ever.
    """
    past = [r for r in looks if r <= done]
    left = len(looks) - len(past)
    last = looks[-1]
    if left == 0 or needed <= last:
        return tuple(looks)
    new_last = min(cap, needed)
    if new_last <= last:
        return tuple(looks)
    first = done + 1
    out = list(past)
    for j in range(left):
        r = new_last if j == left - 1 else round(first * (new_last / first) ** (j / max(1, left - 1)))
        r = max(r, (out[-1] + 1) if out else first)
        out.append(min(r, new_last) if j < left - 1 else new_last)
    # Strictly increasing, ending at new_last.
    fixed: list[int] = []
    for r in out:
        fixed.append(r if not fixed or r > fixed[-1] else fixed[-1] + 1)
    return tuple(fixed)


def to_launch(active: Sequence[Hashable], launches: Mapping[Hashable, int], leader: Hashable | None,
              baseline: Hashable | None, round_no: int) -> list[Hashable]:
    """The settings to launch in round ``round_no`` (1-based), in alternating order.

    Every setting still measured, plus the leader and the baseline while they
    have fewer than two launches: a verdict on them must not rest on one start.
    Odd rounds go in the given order, even rounds in reverse, so slow drift
    favours no setting.
    """
    keys = list(active)
    for extra in (baseline, leader):
        if extra is not None and extra not in keys and launches.get(extra, 0) < 2 and round_no > 1:
            keys.append(extra)
    order = [k for k in launches if k in keys] + [k for k in keys if k not in launches]
    return order if round_no % 2 == 1 else list(reversed(order))
