"""Throughput over time in a report: each run on its own span of the time axis, and the text chart.

A sweep restarts the server for every setting, and each launch writes a log of its own. The
log's clock is the server's: the simulated server runs it faster than the wall clock, and a
real host's clock may be set anywhere. So runs that followed one another can claim the same
stretch of log time, and a chart on that axis drew them on top of each other (issue 42,
item 5). :func:`lay_runs_apart` keeps each run's own pace (the gaps between its samples) and
moves a run that overlaps the ones before it to start where they end — unless it was received
beside them (a fleet's replicas log at the same time, and that is drawn as it happened).

:func:`text_chart` is the Markdown report's plot: every run is drawn (each gets a column of
its own when the runs are apart), and its legend names exactly the runs drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from specmon.wording import counted

#: The text chart's size: 9 columns of axis labels ("  351.9 │") and the plot, 80 columns in all.
CHART_WIDTH, CHART_HEIGHT = 71, 14
#: What the time axis says when runs were moved to spans of their own.
LAID_APART = "each run on its own span"


@dataclass(frozen=True, slots=True)
class RunSpan:
    """Where one run sits on the report's time axis.

    Attributes:
        run: The run's id.
        start: Its first sample, seconds on the axis.
        end: Its last sample.
        shift: Seconds added to its own times to put it there (0: where its clock put it).
    """

    run: int
    start: float
    end: float
    shift: float


def lay_runs_apart(when: np.ndarray, runs: np.ndarray,
                   received: dict[int, tuple[float, float]] | None = None) -> tuple[np.ndarray, list[RunSpan]]:
    """Shift each run that overlaps the runs before it (in run order) to start where they end.

    Args:
        when: Each sample's time on the chosen basis (log or receive time), any order.
        runs: Each sample's run id.
        received: When each run's first and last samples were received, where known: a run
            received while an earlier one was still being received ran beside it (a fleet's
            replicas) and keeps its own times.

    Returns:
        The times (a new array when any run moved) and every run's span, in run order.
    """
    if not len(when):
        return when, []
    ids, lo, hi = _extent(when, runs)
    got = received or {}
    rlo = np.array([got.get(r, (np.nan, np.nan))[0] for r in ids.tolist()], dtype=float)
    rhi = np.array([got.get(r, (np.nan, np.nan))[1] for r in ids.tolist()], dtype=float)
    spans: list[RunSpan] = []
    end = -np.inf  # where the runs so far end on the axis
    recv_end = -np.inf  # when the last of them was received
    shifts = np.zeros(len(ids))
    for k, run in enumerate(ids.tolist()):
        beside = bool(np.isfinite(rlo[k]) and rlo[k] < recv_end)
        shift = 0.0 if beside or lo[k] >= end else float(end - lo[k])
        shifts[k] = shift
        spans.append(RunSpan(int(run), float(lo[k] + shift), float(hi[k] + shift), shift))
        end = max(end, hi[k] + shift)
        if np.isfinite(rhi[k]):
            recv_end = max(recv_end, float(rhi[k]))
    if not shifts.any():
        return when, spans
    return when + shifts[np.searchsorted(ids, runs)], spans


def _extent(values: np.ndarray, runs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(run ids in order, each run's smallest and largest value, NaN ignored), in one pass over blocks:
    a run's samples come in long blocks (a recording holds one run after another)."""
    starts = np.flatnonzero(np.r_[True, runs[1:] != runs[:-1]])
    with np.errstate(invalid="ignore"):
        blo = np.fmin.reduceat(values, starts)
        bhi = np.fmax.reduceat(values, starts)
    ids, inverse = np.unique(runs[starts], return_inverse=True)
    lo, hi = np.full(len(ids), np.nan), np.full(len(ids), np.nan)
    np.fmin.at(lo, inverse, blo)
    np.fmax.at(hi, inverse, bhi)
    return ids, lo, hi


class SeriesLike(Protocol):
    """What the text chart reads of a report (:class:`specmon.output.report.ReportData`)."""

    @property
    def series(self) -> Sequence[object]: ...

    @property
    def time_basis(self) -> str: ...

    @property
    def run_labels(self) -> dict[int, str]: ...


def series_arrays(series: Sequence[object]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, tok/s, run) of a series: the report's own arrays when it keeps them, else built from its points."""
    t, tps, run = (getattr(series, k, None) for k in ("t", "tps", "run"))
    if isinstance(t, np.ndarray) and isinstance(tps, np.ndarray) and isinstance(run, np.ndarray):
        return t, tps, run.astype(np.int64)
    return (np.array([p.t for p in series], dtype=float), np.array([p.tps for p in series], dtype=float),  # type: ignore[attr-defined]
            np.array([p.run for p in series], dtype=np.int64))  # type: ignore[attr-defined]


def spread_indices(run: np.ndarray, limit: int, least: int = 8) -> np.ndarray:
    """At most about ``limit`` evenly spaced sample indices, every run keeping ``least`` of its own (or all
    it has): a run far shorter than the rest was thinned away and left its legend entry undrawn."""
    n = len(run)
    if n <= limit:
        return np.arange(n)
    ids, counts = np.unique(run, return_counts=True)
    out = []
    for r, c in zip(ids.tolist(), counts.tolist(), strict=True):
        own = np.flatnonzero(run == r)
        keep = min(c, max(least, round(limit * c / n)))
        out.append(own[(np.arange(keep) * (c / keep)).astype(np.int64)])
    return np.sort(np.concatenate(out))


def _duration(s: float) -> str:
    s = int(round(s))
    h, rest = divmod(s, 3600)
    m, sec = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else f"{m}m{sec:02d}s"


def _columns(t: np.ndarray, run: np.ndarray, ids: list[int], width: int) -> np.ndarray:
    """The column of every sample: the time axis cut in ``width`` slices, or, when the runs follow one
    another, each run its own columns (at least one, the rest by its share of the time) so none is lost."""
    lo = {r: float(t[run == r].min()) for r in ids}
    hi = {r: float(t[run == r].max()) for r in ids}
    apart = all(lo[b] >= hi[a] for a, b in zip(ids, ids[1:], strict=False))
    t_end = float(t.max()) or 1.0
    if not apart or len(ids) > width:
        return np.minimum(width - 1, (t / t_end * (width - 1)).astype(np.int64))
    spans = np.array([hi[r] - lo[r] for r in ids])
    # One column each, and the rest shared by time (the gaps before each run counted with it).
    gaps = np.array([lo[ids[0]], *[lo[b] - hi[a] for a, b in zip(ids, ids[1:], strict=False)]])
    share = spans + gaps
    extra = np.floor(share / (share.sum() or 1.0) * (width - len(ids))).astype(np.int64)
    extra[np.argmax(share)] += width - len(ids) - int(extra.sum())
    firsts = np.r_[0, np.cumsum(1 + extra)[:-1]]
    cols = np.zeros(len(t), dtype=np.int64)
    for k, r in enumerate(ids):
        own = run == r
        n_cols = 1 + int(extra[k])
        pos = (t[own] - lo[r]) / (spans[k] or 1.0)
        cols[own] = firsts[k] + np.minimum(n_cols - 1, (pos * n_cols).astype(np.int64))
    return cols


def text_chart(data: SeriesLike, width: int = CHART_WIDTH, height: int = CHART_HEIGHT) -> list[str]:
    """Throughput over time as lines of text: runs lettered A, B, ..., each letter at its run's mean
    tok/s in that slice of time.

    Every run is drawn: runs that follow one another get columns of their own, and where runs share
    a column, the one with fewer points is drawn last. The legend names the runs drawn, and says
    how many could not be (more runs than columns). Past 26 runs (a sweep's rounds of launches) a
    letter stands for a configuration, and the legend counts its runs.
    """
    if not len(data.series):
        return ["(no throughput samples)"]
    t, tps, run = series_arrays(data.series)
    ids = sorted(set(run.tolist()))
    cols = _columns(t, run, ids, width)
    index = {r: i for i, r in enumerate(ids)}
    key = cols * len(ids) + np.array([index[r] for r in run.tolist()], dtype=np.int64)
    sums = np.bincount(key, weights=tps, minlength=width * len(ids))
    counts = np.bincount(key, minlength=width * len(ids))
    used = np.flatnonzero(counts)
    means = sums[used] / counts[used]
    lo, hi = float(means.min()), float(means.max())
    if hi - lo < 1e-9:
        lo, hi = lo - 1, hi + 1
    pad = (hi - lo) * 0.05
    lo, hi = lo - pad, hi + pad
    # A letter per run; past 26 runs (a sweep of launch rounds), a letter per configuration, its runs counted.
    by_run = len(ids) <= 26
    names = ids if by_run else list(dict.fromkeys(data.run_labels.get(r, "?") for r in ids))
    code = {n: chr(ord("A") + i) if i < 26 else "*" for i, n in enumerate(names)}
    letters = {r: code[r if by_run else data.run_labels.get(r, "?")] for r in ids}
    grid = [[" "] * width for _ in range(height)]
    cells: dict[int, list[tuple[int, int]]] = {}
    for k, m in zip(used.tolist(), means.tolist(), strict=True):
        x, r = divmod(k, len(ids))
        y = int(round((m - lo) / (hi - lo) * (height - 1)))
        cells.setdefault(ids[r], []).append((x, height - 1 - y))
    for r in sorted(cells, key=lambda r: -len(cells[r])):  # the fewest points last: on top
        for x, y in cells[r]:
            grid[y][x] = letters[r]
    drawn = [r for r in ids if any(grid[y][x] == letters[r] for x, y in cells.get(r, []))]
    if by_run:
        legend = [f"{letters[r]} = run {r}: {data.run_labels.get(r, '?')}" for r in drawn]
    else:
        runs_of = {n: sum(data.run_labels.get(r, "?") == n for r in drawn) for n in names}
        legend = [f"{code[n]} = {n} ({counted(runs_of[n], 'run')})" for n in names if runs_of[n]]
    out = []
    for i, row in enumerate(grid):
        value = hi - (hi - lo) * i / (height - 1)
        label = f"{value:7.1f} │" if i in (0, height // 2, height - 1) else "        │"
        out.append(label + "".join(row).rstrip())
    out.append("        └" + "─" * width)
    out.append(f"         0{'':>{width - 12}}{_duration(float(t.max())):>10}")
    out.append(f"time: {data.time_basis}" + ("; a run at least one column" if LAID_APART in data.time_basis else ""))
    out.append("tok/s per decode line; " + ", ".join(legend))
    if len(drawn) < len(ids):
        out.append(f"({len(ids) - len(drawn)} more runs not drawn: more runs than columns)")
    return out
