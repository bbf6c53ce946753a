"""A sweep's schedule deployed and measured against the best fixed setting at each load.

``specmon sweep ... --concurrency 1,4,16 --measure-schedule``: after the sweep, the schedule it
derived (:mod:`specmon.model.schedule`) is started as the engine's own configuration, shown
first, and measured at every concurrency the way the fixed settings were (fresh launches,
the same load, the same objective). At each load the verdict says how the deployed schedule
does against the best fixed setting there, with a 95% interval over launches (the launch
spread pooled with the fixed settings': a launch CV belongs to the host and engine). A
schedule that gives a load the same K as its best fixed setting should come out level; a
gap there is what switching costs, or noise, and the interval says which.

The engine's module writes the schedule into a profile's argv (``schedule_argv``: vLLM's
``num_speculative_tokens_per_batch_size`` inside ``--speculative-config``) or says why not
(SGLang reads its adaptive tiers from a file on the host: not built here).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from specmon.control.launch import LaunchProfile
from specmon.engines import ADAPTERS, adapter
from specmon.engines.argv import ArgvError
from specmon.experiment.stats.design import summaries
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_state import CellState
from specmon.model.launches import Estimate, Launch
from specmon.model.objective import Objective
from specmon.model.schedule import Schedule
from specmon.model.stats import Summary

__all__ = ["ScheduleCheck", "adaptive_profile", "compare_deployed", "compare_schedule", "deployed_plan",
           "measure_deployed", "measure_schedule", "schedule_profile"]

def schedule_profile(profile: LaunchProfile, schedule: Schedule) -> tuple[LaunchProfile | None, str]:
    """The launch profile that starts the engine on ``schedule`` (None and why when it cannot).

    The engine's module writes it into the profile's argv (vLLM's ``--speculative-config`` takes
    the table), every other flag as it is.
    """
    if schedule.speculation_off:
        return None, "speculation does not pay at any measured load: there is no schedule to deploy"
    ad = adapter(profile.engine)
    if ad.schedule_flag is None:
        takers = " or ".join(f"{a.label} profiles (its {a.schedule_flag} takes the table)"
                             for a in ADAPTERS if a.schedule_flag) or "no engine's profiles"
        return None, (f"a schedule is deployed on {takers}; this profile's engine is "
                      f"{profile.engine}" + (f": {ad.no_schedule_reason}" if ad.no_schedule_reason else ""))
    if profile.mode != "managed" or not profile.argv:
        return None, "a schedule is deployed through a managed profile's argv (custom commands are your own)"
    try:
        argv = ad.schedule_argv(profile.argv, schedule.ranges)
    except ArgvError as exc:
        return None, str(exc)
    # Validated again as a whole: the schedule's JSON goes through the same checks as the user's argv.
    return LaunchProfile.model_validate({**profile.model_dump(), "argv": argv}), ""


def adaptive_profile(profile: LaunchProfile, config_path: str | None = None) -> tuple[LaunchProfile | None, str]:
    """The launch profile that runs the engine's own adaptive controller (None and why when it cannot).

    The engine's module adds it to the argv (SGLang's ``--speculative-adaptive``: its tiers switch by
    batch size and acceptance as it runs; ``config_path`` a tier file on the host, else the engine's
    default tiers). vLLM's dynamic mode is a table the user gives: ``--measure-schedule`` measures the
    one a sweep derives.
    """
    ad = adapter(profile.engine)
    if ad.adaptive_flag is None:
        owners = " or ".join(f"{a.label}'s ({a.adaptive_flag})" for a in ADAPTERS if a.adaptive_flag) or "none"
        return None, (f"the engine's own adaptive controller is {owners}; this profile's engine is "
                      f"{profile.engine} (--measure-schedule measures the schedule a sweep derives)")
    if profile.mode != "managed" or not profile.argv:
        return None, "the adaptive configuration is added to a managed profile's argv (custom commands are your own)"
    try:
        argv = ad.adaptive_argv(profile.argv, config_path)
    except ArgvError as exc:
        return None, str(exc)
    return LaunchProfile.model_validate({**profile.model_dump(), "argv": argv}), ""


# --------------------------------------------------------------------------- the comparison


@dataclass(frozen=True, slots=True)
class ScheduleCheck:
    """A deployed configuration (the schedule, the engine's adaptive controller) against the best fixed
    setting at one load (values in the objective's unit)."""

    concurrency: int
    #: The K the schedule runs at this load (None: the engine chooses, as an adaptive controller does).
    schedule_steps: int | None
    best_label: str
    best_steps: int
    schedule_value: float | None
    best_value: float | None
    #: The deployed configuration against the best fixed setting, percent of the latter's figure, with its
    #: 95% interval (for the adaptive controller, minus this is its regret).
    change_pct: float | None
    ci95: tuple[float, float] | None
    launches: int
    covers: str
    sentence: str
    what: str = "schedule"

    def to_json(self) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else round(x, 3)

        return {"concurrency": self.concurrency, "what": self.what, "schedule_steps": self.schedule_steps,
                "best": self.best_label, "best_steps": self.best_steps, "schedule_value": r(self.schedule_value),
                "best_value": r(self.best_value), "change_pct": r(self.change_pct),
                "change_ci95": None if self.ci95 is None else [r(self.ci95[0]), r(self.ci95[1])],
                "schedule_launches": self.launches, "interval_covers": self.covers, "sentence": self.sentence}


def _launches(cell: CellState, obj: Objective) -> list[Launch]:
    return cell.objective_launches(obj)


def compare_schedule(obj: Objective, fixed: Sequence[CellState], deployed: Sequence[CellState], schedule: Schedule,
                     launch_cv: float) -> list[ScheduleCheck]:
    """At each load of ``schedule``: the deployed schedule's launches against the best fixed setting's."""
    return compare_deployed(obj, fixed, deployed, [(e.concurrency, e.steps) for e in schedule.entries], launch_cv)


def compare_deployed(obj: Objective, fixed: Sequence[CellState], deployed: Sequence[CellState],
                     loads: Sequence[tuple[int, int | None]], launch_cv: float,
                     what: str = "schedule") -> list[ScheduleCheck]:
    """At each load: the deployed configuration's launches against the best fixed setting's.

    ``fixed``: the sweep's settings (one workload); ``deployed``: the configuration's measured cells (one
    per load); ``loads``: each concurrency with the K the configuration runs there (None: its own choice).
    The launch spread is pooled over every setting at that load and the deployed one.
    """
    out = []
    better = "lower" if obj.lower_is_better else "higher"
    name = "the schedule" if what == "schedule" else "the adaptive controller"
    for c, k in loads:
        here = [x for x in fixed if x.concurrency == c and x.status != "failed"]
        mine = next((x for x in deployed if x.concurrency == c), None)
        groups: dict[Hashable, Sequence[Launch]] = {x.key: _launches(x, obj) for x in here}
        bases: dict[Hashable, Summary | None] = {x.key: x.summary() for x in here} if obj.is_tps else {}
        if mine is not None:
            groups["deployed"] = _launches(mine, obj)
            if obj.is_tps:
                bases["deployed"] = mine.summary()
        _, sums = summaries(groups, launch_cv, bases or None)
        fixed_sums = {key: s for key, s in sums.items() if key != "deployed"}
        sched = sums.get("deployed")
        if not fixed_sums:
            continue
        best_key = max(fixed_sums, key=lambda key: fixed_sums[key].mean)
        best_cell = next(x for x in here if x.key == best_key)
        best = fixed_sums[best_key]
        label = best_cell.label or best_cell.setting_label
        who = f"{name} (K={k})" if k is not None else name
        if sched is None:
            out.append(ScheduleCheck(c, k, label, best_cell.steps, None, obj.shown(best.mean), None, None,
                                     0, "no launch", f"concurrency {c}: {who} has no measured launch here", what))
            continue
        ci = None
        pct_internal = (sched.mean / best.mean - 1.0) * 100.0
        if isinstance(sched.model, Estimate) and isinstance(best.model, Estimate):
            _, lo, hi = sched.model.ratio_pct(best.model, 0.95)
            if lo is not None and hi is not None:
                a, b = obj.change_pct(lo), obj.change_pct(hi)
                ci = (min(a, b), max(a, b))
        change = obj.change_pct(pct_internal)
        covers = sched.model.covers() if isinstance(sched.model, Estimate) else f"{sched.batches} launches"
        figure = obj.name if not obj.is_tps else "throughput"
        iv = f" (95% CI {ci[0]:+.1f}…{ci[1]:+.1f}%)" if ci else ""
        if ci is not None and ci[0] <= 0 <= ci[1]:
            word = "level with"
        elif (change > 0) == (better == "higher"):
            word = "better than"
        else:
            word = "worse than"
        sentence = (f"concurrency {c}: {who} is {word} the best fixed setting, {label}: "
                    f"{figure} {change:+.1f}%{iv}; {covers}")
        out.append(ScheduleCheck(c, k, label, best_cell.steps, obj.shown(sched.mean), obj.shown(best.mean),
                                 change, ci, len(sched.model.launches) if isinstance(sched.model, Estimate)
                                 else sched.batches, covers, sentence, what))
    return out


def deployed_plan(plan: SweepPlan, steps: int, loads: Sequence[int], launches: int) -> SweepPlan:
    """The plan that measures a deployed configuration: started with ``steps``, at every load, in
    ``launches`` fresh launches per load, on the sweep's own objective, rule and limits."""
    return SweepPlan((steps,), tuple(loads), order="launches", seed=plan.seed, rule=plan.rule,
                     max_minutes=plan.max_minutes, settle=plan.settle, stall_s=plan.stall_s, attach_s=plan.attach_s,
                     poll_s=plan.poll_s, launch_cv=plan.launch_cv, resolve_pct=plan.resolve_pct,
                     restart_s=plan.restart_s, objective=plan.objective, rounds=launches)


async def measure_schedule(plan: SweepPlan, result: SweepResult, schedule: Schedule, *, launches: int,
                           **sweep_kwargs: Any) -> tuple[SweepResult, list[ScheduleCheck]]:
    """Measure the deployed schedule (``sweep_kwargs``: the :class:`~specmon.experiment.sweep_run.Sweep`'s
    session, restart on the schedule's profile, load, ...) and compare it with ``result``'s settings."""
    loads = [(e.concurrency, e.steps) for e in schedule.entries]
    return await measure_deployed(plan, result, schedule.max_steps, loads, launches=launches, what="schedule",
                                  workload=schedule.workload, **sweep_kwargs)


async def measure_deployed(plan: SweepPlan, result: SweepResult, steps: int, loads: Sequence[tuple[int, int | None]],
                           *, launches: int, what: str, workload: str | None = None,
                           **sweep_kwargs: Any) -> tuple[SweepResult, list[ScheduleCheck]]:
    """Measure a deployed configuration started with ``steps`` at ``loads`` and compare it with ``result``'s."""
    from dataclasses import replace as _replace

    from specmon.experiment.sweep_plan import SweepEvent
    from specmon.experiment.sweep_run import Sweep

    inner = sweep_kwargs.pop("on_event", None)
    if inner is not None:
        def on_event(ev: SweepEvent) -> None:
            # Its runs are named by the step count the engine announces (an adaptive server announces its
            # first tier): every line says what is measured; its own verdict (one setting) is the comparison's.
            if ev.kind != "verdict":
                inner(_replace(ev, text=f"[{what}] {ev.text}"))

        sweep_kwargs["on_event"] = on_event
    sweep = Sweep(deployed_plan(plan, steps, [c for c, _ in loads], launches), state_path=None, **sweep_kwargs)
    measured = await sweep.run()
    fixed = [c for c in result.cells if c.workload == workload]
    return measured, compare_deployed(plan.objective, fixed, measured.cells, loads, plan.launch_cv, what)
