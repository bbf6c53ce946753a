"""Settings compared across replicas, with the replica's own speed taken out: a parallel sweep's evidence.

In a parallel sweep every launch runs one setting on one replica. Its launch mean ``m`` is
modelled on the log scale (replicas and settings multiply a speed, they do not add to it)::

    log m = a_setting + b_replica + e,   e ~ N(0, s²)

where ``b`` is how fast the replica is and ``e`` the launch's own luck (what two starts of one
setting on one replica differ by) with the within-launch error of its mean inside it. Two
analyses, chosen by the *layout* alone (never by which one gives the narrower answer):

* **Replica effects removed** (``blocked``): least squares with a term per replica (effect
  coded, so ``a`` is the setting at the average replica), once the layout identifies them with
  residual degrees of freedom to spare (at least 3, or at least 1 once a replica has run a
  setting twice). A difference of two settings then rests on comparisons *within* replicas:
  how much the replicas differ drops out, which is what rotating the layout buys. This is the
  within-replica (intra-block) analysis of the model with the replica as a random effect; the
  replicas' spread is estimated from the fitted terms and reported, not used.
* **Replica differences inside the launch spread** (``pooled``): before that (the first rounds,
  when each replica has run each setting at most once), every launch of a setting is on another
  replica, so its launches are independent draws of replica and launch together: the two-level
  launch model of :mod:`specmon.model.launches` with the setting's launches as its units (and
  its assumed launch CV until some setting has two launches). A replica shared by two settings
  only makes their difference less variable than this model says: it is conservative.

Intervals are Student t on the residual (or Satterthwaite) degrees of freedom. statsmodels is
not a dependency (its import is ~1 s with pandas, see :mod:`specmon.model.launches`); the fit is
numpy's least squares (``lstsq``, never an inverse of X'X) and the quantiles are scipy's. The
test ``tests/unit/test_reference_stats.py`` checks the fit, its covariance, its intervals and
the replicas' spread against statsmodels' ``OLS`` and ``MixedLM`` on generated layouts.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

import numpy as np

from specmon.model.launches import DEFAULT_LAUNCH_CV, Estimate, Launch, fit, usable, whole_df
from specmon.model.stats import t_quantile

BLOCKED = "blocked"
POOLED = "pooled"
#: Residual degrees of freedom the replica-effects fit needs before it is used while no replica
#: has run a setting twice (with fewer, a t quantile at a sequential test's level is enormous).
MIN_BLOCKED_DF = 3


@dataclass(frozen=True, slots=True)
class FleetLaunch:
    """One launch of a parallel sweep: which replica ran which setting in which round, and its samples' mean."""

    replica: str
    setting: Hashable
    round: int
    launch: Launch


@dataclass(frozen=True)
class FleetFit:
    """The settings' speeds with intervals, from the launches of a parallel sweep (see the module docstring).

    Attributes:
        model: :data:`BLOCKED` or :data:`POOLED`.
        means: Each setting's tok/s (blocked: at the average replica of this fleet).
        launches: Each setting's launches counted.
        replicas: Replicas with at least one launch counted.
        df: The residual (blocked) degrees of freedom; None for pooled (each interval has its own).
        replica_cv: The replicas' spread in speed (blocked only; estimated, shown, not used).
        launch_cv: The launches' own spread (blocked: from the residuals; pooled: the launch model's).
    """

    model: str
    means: dict[Hashable, float]
    launches: dict[Hashable, int]
    replicas: int
    df: float | None = None
    replica_cv: float | None = None
    launch_cv: float | None = None
    launch_cv_estimated: bool = True
    _coef: dict[Hashable, int] = field(default_factory=dict, repr=False)
    _beta: np.ndarray | None = field(default=None, repr=False)
    _cov: np.ndarray | None = field(default=None, repr=False)
    _estimates: dict[Hashable, Estimate] = field(default_factory=dict, repr=False)

    def ratio_pct(self, a: Hashable, b: Hashable, level: float) -> tuple[float, float | None, float | None]:
        """``a / b − 1`` in percent with its two-sided interval at ``level`` (None ends: not known)."""
        if self.model == POOLED:
            ea, eb = self._estimates[a], self._estimates[b]
            return ea.ratio_pct(eb, level)
        assert self._beta is not None and self._cov is not None and self.df is not None
        i, j = self._coef[a], self._coef[b]
        d = float(self._beta[i] - self._beta[j])
        var = float(self._cov[i, i] + self._cov[j, j] - 2 * self._cov[i, j])
        pct = 100 * math.expm1(d)
        if not var > 0:
            return pct, pct, pct
        half = t_quantile(1 - (1 - level) / 2, whole_df(self.df)) * math.sqrt(var)
        return pct, 100 * math.expm1(d - half), 100 * math.expm1(d + half)

    def interval(self, s: Hashable, level: float = 0.95) -> tuple[float, float] | None:
        """A setting's tok/s interval (blocked: at the average of these replicas)."""
        if self.model == POOLED:
            return self._estimates[s].interval(level)
        assert self._beta is not None and self._cov is not None and self.df is not None
        i = self._coef[s]
        var = float(self._cov[i, i])
        half = t_quantile(1 - (1 - level) / 2, whole_df(self.df)) * math.sqrt(max(var, 0.0))
        return math.exp(self._beta[i] - half), math.exp(self._beta[i] + half)

    def covers(self) -> str:
        """What the intervals rest on, in one clause."""
        n = sum(self.launches.values())
        head = f"{n} launch{'es' if n != 1 else ''} on {self.replicas} replica{'s' if self.replicas != 1 else ''}"
        if self.model == BLOCKED:
            spread = ""
            if self.replica_cv is not None:
                spread = f"; replica CV {100 * self.replica_cv:.1f}%, launch CV {100 * (self.launch_cv or 0):.1f}%"
            return f"{head}, replica effects removed ({self.df:g} df){spread}"
        cv = self.launch_cv or 0.0
        how = "estimated" if self.launch_cv_estimated else "assumed"
        return f"{head}, replicas' differences inside the launch spread ({how} launch CV {100 * cv:.1f}%)"


def _repeated(launches: Sequence[FleetLaunch]) -> bool:
    seen: set[tuple[str, Hashable]] = set()
    for x in launches:
        key = (x.replica, x.setting)
        if key in seen:
            return True
        seen.add(key)
    return False


def fit_fleet(launches: Sequence[FleetLaunch], assumed_cv: float = DEFAULT_LAUNCH_CV) -> FleetFit | None:
    """Fit the launches of a parallel sweep (None before any launch has 3 samples)."""
    good = [x for x in launches if usable([x.launch])]
    if not good:
        return None
    settings = list(dict.fromkeys(x.setting for x in good))
    replicas = sorted({x.replica for x in good})
    counts = {s: sum(1 for x in good if x.setting == s) for s in settings}
    blocked = _blocked(good, settings, replicas, counts)
    if blocked is not None:
        return blocked
    groups = {s: [x.launch for x in good if x.setting == s] for s in settings}
    between, estimates = fit(groups, assumed_cv)
    return FleetFit(POOLED, {s: e.mean for s, e in estimates.items()}, counts, len(replicas),
                    launch_cv=between.cv, launch_cv_estimated=between.estimated, _estimates=dict(estimates))


def _blocked(good: Sequence[FleetLaunch], settings: list[Hashable], replicas: list[str],
             counts: dict[Hashable, int]) -> FleetFit | None:
    n, s_n, r_n = len(good), len(settings), len(replicas)
    p = s_n + r_n - 1
    df = n - p
    if df < 1 or (df < MIN_BLOCKED_DF and not _repeated(good)):
        return None
    col = {s: i for i, s in enumerate(settings)}
    row = {r: i for i, r in enumerate(replicas)}
    x = np.zeros((n, p))
    y = np.empty(n)
    for k, launch in enumerate(good):
        x[k, col[launch.setting]] = 1.0
        ri = row[launch.replica]
        if ri < r_n - 1:
            x[k, s_n + ri] = 1.0
        else:  # effect coding: the last replica is minus the sum of the others
            x[k, s_n:] = -1.0
        y[k] = math.log(launch.launch.mean)
    # Least squares by an orthogonal factorisation (numpy's lstsq, SVD), never through X'X: forming
    # X'X squares the design's condition number, so a lopsided layout loses twice the digits.
    beta, _, rank, _ = np.linalg.lstsq(x, y, rcond=None)
    if rank < p:
        return None  # the layout does not connect every setting to every replica
    resid = y - x @ beta
    s2 = float(resid @ resid) / df
    # The covariance needs (X'X)^-1 itself: from X = QR it is R^-1 R^-T, with R as well conditioned
    # as X (not X'X); R is invertible since X has full column rank.
    r_inv = np.linalg.inv(np.linalg.qr(x, mode="r"))
    cov = s2 * (r_inv @ r_inv.T)
    # Every replica's term, the last one's as minus the sum of the others (effect coding), with the
    # variance of each as an estimate: V = L cov L' for the map L from the fitted terms.
    to_effects = np.vstack([np.eye(r_n - 1), -np.ones(r_n - 1)])
    effects = to_effects @ beta[s_n:]
    eff_var = np.diag(to_effects @ cov[s_n:, s_n:] @ to_effects.T)
    # The replicas' spread: the variance of their fitted terms less what estimating them adds. The terms
    # sum to 0, so E[Σ effect²] = (r − 1)·σ²_replica + Σ Var(effect): the estimation part is their sum
    # over r − 1, not their mean (the mean under-subtracts by r/(r − 1); equal to the ANOVA estimator
    # (MS_replica − MS_error)/settings, and to MixedLM's REML, on a complete balanced layout).
    replica_var = float(np.var(effects, ddof=1) - eff_var.sum() / (r_n - 1)) if r_n > 1 else 0.0
    within = float(np.mean([(g.launch.se / g.launch.mean) ** 2 for g in good]))  # type: ignore[operator]
    return FleetFit(BLOCKED, {s: math.exp(beta[col[s]]) for s in settings}, counts, r_n, float(df),
                    replica_cv=math.sqrt(max(replica_var, 0.0)), launch_cv=math.sqrt(max(s2 - within, 0.0)),
                    _coef=col, _beta=beta, _cov=cov)


# --------------------------------------------------------------------------- the decision

WINNER = "winner"
EQUIVALENT = "equivalent"
CONTINUE = "continue"
UNDECIDED = "undecided"


@dataclass(frozen=True)
class FleetDecision:
    """What a look at a parallel sweep's launches says.

    Attributes:
        kind: :data:`WINNER` (the leader is ahead of every other open setting), :data:`EQUIVALENT`
            (every other open setting is slower or within the margin), :data:`CONTINUE` (another
            round), :data:`UNDECIDED` (the last round gave neither).
        leader: The open setting with the highest estimate.
        slower: Open settings the leader is ahead of, each with its ``(pct, low, high)``.
        equivalent: Open settings within ``± margin`` of the leader, each with its interval.
        open: The rest (neither, or not measured yet): they stay in the rotation.
        level: The two-sided confidence of every test at this look.
    """

    kind: str
    leader: Hashable
    slower: dict[Hashable, tuple[float, float, float]]
    equivalent: dict[Hashable, tuple[float, float, float]]
    open: dict[Hashable, tuple[float, float | None, float | None]]
    level: float

    @property
    def stop(self) -> bool:
        return self.kind != CONTINUE


def adjusted_level(alpha: float, rounds: int) -> float:
    """Two-sided confidence of each test when a pair is tested once per round, ``rounds`` at most.

    By the union bound two equal settings are called different with probability at most ``alpha``
    however many rounds the sweep runs before it stops.
    """
    return 1.0 - alpha / max(rounds, 1)


def decide(ff: FleetFit, open_settings: Sequence[Hashable], *, level: float, margin_pct: float,
           last: bool) -> FleetDecision | None:
    """Judge the open settings against their leader at ``level`` (None: fewer than two have launches)."""
    present = [s for s in open_settings if s in ff.means]
    if len(present) < 2:
        return None
    unmeasured = [s for s in open_settings if s not in ff.means]
    leader = max(present, key=lambda s: ff.means[s])
    slower: dict[Hashable, tuple[float, float, float]] = {}
    equivalent: dict[Hashable, tuple[float, float, float]] = {}
    undecided: dict[Hashable, tuple[float, float | None, float | None]] = {}
    for s in present:
        if s == leader:
            continue
        pct, lo, hi = ff.ratio_pct(leader, s, level)
        if lo is not None and hi is not None and lo > 0:
            slower[s] = (pct, lo, hi)
        elif lo is not None and hi is not None and -margin_pct < lo and hi < margin_pct:
            equivalent[s] = (pct, lo, hi)
        else:
            undecided[s] = (pct, lo, hi)
    for s in unmeasured:  # a setting not measured yet can be neither beaten nor matched
        undecided[s] = (math.nan, None, None)
    if not undecided:
        kind = WINNER if not equivalent else EQUIVALENT
    else:
        kind = UNDECIDED if last else CONTINUE
    return FleetDecision(kind, leader, slower, equivalent, undecided, level)
