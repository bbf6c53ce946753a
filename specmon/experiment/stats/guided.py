"""Guided search: fewer restarts to the fastest speculative setting.

A grid sweep restarts the server once per setting; on a large model each
restart costs 10-15 minutes, and SGLang EAGLE's space (steps x top-k x draft
tokens) has dozens of settings. The guided strategy measures a few settings,
fits the cost model of :mod:`specmon.model.costmodel` to them, predicts the
throughput of every setting not measured yet, and measures only where the
prediction says the winner could be.

The model (per request, at concurrency ``c``)::

    tps(x)   = 1000 * c * tokens_per_cycle(x) / cycle_ms(x)
    cycle_ms = b0 + b1*steps + b2*(draft_tokens - steps - 1) + b3*(topk - 1)*steps

Cycle time grows linearly with the draft steps and the verified tokens (the
real campaign in DESIGN.md: +1.1 ms per verified token, a draft pass per
step). ``b0 + b1*steps`` is the cost model's line itself
(:func:`specmon.model.costmodel.fit_cycle`, Siegel's repeated median through
the measured chains, the line the cost-model panel shows); ``b2`` and ``b3``,
what a tree costs beyond it, are least squares on the trees' distances from
that line. Until two chain step counts are measured (a space of trees only),
all four are fitted jointly by least squares. Tokens per cycle are ``1 + sum(q_k)`` over the usable draft positions:
the chain's marginal acceptance ``p_k`` is read from the growth of the accept
length between measured step counts (as in the cost-model panel) and
extrapolated geometrically past the deepest one; a tree of ``topk`` branches
accepts position ``k`` when any branch matches, with correlated branches:
``q_k = 1 - (1 - p_k) ** (1 + g*(topk - 1))`` (EAGLE-2's dynamic trees gain
acceptance per depth with diminishing returns in the branch count), ``g``
fitted to measured tree settings.

A coefficient the measurements cannot identify (no tree setting measured yet,
so nothing says what a branch costs) makes the prediction of the settings that
depend on it *unknown*: those settings are candidates until one of them is
measured. The search stops when every unmeasured setting's optimistic
prediction is below the best measured mean, and the best measured setting's
neighbours have been measured.

Pure: no I/O, no clock; the caller measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from specmon.model.costmodel import CycleFit, fit_cycle
from specmon.wording import counted

#: The prediction's own uncertainty, relative, per step of distance to the nearest measured setting.
EXTRAPOLATION_PER_STEP = 0.01
#: Tree-branch acceptance gain assumed when no tree setting has been measured (only ranks candidates).
PRIOR_BRANCH_GAIN = 0.35
#: How much more branch gain than fitted the optimistic prediction of a tree allows (the fit rests on a
#: few noisy accept lengths). bench_guided, tree space, 200 seeds: slack 0 98.5% of the grid's verdict
#: at 0.27x the restarts, 0.05 99.0% at 0.28x, 0.1 99.5% at 0.30x.
GAIN_SLACK = 0.1


@dataclass(frozen=True, slots=True, order=True)
class Setting:
    """One point of the space: ``steps == 0`` is no speculation."""

    steps: int
    topk: int = 1
    draft_tokens: int = 0
    #: Other launch parameters (vLLM's n-gram window, llama.cpp's speculative type): settings of one
    #: family share the tree shape's cycle cost, and each family's acceptance is learnt from its own.
    family: tuple[tuple[str, int | str], ...] = ()

    @classmethod
    def chain(cls, steps: int) -> Setting:
        """A chain drafter (top-k 1) with ``steps`` steps, or no speculation for 0."""
        return cls(0, 1, 0) if steps == 0 else cls(steps, 1, steps + 1)

    @property
    def depth(self) -> int:
        """Draft positions a cycle can accept."""
        return 0 if self.steps == 0 else min(self.steps, self.draft_tokens - 1)

    @property
    def is_chain(self) -> bool:
        return self.topk == 1

    def label(self) -> str:
        if self.steps == 0:
            return "no speculation"
        extra = "".join(f", {k} {v}" for k, v in self.family)
        if self.is_chain:
            return f"{counted(self.steps, 'step')}{extra}"
        return f"{counted(self.steps, 'step')}, top-k {self.topk}, {counted(self.draft_tokens, 'draft token')}{extra}"


@dataclass(frozen=True, slots=True)
class Measurement:
    """What one measured setting gave: mean throughput with its 95% half-width, and the accept length."""

    setting: Setting
    tps: float
    half_width: float
    accept_len: float
    concurrency: int = 1

    @property
    def cycle_ms(self) -> float:
        return 1000.0 * self.concurrency * self.accept_len / self.tps


@dataclass(frozen=True, slots=True)
class Prediction:
    """The model's throughput for an unmeasured setting, and the most it could be.

    ``tps`` is the point prediction; ``upper`` the optimistic one (the most
    acceptance the measured accept lengths allow, the cycle time at the low end
    of its noise). Both are None when the model cannot say: such a setting is
    unexplored, and stays a candidate until something like it is measured.
    """

    setting: Setting
    tps: float | None
    best_case: float | None

    @property
    def upper(self) -> float:
        return math.inf if self.best_case is None else self.best_case


def neighbours(setting: Setting, space: Iterable[Setting]) -> list[Setting]:
    """Settings one notch away: a step more or less at the same tree shape, or the next branch count,
    or the same tree in a family that differs in one parameter."""
    out = []
    for other in space:
        if other == setting:
            continue
        if setting.steps == 0 or other.steps == 0:
            if max(setting.steps, other.steps) == 1 and setting.is_chain and other.is_chain:
                out.append(other)
            continue
        if other.family != setting.family:
            same_tree = (other.steps, other.topk, other.draft_tokens) == (setting.steps, setting.topk,
                                                                          setting.draft_tokens)
            if same_tree and sum(a != b for a, b in zip(other.family, setting.family, strict=False)) == 1:
                out.append(other)
            continue
        same_shape = other.topk == setting.topk and (other.draft_tokens - other.steps) == (
            setting.draft_tokens - setting.steps)
        if same_shape and abs(other.steps - setting.steps) == 1 or other.steps == setting.steps and other.topk != setting.topk or other.steps == setting.steps and other.topk == setting.topk and other.draft_tokens != setting.draft_tokens:
            out.append(other)
    return out


Family = tuple[tuple[str, int | str], ...]


def _chain_accept(measured: Sequence[Measurement], family: Family = ()) -> dict[int, float]:
    by_depth = {0: 1.0}
    for m in measured:
        if m.setting.is_chain and m.setting.steps > 0 and m.setting.family == family:
            by_depth[m.setting.depth] = m.accept_len
    return by_depth


def _chain_marginals(measured: Sequence[Measurement], depth: int, family: Family = ()) -> list[float]:
    """p_1..p_depth from the accept lengths of the measured chain settings (the point estimate)."""
    by_depth = _chain_accept(measured, family)
    known = sorted(by_depth)
    marg: list[float] = []
    for lo, hi in zip(known, known[1:], strict=False):
        gain = max(0.0, (by_depth[hi] - by_depth[lo]) / (hi - lo))
        marg.extend([min(gain, 1.0)] * (hi - lo))
    if len(marg) < depth:
        # Past the deepest measured chain: acceptance keeps decaying at the ratio of the last two estimates.
        last = marg[-1] if marg else 0.5
        prev = marg[-2] if len(marg) >= 2 else 1.0
        ratio = min(0.95, last / prev) if prev > 0 else 0.5
        while len(marg) < depth:
            last *= ratio
            marg.append(last)
    return marg[:depth]


def _chain_marginals_upper(measured: Sequence[Measurement], depth: int, family: Family = ()) -> list[float]:
    """The most acceptance per position the measured accept lengths allow.

    Marginal acceptance does not grow with depth, so the accept length is
    concave in the depth: between two measured depths it lies below the
    extension of the segment before it (and above the chord). The largest value
    consistent with that is the lower of the two extensions (the segment
    before, rising from the left point; the segment after, reaching back from
    the right one), never above the right point. Past the deepest measured
    depth the last segment's slope bounds every further position.
    """
    by_depth = _chain_accept(measured, family)
    known = sorted(by_depth)
    slopes = [max(0.0, (by_depth[b] - by_depth[a]) / (b - a)) for a, b in zip(known, known[1:], strict=False)]

    def upper(d: int) -> float:
        if d in by_depth:
            return by_depth[d]
        i = next((j for j, k in enumerate(known) if k > d), None)
        if i is None:  # beyond the deepest measurement
            last = known[-1]
            return by_depth[last] + (slopes[-1] if slopes else 1.0) * (d - last)
        lo, hi = known[i - 1], known[i]
        left = slopes[i - 2] if i >= 2 else 1.0
        right = slopes[i] if i < len(slopes) else 0.0
        return min(by_depth[lo] + left * (d - lo), by_depth[hi] - right * (hi - d), by_depth[hi])

    values = [upper(d) for d in range(depth + 1)]
    return [min(1.0, max(0.0, b - a)) for a, b in zip(values, values[1:], strict=False)]


def _tokens(setting: Setting, marg: Sequence[float], gain: float) -> float:
    if setting.steps == 0:
        return 1.0
    exponent = 1.0 + gain * (setting.topk - 1)
    return 1.0 + float(sum(1.0 - (1.0 - p) ** exponent for p in marg[: setting.depth]))


def _fit_gain(measured: Sequence[Measurement], marg: dict[Family, list[float]]) -> float | None:
    trees = [m for m in measured if m.setting.steps > 0 and not m.setting.is_chain and m.setting.family in marg]
    if not trees:
        return None
    grid = np.linspace(0.0, 2.0, 201)
    err = [sum((_tokens(m.setting, marg[m.setting.family], g) - m.accept_len) ** 2 for m in trees) for g in grid]
    return float(grid[int(np.argmin(err))])


def _features(s: Setting) -> list[float]:
    return [1.0, float(s.steps), float(s.draft_tokens - s.steps - 1), float((s.topk - 1) * s.steps)]


def _on_line(s: Setting) -> bool:
    """A chain that verifies every drafted token: its cycle is the cost model's line alone."""
    return s.steps > 0 and s.topk == 1 and s.draft_tokens == s.steps + 1


@dataclass
class Surrogate:
    """The cost model fitted to the measured settings."""

    measured: list[Measurement]
    line: CycleFit | None = field(init=False)
    coef: np.ndarray = field(init=False)
    known: list[bool] = field(init=False)
    marg: list[float] = field(init=False)
    marg_upper: list[float] = field(init=False)
    gain: float | None = field(init=False)

    def __post_init__(self) -> None:
        spec = [m for m in self.measured if m.setting.steps > 0]
        # The chains' line (top-k 1, every draft token verified: cycle = base + per_step·steps) is the cost
        # model's own fit (costmodel.fit_cycle, Siegel's repeated median), as the cost-model panel draws it:
        # one odd chain cannot bend it. A tree's extra cost over that line (more verified tokens, more
        # branches) is then least squares on the trees' residuals from it.
        chains = [m for m in spec if _on_line(m.setting)]
        self.line = fit_cycle([m.setting.steps for m in chains], [m.cycle_ms for m in chains])
        coef = np.zeros(4)
        self._proj = np.zeros((4, 4))
        if self.line is not None:
            coef[:2] = self.line.base_ms, self.line.per_step_ms
            self._proj[:2, :2] = np.eye(2)
            trees = [m for m in spec if not _on_line(m.setting)]
            if trees:
                x = np.array([_features(m.setting)[2:] for m in trees])
                y = np.array([m.cycle_ms - self.line.cycle_ms(m.setting.steps) for m in trees])
                coef[2:], *_ = np.linalg.lstsq(x, y, rcond=None)
                self._proj[2:, 2:] = np.linalg.pinv(x) @ x
        elif spec:
            # Fewer than two chain step counts (a space of trees only): every term jointly by least squares,
            # minimum norm: only combinations of the coefficients the measured settings pin down are ever
            # used (see identifiable), so the split of a collinear pair never matters.
            x = np.array([_features(m.setting) for m in spec])
            y = np.array([m.cycle_ms for m in spec])
            coef, *_ = np.linalg.lstsq(x, y, rcond=None)
            self._proj = np.linalg.pinv(x) @ x
        self.known = [bool(abs(self._proj[j, j] - 1.0) < 1e-6) for j in range(4)]
        self.coef = coef
        depth = max((m.setting.depth for m in self.measured), default=1)
        # Acceptance is learnt per family, from that family's measured chains.
        fams = {m.setting.family for m in spec if m.setting.is_chain}
        self._marg = {f: _chain_marginals(self.measured, 64 if depth else 1, f) for f in fams | {()}}
        self._marg_upper = {f: _chain_marginals_upper(self.measured, 64, f) for f in fams | {()}}
        self._fams = fams
        self.marg = self._marg[()]
        self.marg_upper = self._marg_upper[()]
        self.gain = _fit_gain(self.measured, {f: self._marg[f] for f in fams})
        self._plain = next((m for m in self.measured if m.setting.steps == 0), None)

    def identifiable(self, s: Setting) -> bool:
        """Whether every coefficient this setting's cycle time needs has been measured."""
        if s.steps == 0:
            return self._plain is not None
        # The cycle time of ``s`` is known only when its features lie in the span of the measured
        # ones: one tree measured cannot tell what a branch costs from what a verified token costs.
        f = np.array(_features(s))
        if float(np.linalg.norm(f - self._proj @ f)) > 1e-6 * (1.0 + float(np.linalg.norm(f))):
            return False
        if s.family not in self._fams:
            return False  # nothing measured says what this family accepts
        return s.is_chain or self.gain is not None

    def predict(self, s: Setting, concurrency: int = 1) -> Prediction:
        """Throughput of ``s`` with an honest half-width, or an unknown prediction."""
        if not self.identifiable(s):
            return Prediction(s, None, None)
        if s.steps == 0:
            assert self._plain is not None
            return Prediction(s, self._plain.tps, self._plain.tps + self._plain.half_width)
        cycle = float(np.dot(self.coef, _features(s)))
        if cycle <= 0:
            return Prediction(s, None, None)
        gain = self.gain if self.gain is not None else PRIOR_BRANCH_GAIN
        tps = 1000.0 * concurrency * _tokens(s, self._marg[s.family], gain) / cycle
        nearest = min(self.measured, key=lambda m: _distance(m.setting, s))
        rel = nearest.half_width / nearest.tps + EXTRAPOLATION_PER_STEP * _distance(nearest.setting, s)
        # Optimistic: the most acceptance the measured accept lengths allow, at the cycle time less its noise.
        # A tree's branch gain is fitted from a few noisy accept lengths: the best case allows more of it.
        hi_gain = gain + GAIN_SLACK if not s.is_chain else gain
        best_case = 1000.0 * concurrency * _tokens(s, self._marg_upper[s.family], hi_gain) / cycle * (1.0 + rel)
        return Prediction(s, tps, max(best_case, tps * (1.0 + rel)))


def _distance(a: Setting, b: Setting) -> float:
    fam = sum(x != y for x, y in zip(a.family, b.family, strict=False)) + abs(len(a.family) - len(b.family))
    return abs(a.steps - b.steps) + abs(a.topk - b.topk) + abs(a.draft_tokens - b.draft_tokens) / 2 + fam


@dataclass
class GuidedResult:
    """Where the search ended: the best measured setting, everything measured, in order."""

    best: Measurement
    measured: list[Measurement]
    space_size: int
    predictions: dict[Setting, Prediction]

    @property
    def restarts(self) -> int:
        return len(self.measured)

    @property
    def saved(self) -> int:
        """Restarts a grid over the same space would have added."""
        return self.space_size - self.restarts


def initial_design(space: Sequence[Setting]) -> list[Setting]:
    """No speculation, and the shallowest, a middle and the deepest chain (of the first family listed)."""
    first = next((s.family for s in space if s.steps > 0 and s.is_chain), ())
    chains = sorted((s for s in space if s.steps > 0 and s.is_chain and s.family == first),
                    key=lambda s: (s.steps, s.topk, s.draft_tokens))
    picks: list[Setting] = [s for s in space if s.steps == 0][:1]
    if chains:
        for s in (chains[0], chains[len(chains) // 2], chains[-1]):
            if s not in picks:
                picks.append(s)
    elif space:
        picks.append(sorted(space)[len(space) // 2])
    return picks


def next_setting(space: Sequence[Setting], measured: Sequence[Measurement]) -> Setting | None:
    """The next setting worth a restart, or None when the answer is in."""
    done = {m.setting for m in measured}
    todo = [s for s in space if s not in done]
    if not todo:
        return None
    model = Surrogate(list(measured))
    best = max(measured, key=lambda m: m.tps)
    preds = {s: model.predict(s, best.concurrency) for s in todo}
    # The winner's neighbours first: a measured optimum must be a local one.
    near = [s for s in neighbours(best.setting, space) if s in preds and preds[s].upper >= best.tps - best.half_width]
    if near:
        return max(near, key=lambda s: preds[s].upper)
    contenders = [s for s, p in preds.items() if p.upper > best.tps]
    if not contenders:
        return None
    unknown = [s for s in contenders if preds[s].tps is None]
    if unknown:
        # Explore the unidentified part with the setting closest to what was measured.
        return min(unknown, key=lambda s: min(_distance(s, m.setting) for m in measured))
    return max(contenders, key=lambda s: preds[s].tps or 0.0)


def guided_search(space: Sequence[Setting], measure: Callable[[Setting], Measurement],
                  *, max_restarts: int | None = None) -> GuidedResult:
    """Run the guided strategy over ``space`` with ``measure`` (one restart and measurement per call).

    Args:
        space: Every setting the user allows.
        measure: Restarts on a setting and measures it.
        max_restarts: Stop after this many measurements (None = when the model is done).

    Returns:
        The best measured setting and the path to it.
    """
    if not space:
        raise ValueError("the search space is empty")
    limit = max_restarts if max_restarts is not None else len(space)
    measured: list[Measurement] = []
    for s in initial_design(space):
        if len(measured) >= limit:
            break
        measured.append(measure(s))
    while len(measured) < limit:
        nxt = next_setting(space, measured)
        if nxt is None:
            break
        measured.append(measure(nxt))
    done = {m.setting for m in measured}
    model = Surrogate(measured)
    preds = {s: model.predict(s, measured[0].concurrency) for s in space if s not in done}
    return GuidedResult(max(measured, key=lambda m: m.tps), measured, len(space), preds)
