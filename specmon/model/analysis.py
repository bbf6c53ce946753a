"""From runs to the answer: one row per configuration, the baseline, and a verdict.

Runs with equal configurations are pooled into one row (a restart with the
same step count adds evidence, it is not a new contender). Each run is one
server launch: a row's mean is the mean of its launches' means, and its
interval comes from the two-level model of :mod:`specmon.model.launches`
(within-launch batch means, between-launch variance pooled over the rows
measured in two or more launches, or an assumed launch CV when none was).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import numpy as np

from specmon.model.launches import (
    DEFAULT_LAUNCH_CV,
    Between,
    Estimate,
    Launch,
    as_summary,
    fit,
    launch_of,
    rests_on,
)
from specmon.model.session import Run, RunConfig, ServerState
from specmon.model.stats import (
    MIN_SAMPLES_FOR_BATCHING,
    MIN_SAMPLES_FOR_CI,
    Ratio,
    Summary,
    batch_means,
    difference,
    own_samples,
    ratio,
    summarize,
    t975,
)
from specmon.model.verdict import Answer, answer, pct_bound, tps_bound
from specmon.records import iso_timestamp

#: A configuration enters the verdict once its throughput has an interval: no other floor. At
#: small n the interval is wide (Student's t with few degrees of freedom), which is the honest
#: answer; a fixed count would override intervals that are already far apart.
MIN_SAMPLES_FOR_VERDICT = MIN_SAMPLES_FOR_CI


def summarize_runs(runs: Sequence[Run], attr: str) -> Summary | None:
    """Pool one metric over runs, with an interval from the runs' batch means pooled."""
    series = [own_samples(getattr(r, attr)) for r in runs if len(getattr(r, attr))]
    if not series:
        return None
    if len(series) == 1:
        return summarize(series[0], scratch=True)  # our own copy of the run's column (float32 stays so)
    base = summarize(np.concatenate(series), scratch=True)
    if base is None:
        return None
    # Interval from the batch means of each run, kept apart (no batch straddles a restart).
    bms = [m for s in series if len(s) >= MIN_SAMPLES_FOR_BATCHING for m in batch_means(s)]
    if len(bms) < 3:
        return base
    k = len(bms)
    se = float(np.std(bms, ddof=1)) / math.sqrt(k)
    half = t975(k - 1) * se
    return Summary(base.n, base.mean, base.median, base.p10, base.p90, base.sd, se, float(k - 1),
                   base.mean - half, base.mean + half, k)


@dataclass
class ConfigRow:
    """One configuration seen, with its pooled statistics."""

    key: RunConfig | str
    label: str
    runs: list[Run]
    throughput: Summary | None
    accept_len: Summary | None
    accept_rate: Summary | None
    per_position: tuple[float, ...] | None
    concurrency: dict[int, Summary] = field(default_factory=dict)
    vs_baseline: Ratio | None = None
    is_baseline: bool = False
    best: bool = False
    #: One entry per server launch (run) of this configuration, in run order.
    launches: tuple[Launch, ...] = ()
    #: The throughput pooled over samples with within-launch intervals only (what ``throughput``
    #: was before the launch model; ``assemble`` makes ``throughput`` the two-level one).
    within: Summary | None = None
    #: The two-level estimate behind ``throughput`` (None before ``assemble``).
    estimate: Estimate | None = None
    #: The verdict's mark beside this row: ★ a declared winner, ☆ the leader not separated, "" none
    #: (set by the verdict, :func:`specmon.model.verdict.answer`; ``best`` is only first by mean).
    mark: str = ""

    @property
    def covers(self) -> str | None:
        """What the throughput interval covers: ``3 launches``, ``1 launch + assumed launch CV 5%``."""
        return self.estimate.covers() if self.estimate is not None else None

    @property
    def config(self) -> RunConfig | None:
        """The configuration, when the log announced it."""
        return self.key if isinstance(self.key, RunConfig) else None

    @property
    def steps(self) -> int | None:
        """Speculative steps (0 = no speculation), when known."""
        return self.config.steps if self.config else None

    @property
    def samples(self) -> int:
        """Counted throughput samples."""
        return self.throughput.n if self.throughput else 0


@dataclass
class Baseline:
    """What speed-ups are measured against."""

    source: str  # "run" (a no-speculation run), "file" (--baseline FILE), "tps" (--baseline-tps)
    label: str
    throughput: Summary | None = None
    tps: float | None = None

    @property
    def mean(self) -> float | None:
        """The baseline throughput."""
        if self.tps is not None:
            return self.tps
        return self.throughput.mean if self.throughput else None

    def against(self) -> Summary | float | None:
        """What :func:`specmon.model.stats.ratio` takes as the reference."""
        return self.tps if self.tps is not None else self.throughput


@dataclass
class Verdict:
    """The fastest configuration and how sure we are."""

    best: ConfigRow | None
    runner_up: ConfigRow | None
    speedup: Ratio | None  # best vs baseline
    separated: bool  # best vs runner-up difference excludes zero
    diff: tuple[float, float | None, float | None] | None  # best - runner-up, tok/s, with interval
    sentence: str
    concurrency_note: str | None = None
    #: What every surface draws (mark, words, JSON); made once from the fields above.
    answer: Answer = field(default_factory=lambda: answer(leader=None, runner_up=None, separated=False,
                                                          equivalent=False, sentence=""))


@dataclass(frozen=True)
class Crash:
    """A run that ended in a crash: which run, when, and the line that names the cause."""

    run: int
    label: str
    source: str
    line: int | None
    at: float | None  # log time (naive, read as UTC), when the log gave one
    error: str
    served: bool  # whether the run produced samples before it died

    @property
    def when(self) -> str:
        """``2026-02-12 11:19:18``, or ``an unknown time``."""
        if self.at is None:
            return "an unknown time"
        return datetime.fromtimestamp(self.at, tz=UTC).strftime("%Y-%m-%d %H:%M:%S")

    @property
    def clock(self) -> str:
        """``11:19:18``, or ``an unknown time``."""
        return self.when[11:] if self.at is not None else self.when

    @property
    def sentence(self) -> str:
        """``run 3 (EAGLE3 3 steps) crashed at 2026-02-12 11:19:18 (line 93 of x.log): CUDA out of ...``"""
        where = f" (line {self.line} of {self.source})" if self.line is not None and self.source else ""
        return f"run {self.run} ({self.label}) crashed at {self.when}{where}: {self.error}"

    def to_json(self) -> dict[str, Any]:
        """The crash as ``summarize --format json`` prints it."""
        return {"run": self.run, "label": self.label, "source": self.source, "line": self.line,
                "time": iso_timestamp(self.at), "error": self.error, "served": self.served}


def crashes(runs: Iterable[Run]) -> list[Crash]:
    """The crashes among the runs (served or not), in run order."""
    out = []
    for r in runs:
        if r.state is not ServerState.CRASHED:
            continue
        error = r.crash_cause or r.crash_detail or "the server crashed (no message)"
        out.append(Crash(r.id, r.label, r.source, r.crash_line, r.crash_at, error, r.used))
    return out


@dataclass
class Analysis:
    """Everything the table and the verdict show."""

    rows: list[ConfigRow]
    baseline: Baseline | None
    verdict: Verdict
    crashes: list[Crash] = field(default_factory=list)
    #: The between-launch part every interval above includes.
    between: Between | None = None


def row_key(run: Run) -> RunConfig | str:
    if run.baseline_source:
        return "baseline file"
    if run.config is not None:
        # The model path is informative but must not split rows of one campaign.
        c = run.config
        return RunConfig(c.engine, c.algorithm, c.steps, c.topk, c.draft_tokens, params=c.params)
    return f"unknown config ({run.source})"


def _concurrency_breakdown(runs: Sequence[Run], whole: Summary | None = None) -> dict[int, Summary]:
    """Throughput by concurrency level. ``whole``: :func:`summarize_runs` of the same runs' throughput,
    which is the one level's summary, to the bit, when a single run ran at a single level."""
    used = [r for r in runs if len(r.throughput)]
    if not used:
        return {}
    if len(used) == 1 and whole is not None:
        levels_seen = np.frombuffer(used[0].concurrency, dtype=np.uint32)
        if len(levels_seen) == len(used[0].throughput) and len(levels_seen) and levels_seen.min() == levels_seen.max():
            return {int(levels_seen[0]): whole}  # the same samples, summarised once (a copy and a sort less)
    # Our own copy, in the samples' width (float32 for the runs' compact columns).
    tp = np.concatenate([own_samples(r.throughput) for r in used])
    conc = np.concatenate([np.frombuffer(r.concurrency, dtype=np.uint32) for r in used])
    out = {}
    lowest, highest = (int(conc.min()), int(conc.max())) if len(conc) else (0, 0)
    if lowest == highest:
        # One level (the usual live case): all the samples, no order to find (an argsort is
        # 8 bytes a sample: 24 MB at 3M).
        levels = np.asarray([lowest] if len(conc) else [], dtype=np.int64)
        parts: Iterable[np.ndarray] = iter([tp])
    elif highest < 1 << 16:
        # Each level's samples in their order, all levels at once: a stable sort of the levels
        # (a radix sort at 16 bits) cut where the level changes. A mask per level read the
        # whole column once per level (24 of 36 ms for 1.2M samples at 4 levels).
        order = np.argsort(conc.astype(np.uint16), kind="stable")
        counts = np.bincount(conc)
        levels = np.flatnonzero(counts)
        ends = np.cumsum(counts[levels]).tolist()
        # (one level's samples gathered at a time: at most one level's copy beside the order)
        parts = (tp[order[a:b]] for a, b in zip([0, *ends[:-1]], ends, strict=True))
    else:
        levels = np.unique(conc)
        parts = (tp[conc == c] for c in levels)
    for c, part in zip(levels.tolist(), parts, strict=True):
        s = summarize(part, scratch=True)  # each part is a copy of ours (tp, or gathered from it)
        if s is not None:
            out[int(c)] = s
    return out


def _per_position(runs: Sequence[Run]) -> tuple[float, ...] | None:
    n = sum(r.per_position_n for r in runs)
    if not n:
        return None
    width = max(len(r.per_position_sum) for r in runs if r.per_position_n)
    sums = [0.0] * width
    for r in runs:
        if r.per_position_n and len(r.per_position_sum) == width:
            for i, v in enumerate(r.per_position_sum):
                sums[i] += v
    return tuple(s / n for s in sums)


def row_order(row: ConfigRow) -> tuple[int, int, int, str]:
    # Baseline file first, then by step count (no speculation = 0), unknown configurations last.
    cfg = row.config
    if row.key == "baseline file":
        return (0, 0, 0, "")
    if cfg is None or cfg.steps is None:
        return (2, 0, 0, row.label)
    return (1, cfg.steps, cfg.draft_tokens or 0, row.label)


def build_rows(runs: Iterable[Run]) -> list[ConfigRow]:
    """Group runs by configuration; rows ordered by step count."""
    groups: dict[RunConfig | str, list[Run]] = {}
    for run in runs:
        if not run.used:
            continue
        groups.setdefault(row_key(run), []).append(run)
    rows = []
    for key, rs in groups.items():
        label = key.label if isinstance(key, RunConfig) else str(key)
        within = summarize_runs(rs, "throughput")
        launches = tuple(x for r in rs if (x := launch_of(r.throughput, f"run {r.id}")) is not None)
        rows.append(ConfigRow(
            key=key, label=label, runs=rs, launches=launches, within=within,
            throughput=within,
            accept_len=summarize_runs(rs, "accept_len"),
            accept_rate=summarize_runs(rs, "accept_rate"),
            per_position=_per_position(rs),
            concurrency=_concurrency_breakdown(rs, within),
        ))
    return sorted(rows, key=row_order)


def _fmt_pct(r: Ratio) -> str:
    if r.ci95_low is None or r.ci95_high is None:
        return f"{r.pct:+.1f}%"
    return f"{r.pct:+.1f}% ({pct_bound(r.ci95_low)}…{pct_bound(r.ci95_high)}%)"


def _dominant(row: ConfigRow) -> int | None:
    counts = Counter({c: s.n for c, s in row.concurrency.items()})
    if not counts:
        return None
    c, _ = counts.most_common(1)[0]
    return c


def analyze(runs: Iterable[Run], *, baseline_tps: float | None = None,
            launch_cv: float = DEFAULT_LAUNCH_CV) -> Analysis:
    """Rows, baseline and verdict for a set of runs.

    Args:
        runs: the session's runs (unused runs are ignored).
        baseline_tps: an exact baseline throughput given by the user; wins over
            a baseline file, which wins over a no-speculation run in the data.
        launch_cv: the launch CV assumed when no configuration has two launches (a fraction).
    """
    runs = list(runs)
    analysis = assemble(build_rows(runs), baseline_tps=baseline_tps, launch_cv=launch_cv)
    analysis.crashes = crashes(runs)
    return analysis


def apply_launches(rows: Sequence[ConfigRow], launch_cv: float = DEFAULT_LAUNCH_CV) -> Between:
    """Fit the two-level model over the rows and make each row's throughput its estimate.

    Idempotent: it starts from each row's within-launch summary (``within``).
    """
    groups: dict[Hashable, Sequence[Launch]] = {id(r): r.launches for r in rows}
    between, estimates = fit(groups, launch_cv)
    for r in rows:
        base = r.within if r.within is not None else r.throughput
        r.within = base
        est = estimates.get(id(r))
        r.estimate = est
        r.throughput = as_summary(est, base) if est is not None and base is not None else base
    return between


def assemble(rows: list[ConfigRow], *, baseline_tps: float | None = None,
             baseline_key: RunConfig | str | None = None, launch_cv: float = DEFAULT_LAUNCH_CV) -> Analysis:
    """Baseline, comparisons and verdict over built rows.

    Args:
        rows: fresh rows (their flags are set here), in table order.
        baseline_tps: a given baseline throughput (``--baseline-tps``).
        baseline_key: the key of a row the user marked as the baseline (the
            dashboard's ``b``); it wins over everything while it has samples.
        launch_cv: the launch CV assumed when no configuration has two launches (a fraction).
    """
    between = apply_launches(rows, launch_cv)
    chosen = None
    if baseline_key is not None:
        chosen = next((r for r in rows if r.key == baseline_key and r.throughput is not None), None)
    baseline: Baseline | None = None
    if chosen is not None:
        chosen.is_baseline = True
        baseline = Baseline("run", f"{chosen.label} (marked)", throughput=chosen.throughput)
    elif baseline_tps is not None:
        baseline = Baseline("tps", f"{baseline_tps:g} tok/s (given)", tps=baseline_tps)
    else:
        file_row = next((r for r in rows if r.key == "baseline file"), None)
        nospec_row = next((r for r in rows if r.config is not None and r.config.is_nospec), None)
        ref = file_row or nospec_row
        if ref is not None and ref.throughput is not None:
            ref.is_baseline = True
            baseline = Baseline("file" if ref is file_row else "run", ref.label, throughput=ref.throughput)
    if baseline is not None and baseline.against() is not None:
        for row in rows:
            if row.throughput is not None and not row.is_baseline:
                row.vs_baseline = ratio(row.throughput, baseline.against())  # type: ignore[arg-type]
    return Analysis(rows, baseline, verdict_for(rows, baseline, between), between=between)


def launches_sentence(rows: Sequence[ConfigRow], between: Between | None) -> str:
    """``Rests on 5 launches (2 of EAGLE3 2 steps, ...); launch CV ...`` over the rows with an estimate."""
    named = [(r.label, r.estimate) for r in rows if r.estimate is not None]
    if between is None or not named:
        return ""
    return rests_on(named, between)


def verdict_for(rows: list[ConfigRow], baseline: Baseline | None, between: Between | None = None) -> Verdict:
    candidates = [r for r in rows if r.throughput is not None and r.throughput.n >= MIN_SAMPLES_FOR_VERDICT
                  and r.throughput.se is not None and r.key != "baseline file"]
    if not candidates:
        text = ("Not enough data: no configuration has an interval yet (each needs at least "
                f"{MIN_SAMPLES_FOR_VERDICT} counted throughput samples).")
        return Verdict(None, None, None, False, None, text,
                       answer=answer(leader=None, runner_up=None, separated=False, equivalent=False, sentence=text))
    ranked = sorted(candidates, key=lambda r: r.throughput.mean, reverse=True)  # type: ignore[union-attr]
    best = ranked[0]
    best.best = True
    for r in rows:
        r.mark = ""
    runner = ranked[1] if len(ranked) > 1 else None
    speedup = None
    if baseline is not None and not best.is_baseline and baseline.against() is not None:
        speedup = ratio(best.throughput, baseline.against())  # type: ignore[arg-type]
    separated = False
    diff = None
    if runner is not None:
        diff = difference(best.throughput, runner.throughput)  # type: ignore[arg-type]
        separated = diff[1] is not None and diff[1] > 0
    # Sentence.
    tp = best.throughput
    assert tp is not None
    parts = [f"{best.label}: {tp.mean:.1f} tok/s"]
    if best.is_baseline:
        parts.append("(the baseline itself)")
    elif speedup is not None and baseline is not None:
        parts.append(f"{_fmt_pct(speedup)} over {baseline.label}")
    text = " ".join(parts)
    if runner is None:
        text += "; no other configuration to compare with."
    elif separated:
        assert diff is not None and diff[1] is not None and diff[2] is not None
        text += (f"; faster than the runner-up {runner.label} (by {diff[0]:.1f} tok/s, 95% interval "
                 f"{tps_bound(diff[1], sign=False)}…{tps_bound(diff[2], sign=False)}).")
    else:
        text += f"; {runner.label} is not distinguishable: no winner declared."
    rests = launches_sentence(candidates, between)
    if rests:
        text += " " + rests
    note = None
    doms = {r.label: _dominant(r) for r in candidates}
    if len({d for d in doms.values() if d}) > 1:
        note = ("Configurations ran at different concurrency (" +
                ", ".join(f"{k}: {v}" for k, v in doms.items()) +
                "); throughput is only comparable at equal concurrency.")
    made = answer(leader=best.label, runner_up=runner.label if runner else None, separated=separated,
                  equivalent=False, sentence=text, leader_steps=best.steps,
                  runner_up_steps=runner.steps if runner else None)
    best.mark = made.mark
    return Verdict(best, runner, speedup, separated, diff, text, note, made)
