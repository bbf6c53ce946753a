"""The fleet view's rules, apart from its model: when a replica is an outlier among the replicas of its
configuration (a modified z-score on the median and MAD of the others, Iglewicz and Hoaglin's 3.5), and
when a run's acceptance has fallen. Pure numpy: the fleet view runs them a few times a second."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence

import numpy as np

from specmon.model.launches import DEFAULT_LAUNCH_CV
from specmon.model.stats import MIN_SAMPLES_FOR_BATCHING

#: A replica is an outlier when its run mean (tok/s, or accept length) lies more than this many robust
#: deviations from the median of the *other* replicas of its configuration. 3.5 is Iglewicz and Hoaglin's
#: cut for the modified z-score (median and MAD scaled to a normal standard deviation).
OUTLIER_K = 3.5
#: Replicas of one configuration needed before any of them can be called an outlier (the replica and
#: at least two others to take a median and a MAD from).
OUTLIER_MIN_REPLICAS = 3
#: Counted samples a replica's run needs to take part in the comparison (its mean is noise before).
OUTLIER_MIN_SAMPLES = MIN_SAMPLES_FOR_BATCHING
#: The robust scale is never taken below this fraction of the median: with two to four others the
#: MAD is often near zero by chance (two alike replicas 0.1% apart would make a 1% difference
#: "10 deviations"). 5% is the launch CV the launch model assumes when it has nothing better
#: (:data:`specmon.model.launches.DEFAULT_LAUNCH_CV`): a flag then needs at least 3.5 × 5% = 17.5%.
OUTLIER_SCALE_FLOOR = DEFAULT_LAUNCH_CV
#: Acceptance has fallen when the mean accept length of the last window (the ``--window`` batches,
#: 20 by default) is below this fraction of the run's own mean accept length ...
ACCEPT_FALL_RATIO = 0.7
#: ... and the run has at least this many windows of counted accept-length samples (the run's mean
#: is then mostly the time before the window).
ACCEPT_FALL_MIN_WINDOWS = 3

#: ``scipy.stats.median_abs_deviation(scale="normal")`` divides the MAD by the standard normal's 0.75
#: quantile (``scipy.special.ndtri(0.75)``), making it a standard deviation for normal data.
NORMAL_MAD_SCALE = 0.6744897501960817


def mad_normal(x: np.ndarray) -> float:
    """``scipy.stats.median_abs_deviation(x, scale="normal")``, in numpy (a test checks they agree).

    The fleet view computes it on the event loop a few times a second, twice per replica:
    scipy.stats costs 0.4 s to import (5 s and more measured on a loaded host, a frozen
    screen) and ~50 µs per call; this is the same arithmetic.
    """
    return float(np.median(np.abs(x - np.median(x)))) / NORMAL_MAD_SCALE


def robust_outliers(values: Mapping[Hashable, float], *, k: float = OUTLIER_K,
                    floor: float = OUTLIER_SCALE_FLOOR) -> dict[Hashable, tuple[float, float]]:
    """The values more than ``k`` robust deviations from the median of the *others*.

    For each value: the median of the other values, and their median absolute deviation scaled
    to a normal standard deviation (:func:`mad_normal`: ``scipy.stats.median_abs_deviation(scale='normal')``),
    never below ``floor`` × |median|. Needs :data:`OUTLIER_MIN_REPLICAS` values (two others at least).

    Returns:
        For each outlier: (its robust z, its relative difference to the others' median).
    """
    if len(values) < OUTLIER_MIN_REPLICAS:
        return {}
    keys = list(values)
    x = np.array([values[key] for key in keys], dtype=np.float64)
    n = len(x)
    # Row i holds every value but x[i]: all the leave-one-out medians and MADs in two calls (a loop
    # of np.median per replica was most of a 64-replica refresh).
    others = np.broadcast_to(x, (n, n))[~np.eye(n, dtype=bool)].reshape(n, n - 1)
    med = np.median(others, axis=1)
    mad = np.median(np.abs(others - med[:, None]), axis=1) / NORMAL_MAD_SCALE
    scale = np.maximum(mad, floor * np.abs(med))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = (x - med) / scale
    out: dict[Hashable, tuple[float, float]] = {}
    # A scale of 0 (every other value 0) compares against nothing: never flagged.
    for i in np.flatnonzero((scale > 0) & (np.abs(z) > k)).tolist():
        m = float(med[i])
        out[keys[i]] = (float(z[i]), float(x[i] / m - 1.0) if m else math.inf)
    return out


def acceptance_fell(values: Sequence[float] | np.ndarray, window: int) -> tuple[float, float] | None:
    """Whether a run's acceptance has fallen: (recent mean, run mean) when it has, else None.

    The rule: the run has at least :data:`ACCEPT_FALL_MIN_WINDOWS` × ``window`` counted
    accept-length samples, and the mean of the last ``window`` is below
    :data:`ACCEPT_FALL_RATIO` × the mean of all of them.
    """
    window = max(1, window)
    n = len(values)
    if n < ACCEPT_FALL_MIN_WINDOWS * window:
        return None
    x = np.asarray(values, dtype=np.float64)
    mean = float(x.mean())
    recent = float(x[-window:].mean())
    if mean > 0 and recent < ACCEPT_FALL_RATIO * mean:
        return recent, mean
    return None
