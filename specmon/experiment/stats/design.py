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
* **The budget** (:func:`budget`): the most the design spends, every setting in every round it
  may run, at the measured restart cost, stated before the first restart.
* **What would decide it** (:func:`needs_more`, :class:`NeedsMore`): for a verdict that stops
  undecided, how many more launches of its two leading settings would decide it with 80%
  probability at the verdict's own level, from the measured launch spread; its time at the
  measured restart cost. Which settings to launch next is :func:`to_launch` alone; the
  best-arm design (:mod:`specmon.experiment.stats.bai`) replaces that one function, its looks and its level.

Everything here is pure: the sweep runner (:mod:`specmon.experiment.rounds`) and
the fast simulated campaigns of ``bench/bench_launches.py`` call the same
functions.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace

from specmon.model.launches import Between, Estimate, Launch, as_summary, fit, usable
from specmon.model.objective import ObjectiveVerdict
from specmon.model.stats import Summary, t_quantile
from specmon.model.stopping import BUDGET, CONTINUE, Decision, StoppingRule, SweepVerdict

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
    def head(self) -> str:
        """``to resolve ±3% with launch CV 5% and within-launch noise 1.1%/min: 6 launches × 2.0 minutes per setting``."""
        return self.heading()

    def heading(self, each_of: str = "per setting") -> str:
        """:attr:`head`, saying whose launches they are (the best-arm design: ``of each of the two closest``)."""
        each = self.samples / self.noise.rate
        return (f"to resolve ±{self.resolve_pct:g}% with launch CV {100 * self.noise.launch_cv:.1f}% and "
                f"within-launch noise {100 * self.noise.minute_noise():.1f}% per minute: "
                f"{self.launches} launch{'es' if self.launches != 1 else ''} × {_duration(each, 1)} {each_of}")

    @property
    def text(self) -> str:
        """:attr:`head`, then ``about 4.3 h in all (4 settings, 10.0 minutes a restart)``."""
        return (f"{self.head}, about {_duration(self.total_s)} in all ({self.settings} settings, "
                f"{_duration(self.noise.restart_s, 1)} a restart)")


def _duration(s: float, digits: int = 0) -> str:
    """``4.3 h``, ``26 min`` (``0.8 minutes`` with a digit), ``25 s``."""
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    if s >= 60:
        return f"{s / 60:.{digits}f} {'minutes' if digits else 'min'}"
    return f"{s:.1f} s" if s < 10 else f"{s:.0f} s"


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


# --------------------------------------------------------------------------- the budget and what is left


@dataclass(frozen=True, slots=True)
class Budget:
    """The most a launch design will spend, stated before it starts (see :func:`budget`).

    Attributes:
        restarts: Restarts at most (every setting in every round; clearly slower ones leave early).
        rounds: Rounds at most.
        settings: Settings (times loads) launched in a round.
        seconds: Time those restarts take at ``restart_s`` each, plus measuring, in the run's clock.
        restart_s: The restart cost it is stated at (measured, or assumed before the first).
        clock: What the seconds are: ``""`` for a real server, else the demo's note
            (``"simulated ×100"``) so the time read matches the clock the run uses.
    """

    restarts: int
    rounds: int
    settings: int
    seconds: float
    restart_s: float
    clock: str = ""
    #: The best-arm design (:mod:`specmon.experiment.stats.bai`): ``(warm-up rounds, settings a later round)``,
    #: None for the design that launches every undecided setting each round.
    pairs: tuple[int, int] | None = None

    @property
    def text(self) -> str:
        """``budget: at most 80 restarts (16 rounds of 5 settings), about 20.3 h at 15.0 minutes a restart; ...``."""
        where = f" ({self.clock})" if self.clock else ""
        if self.pairs is not None:
            return (f"budget: at most {self.restarts} restarts (every setting in the first {self.pairs[0]} rounds, "
                    f"then the leader and its closest challenger, up to {self.rounds} rounds), about "
                    f"{_duration(self.seconds)} at {_duration(self.restart_s, 1)} a restart{where}; settings clearly "
                    "behind leave early")
        return (f"budget: at most {self.restarts} restart{'s' if self.restarts != 1 else ''} ({self.rounds} "
                f"round{'s' if self.rounds != 1 else ''} of {self.settings} setting{'s' if self.settings != 1 else ''}"
                f"), about {_duration(self.seconds)} at {_duration(self.restart_s, 1)} a restart{where}; every "
                "setting is launched twice before any is judged, and settings clearly behind leave early")


def launch_seconds(noise: Noise, lo: int, hi: int, cap_s: float | None = None) -> float:
    """Seconds one launch measures (the design's launch length), at most ``cap_s``."""
    m = launch_samples(noise, lo, hi)
    secs = m / max(noise.rate, 1e-9)
    return min(secs, cap_s) if cap_s is not None else secs


def budget(noise: Noise, settings: int, rounds: int, lo: int, hi: int, *, cap_s: float | None = None,
           clock: str = "", pairs: tuple[int, int] | None = None) -> Budget:
    """The most the design spends: ``settings × rounds`` restarts, each with one launch's measuring.

    With ``pairs = (warm-up rounds, per round)`` (the best-arm design): every setting in the
    warm-up rounds, then at most ``per round`` launches a round.
    """
    if pairs is not None:
        warm, per_round = pairs
        restarts = settings * min(warm, rounds) + min(per_round, settings) * max(0, rounds - warm)
    else:
        restarts = settings * rounds
    per = noise.restart_s + launch_seconds(noise, lo, hi, cap_s)
    return Budget(restarts, rounds, settings, restarts * per, noise.restart_s, clock, pairs)


def expected_restarts(launches: int, settings: int, pairs: tuple[int, int] | None = None) -> int:
    """The restarts a plan of ``launches`` per setting expects (the budget is the most; this the likely).

    Every setting ``launches`` times; with the best-arm design (``pairs = (warm-up rounds, launches
    a later round)``, as :func:`budget` takes it) every setting through the warm-up, then only the
    leader and its closest challenger of each load go on to ``launches`` each: the settings clearly
    behind are expected to leave after the warm-up (in the simulated campaigns they get 2-5
    launches, ``bench/bench_bai.py``).
    """
    if pairs is None:
        return settings * launches
    warm, per_round = pairs
    return settings * warm + min(per_round, settings) * max(0, launches - warm)


def expected_text(restarts: int, seconds: float) -> str:
    """``about 38 restarts and 9.5 h expected``."""
    return f"about {restarts} restart{'s' if restarts != 1 else ''} and {_duration(seconds)} expected"


#: The chance :class:`NeedsMore`'s launches decide, if the difference is the one seen.
POWER = 0.8
#: Beyond this many more launches of each, the answer is "too close to resolve" rather than a count.
MAX_MORE = 200


@dataclass(frozen=True, slots=True)
class NeedsMore:
    """What would decide an undecided verdict: more launches of its two leading settings.

    Computed from the measured spreads (:func:`more_launches`): with ``launches_each`` more
    launches of each, the verdict's own test at its own level would decide with probability
    ``power`` if the true difference is the one seen — separate them (``kind="separate"``), or
    show them equivalent within the margin (``kind="equivalent"``), whichever takes fewer.

    Attributes:
        a: The leader (fastest by mean).
        b: The runner-up.
        launches_each: More launches of each of the two (``MAX_MORE`` when ``reachable`` is False).
        seconds: Their time at ``restart_s`` restarts and ``launch_s`` of measuring each, in the
            run's clock.
        restart_s: The restart cost used.
        launch_s: Measuring time per launch used.
        diff_pct: The difference seen, ``a`` over ``b``, percent.
        spread_pct: One launch's relative spread (launch CV with the within-launch part), percent.
        power: The chance of a decision with that many more launches.
        kind: ``separate`` or ``equivalent``.
        reachable: False when more than :data:`MAX_MORE` launches each would be needed.
        clock: As :attr:`Budget.clock`.
    """

    a: str
    b: str
    launches_each: int
    seconds: float
    restart_s: float
    launch_s: float
    diff_pct: float
    spread_pct: float
    power: float = POWER
    kind: str = "separate"
    reachable: bool = True
    clock: str = ""
    #: Which verdict it is about (``at concurrency 4``), empty for a sweep's only one.
    at: str = ""
    #: Whether the launch spread was measured (a setting launched twice), or only assumed.
    measured: bool = True
    #: The figure the difference is in when it is not tok/s (``ITL p50``: its difference in its own terms).
    what: str = ""
    #: The verdict's group (its concurrency and workload): what a schedule's undecided load is matched by.
    concurrency: int | None = None
    workload: str | None = None

    @property
    def hours(self) -> float:
        """:attr:`seconds` in hours."""
        return self.seconds / 3600.0

    @property
    def restarts(self) -> int:
        """Restarts the more launches take (both settings)."""
        return 2 * self.launches_each

    @property
    def text(self) -> str:
        """One sentence: which two, how many more launches of each, how long, and why that many."""
        where = f"; {self.clock}" if self.clock else ""
        head = f"What would decide it{' ' + self.at if self.at else ''}:"
        how = "measured" if self.measured else "assumed"
        if not self.reachable:
            return (f"{head} {self.a} and {self.b} are {abs(self.diff_pct):.1f}% apart"
                    f"{' in ' + self.what if self.what else ''} with a launch spread of "
                    f"{self.spread_pct:.1f}% ({how}): more than {MAX_MORE} more launches of each would be needed "
                    "to separate them or show them equivalent; for practical purposes either will do.")
        spread = f"launch spread {self.spread_pct:.1f}% {how}" + (
            "" if self.measured else ": no setting was launched twice")
        goal = ("separate them" if self.kind == "separate"
                else "show them equivalent within the margin")
        return (f"{head} about {self.launches_each} more launch{'es' if self.launches_each != 1 else ''}"
                f" of each of {self.a} and {self.b} ({self.restarts} restarts, about {_duration(self.seconds)} at "
                f"{_duration(self.restart_s, 1)} a restart{where}) for a chance of {100 * self.power:.0f}% to {goal}, "
                f"if the difference is the {self.diff_pct:+.1f}%{' in ' + self.what if self.what else ''} seen "
                f"({spread}).")

    @property
    def clause(self) -> str:
        """:attr:`text` short, for a line that names its load already (a schedule's undecided one):
        ``about 3 more launches of each of A and B (6 restarts, about 1.2 h) would decide it``."""
        if not self.reachable:
            return (f"{self.a} and {self.b} are too close to decide in {MAX_MORE} more launches of each: "
                    "either will do")
        return (f"about {self.launches_each} more launch{'es' if self.launches_each != 1 else ''} of each of "
                f"{self.a} and {self.b} ({self.restarts} restarts, about {_duration(self.seconds)}) would decide it")

    def to_json(self) -> dict[str, object]:
        """JSON-ready (``needs_more`` of a sweep's document)."""
        return {"a": self.a, "b": self.b, "launches_each": self.launches_each, "restarts": self.restarts,
                "seconds": round(self.seconds, 1), "hours": round(self.hours, 3), "restart_s": round(self.restart_s, 2),
                "launch_s": round(self.launch_s, 2), "diff_pct": round(self.diff_pct, 2),
                "spread_pct": round(self.spread_pct, 2), "power": self.power, "kind": self.kind,
                "reachable": self.reachable, "clock": self.clock or None, "at": self.at or None,
                "spread_measured": self.measured, "concurrency": self.concurrency, "workload": self.workload,
                "clause": self.clause, "text": self.text}


def _z(p: float) -> float:
    return t_quantile(p, math.inf)


def more_launches(diff: float, spread2: float, ra: int, rb: int, df0: float, level: float, *,
                  margin: float | None = None, power: float = POWER, cap: int = MAX_MORE) -> tuple[int, str]:
    """More launches of each of two settings for their comparison to decide with probability ``power``.

    A power calculation on the launch model (:mod:`specmon.model.launches`): a setting's mean over
    ``r`` launches has relative variance ``s² / r``, where ``s²`` is one launch's (the launch CV and
    its within-launch error, as measured: the pooled mean square of launch deviations). After ``k``
    more launches of each, the difference relative to the runner-up has standard error
    ``se_k = s · sqrt((1+d)²/(ra+k) + 1/(rb+k))`` on ``df0 + 2k`` degrees of freedom, and the verdict's
    test at ``level`` separates the two when the interval ``|d| ± t·se_k`` excludes 0, with
    probability about ``Φ(|d|/se_k − t)``; it shows them equivalent when the interval lies within
    ``±margin``, with probability about ``Φ((margin − |d|)/se_k − t)``.

    Args:
        diff: The relative difference (a fraction; its sign does not matter).
        spread2: ``s²``, one launch's relative variance.
        ra, rb: Launches each has now.
        df0: Degrees of freedom of the spread now (inf when assumed).
        level: The verdict's two-sided confidence (its adjusted level).
        margin: The equivalence margin (a fraction), None for separation only.
        power: The chance asked for.
        cap: The most launches of each considered.

    Returns:
        ``(k, kind)``: the smallest ``k`` and whether it ``separate``\\ s or shows them
        ``equivalent``; ``(cap + 1, "separate")`` when neither is reached within ``cap``.
    """
    d = abs(diff)
    zp = _z(power)
    for k in range(cap + 1):
        # On the runner-up's scale: the leader's mean is (1 + d) times it, its variance (1 + d)² times.
        se = math.sqrt(max(spread2, 0.0) * ((1.0 + d) ** 2 / (ra + k) + 1.0 / (rb + k)))
        df = df0 + 2 * k if math.isfinite(df0) else math.inf
        t = t_quantile(1 - (1 - level) / 2, max(df, 1.0))
        if se <= 0:
            return k, "separate" if d > 0 else "equivalent"
        if d > 0 and d / se - t >= zp:
            return k, "separate"
        if margin is not None and margin > d and (margin - d) / se - t >= zp:
            return k, "equivalent"
    return cap + 1, "separate"


def launch_spread2(a: Estimate, b: Estimate) -> tuple[float, float]:
    """One launch's relative variance and its degrees of freedom, from two settings' estimates.

    Estimated (two launches or more somewhere): the pooled mean square of relative launch
    deviations, which holds the launch CV and the within-launch part alike. Assumed: the assumed
    launch CV squared plus the two settings' own within-launch part.
    """
    between = a.between
    if between.estimated:
        return max(between.ms_between, between.tau2), between.df
    own = [(x.se / x.mean) ** 2 for e in (a, b) for x in e.launches if x.se is not None and x.mean > 0]
    return between.tau2 + (sum(own) / len(own) if own else 0.0), math.inf


def needs_more(a: Estimate, b: Estimate, names: tuple[str, str], *, level: float, margin_pct: float | None,
               restart_s: float, launch_s: float, power: float = POWER, clock: str = "") -> NeedsMore:
    """What would decide between the leader ``a`` and the runner-up ``b`` (see :func:`more_launches`).

    Args:
        a: The leader's estimate; b: the runner-up's.
        names: Their names.
        level: The verdict's two-sided confidence.
        margin_pct: The equivalence margin, percent of the leader (None: separation only).
        restart_s: A restart's cost, in the run's clock.
        launch_s: Measuring time per launch, in the run's clock.
        power: The chance of a decision asked for.
        clock: As :attr:`Budget.clock`.
    """
    diff = a.mean / b.mean - 1.0 if b.mean > 0 else 0.0
    spread2, df0 = launch_spread2(a, b)
    margin = margin_pct / 100.0 if margin_pct is not None else None
    k, kind = more_launches(diff, spread2, len(a.launches), len(b.launches), df0, level, margin=margin, power=power)
    reachable = k <= MAX_MORE
    k = min(k, MAX_MORE)
    k = max(k, 1)  # undecided now: at least one more launch of each
    return NeedsMore(names[0], names[1], k, 2 * k * (restart_s + launch_s), restart_s, launch_s, 100 * diff,
                     100 * math.sqrt(spread2), power, kind, reachable, clock, measured=a.between.estimated)


def what_would_decide(verdict: SweepVerdict | ObjectiveVerdict, *, restart_s: float, launch_s: float,
                      clock: str = "") -> NeedsMore | None:
    """What would decide a sweep's verdict that stopped undecided (None when it decided, or cannot say).

    Its leader and runner-up, their launch estimates, and the verdict's own adjusted level and
    margin go into :func:`needs_more`. An objective's verdict (a latency is carried as a rate)
    is computed on that scale, and its difference is said in the objective's own terms.
    """
    if verdict.separated or verdict.equivalent:
        return None
    if isinstance(verdict, ObjectiveVerdict):
        ob, orun = verdict.best, verdict.runner_up
        if ob is None or orun is None:
            return None
        a, b, names = ob.summary.model, orun.summary.model, (ob.label, orun.label)
    else:
        best, runner = verdict.best, verdict.runner_up
        if best is None or runner is None:
            return None
        a, b, names = best.estimate, runner.estimate, (best.label, runner.label)
    if not isinstance(a, Estimate) or not isinstance(b, Estimate):
        return None
    more = needs_more(a, b, names, level=verdict.level, margin_pct=verdict.margin_pct, restart_s=restart_s,
                      launch_s=launch_s, clock=clock)
    if isinstance(verdict, ObjectiveVerdict) and verdict.diff_pct is not None:
        # The objective's own difference (a latency: percent lower), and which figure it is about.
        more = replace(more, diff_pct=abs(verdict.diff_pct[0]), what=verdict.objective.name)
    return more


def closing_advice(needs: Sequence[NeedsMore]) -> list[str]:
    """The sweep's closing advice: what would decide each undecided verdict, one sentence each."""
    return [n.text for n in needs]
