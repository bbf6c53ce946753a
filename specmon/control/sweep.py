"""Automatic sweeps over speculative step counts: the names of the sweep modules, in one place.

A sweep is split by what each part holds:

* :mod:`specmon.control.sweep_plan`: what to sweep and how (:class:`SweepPlan`, its
  validation, :class:`SweepError`) and the parts a sweep is given (``Restarter``,
  ``LoadControl``, ``RestartOutcome``, ``SweepEvent``);
* :mod:`specmon.control.sweep_state`: the JSON state file's contents (``CellState``,
  ``Segment``), resume, and how a setting maps to a run's configuration;
* :mod:`specmon.control.sweep_run`: the runner, :class:`Sweep` (the loop, looks,
  restarts, load, the server check);
* :mod:`specmon.control.sweep_result`: what a sweep found (:class:`SweepResult`,
  verdicts from the stored samples, the sources' cross-check);
* :mod:`specmon.control.plan_restarter`: the restarts in the real world
  (``PlanRestarter``, ``controller_restarter``, ``LogFollower``);
* :mod:`specmon.control.rounds`: the launch design's rounds.

Every name is re-exported here, so ``from specmon.control.sweep import ...`` keeps
working. Patch a tunable (``SERVER_CHECK_S``) in the module that reads it
(:mod:`specmon.control.sweep_run`): patching it here has no effect.
"""

from __future__ import annotations

from specmon.control.plan_restarter import (
    RECENT_LINES,
    TAIL_SHOWN,
    LogFollower,
    PlanRestarter,
    controller_restarter,
    log_tail,
    stderr_show,
)
from specmon.control.sweep_plan import (
    ORDERS,
    STRATEGIES,
    LoadControl,
    Restarter,
    RestartOutcome,
    SweepError,
    SweepEvent,
    SweepPlan,
)
from specmon.control.sweep_result import (
    SweepResult,
    analyses_from_cells,
    pooled_counters,
    source_means,
    verdict_sources,
)
from specmon.control.sweep_run import SERVER_CHECK_S, Sweep
from specmon.control.sweep_state import (
    ACTIVE,
    DONE,
    FAILED,
    PENDING,
    SETTLED,
    SKIPPED,
    STATE_VERSION,
    CellState,
    Segment,
    cell_key,
    finished_state,
    group_summaries,
    guided_setting,
    launch_samples,
)

__all__ = [
    "ACTIVE",
    "DONE",
    "FAILED",
    "ORDERS",
    "PENDING",
    "RECENT_LINES",
    "SERVER_CHECK_S",
    "SETTLED",
    "SKIPPED",
    "STATE_VERSION",
    "STRATEGIES",
    "TAIL_SHOWN",
    "CellState",
    "LoadControl",
    "LogFollower",
    "PlanRestarter",
    "RestartOutcome",
    "Restarter",
    "Segment",
    "Sweep",
    "SweepError",
    "SweepEvent",
    "SweepPlan",
    "SweepResult",
    "analyses_from_cells",
    "cell_key",
    "controller_restarter",
    "finished_state",
    "group_summaries",
    "guided_setting",
    "launch_samples",
    "log_tail",
    "pooled_counters",
    "source_means",
    "stderr_show",
    "verdict_sources",
]
