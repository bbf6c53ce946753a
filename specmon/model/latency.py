"""Latency percentiles over a window, from an engine's cumulative Prometheus histograms.

vLLM and SGLang export time to first token and inter-token latency as histograms
(``*_time_to_first_token_seconds``, ``*_inter_token_latency_seconds``): cumulative
counts per upper bound ``le``. The observations of a window are the difference of two
scrapes' counts; a quantile of them is read the way Prometheus's ``histogram_quantile``
reads one (linear within the bucket the rank falls in; the lowest bucket from 0; a rank
in the ``+Inf`` bucket gives the highest finite bound), so the dashboard's figure is the
one a Grafana panel over the same window shows. No library does this on two in-memory
scrapes (prometheus_client writes histograms, it does not read quantiles from them):
the interpolation is a few lines, tested on generated histograms.

Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: (upper bound, cumulative count) of each bucket, ``+Inf`` last.
Buckets = tuple[tuple[float, float], ...]


def window_counts(older: Buckets | None, newer: Buckets) -> Buckets | None:
    """The window's own cumulative counts (``newer - older``); None when the bounds differ or a count fell.

    ``older`` None: everything since the server started.
    """
    if older is None:
        return newer
    if [b for b, _ in older] != [b for b, _ in newer]:
        return None
    out = tuple((b, n - o) for (b, o), (_, n) in zip(older, newer, strict=True))
    if any(c < 0 for _, c in out):
        return None  # a restart reset the counts: no window spans it
    return out


def quantile(q: float, buckets: Sequence[tuple[float, float]]) -> float | None:
    """``histogram_quantile(q, ...)`` of one histogram's cumulative buckets; None without observations."""
    if not buckets or not 0.0 <= q <= 1.0:
        return None
    total = buckets[-1][1]
    if total <= 0 or not math.isinf(buckets[-1][0]):
        return None
    rank = q * total
    prev_bound, prev_count = 0.0, 0.0
    for bound, count in buckets:
        if count >= rank:
            if math.isinf(bound):
                return prev_bound  # the highest finite bound, as Prometheus does
            if count == prev_count:
                return bound
            return prev_bound + (bound - prev_bound) * (rank - prev_count) / (count - prev_count)
        prev_bound, prev_count = bound, count
    return prev_bound
