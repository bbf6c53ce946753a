"""The model behind the numbers: tokens per verify cycle against the time a cycle takes.

Speculative decoding trades time for tokens. One *cycle* drafts ``s`` tokens
and verifies them in one target pass; it yields ``a(s)`` tokens on average —
SGLang's ``accept len``, vLLM's mean acceptance length, bonus token included.
So, per request::

    throughput(s) = a(s) / cycle(s)          (plain decoding: 1 / step time)

and from measured throughput and accept length the cycle time follows:
``cycle(s) = 1000 · c · a(s) / tps(s)`` ms at concurrency ``c``. Cycle time
grows about linearly with the step count (each step is one draft pass plus
one more token to verify), so a straight line through the measured cycle
times — ``cycle(s) ≈ base + per_step · s``, fitted robustly (repeated median)
so one odd configuration cannot bend it — is the cost side of the model.

The value side is the acceptance of each draft position. One more step, from
``s`` to ``s + 1``, adds ``p(s+1)`` tokens per cycle (the marginal acceptance
of position ``s + 1``) and costs ``per_step`` ms, so it pays off exactly when::

    p(s+1) > a(s) · per_step / cycle(s)       (the break-even acceptance)

``p`` comes from the engine's per-position acceptance where it logs it (vLLM),
else from the growth of the accept length between measured step counts.

Where measurement disagrees with the model — a throughput far from what its
accept length and the fitted cycle time predict, or an accept length the
per-position rates do not add up to — the panel says so: something other
than the trade-off (a missing CUDA graph, memory pressure, a different batch)
is moving the numbers.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.model.analysis import Analysis, ConfigRow

#: A throughput this far from the model's prediction (and outside its interval) is a disagreement.
DISAGREE_MIN_PCT = 3.0


@dataclass(frozen=True, slots=True)
class CostPoint:
    """One measured configuration seen through the model.

    Attributes:
        steps: Speculative steps (0 = no speculation).
        label: The configuration's label.
        concurrency: The concurrency the cycle time was computed for.
        tokens_per_cycle: Mean accept length (1 without speculation).
        tps: Measured mean throughput (tok/s, whole batch).
        tps_half_width: Its 95% half-width, when known.
        cycle_ms: Cycle (or plain step) time implied by the two: ``1000·c·a/tps``.
        model_cycle_ms: The fitted line's cycle time at these steps.
        model_tps: Throughput the model predicts: ``1000·c·a/model_cycle_ms``.
        residual_pct: Measured against predicted, in percent.
        disagrees: The measurement is off the model by more than chance and
            :data:`DISAGREE_MIN_PCT`.
    """

    steps: int
    label: str
    concurrency: int
    tokens_per_cycle: float
    tps: float
    tps_half_width: float | None
    cycle_ms: float
    model_cycle_ms: float | None = None
    model_tps: float | None = None
    residual_pct: float | None = None
    disagrees: bool = False


@dataclass(frozen=True, slots=True)
class CycleFit:
    """``cycle(s) ≈ base_ms + per_step_ms · s`` through the speculative points, plus the plain step."""

    base_ms: float
    per_step_ms: float
    plain_ms: float | None
    points: int

    def cycle_ms(self, steps: int) -> float:
        """Predicted cycle time at ``steps`` (the plain step time at 0, when measured)."""
        if steps == 0 and self.plain_ms is not None:
            return self.plain_ms
        return self.base_ms + self.per_step_ms * steps

    @property
    def overhead_ms(self) -> float | None:
        """What one speculative cycle costs beyond a plain step before any drafting (base − plain)."""
        return None if self.plain_ms is None else self.base_ms - self.plain_ms


@dataclass(frozen=True, slots=True)
class Marginal:
    """The value of one more draft step, from ``steps`` to ``steps + 1``.

    Attributes:
        steps: The step count it starts from.
        breakeven: Acceptance position ``steps + 1`` needs for the step to pay off.
        acceptance: Estimated acceptance of that position (None: not measured).
        source: Where the estimate comes from: ``per-position`` (logged),
            ``accept length`` (growth between measured step counts) or ``""``.
        change_pct: Predicted throughput change of the extra step, when the acceptance is known.
    """

    steps: int
    breakeven: float
    acceptance: float | None
    source: str
    change_pct: float | None

    @property
    def pays_off(self) -> bool | None:
        """Whether the extra step is predicted to help (None: acceptance unknown)."""
        if self.acceptance is None:
            return None
        return self.acceptance > self.breakeven


@dataclass
class CostModelView:
    """What the cost-model panel shows, for one concurrency."""

    concurrency: int
    points: list[CostPoint]
    fit: CycleFit | None
    marginals: list[Marginal]
    acceptance: dict[int, tuple[float, str]] = field(default_factory=dict)  # position -> (p, source)
    disagreements: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def model_best_steps(self) -> int | None:
        """The measured step count the model ranks fastest (by predicted throughput)."""
        ranked = [(p.model_tps, p.steps) for p in self.points if p.model_tps is not None]
        return max(ranked)[1] if ranked else None

    def to_json(self) -> dict[str, Any]:
        """JSON-ready numbers (rounded)."""

        def r(x: float | None, nd: int = 3) -> float | None:
            return None if x is None or math.isnan(x) else round(x, nd)

        return {
            "concurrency": self.concurrency,
            "fit": None if self.fit is None else {
                "base_ms": r(self.fit.base_ms), "per_step_ms": r(self.fit.per_step_ms),
                "plain_ms": r(self.fit.plain_ms), "overhead_ms": r(self.fit.overhead_ms), "points": self.fit.points},
            "points": [{"steps": p.steps, "label": p.label, "tokens_per_cycle": r(p.tokens_per_cycle),
                        "tps": r(p.tps), "cycle_ms": r(p.cycle_ms), "model_cycle_ms": r(p.model_cycle_ms),
                        "model_tps": r(p.model_tps), "residual_pct": r(p.residual_pct, 2),
                        "disagrees": p.disagrees} for p in self.points],
            "acceptance": {str(k): {"p": r(v[0], 4), "source": v[1]} for k, v in sorted(self.acceptance.items())},
            "marginal": [{"from_steps": m.steps, "to_steps": m.steps + 1, "breakeven": r(m.breakeven, 4),
                          "acceptance": r(m.acceptance, 4), "source": m.source, "change_pct": r(m.change_pct, 2),
                          "pays_off": m.pays_off} for m in self.marginals],
            "model_best_steps": self.model_best_steps,
            "disagreements": self.disagreements,
            "notes": self.notes,
        }

    def lines(self) -> list[str]:
        """Plain-text lines for a panel or a report."""
        out = [f"Cost model (concurrency {self.concurrency})"]
        f = self.fit
        if f is not None:
            text = f"  cycle ≈ {f.base_ms:.1f} ms + {f.per_step_ms:.2f} ms × steps"
            if f.plain_ms is not None:
                text += f"   (plain decode step {f.plain_ms:.1f} ms)"
            out.append(text)
        out.append("  steps  tokens/cycle  cycle ms   tok/s   model tok/s")
        for p in self.points:
            model = "—" if p.model_tps is None else f"{p.model_tps:7.1f}"
            mark = "  ≠" if p.disagrees else ""
            out.append(f"  {p.steps:>5}  {p.tokens_per_cycle:12.2f}  {p.cycle_ms:8.1f}  {p.tps:6.1f}   {model:>11}{mark}")
        for m in self.marginals:
            head = f"  {m.steps}→{m.steps + 1} steps: position {m.steps + 1} must be accepted ≥ {100 * m.breakeven:.1f}%"
            if m.acceptance is None:
                out.append(head + " (not measured)")
            else:
                verdict = "pays off" if m.pays_off else "does not pay off"
                change = f" ({m.change_pct:+.1f}%)" if m.change_pct is not None else ""
                out.append(head + f"; measured {100 * m.acceptance:.1f}% ({m.source}): {verdict}{change}")
        out += [f"  ≠ {d}" for d in self.disagreements]
        out += [f"  {n}" for n in self.notes]
        return out


def _fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Siegel's repeated-median line (:func:`scipy.stats.siegelslopes`): intercept and slope.

    Least squares would let one configuration that is off the model (a
    missing CUDA graph at one size) drag the line and make its neighbours
    look wrong instead; the repeated median ignores up to half the points
    being off, and through two points it is the line through them. The
    intercept is the median of ``y − slope·x`` (scipy's ``hierarchical``
    method). Needs two distinct ``xs`` at least (scipy's median of no slopes
    is NaN).
    """
    # Imported here: scipy.stats costs 0.4-3 s to import, and a summary that never fits a line
    # (one step count, or none) should not pay it.
    from scipy.stats import siegelslopes

    fit = siegelslopes(ys, xs)
    return float(fit.intercept), float(fit.slope)


def fit_cycle(steps: Sequence[int], cycle_ms: Sequence[float], plain_ms: float | None = None) -> CycleFit | None:
    """The cost side of the model: ``cycle ≈ base + per_step · steps`` through speculative points.

    The one line fit of specmon: the cost-model panel and the guided search
    (:mod:`specmon.experiment.stats.guided`) both use it. None with fewer than two
    distinct step counts (a line through one step count is not determined).

    Args:
        steps: Each speculative point's step count (> 0).
        cycle_ms: Its cycle time, ``1000·c·a/tps``.
        plain_ms: The measured plain decode step, when there is one.
    """
    if len(set(steps)) < 2:
        return None
    base, slope = _fit_line([float(s) for s in steps], cycle_ms)
    return CycleFit(base, slope, plain_ms, len(steps))


def _concurrency_of(row: ConfigRow, wanted: int | None) -> int:
    if wanted is not None:
        return wanted
    counts = Counter({c: s.n for c, s in row.concurrency.items()})
    c = counts.most_common(1)[0][0] if counts else 1
    return c if c > 0 else 1


@dataclass(frozen=True, slots=True)
class Measured:
    """One configuration's measurement, as the cost model reads it (from an analysis row, or from a
    sweep's table of one load: :func:`cost_model_of`).

    Attributes:
        steps: Speculative steps (0 = no speculation).
        label: The configuration's label.
        tps: Mean throughput (tok/s, whole batch).
        tps_half_width: Its 95% half-width, when known.
        accept_len: Mean accept length (None without speculation or when not logged).
        per_position: Logged acceptance of each draft position (vLLM), when known.
        concurrency: The concurrency it was measured at.
    """

    steps: int
    label: str
    tps: float
    tps_half_width: float | None
    accept_len: float | None
    per_position: tuple[float, ...] | None
    concurrency: int


def build_cost_model(analysis: Analysis, *, concurrency: int | None = None) -> CostModelView | None:
    """The cost model of an analysis (rows with a known step count and a throughput).

    Args:
        analysis: From :func:`specmon.model.analysis.analyze` (one campaign; for a sweep, one concurrency).
        concurrency: The concurrency the rows were measured at; None = each row's dominant one.

    Returns:
        The view, or None when no row has both a step count and a throughput.
    """
    rows = [r for r in analysis.rows if r.steps is not None and r.throughput is not None and r.throughput.mean > 0
            and r.key != "baseline file"]
    return cost_model_of([Measured(int(r.steps), r.label, r.throughput.mean,  # type: ignore[arg-type, union-attr]
                                   r.throughput.ci_half_width,  # type: ignore[union-attr]
                                   r.accept_len.mean if r.accept_len is not None else None, r.per_position,
                                   _concurrency_of(r, concurrency)) for r in rows])


def cost_model_of(measured: Sequence[Measured]) -> CostModelView | None:
    """The cost model of measured configurations (one load: a sweep's group, or one campaign).

    Returns:
        The view, or None when nothing has both a step count and a throughput.
    """
    rows = [m for m in measured if m.tps > 0 and math.isfinite(m.tps)]
    if not rows:
        return None
    points: list[CostPoint] = []
    conc_used: Counter[int] = Counter()
    for row in sorted(rows, key=lambda r: r.steps):
        steps = row.steps
        if steps > 0 and (row.accept_len is None or row.accept_len <= 0):
            continue  # a speculative row with no accept length says nothing about cycles
        c = row.concurrency if row.concurrency > 0 else 1
        conc_used[c] += 1
        a = 1.0 if steps == 0 else row.accept_len
        assert a is not None
        points.append(CostPoint(steps, row.label, c, a, row.tps, row.tps_half_width, 1000.0 * c * a / row.tps))
    if not points:
        return None
    view_conc = conc_used.most_common(1)[0][0]
    view = CostModelView(view_conc, points, None, [])
    if len(conc_used) > 1:
        view.notes.append("rows ran at different concurrency: cycle times are only comparable at equal batch")

    spec = [p for p in points if p.steps > 0]
    plain = next((p.cycle_ms for p in points if p.steps == 0), None)
    view.fit = fit_cycle([p.steps for p in spec], [p.cycle_ms for p in spec], plain)
    if view.fit is None and spec:
        view.notes.append("measure at least two speculative step counts to fit the cost of one more step")

    # Per-position (marginal) acceptance: logged rates first, else growth of the accept length.
    acceptance: dict[int, tuple[float, str]] = {}
    for row in rows:
        if row.per_position and row.steps:
            for k, prob in enumerate(row.per_position[: row.steps], start=1):
                acceptance.setdefault(k, (prob, "per-position"))
    by_steps = {p.steps: p.tokens_per_cycle for p in points}
    if 0 not in by_steps and spec:
        by_steps[0] = 1.0  # with no drafting a cycle yields the one bonus token
    known = sorted(by_steps)
    for lo, hi in zip(known, known[1:], strict=False):
        gain = (by_steps[hi] - by_steps[lo]) / (hi - lo)
        for k in range(lo + 1, hi + 1):
            acceptance.setdefault(k, (max(gain, 0.0), "accept length" if hi - lo == 1 else "accept length (spread)"))
    view.acceptance = acceptance

    fit = view.fit
    if fit is not None:
        enough = len(spec) >= 3  # a line through two points fits them exactly: nothing to disagree with
        new_points = []
        for p in points:
            mc = fit.cycle_ms(p.steps)
            if p.steps == 0 and fit.plain_ms is None or mc <= 0:
                new_points.append(p)
                continue
            mtps = 1000.0 * p.concurrency * p.tokens_per_cycle / mc
            resid = 100.0 * (p.tps - mtps) / mtps
            noise_pct = 100.0 * 2 * (p.tps_half_width or 0.0) / p.tps
            disagrees = enough and p.steps > 0 and abs(resid) > max(DISAGREE_MIN_PCT, noise_pct)
            new_points.append(CostPoint(p.steps, p.label, p.concurrency, p.tokens_per_cycle, p.tps,
                                        p.tps_half_width, p.cycle_ms, mc, mtps, resid, disagrees))
            if disagrees:
                view.disagreements.append(
                    f"{p.label}: measured {p.tps:.1f} tok/s, the model predicts {mtps:.1f} ({resid:+.1f}%): its cycle "
                    f"takes {p.cycle_ms:.1f} ms, not the {mc:.1f} ms the other step counts imply")
        view.points = new_points
        # The value of one more step, from every measured speculative step count (and from none).
        for p in view.points:
            cyc = p.cycle_ms
            breakeven = p.tokens_per_cycle * fit.per_step_ms / cyc if p.steps > 0 else None
            if p.steps == 0:
                # From no speculation to 1 step the cost is the whole first cycle, not one step.
                first = fit.cycle_ms(1)
                breakeven = first / cyc - 1.0
            if breakeven is None:
                continue
            est = acceptance.get(p.steps + 1)
            change = None
            if est is not None:
                nxt_cycle = fit.cycle_ms(p.steps + 1)
                change = 100.0 * (((p.tokens_per_cycle + est[0]) / nxt_cycle) / (p.tokens_per_cycle / cyc) - 1.0)
            view.marginals.append(Marginal(p.steps, breakeven, est[0] if est else None, est[1] if est else "", change))
        if plain is not None and fit.plain_ms is not None and fit.overhead_ms is not None:
            view.notes.append(f"a speculative cycle costs {fit.overhead_ms:.1f} ms more than a plain step before "
                              f"any draft, plus {fit.per_step_ms:.2f} ms per draft step")
    # Accept length against the logged per-position rates (they should add up).
    for row in rows:
        if row.per_position and row.steps and row.accept_len is not None:
            implied = 1.0 + sum(row.per_position[: row.steps])
            logged = row.accept_len
            if logged > 0 and abs(implied - logged) / logged > 0.05:
                view.disagreements.append(
                    f"{row.label}: per-position acceptance adds up to {implied:.2f} tokens per cycle, "
                    f"the logged accept length is {logged:.2f}")
    best = view.model_best_steps
    measured_best = max(view.points, key=lambda q: q.tps).steps
    if best is not None and best != measured_best and len(spec) >= 3:
        view.disagreements.append(f"the model ranks {best} steps fastest; the measurements rank {measured_best} steps")
    return view
