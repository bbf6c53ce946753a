"""The sweep's sequential stopping rule and its verdict, with an error rate that stays honest.

A sweep measures one setting (a step count at a concurrency) at a time and
looks at the data as it comes, so that clear cases finish early. Looking
repeatedly at a 95% interval and stopping the first time it "separates" two
settings would call equal settings different far more often than 5% of the
time. The rule here avoids that:

* **Planned looks.** A setting is only ever judged at ``looks`` planned sample
  counts ``n_1 < … < n_K`` (geometric from ``min_samples`` to
  ``max_samples``); in between, data is just collected.
* **Bonferroni split.** Every test that can make a "separated" claim uses
  the two-sided level ``alpha / (2K)``: a pair of settings is tested at most
  when either one reaches one of its K looks (2K tests), so by the union bound
  the chance that two truly equal settings are ever called different is at
  most ``alpha`` — whatever the order, interleaving or early stops. The final
  verdict applies the same adjusted test, so it agrees with the decisions
  taken along the way.
* **Three ways to stop early**, all judged against the *leader* (the other
  setting with the highest mean): *slower* (the adjusted interval of
  ``leader − this`` lies above 0 — a clear loser needs no precision),
  *equivalent* (the adjusted interval lies within ``±margin_pct`` of the
  leader: whatever difference remains is too small to matter), and *precise*
  (this setting's own 95% half-width is below ``precision_pct`` of its mean).
  Otherwise collection goes on until ``max_samples`` (or the caller's time
  budget) — the budget stop, after which the verdict may honestly be
  "not separated".

The means and standard errors come from :mod:`specmon.model.analysis` /
:mod:`specmon.model.stats` (batch means, Welch degrees of freedom); this module only
adds the adjusted critical value and the decisions.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from specmon.model.analysis import Analysis, ConfigRow, launches_sentence
from specmon.model.stats import Ratio, Summary, t_quantile, welch_df
from specmon.model.verdict import Answer, answer, pct_bound, tps_bound

#: Whatever the caller names its settings by (a label, a (steps, concurrency) pair).
_Key = TypeVar("_Key", bound=Hashable)


# --------------------------------------------------------------------------- the rule


@dataclass(frozen=True, slots=True)
class Difference:
    """``a.mean − b.mean`` with an interval at a chosen level (bounds None when not computable)."""

    diff: float
    low: float | None
    high: float | None

    @property
    def known(self) -> bool:
        """Whether the interval could be computed."""
        return self.low is not None and self.high is not None


def adjusted_difference(a: Summary, b: Summary, level: float) -> Difference:
    """Welch interval of ``a.mean − b.mean`` at two-sided confidence ``level`` (e.g. 0.995).

    Uses the batch-means standard errors and degrees of freedom of the
    summaries (:func:`specmon.model.stats.summarize`), like
    :func:`specmon.model.stats.difference` does at 95%.
    """
    if a.model is not None and b.model is not None:
        # The launch model's interval (launches as the unit; the pooled between-launch term shared).
        return Difference(*a.model.difference(b.model, level))
    d = a.mean - b.mean
    if a.se is None or b.se is None:
        return Difference(d, None, None)
    df = welch_df(a.se, a.df, b.se, b.df)
    if df is None:
        return Difference(d, None, None)
    half = t_quantile(1.0 - (1.0 - level) / 2.0, df) * math.sqrt(a.se**2 + b.se**2)
    return Difference(d, d - half, d + half)


#: Why a setting stopped (or not).
CONTINUE, SLOWER, EQUIVALENT, PRECISE, BUDGET = "continue", "slower", "equivalent", "precise", "budget"


@dataclass(frozen=True, slots=True)
class Decision:
    """The rule's answer at one look.

    Attributes:
        stop: Whether to stop collecting for this setting.
        reason: One of ``continue``, ``slower``, ``equivalent``, ``precise``, ``budget``.
        versus: The leader it was compared with, if any.
        text: One sentence for the progress log.
    """

    stop: bool
    reason: str
    versus: Hashable | None = None
    text: str = ""


@dataclass(frozen=True, slots=True)
class StoppingRule:
    """When to stop measuring one setting (see the module docstring for the why).

    Attributes:
        alpha: Family-wise error for calling two equal settings different.
        looks: Planned looks per setting (K).
        min_samples: Counted samples at the first look.
        max_samples: Counted samples at the last look (the sample budget).
        margin_pct: Differences within ± this share of the leader's mean are "equivalent".
        precision_pct: A setting whose 95% half-width is below this share of its mean is "precise".
    """

    alpha: float = 0.05
    looks: int = 5
    min_samples: int = 40
    max_samples: int = 1600
    margin_pct: float = 1.0
    precision_pct: float = 0.5

    def __post_init__(self) -> None:
        if not 0 < self.alpha < 1:
            raise ValueError("alpha must be in (0, 1)")
        if self.looks < 1:
            raise ValueError("looks must be at least 1")
        if self.min_samples < 3:
            raise ValueError("min_samples must be at least 3 (an interval needs 3 samples)")
        if self.max_samples < self.min_samples:
            raise ValueError("max_samples must be at least min_samples")
        if self.margin_pct <= 0 or self.precision_pct <= 0:
            raise ValueError("margin_pct and precision_pct must be positive")

    @property
    def look_points(self) -> tuple[int, ...]:
        """The planned sample counts n_1 < … < n_K (geometric, ending at ``max_samples``)."""
        if self.looks == 1 or self.max_samples == self.min_samples:
            return (self.max_samples,)
        ratio = (self.max_samples / self.min_samples) ** (1.0 / (self.looks - 1))
        points: list[int] = []
        for j in range(self.looks):
            n = self.max_samples if j == self.looks - 1 else round(self.min_samples * ratio**j)
            if not points or n > points[-1]:
                points.append(n)
        return tuple(points)

    def next_look(self, n: int) -> int | None:
        """The first planned look at or above ``n`` samples (None past the budget)."""
        for point in self.look_points:
            if point >= n:
                return point
        return None

    @property
    def test_level(self) -> float:
        """Two-sided confidence of every separation/equivalence test: 1 − alpha/(2K)."""
        return 1.0 - self.alpha / (2 * self.looks)

    def decide(
        self,
        this: Summary,
        others: Mapping[_Key, Summary],
        *,
        budget_spent: bool = False,
        label: str = "this setting",
        names: Mapping[_Key, str] | None = None,
    ) -> Decision:
        """Judge one setting at a look.

        Args:
            this: The setting's throughput summary now.
            others: The other settings with data (their current summaries).
            budget_spent: The caller's time budget ran out (or the last look is reached).
            label: The setting's name, for the sentence.
            names: Names of the other settings, for the sentence.

        Returns:
            Whether to stop, and why.
        """
        names = names or {}
        if this.n >= self.max_samples:
            budget_spent = True
        rivals = {k: s for k, s in others.items() if s is not None and s.n >= self.min_samples}
        if rivals and this.n >= self.min_samples:
            key, leader = max(rivals.items(), key=lambda kv: kv[1].mean)
            who = names.get(key, str(key))
            diff = adjusted_difference(leader, this, self.test_level)
            if diff.known and leader.mean > this.mean and diff.low > 0:  # type: ignore[operator]
                return Decision(True, SLOWER, key, f"{label} is slower than {who} by {diff.diff:.2f} tok/s "
                                                   f"(adjusted interval {diff.low:.2f}…{diff.high:.2f})")
            margin = self.margin_pct / 100.0 * leader.mean
            if diff.known and -margin < diff.low and diff.high < margin:  # type: ignore[operator]
                return Decision(True, EQUIVALENT, key, f"{label} is within ±{self.margin_pct:g}% of {who} "
                                                       f"(adjusted interval {diff.low:+.2f}…{diff.high:+.2f} tok/s)")
        half = this.ci_half_width
        if this.n >= self.min_samples and half is not None and this.mean > 0 \
                and half <= self.precision_pct / 100.0 * this.mean:
            return Decision(True, PRECISE, None, f"{label} is measured to ±{100 * half / this.mean:.2f}%")
        if budget_spent:
            return Decision(True, BUDGET, None, f"{label}: budget reached at {this.n} samples")
        return Decision(False, CONTINUE, None, "")


# --------------------------------------------------------------------------- the verdict


@dataclass
class SweepVerdict:
    """The sweep's answer for one concurrency.

    ``best``/``runner_up``/``speedup`` come from :func:`specmon.model.analysis.analyze`
    (95% intervals); ``separated`` uses the rule's adjusted level, the same
    test the sweep stopped on, so a winner is only declared when it holds up
    after the repeated looks.
    """

    concurrency: int | None
    analysis: Analysis
    separated: bool
    diff: Difference | None
    level: float
    sentence: str
    #: Not separated, and the adjusted interval of best − runner-up lies within ±margin_pct.
    equivalent: bool = False
    margin_pct: float | None = None
    #: Which source the samples come from: ``counters``, ``log``, ``counters+log`` (mixed visits).
    source: str = "log"
    #: The other sources' view (see :func:`check_source`).
    checks: tuple[SourceCheck, ...] = ()
    #: The named prompt set these settings were measured with (None: one workload only).
    workload: str | None = None

    @property
    def sources_agree(self) -> bool | None:
        """Whether every other source agrees (None when there is no other source)."""
        return all(c.agrees for c in self.checks) if self.checks else None

    def with_sources(self, source: str, checks: Sequence[SourceCheck]) -> SweepVerdict:
        """The same verdict, saying which source it rests on and whether the others agree."""
        names = {"counters": "the engine's counters (/metrics)", "log": "the server log",
                 "counters+log": "the engine's counters and, where they were missing, the log"}
        text = f" Rests on {names.get(source, source)}"
        if checks:
            short = {"counters": "the counters", "log": "the log", "counters+log": "the counters"}
            text += "; " + "; ".join(c.phrase(short.get(source, source)) for c in checks)
        return replace(self, source=source, checks=tuple(checks), sentence=self.sentence + text + ".")

    @property
    def answer(self) -> Answer:
        """What every surface draws: ★ only for a declared winner (:mod:`specmon.model.verdict`)."""
        best, runner = self.best, self.runner_up
        return answer(leader=best.label if best else None, runner_up=runner.label if best and runner else None,
                      separated=self.separated, equivalent=self.equivalent, sentence=self.sentence,
                      leader_steps=best.steps if best else None, runner_up_steps=runner.steps if runner else None,
                      level=self.level)

    @property
    def best(self) -> ConfigRow | None:
        """The fastest configuration by mean (a winner only when ``separated``)."""
        return self.analysis.verdict.best

    @property
    def runner_up(self) -> ConfigRow | None:
        """The second fastest configuration."""
        return self.analysis.verdict.runner_up

    @property
    def speedup(self) -> Ratio | None:
        """Best against the baseline, with its 95% interval."""
        return self.analysis.verdict.speedup

    def to_json(self) -> dict[str, object]:
        """The verdict as the JSON ``specmon sweep --format json`` prints."""
        best, runner, sp = self.best, self.runner_up, self.speedup

        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 2)

        return {
            "concurrency": self.concurrency,
            **({"workload": self.workload} if self.workload else {}),
            "best": best.label if best else None,
            "best_steps": best.steps if best else None,
            "runner_up": runner.label if runner else None,
            "runner_up_steps": runner.steps if runner else None,
            "speedup_pct": r(sp.pct) if sp else None,
            "speedup_ci95": [r(sp.ci95_low), r(sp.ci95_high)] if sp else None,
            "separated": self.separated,
            "winner_steps": best.steps if best and self.separated else None,
            "diff_tps": r(self.diff.diff) if self.diff else None,
            "diff_interval": [r(self.diff.low), r(self.diff.high)] if self.diff else None,
            "diff_level": round(self.level, 5),
            "equivalent": self.equivalent,
            "margin_pct": self.margin_pct,
            "source": self.source,
            "sources_agree": self.sources_agree,
            "checks": [c.to_json() for c in self.checks],
            "sentence": self.sentence,
            "answer": self.answer.to_json(),
        }


def _pct_text(r: Ratio) -> str:
    # From the numbers the JSON keeps (2 decimals), as specmon.output.tables.pct_interval_text
    # does: the sentence, the report and the dashboard then print the same digits.
    pct = round(r.pct, 2)
    if r.ci95_low is None or r.ci95_high is None:
        return f"{pct:+.1f}%"
    return f"{pct:+.1f}% ({pct_bound(round(r.ci95_low, 2))}…{pct_bound(round(r.ci95_high, 2))}%)"


def sweep_verdict(analysis: Analysis, rule: StoppingRule, concurrency: int | None = None,
                  workload: str | None = None) -> SweepVerdict:
    """Turn an :class:`~specmon.model.analysis.Analysis` of sweep data into the sweep's verdict.

    Args:
        analysis: ``analyze(...)`` of the sweep's runs (one concurrency).
        rule: The rule the sweep ran with (its level decides ``separated``).
        concurrency: Which concurrency these runs were measured at, for the sentence.

    Returns:
        The verdict, with a plain-language sentence such as
        ``"EAGLE3 2 steps: +5.9% (+3.1…+8.6%) over no speculation; EAGLE3 3 steps is not distinguishable"``.
    """
    v = analysis.verdict
    level = rule.test_level
    at = (f" at concurrency {concurrency}" if concurrency else "") + (f" on the {workload} prompts" if workload else "")
    best, runner = v.best, v.runner_up
    if best is None or best.throughput is None:
        return SweepVerdict(concurrency, analysis, False, None, level, v.sentence, workload=workload)
    best_tp = best.throughput
    diff = None
    separated = equivalent = False
    margin = rule.margin_pct / 100.0 * best_tp.mean
    if runner is not None and runner.throughput is not None:
        diff = adjusted_difference(best_tp, runner.throughput, level)
        separated = diff.known and diff.low > 0  # type: ignore[operator]
        equivalent = (not separated and diff.known and -margin < diff.low  # type: ignore[operator]
                      and diff.high < margin)  # type: ignore[operator]
    base = analysis.baseline
    if best.is_baseline:
        head = f"{best.label} is fastest{at} ({best_tp.mean:.1f} tok/s)"
    elif v.speedup is not None and base is not None:
        head = f"{best.label}: {_pct_text(v.speedup)} over {base.label}{at}"
    else:
        head = f"{best.label}: {best_tp.mean:.1f} tok/s{at} (no baseline measured)"
    if runner is None:
        tail = "; nothing else to compare with."
    elif separated:
        assert diff is not None
        tail = (f"; faster than {runner.label} by {diff.diff:.1f} tok/s "
                f"({100 * level:.2f}% interval {tps_bound(diff.low, sign=False)}…{tps_bound(diff.high, sign=False)}, "  # type: ignore[arg-type]
                "adjusted for repeated looks).")
    elif equivalent:
        assert diff is not None
        tail = (f"; {runner.label} is equivalent within ±{rule.margin_pct:g}% "
                f"({100 * level:.2f}% interval of the difference {tps_bound(diff.low)}…{tps_bound(diff.high)} tok/s): "  # type: ignore[arg-type]
                "either will do.")
    elif diff is not None and diff.known:
        tail = (f"; {runner.label} is not distinguishable ({100 * level:.2f}% interval of the difference "
                f"{tps_bound(diff.low)}…{tps_bound(diff.high)} tok/s, wider than ±{rule.margin_pct:g}%): "  # type: ignore[arg-type]
                "no winner declared.")
    else:
        tail = f"; {runner.label} is not distinguishable: no winner declared."
    rests = launches_sentence([r for r in analysis.rows if r.key != "baseline file"], analysis.between)
    if rests:
        tail += " " + rests
    made = SweepVerdict(concurrency, analysis, separated, diff, level, head + tail, equivalent, rule.margin_pct,
                        workload=workload)
    for r in analysis.rows:  # the rows' marks are this verdict's (its adjusted level), not the 95% one's
        r.mark = ""
    best.mark = made.answer.mark
    return made


@dataclass(frozen=True, slots=True)
class SourceCheck:
    """Another source's view of the same settings, against the one the verdict rests on.

    Sources measure different things: the client times each request's decode, the log and
    the counters the server's throughput over all requests. Their levels differ for good
    reasons (concurrency, prefill, what a "second" covers), so agreement is judged on what
    the verdict says, not on the level: the same fastest setting, and the same relative
    differences between settings. The level offset is reported beside it.

    Attributes:
        name: ``client`` (the load driver's per-request decode speed), ``log`` or ``counters``.
        means: Mean tok/s per step count by this source.
        best_steps: This source's fastest step count.
        max_gap_pct: The largest difference, in percentage points, between the two sources'
            speeds relative to the verdict's best setting (``this[k]/this[best]`` against
            ``primary[k]/primary[best]``), over settings both measured.
        agrees: Same fastest setting (or the verdict separated nothing) and every relative
            difference within tolerance.
        level_pct: This source's level against the primary's, the median ``this/primary − 1`` in
            percent (information, not judged).
    """

    name: str
    means: dict[Any, float]
    #: The fastest setting's name: a step count, or a label when the sweep has more dimensions.
    best_steps: int | str | None
    max_gap_pct: float | None
    agrees: bool
    level_pct: float | None = None
    tolerance_pct: float = 10.0
    #: Whether this source names the verdict's fastest setting (or the verdict separated nothing).
    same_best: bool = True
    #: The verdict's fastest setting by mean (its winner when it separated one).
    leader: int | str | None = None

    def phrase(self, primary_name: str = "the verdict's source") -> str:
        """What this source says, in words: "client agrees (...)" or "client disagrees: ..."."""
        level = ""
        if self.level_pct is not None and abs(self.level_pct) >= 1.0:
            whose = primary_name + ("'" if primary_name.endswith("s") else "'s")  # the counters', the log's
            level = f"; its level is {abs(self.level_pct):.1f}% {'above' if self.level_pct > 0 else 'below'} {whose}"
        if self.max_gap_pct is None:
            return f"{self.name}: no settings in common"
        if self.agrees and self.best_steps != self.leader and self.leader is not None:
            # The verdict declared no winner, so another ranking does not contradict it: said as it is.
            fastest = f"{self.best_steps}" if isinstance(self.best_steps, str) else f"{self.best_steps} steps"
            return (f"{self.name} agrees as far as the verdict goes (which separates none; it ranks {fastest} "
                    f"fastest; differences between settings within {self.max_gap_pct:.1f} points{level})")
        if self.agrees:
            return (f"{self.name} agrees (the same fastest setting; differences between settings within "
                    f"{self.max_gap_pct:.1f} points{level})")
        if not self.same_best:
            fastest = ("nothing" if self.best_steps is None else f"{self.best_steps}" if isinstance(self.best_steps, str)
                       else f"{self.best_steps} steps")
            return f"{self.name} disagrees: it ranks {fastest} fastest"
        ranking = "the same fastest setting" if self.leader is None or self.best_steps == self.leader else (
            f"it ranks {self.best_steps if isinstance(self.best_steps, str) else f'{self.best_steps} steps'} "
            "fastest (the verdict separates none)")
        return (f"{self.name} disagrees: {ranking}, but differences between settings "
                f"{self.max_gap_pct:.1f} points apart (tolerance {self.tolerance_pct:g}){level}")

    def to_json(self) -> dict[str, object]:
        """JSON-ready."""
        return {"name": self.name, "means": {str(k): round(v, 2) for k, v in sorted(self.means.items())},
                "best_steps": self.best_steps,
                "max_gap_pct": None if self.max_gap_pct is None else round(self.max_gap_pct, 2),
                "level_pct": None if self.level_pct is None else round(self.level_pct, 2),
                "agrees": self.agrees, "phrase": self.phrase()}


def check_source(name: str, means: Mapping[Any, float], primary: Mapping[Any, float], *,
                 verdict_best: int | str | None, separated: bool, tolerance_pct: float = 10.0) -> SourceCheck:
    """Compare another source's means with the primary source's (see :class:`SourceCheck`).

    One rule: the sources agree when they name the same fastest setting and their speeds
    relative to it match within ``tolerance_pct`` points. A source whose level alone differs
    (the client's per-request speed 25% under the server's throughput, the same ranking)
    agrees, and the sentence says by how much its level differs.
    """
    import statistics

    best = max(means, key=lambda k: means[k]) if means else None
    if best is not None and verdict_best in means and math.isclose(means[verdict_best], means[best], rel_tol=1e-9):
        # A tie at the top, to rounding (a source at another level rounds the two apart or together),
        # includes the verdict's best: this source names it fastest too.
        best = verdict_best
    common = [k for k in means if k in primary and primary[k] > 0 and means[k] > 0]
    level = statistics.median(means[k] / primary[k] - 1 for k in common) * 100 if common else None
    gap: float | None = None
    if common:
        ref = verdict_best if verdict_best in common else max(common, key=lambda k: primary[k])
        gap = max(abs(means[k] / means[ref] - primary[k] / primary[ref]) * 100 for k in common)
    same_best = best == verdict_best or not separated
    agrees = bool(common) and same_best and gap is not None and gap <= tolerance_pct
    return SourceCheck(name, dict(means), best, gap, agrees, level, tolerance_pct, same_best, verdict_best)
