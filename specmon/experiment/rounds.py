"""The sweep's launch design: rounds of launches, each setting relaunched, until resolved.

``specmon sweep --order launches`` (the default with ``--resolve-pct``) measures
every setting in *rounds*. In each round every setting still undecided is
started afresh (a new launch: the server is restarted even when it already
runs that setting) and measured for as long as more time in this launch
shrinks the setting's interval faster than a new launch would
(:func:`specmon.experiment.stats.design.extend`); rounds alternate direction, so slow
drift favours no setting. After each round the settings are judged with the
stopping rule on the two-level intervals (:mod:`specmon.model.launches`), the
rule's looks being the planned rounds; the leader and the baseline are
launched at least twice. Before measuring, and after every round, the sweep
says its plan in one line (:func:`specmon.experiment.stats.design.plan`).

The decisions are the pure functions of :mod:`specmon.experiment.stats.design`; this
module only drives the :class:`~specmon.experiment.sweep_run.Sweep` that restarts
and measures.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import replace
from typing import Any, Protocol

from specmon.control.eta import EtaStore
from specmon.experiment.stats import bai
from specmon.experiment.stats.design import (
    DEFAULT_WITHIN_PER_SAMPLE,
    MAX_LAUNCHES,
    Budget,
    NeedsMore,
    Noise,
    budget,
    expected_restarts,
    expected_text,
    extend,
    judge_round,
    launch_samples,
    launch_seconds,
    plan,
    reschedule,
    summaries,
    to_launch,
    what_would_decide,
    within_per_sample,
)
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_state import DONE, FAILED, SETTLED, CellState, Segment
from specmon.model.launches import Estimate, Launch
from specmon.model.objective import ObjectiveVerdict
from specmon.model.stats import Summary
from specmon.model.stopping import CONTINUE, EQUIVALENT, SLOWER, Decision, StoppingRule, SweepVerdict


class DrivenSweep(Protocol):
    """What the rounds read and call of the sweep they drive (:class:`~specmon.experiment.sweep_run.Sweep`).

    Spelled here, not imported: ``sweep_run`` builds the rounds, so importing it back (even for
    type checkers only) made the two modules a circle.
    """

    plan: SweepPlan
    cells: list[CellState]
    restart_times: list[float]
    load: Any
    _stop_requested: bool
    _server_steps: int | None

    def _emit(self, kind: str, text: str, cell: CellState | None = None) -> None: ...

    async def _visit(self, cell: CellState, *, until_done: bool,
                     stop_when: Callable[[CellState, Segment], bool] | None = None) -> None: ...

    def save(self) -> None: ...


#: Samples a second assumed before any was measured (SGLang logs a decode line about every second).
DEFAULT_RATE = 1.0
#: The difference the plan resolves when the user gave none, percent.
DEFAULT_RESOLVE_PCT = 5.0


def rounds_for(rule: StoppingRule, resolve_pct: float | None, launch_cv: float, restart_s: float) -> int:
    """The planned rounds, fixed before measuring.

    Enough for the plan made with the assumed launch CV and a typical
    within-launch noise, at least 2, at most :data:`~specmon.experiment.stats.design.MAX_LAUNCHES`.
    """
    noise = Noise(launch_cv**2, DEFAULT_WITHIN_PER_SAMPLE, DEFAULT_RATE, restart_s)
    p = plan(resolve_pct or DEFAULT_RESOLVE_PCT, noise, 2, rule.test_level, rule.min_samples, rule.max_samples)
    # With no launch variance said (launch CV 0) one launch per setting is the design.
    return max(1 if launch_cv == 0 else 2, min(MAX_LAUNCHES, p.launches))


def effective_rule(plan_rule: StoppingRule, resolve_pct: float | None, launch_cv: float, restart_s: float,
                   rounds: int | None = None, design: str = "today") -> tuple[StoppingRule, tuple[int, ...]]:
    """The rule the launch design judges with, and the rounds it judges after.

    The looks are rounds, geometric from 2 to the planned rounds (as the
    sample rule's looks are sample counts), so the Bonferroni split covers
    every judgement; the sample budget is per launch, not per setting. The
    best-arm design (``design="bai"``, :mod:`specmon.experiment.stats.bai`) has its own
    looks, fixed in advance, and tests at ``α/K``.
    """
    if rounds is not None:  # fixed in advance: one look, after the last
        return replace(plan_rule, looks=1, max_samples=max(plan_rule.max_samples, 1 << 40)), (rounds,)
    if design == bai.NAME:
        looks_bai = bai.look_rounds()
        return bai.rule_for(plan_rule, looks_bai), looks_bai
    last = rounds_for(plan_rule, resolve_pct, launch_cv, restart_s)
    looks = look_rounds(last, plan_rule.looks)
    return replace(plan_rule, looks=len(looks), max_samples=max(plan_rule.max_samples, 1 << 40)), looks


def look_rounds(last: int, looks: int) -> tuple[int, ...]:
    """Rounds ``2 ≤ r_1 < … < r_K = last`` (geometric) after which the settings are judged (``(1,)`` for one)."""
    if last <= 2 or looks <= 1:
        return (last,)
    ratio = (last / 2) ** (1.0 / (looks - 1))
    out: list[int] = []
    for j in range(looks):
        r = last if j == looks - 1 else round(2 * ratio**j)
        if not out or r > out[-1]:
            out.append(r)
    return tuple(out)


def design_tau2(between_tau2: float, between_df: float, estimated: bool, launch_cv: float,
                prior_df: float = 4.0) -> float:
    """The launch variance the *design* plans with: the estimate, steadied by the assumed CV.

    With one or two replicated launches the estimate swings from 0 to several
    times the truth; a design that believed a 0 would stop relaunching. The
    assumed CV counts as ``prior_df`` degrees of freedom (the intervals never
    use this: they use the estimate alone).
    """
    if not estimated:
        return launch_cv**2
    return (prior_df * launch_cv**2 + between_df * between_tau2) / (prior_df + between_df)


class LaunchRounds:
    """Runs a sweep's settings in rounds of launches (see the module docstring)."""

    def __init__(self, sweep: DrivenSweep) -> None:
        self.sweep = sweep
        p = sweep.plan
        #: ``today`` (every undecided setting each round) or ``bai`` (:mod:`specmon.experiment.stats.bai`: the leader
        #: and its most ambiguous challenger), from the plan (a test may still set the sweep's ``design``).
        self.design = str(getattr(sweep, "design", None) or p.design)
        self.judge_rule, self.looks = effective_rule(p.rule, p.resolve_pct, p.launch_cv, p.restart_s, p.rounds,
                                                     self.design)
        self.fixed = p.rounds is not None
        self.bai = self.design == bai.NAME and not self.fixed
        self.rounds = self.looks[-1]
        self.rule = p.rule
        self.resolve_pct = p.resolve_pct or DEFAULT_RESOLVE_PCT
        #: The names of the group being judged (for the decisions' sentences).
        self.sweep_names: dict[Hashable, str] = {}

    # -- what is known -----------------------------------------------------------------------

    def noise(self, cells: Sequence[CellState]) -> Noise:
        """The current estimates: launch CV (pooled, or assumed), within-launch noise, rate, restart time."""
        sw = self.sweep
        groups: dict[Hashable, Sequence[Launch]] = {c.key: c.launches() for c in cells}
        between, _ = summaries(groups, sw.plan.launch_cv)
        tau2 = design_tau2(between.tau2, between.df, between.estimated, sw.plan.launch_cv)
        launches = [x for ls in groups.values() for x in ls]
        w = within_per_sample(launches) or DEFAULT_WITHIN_PER_SAMPLE
        n = sum(c.n for c in sw.cells)
        secs = sum(c.elapsed_s for c in sw.cells)
        rate = n / secs if n and secs > 0 else sw.plan.sample_rate
        restart = (sum(sw.restart_times) / len(sw.restart_times)) if sw.restart_times else sw.plan.restart_s
        return Noise(tau2, w, rate, restart)

    def needed(self) -> int:
        """Launches per setting the plan asks for now (from the noise measured so far)."""
        rule = self.rule
        p = plan(self.resolve_pct, self.noise(self.sweep.cells), 2, self.judge_rule.test_level, rule.min_samples,
                 rule.max_samples)
        return p.launches

    def plan_line(self, cells: Sequence[CellState]) -> str:
        """The plan in one line, with its budget (updated as the sweep learns)."""
        if self.fixed:
            return f"plan: {self.rounds} launch(es) of each setting at each load, fixed in advance"
        rule = self.rule
        settings = len({c.key for c in self.sweep.cells})
        noise = self.noise(cells)
        p = plan(self.resolve_pct, noise, settings, self.judge_rule.test_level, rule.min_samples, rule.max_samples)
        stated = self.budget()
        # What is likely, beside the most: restarts at the plan's launches per setting, at this sweep's costs.
        n = min(expected_restarts(p.launches, len(self.sweep.cells), stated.pairs), stated.restarts)
        per = stated.seconds / stated.restarts if stated.restarts else 0.0
        head = p.heading("of each of the two closest settings" if self.bai else "per setting")
        return f"plan: {head}, {expected_text(n, n * per)}; {stated.text}"

    def budget(self) -> Budget:
        """The most this design spends: every setting at every load in every round it may run.

        The rounds may stretch to :data:`~specmon.experiment.stats.design.MAX_LAUNCHES` when the variance
        estimates ask for more launches (:func:`~specmon.experiment.stats.design.reschedule`), so that is
        the bound stated; the time is at the measured restart cost, in the run's clock.
        """
        sw = self.sweep
        p = sw.plan
        rounds = self.rounds if self.fixed or self.bai else max(self.rounds, MAX_LAUNCHES)
        cap = p.max_minutes * 60.0 if p.max_minutes is not None else None
        groups = max(1, len(p.groups))
        return budget(self.noise(sw.cells), len(sw.cells), rounds, self.rule.min_samples, self.rule.max_samples,
                      cap_s=cap, clock=p.clock,
                      pairs=(bai.WARMUP, 2 * groups) if self.bai else None)

    def launch_s(self) -> float:
        """Measuring time of one launch so far (the design's launch length before any was measured)."""
        sw = self.sweep
        launches = sum(len(c.launches()) for c in sw.cells)
        secs = sum(c.elapsed_s for c in sw.cells)
        if launches and secs > 0:
            return secs / launches
        cap = sw.plan.max_minutes * 60.0 if sw.plan.max_minutes is not None else None
        return launch_seconds(self.noise(sw.cells), self.rule.min_samples, self.rule.max_samples, cap)

    def restart_s(self) -> float:
        """A restart's cost: the mean of those measured, else the plan's assumed start-up time."""
        sw = self.sweep
        return sum(sw.restart_times) / len(sw.restart_times) if sw.restart_times else sw.plan.restart_s

    def _stop_when(self, cells: Sequence[CellState]) -> tuple[Noise, int]:
        noise = self.noise(cells)
        m_new = launch_samples(noise, self.rule.min_samples, self.rule.max_samples)
        return noise, m_new

    def _requests_enough(self, cell: CellState) -> bool:
        """Whether this launch's load has completed the requests its objective needs (always, for tok/s)."""
        obj = self.sweep.plan.objective
        if obj.is_tps:
            return True
        load = self.sweep.load
        # Timed requests: one that came in a single burst has no latency to count (see objective.py).
        done = getattr(load, "timed", None)
        if done is None:
            done = getattr(load, "completed", None)
        if done is None:
            return True  # a load that does not count: the launch's length is the samples'
        # The first wave (one request per client slot) is left out of the objective.
        return int(done) >= obj.min_requests() + cell.concurrency

    def _say_short_launch(self, cell: CellState) -> None:
        """A launch that ended (its time budget) before its load completed the requests its objective
        needs is not counted: said, with what to change, rather than left to a silent "no value yet"."""
        obj = self.sweep.plan.objective
        if obj.is_tps or not cell.segments:
            return
        got, need = len(cell.segments[-1].requests), obj.min_requests()
        if got < need:
            self.sweep._emit("look", f"{cell.label or cell.setting_label}: this launch completed {got} requests "
                                     f"after its first wave, fewer than the {need} its {obj.name} needs: not "
                                     "counted (give it more time with --max-minutes, or a lower percentile)", cell)

    def _decision_text(self, d: Decision) -> str:
        """The decision in the objective's words (the rule's own sentences speak tok/s)."""
        obj = self.sweep.plan.objective
        if obj.is_tps or d.reason not in (SLOWER, EQUIVALENT):
            return d.text
        who = self.sweep_names.get(d.versus, str(d.versus)) if d.versus is not None else "the leader"
        if d.reason == SLOWER:
            return f"worse {obj.name} than {who} (adjusted interval of the difference excludes 0)"
        return f"{obj.name} within ±{self.sweep.plan.rule.margin_pct:g}% of {who} (adjusted interval)"

    def _stopped(self) -> bool:
        """Whether the user asked the sweep to stop (read afresh: awaiting a visit may change it)."""
        return self.sweep._stop_requested

    # -- running -----------------------------------------------------------------------------

    async def run(self) -> None:
        """Measure in rounds until every setting is decided or the planned rounds are spent."""
        sw = self.sweep
        sw._emit("plan", self.plan_line(sw.cells))
        round_no = max((len(c.launches()) for c in sw.cells), default=0)
        while round_no < self.looks[-1]:
            round_no += 1
            if sw._stop_requested:
                return
            for g in sw.plan.groups:
                cells = [c for c in sw.cells if c.group == g]
                active = [c.key for c in cells if c.status not in SETTLED]
                sums = self._sums(cells)
                leader = max(sums, key=lambda k: sums[k].mean) if sums else None
                base = next((c.key for c in cells if c.steps == 0 and c.status != FAILED), None)
                counts: dict[Hashable, int] = {c.key: len(c.launches()) for c in cells}
                pick = (bai.to_launch(active, counts, sums, base, round_no, self.judge_rule.test_level)
                        if self.bai else to_launch(active, counts, leader, base, round_no))
                for key in pick:
                    cell = next(c for c in cells if c.key == key)
                    if sw._stop_requested or cell.status == FAILED:
                        continue
                    kept = (cell.status, cell.reason, cell.text) if cell.status == DONE else None
                    noise, m_new = self._stop_when(cells)

                    def enough(c: CellState, seg: Segment, noise: Noise = noise, m_new: int = m_new) -> bool:
                        n = len(seg.throughput)
                        if n < self.rule.min_samples or not self._requests_enough(c):
                            return False
                        if n >= self.rule.max_samples:
                            return True
                        ns = [x.n for x in c.launches()]
                        return not extend(noise, ns or [n], m_new)

                    sw._server_steps = None  # a new launch, even of the setting running now
                    await sw._visit(cell, until_done=False, stop_when=enough)
                    self._say_short_launch(cell)
                    if kept is not None and cell.status not in (FAILED,):
                        cell.status, cell.reason, cell.text = kept
            if self._stopped():
                return
            if round_no in self.looks:
                self._judge(round_no)
                if round_no < self.looks[-1] and not self.fixed and not self.bai:
                    self.looks = reschedule(self.looks, round_no, self.needed(), MAX_LAUNCHES)
                    self.rounds = self.looks[-1]
            sw._emit("plan", self.plan_line(sw.cells))
            sw.save()
            if all(c.status in SETTLED for c in sw.cells):
                return

    def _sums(self, cells: Sequence[CellState]) -> dict[Hashable, Summary]:
        obj = self.sweep.plan.objective
        if not obj.is_tps:
            # A latency or goodput: each launch's value from its requests (no per-sample base).
            _, osums = summaries({c.key: c.objective_launches(obj) for c in cells}, self.sweep.plan.launch_cv)
            return osums
        groups: dict[Hashable, Sequence[Launch]] = {c.key: c.launches() for c in cells}
        bases: dict[Hashable, Summary | None] = {c.key: c.summary() for c in cells}
        _, sums = summaries(groups, self.sweep.plan.launch_cv, bases)
        return sums

    def _value_text(self, s: Summary | None) -> str:
        """A setting's figure for the look line: ``812.4 tok/s ± 20.1`` or ``ITL p50 21.3 ms (19.8–23.0)``."""
        obj = self.sweep.plan.objective
        if s is None:
            return f"no {obj.name} yet" if not obj.is_tps else "0.0 tok/s"
        if obj.is_tps:
            half = s.ci_half_width
            return f"{s.mean:.1f} tok/s" + (f" ± {half:.1f}" if half else "")
        ci = obj.shown_interval(s.ci95_low, s.ci95_high)
        return f"{obj.name} {obj.shown(s.mean):.4g} {obj.unit}" + (f" ({ci[0]:.4g}–{ci[1]:.4g})" if ci else "")

    def _judge(self, round_no: int) -> None:
        sw = self.sweep
        last = round_no >= self.rounds
        for g in sw.plan.groups:
            cells = [c for c in sw.cells if c.group == g and c.status != FAILED]
            sums = self._sums(cells)
            active = [c.key for c in cells if c.status not in SETTLED]
            names: dict[Hashable, str] = {c.key: c.label or c.key for c in cells}
            self.sweep_names = names
            rule = self.judge_rule
            if not sw.plan.objective.is_tps:
                # Every counted launch already has the requests its objective needs.
                rule = replace(rule, min_samples=3)
            decisions = judge_round(rule, sums, active, last=last, names=names)
            for c in cells:
                d = decisions.get(c.key)
                if d is None:
                    continue
                s = sums.get(c.key)
                est = s.model if s is not None else None
                covers = est.covers() if isinstance(est, Estimate) else f"{len(c.launches())} launches"
                self.sweep._emit("look", f"{c.label}: round {round_no}, {covers}, {self._value_text(s)}"
                                 + (f" — {self._decision_text(d)}" if d.text else " — continue"), c)
                c.looks_done = self.looks.index(round_no) + 1
                if d.stop and d.reason != CONTINUE:
                    text = self._decision_text(d)
                    c.status, c.reason, c.text = DONE, d.reason, text
                    sw._emit("done", f"{c.label} done after {len(c.launches())} launches, {c.n} samples: "
                                     f"{text or d.reason}", c)


def needs_more_of(plan: SweepPlan, cells: Sequence[CellState], restart_times: Sequence[float],
                  verdicts: Sequence[SweepVerdict],
                  objective: Sequence[ObjectiveVerdict] = ()) -> list[NeedsMore]:
    """What would decide each undecided deciding verdict (:func:`specmon.experiment.stats.design.what_would_decide`):
    the throughput's, or the objective's when it is not tok/s; at this sweep's measured restart cost
    and launch length, in the run's clock."""
    deciding: Sequence[SweepVerdict | ObjectiveVerdict] = verdicts if plan.objective.is_tps else objective
    restart = sum(restart_times) / len(restart_times) if restart_times else plan.restart_s
    launches = sum(len(c.launches()) for c in cells)
    secs = sum(c.elapsed_s for c in cells)
    launch = secs / launches if launches and secs > 0 else 60.0 * (plan.max_minutes or 1.0)
    out = []
    for v in deciding:
        more = what_would_decide(v, restart_s=restart, launch_s=launch, clock=plan.clock)
        if more is not None:
            more = replace(more, concurrency=v.concurrency, workload=v.workload)
            out.append(replace(more, at=_group_text(v)) if len(deciding) > 1 else more)
    return out


def _group_text(v: SweepVerdict | ObjectiveVerdict) -> str:
    return (f"at concurrency {v.concurrency}" if v.concurrency else "") + (
        f" on the {v.workload} prompts" if v.workload else "")


def plan_budget(plan: SweepPlan) -> Budget | None:
    """The budget a launch-design sweep states before its first restart (None for another order):
    from the plan alone (its assumed launch CV, sample rate and restart time)."""
    if plan.order != "launches":
        return None
    judge_rule, looks = effective_rule(plan.rule, plan.resolve_pct, plan.launch_cv, plan.restart_s, plan.rounds,
                                       plan.design)
    # The best-arm design's own budget (its looks, two launches a round per load), as LaunchRounds.budget
    # states it once running: the count a user confirms must be the one the design can spend.
    best_arm = plan.design == bai.NAME and plan.rounds is None
    rounds = looks[-1] if plan.rounds is not None or best_arm else max(looks[-1], MAX_LAUNCHES)
    noise = Noise(plan.launch_cv**2, DEFAULT_WITHIN_PER_SAMPLE, plan.sample_rate, plan.restart_s)
    cells = len(plan.settings) * len(plan.groups)
    cap = plan.max_minutes * 60.0 if plan.max_minutes is not None else None
    return budget(noise, cells, rounds, plan.rule.min_samples, plan.rule.max_samples, cap_s=cap, clock=plan.clock,
                  pairs=(bai.WARMUP, 2 * len(plan.groups)) if best_arm else None)


def known_restart_s(store: EtaStore | None, host: str) -> float | None:
    """A restart's cost on ``host`` from the restart times remembered there (the median of each phase,
    summed), for the budget stated before this sweep's first restart; None when none is remembered."""
    medians = store.medians(host) if store is not None else {}
    return sum(medians.values()) if medians else None
