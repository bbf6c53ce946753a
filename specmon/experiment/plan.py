"""The experiment plan: the one definition of a sweep, typed (pydantic), and where its values came from.

A plan says what is varied (steps, grid), the loads, the objective, how careful the experiment is
(a preset, every knob still reachable), the design (order, strategy, rounds, seed), what is deployed
and measured after it (a schedule, the engine's adaptive mode), what is left running and the output.
It comes from layers, each overriding the one before (:func:`specmon.experiment.plan_sources.resolve`): the plan's defaults, the
care preset, a profile's ``[profiles.NAME.sweep]`` and ``[profiles.NAME.load]``, a plan file or a
recording (``--plan``), then the options typed on the command line. Its rules between fields are
validators here, each one sentence; what depends on the server (its launch profile, its step range,
its engine's schedule form) is checked against the profile when it is known
(:mod:`specmon.commands.sweeping`).

The runtime pieces are made from it: :meth:`ExperimentPlan.sweep_plan` (one server) and
:meth:`ExperimentPlan.fleet_plan` (replicas). Its saved form (:meth:`ExperimentPlan.saved`) goes
into every sweep's recording and report, and ``specmon sweep --plan RECORDING`` runs it again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    model_validator,
)

if TYPE_CHECKING:
    from specmon.control.dims import Grid
    from specmon.experiment.fleet_sweep import FleetPlan
    from specmon.experiment.sweep_plan import SweepPlan
    from specmon.model.objective import Objective

__all__ = ["GROUPS", "PRESETS", "RUN_ONLY", "ExperimentPlan", "PlanError", "flag"]


class PlanError(ValueError):
    """A plan that cannot run, or a plan source that cannot be read: one sentence."""


#: The groups of the plan, in the order ``--print-plan`` and ``sweep --help`` show them.
GROUPS = {
    "target": "which server",
    "vary": "what is varied",
    "load": "the load",
    "objective": "what the verdict decides on",
    "care": "how careful",
    "design": "the design",
    "after": "deployed and measured after the sweep",
    "finish": "what is left running",
    "output": "the output",
    "demo": "the demo only (--demo)",
}

#: How careful an experiment is. ``standard`` is what every option's default always was; the others
#: trade samples and the equivalence margin. The error level (alpha) of quick and standard is the same
#: 5%: a quicker answer is a less precise one, never a less honest one.
PRESETS: dict[str, dict[str, Any]] = {
    "quick": {"min_samples": 20, "max_samples": 400, "looks": 3, "alpha": 0.05, "margin_pct": 2.0,
              "precision_pct": 1.0},
    "standard": {"min_samples": 40, "max_samples": 1600, "looks": 5, "alpha": 0.05, "margin_pct": 1.0,
                 "precision_pct": 0.5},
    "thorough": {"min_samples": 80, "max_samples": 6400, "looks": 8, "alpha": 0.01, "margin_pct": 0.5,
                 "precision_pct": 0.25},
}
_CARE_KNOBS = ("min_samples", "max_samples", "looks", "alpha", "margin_pct", "precision_pct")

#: Fields only an invocation has: never saved with the plan (a rerun of a recording's plan writes its own
#: recording, never over the one it reads), never part of its identity.
RUN_ONLY = ("yes", "fresh", "config", "record")

#: The one-server options a parallel sweep over replicas refuses, with why.
NOT_FOR_FLEET = (
    ("grid", "--grid", "a parallel sweep compares step counts (--steps)"),
    ("workload", "--workload", "every replica gets the same workload: give --prompts"),
    ("state", "--state", "a parallel sweep is not resumed: its rounds run again from the start"),
    ("fresh", "--fresh", "a parallel sweep is not resumed: it always starts afresh"),
    ("resolve_pct", "--resolve-pct", "its rounds are set with --rounds"),
    ("strategy", "--strategy", "every step count given is measured"),
    ("order", "--order", "the rotated layout sets the order"),
    ("prometheus_port", "--prometheus-port", "it serves one server's figures"),
    ("measure_schedule", "--measure-schedule", "it runs one concurrency"),
    ("compare_adaptive", "--compare-adaptive", "not built for replicas: compare it on one server"),
    ("objective", "--objective", "its verdict is on tok/s from each replica's log (not built: latency "
                                 "objectives across replicas)"),
)
#: What each of those fields holds when it was not asked for (a parallel sweep accepts that).
_FLEET_NEUTRAL: dict[str, tuple[Any, ...]] = {"fresh": (False,), "strategy": ("grid",), "order": (None, "given"),
                                             "objective": (None, "tps")}


def _g(group: str, help: str, flag: str | None = None, shown: bool = False) -> dict[str, Any]:
    """A field's place: its group, its help, its option (``--name`` by default), whether ``--help`` lists it."""
    return {"group": group, "help": help, "flag": flag, "shown": shown}


class ExperimentPlan(BaseModel):
    """What a sweep measures and how; every field has a group, a help line and an option."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    # ---- target
    profile: str | None = Field(None, json_schema_extra=_g(
        "target", "a profile of the config file with a [launch] section", "PROFILE"))
    demo: bool = Field(False, json_schema_extra=_g(
        "target", "the built-in simulated SGLang server (no GPU, no SSH): steps 0,1,2,5,10, launches 2% apart",
        shown=True))
    # ---- vary
    steps: list[int] | None = Field(None, json_schema_extra=_g(
        "vary", "step counts to try, e.g. 0,1,2,3,5 (0 = no speculation)", shown=True))
    grid: list[str] | None = Field(None, json_schema_extra=_g(
        "vary", "more than the step count: steps=1,2,3 topk=1,4 draft_tokens=4,8 (each NAME a {NAME} "
                "placeholder of the profile; combinations the engine refuses are left out, and said)", shown=True))
    # ---- load
    concurrency: list[int] = Field([1], json_schema_extra=_g(
        "load", "requests in flight, e.g. 1 or 1,8 (default 1: what a single user feels)", shown=True))
    workload: list[str] | None = Field(None, json_schema_extra=_g(
        "load", "a verdict per named prompt set: bundled chat, code, long, or NAME=FILE.jsonl", shown=True))
    prompts: str | None = Field(None, json_schema_extra=_g(
        "load", 'a JSONL file of prompts ({"prompt": "..."} per line) instead of the bundled set'))
    endpoint: Literal["completions", "chat"] = Field("completions", json_schema_extra=_g(
        "load", "the OpenAI-compatible endpoint the load uses"))
    max_tokens: int | None = Field(None, ge=1, json_schema_extra=_g(
        "load", "tokens generated per load request (default 512; demo 2048)"))
    request_timeout: float = Field(300.0, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "load", "upper bound on one load request, seconds"))
    no_load: bool = Field(False, json_schema_extra=_g(
        "load", "drive no load: measure the server's own traffic"))
    # ---- objective
    objective: str | None = Field(None, json_schema_extra=_g(
        "objective", "tps (default), itl-p50, itl-p99, ttft-p99 or goodput:ttft=MS,itl=MS, judged per launch on "
                     "the requests specmon drives", shown=True))
    # ---- care
    care: Literal["quick", "standard", "thorough"] = Field("standard", json_schema_extra=_g(
        "care", "how careful: quick, standard or thorough (sets the knobs below; each can still be set)",
        shown=True))
    min_samples: int = Field(40, ge=1, json_schema_extra=_g("care", "counted samples before the first look"))
    max_samples: int = Field(1600, ge=1, json_schema_extra=_g("care", "sample budget per setting: the last look"))
    looks: int = Field(5, ge=1, json_schema_extra=_g("care", "planned looks per setting"))
    alpha: float = Field(0.05, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "care", "chance of calling two equal settings different, over all looks"))
    margin_pct: float = Field(1.0, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "care", "differences within ±P% are 'equivalent'"))
    precision_pct: float = Field(0.5, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "care", "stop a setting once its 95% interval is within ±P%"))
    launch_cv_pct: float | None = Field(None, ge=0, lt=100, json_schema_extra=_g(
        "care", "launch spread assumed until measured, percent (default 5; the demo's server: 2)", "--launch-cv"))
    resolve_pct: float | None = Field(None, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "care", "the difference worth resolving, percent: relaunch until intervals are about ±P%"))
    max_minutes: float | None = Field(None, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "care", "collection time per setting, minutes (default 10; demo 0.4)"))
    # ---- design
    order: Literal["given", "random", "interleave", "launches"] | None = Field(None, json_schema_extra=_g(
        "design", "launches (default: rounds, every setting at least twice, until decided or the stated budget); "
                  "given, random, interleave: each setting once", shown=True))
    design: Literal["rounds", "bai"] = Field("rounds", json_schema_extra=_g(
        "design", "the launch design's rounds: rounds (every undecided setting each round) or bai (the leader "
                  "and its most ambiguous challenger: fewer restarts on settings clearly behind)"))
    strategy: Literal["grid", "guided"] = Field("grid", json_schema_extra=_g(
        "design", "grid: every setting; guided: only those the cost model says could win"))
    rounds: int | None = Field(None, ge=1, json_schema_extra=_g(
        "design", "a parallel sweep over replicas: rounds at most (default twice the settings)"))
    seed: int | None = Field(None, json_schema_extra=_g("design", "seed of the random order (and the demo server)"))
    # ---- after
    measure_schedule: int | None = Field(None, ge=1, json_schema_extra=_g(
        "after", "over two or more concurrencies: deploy the derived schedule and measure it in N launches per load",
        shown=True))
    compare_adaptive: str | None = Field(None, json_schema_extra=_g(
        "after", "SGLang: measure the engine's adaptive mode (TIERS: its tier file on the host, '' the default)",
        shown=True))
    # ---- finish
    finish: Literal["winner", "last", "none"] | None = Field(None, json_schema_extra=_g(
        "finish", "left running: winner, last (the last measured) or none (stopped); default: ask, else last",
        shown=True))
    # ---- output
    format: Literal["table", "json", "markdown"] = Field("table", json_schema_extra=_g(
        "output", "what is printed at the end", shown=True))
    record: str | None = Field(None, json_schema_extra=_g(
        "output", "recording file (default: a new file in the user data directory)", shown=True))
    no_record: bool = Field(False, json_schema_extra=_g("output", "do not record the session"))
    state: str | None = Field(None, json_schema_extra=_g(
        "output", "progress file for resuming (default: per profile and plan, in the user data directory)"))
    prometheus_port: int | None = Field(None, json_schema_extra=_g(
        "output", "serve the live figures as Prometheus metrics on 127.0.0.1:PORT"))
    no_metrics: bool = Field(False, json_schema_extra=_g(
        "output", "read no /metrics counters: measure from the server log only"))
    # ---- demo
    replicas: int | None = Field(None, ge=1, json_schema_extra=_g(
        "demo", "a parallel sweep on N simulated replicas (2-16) on this machine"))
    drift_pct_per_hour: float = Field(0.0, allow_inf_nan=False, json_schema_extra=_g(
        "demo", "the simulated server's slow drift, percent per simulated hour"))
    time_scale: float = Field(100.0, gt=0, allow_inf_nan=False, json_schema_extra=_g(
        "demo", "simulated seconds per real second"))
    # ---- the invocation (never saved)
    yes: bool = Field(False, json_schema_extra=_g("run", "restart without asking first", "-y"))
    fresh: bool = Field(False, json_schema_extra=_g("run", "ignore saved progress and start over"))
    config: str | None = Field(None, json_schema_extra=_g("run", "config file"))

    #: The prompt sets of ``workload``, read by :meth:`with_workload_sets` (files are not read in a validator).
    _workload_sets: dict[str, tuple[str, ...]] | None = PrivateAttr(None)
    #: The target profile lists replicas (known when it was resolved against the profile).
    _fleet: bool = PrivateAttr(False)
    #: The words typed (``continue_command``), when run from the command line.
    _argv: tuple[str, ...] | None = PrivateAttr(None)

    # --------------------------------------------------------------- rules

    @model_validator(mode="before")
    @classmethod
    def _care_preset(cls, data: Any) -> Any:
        """The preset fills the knobs not set explicitly (in any layer)."""
        if isinstance(data, dict):
            preset = PRESETS.get(str(data.get("care", "standard")))
            if preset is not None:
                filled = {k: v for k, v in preset.items() if k in _CARE_KNOBS}
                if "min_samples" in data and "max_samples" not in data and isinstance(data["min_samples"], int):
                    # More samples before the first look than the preset's budget: the budget grows to it.
                    filled["max_samples"] = max(filled["max_samples"], data["min_samples"])
                data = {**filled, **data}
        return data

    @model_validator(mode="after")
    def _rules(self, info: ValidationInfo) -> ExperimentPlan:
        """Each rule between fields, one sentence each (the first broken one is said)."""
        if (info.context or {}).get("fields_only"):
            return self  # one field checked alone (a profile's table at load)
        why = self.problem(fleet=bool((info.context or {}).get("fleet")))
        if why:
            raise ValueError(why)
        return self

    def problem(self, *, fleet: bool = False) -> str | None:
        """Why this plan cannot run (None: it can). ``fleet``: the profile lists replicas."""
        for rule in (self._target_rule, self._vary_rule, self._load_rule, self._care_rule, self._output_rule,
                     self.demo_problem):
            why = rule()
            if why:
                return why
        parallel = self.demo and self.replicas is not None or fleet
        # A parallel sweep's refusals first: "does not apply to replicas" says more than a rule of the option.
        why = self._fleet_rule() if parallel else None
        why = why or self._after_rule()
        if why:
            return why
        if not parallel and self.rounds is not None:
            if self.demo:
                return "--rounds is for a parallel sweep over replicas (a profile's, or --demo --replicas N)"
            return "--rounds is for a parallel sweep over a profile's replicas; one server's sweep decides at its looks (--looks)"
        from specmon.experiment.sweep_plan import SweepError

        try:
            self.sweep_plan()
            if parallel:
                self.fleet_plan()
        except (SweepError, ValueError) as exc:  # the runtime plans' own checks, and the stopping rule's
            return str(exc)
        return None

    def _target_rule(self) -> str | None:
        if self.demo and self.profile:
            return "give a PROFILE or --demo, not both"
        if not self.demo and not self.profile:
            return "which server? give a PROFILE (a config profile with a [launch] section) or --demo"
        return None

    def _vary_rule(self) -> str | None:
        for s in self.steps or ():
            if s < 0:
                return f"--steps: step counts are whole numbers ≥ 0: {s}"
        if self.grid is not None:
            from specmon.control.dims import parse_grid

            try:
                grid = parse_grid(self.grid)
            except ValueError as exc:
                return f"--grid: {exc}"
            if "steps" in grid and self.steps is not None:
                return "give the step counts once: in --grid steps=... or with --steps"
            if "steps" not in grid and self.steps is None:
                return "give the step counts: --grid steps=1,2,3 ... (0 = no speculation)"
            try:
                _ = self.grid_settings
            except ValueError as exc:
                return f"--grid: {exc}"
        elif self.steps is None and not self.demo:
            return "give the step counts to try: --steps 0,1,2,3,5 (0 = no speculation)"
        return None

    def _load_rule(self) -> str | None:
        if any(c < 1 for c in self.concurrency) or not self.concurrency:
            return "--concurrency: requests in flight are whole numbers ≥ 1"
        if self.workload is not None:
            if self.prompts:
                return "give --prompts or --workload, not both"
            if self.no_load:
                return "--workload names the load's prompt sets: it cannot go with --no-load"
        return None

    def _care_rule(self) -> str | None:
        if self.alpha >= 1:
            return "--alpha must be below 1"
        if self.design == "bai" and (self.order not in (None, "launches") or self.strategy == "guided"):
            return ("--design bai chooses which settings each round of launches relaunches: it goes with the "
                    "launch design (leave out --order, or --order launches; not with --strategy guided)")
        return None

    def _after_rule(self) -> str | None:
        if self.demo and (self.measure_schedule or self.compare_adaptive is not None):
            return ("--measure-schedule and --compare-adaptive restart a real server (vLLM, SGLang): the demo's "
                    "simulated server has neither a schedule nor an adaptive mode")
        if self.compare_adaptive is not None:
            if self.workload:
                return "--compare-adaptive measures one workload: leave out --workload"
            if self.no_load:
                return "--compare-adaptive compares loads specmon drives: leave out --no-load"
            if self.compare_adaptive and not self.compare_adaptive.startswith("/"):
                return ("--compare-adaptive: the tier file is a path on the server's host, absolute: "
                        f"{self.compare_adaptive!r}")
        if self.measure_schedule:
            if len(set(self.concurrency)) < 2:
                return "--measure-schedule needs a schedule: sweep two or more concurrencies (--concurrency 1,16)"
            if self.grid is not None and self.grid_settings.dimensions:
                return "--measure-schedule: a schedule varies the step count alone (--steps, not --grid)"
            if self.workload:
                return "--measure-schedule deploys one schedule: measure one workload (leave out --workload)"
            if self.no_load:
                return "--measure-schedule compares loads specmon drives: leave out --no-load"
        return None

    def _output_rule(self) -> str | None:
        if self.prometheus_port is not None and not 0 <= self.prometheus_port <= 65535:
            return "--prometheus-port must be 0..65535"
        if self.record and self.no_record:
            return "give --record PATH or --no-record, not both"
        return None

    def demo_problem(self) -> str | None:
        """The demo's own options given without the demo (None: none)."""
        if self.replicas is not None and not self.demo:
            return "--replicas is for the demo (--demo --replicas 4); a real fleet lists its replicas in its profile"
        if self.replicas is not None and not 2 <= self.replicas <= 16:
            return "--replicas must be 2 to 16"
        if not self.demo:
            for name, flag in (("drift_pct_per_hour", "--drift-pct-per-hour"), ("time_scale", "--time-scale")):
                if name in self.model_fields_set and getattr(self, name) != ExperimentPlan.model_fields[name].default:
                    return f"{flag} is for the demo's simulated server (--demo): a real server runs in real time"
        return None

    def _fleet_rule(self) -> str | None:
        for name, flag, why in NOT_FOR_FLEET:
            value = getattr(self, name)
            if name == "objective" and value is not None and self.objective_value.is_tps:
                continue  # tok/s is what a parallel sweep decides on anyway
            if value not in _FLEET_NEUTRAL.get(name, (None,)):
                return f"{flag} does not apply to a parallel sweep over replicas: {why}"
        if len(self.concurrency) != 1:
            return "a parallel sweep runs one concurrency: give --concurrency with one value"
        return None

    @classmethod
    def check_values(cls, values: Mapping[str, Any]) -> None:
        """Each value of ``values`` of its field's type and range, alone (the rules between fields wait
        for the other layers). Raises PlanError naming the first wrong one."""
        for name, value in values.items():
            f = cls.model_fields[name]
            try:
                TypeAdapter(f.annotation).validate_python(value)  # type: ignore[arg-type]
            except ValidationError as exc:
                raise PlanError(f"{name}: {exc.errors()[0]['msg']}") from None
            probe = {"demo": True, name: value} if name not in ("demo", "profile") else {name: value}
            try:
                cls.model_validate(probe, context={"fields_only": True})
            except ValidationError as exc:
                field_errors = [e for e in exc.errors() if e["loc"]]
                if field_errors:
                    raise PlanError(f"{name}: {field_errors[0]['msg']}") from None

    # --------------------------------------------------------------- derived

    @cached_property
    def grid_settings(self) -> Grid:
        """The settings of ``--grid`` (with ``steps`` from it or from ``--steps``), what was left out and why."""
        from specmon.control.dims import expand_grid, parse_grid

        assert self.grid is not None
        grid = parse_grid(self.grid)
        if "steps" not in grid:
            grid = {"steps": tuple(self.steps or ()), **grid}
        return expand_grid(grid)

    @property
    def step_list(self) -> list[int]:
        """The step counts measured: from the grid, ``steps``, or the demo's campaign."""
        if self.grid is not None:
            return list(dict.fromkeys(st for st, _ in self.grid_settings.settings))
        if self.steps is not None:
            return list(self.steps)
        from specmon.control.demo import DEMO_SWEEP_STEPS

        return list(DEMO_SWEEP_STEPS)

    @property
    def objective_value(self) -> Objective:
        """``objective`` parsed (tok/s when none is given)."""
        from specmon.model.objective import Objective, parse_objective

        return parse_objective(self.objective) if self.objective else Objective()

    @property
    def launch_cv(self) -> float | None:
        """The launch spread as a fraction (None: the target's default)."""
        return None if self.launch_cv_pct is None else self.launch_cv_pct / 100.0

    @property
    def parallel(self) -> bool:
        """A parallel sweep over replicas: the demo's, or those of the profile it was resolved against."""
        return self.demo and self.replicas is not None or self._fleet

    @property
    def runtime_design(self) -> str:
        """The launch design as the runners name it (``today`` for rounds of every undecided setting)."""
        return "bai" if self.design == "bai" else "today"

    @property
    def argv(self) -> list[str] | None:
        """The words typed on the command line (None: not run from it)."""
        return list(self._argv) if self._argv is not None else None

    def invoked_as(self, argv: Sequence[str] | None) -> ExperimentPlan:
        """This plan, remembering the words that ran it."""
        plan = self.model_copy()
        plan._argv = tuple(argv) if argv is not None else None
        return plan

    def replaced(self, **values: Any) -> ExperimentPlan:
        """This plan with ``values`` (fields) set and validated again (the demo's seed drawn, its finish)."""
        plan = ExperimentPlan.model_validate({**self.model_dump(exclude_unset=False), **values},
                                             context={"fleet": self._fleet})
        plan._workload_sets, plan._fleet, plan._argv = self._workload_sets, self._fleet, self._argv
        return plan

    @property
    def workload_sets(self) -> dict[str, tuple[str, ...]] | None:
        """The prompt sets read for ``workload`` (None until :meth:`with_workload_sets`)."""
        return self._workload_sets

    def with_workload_sets(self) -> ExperimentPlan:
        """This plan with its workloads' prompt sets read (raises LoadError for a set that cannot be)."""
        if self.workload is None:
            return self
        from specmon.control.load import load_workloads

        items = [w for word in self.workload for w in word.split(",") if w.strip()]
        plan = self.model_copy()
        plan._workload_sets = load_workloads(items)
        return plan

    def sweep_plan(self) -> SweepPlan:
        """The one-server runtime plan (raises SweepError for what it refuses)."""
        from specmon.experiment.sweep_plan import SweepPlan
        from specmon.model.launches import DEFAULT_LAUNCH_CV
        rule = self.sweep_plan_rule()
        points = self.grid_settings.settings if self.grid is not None and self.grid_settings.dimensions else ()
        workloads = tuple(self._workload_sets) if self._workload_sets is not None else tuple(
            _workload_name(w) for word in self.workload or () for w in word.split(",") if w.strip())
        launch_cv = DEFAULT_LAUNCH_CV if self.launch_cv is None else self.launch_cv
        # The launch design is the default: it launches every setting at least twice (the launch spread is
        # measured, not assumed) and can reach a verdict; the guided strategy chooses its own order.
        order = self.order or ("given" if self.strategy == "guided" else "launches")
        steps = tuple(self.step_list)
        if self.demo:
            from specmon.control.demo import DEMO_LAUNCH_CV

            # Time compressed 100×: a decode line every ~9 ms, so polling fast keeps looks on time.
            scale = min(self.time_scale, 1000.0)
            return SweepPlan(steps, tuple(self.concurrency), order, self.seed, rule,
                             max_minutes=self.max_minutes or 0.4, settle=2, stall_s=20.0, attach_s=20.0, poll_s=0.1,
                             strategy=self.strategy, points=points, workloads=workloads, launch_cv=launch_cv,
                             resolve_pct=self.resolve_pct, restart_s=1.0, objective=self.objective_value,
                             sample_rate=scale, design=self.runtime_design,
                             clock=f"the simulated server runs {scale:g}× faster than a real one, its launches "
                                   f"{100 * (DEMO_LAUNCH_CV if self.launch_cv is None else self.launch_cv):g}% apart")
        return SweepPlan(steps, tuple(self.concurrency), order, self.seed, rule,
                         max_minutes=self.max_minutes or 10.0, strategy=self.strategy, points=points,
                         workloads=workloads, launch_cv=launch_cv, resolve_pct=self.resolve_pct,
                         objective=self.objective_value, design=self.runtime_design)

    @classmethod
    def dashboard_parts(cls, values: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """What ``s`` in the dashboard takes from a profile's plan (the dialog picks the steps, the grid
        and the strategy): the runtime plan's fields and the load's. Raises ValueError (a file unread)."""
        plan = cls.model_validate(dict(values), context={"fields_only": True})
        plan_fields: dict[str, Any] = {
            "rule": plan.sweep_plan_rule(), "concurrency": tuple(plan.concurrency),
            "max_minutes": plan.max_minutes or 10.0, "resolve_pct": plan.resolve_pct,
            "objective": plan.objective_value}
        if plan.launch_cv is not None:
            plan_fields["launch_cv"] = plan.launch_cv
        if plan.order is not None:
            plan_fields["order"] = plan.order
        load: dict[str, Any] = {"endpoint": plan.endpoint, "request_timeout_s": plan.request_timeout}
        if plan.max_tokens is not None:
            load["max_tokens"] = plan.max_tokens
        if plan.prompts:
            from specmon.control.load import LoadError, load_prompts

            try:
                load["prompts"] = load_prompts(plan.prompts)
            except LoadError as exc:
                raise ValueError(str(exc)) from None
        return plan_fields, load

    def sweep_plan_rule(self) -> Any:
        """The stopping rule of the care knobs (a StoppingRule; raises ValueError for knobs it refuses)."""
        from specmon.model.stopping import StoppingRule

        return StoppingRule(alpha=self.alpha, looks=self.looks, min_samples=self.min_samples,
                            max_samples=self.max_samples, margin_pct=self.margin_pct,
                            precision_pct=self.precision_pct)

    def fleet_plan(self) -> FleetPlan:
        """The runtime plan of a parallel sweep over replicas (raises SweepError)."""
        from specmon.experiment.fleet_sweep import FleetPlan
        from specmon.model.launches import DEFAULT_LAUNCH_CV

        return FleetPlan(tuple(self.step_list), self.concurrency[0], samples=self.min_samples, rounds=self.rounds,
                         seed=self.seed, alpha=self.alpha, margin_pct=self.margin_pct,
                         launch_cv=DEFAULT_LAUNCH_CV if self.launch_cv is None else self.launch_cv,
                         launch_minutes=self.max_minutes or 10.0, design=self.runtime_design)

    # --------------------------------------------------------------- saved and shown

    def saved(self) -> dict[str, Any]:
        """The plan as saved in recordings and reports: every field that differs from its default, the
        invocation's own (``--yes``, ``--fresh``, ``--config``) left out."""
        out = {}
        preset = PRESETS[self.care]
        for name, f in ExperimentPlan.model_fields.items():
            value = getattr(self, name)
            # A knob is saved when it differs from what its preset gives (a preset fills the knobs
            # not given, so a value equal to the field's default may still be the one set).
            unchanged = preset.get(name, f.default)
            if name in RUN_ONLY or value == unchanged:
                continue
            out[name] = value
        if "care" in out or self.care != "standard":
            out["care"] = self.care
        return out

    def shown(self, origins: Mapping[str, str] | None = None) -> str:
        """Every field by group, with where its value came from (``--print-plan``)."""
        origins = origins or {}
        lines = []
        for group, title in GROUPS.items():
            lines.append(f"{title}:")
            for name, f in ExperimentPlan.model_fields.items():
                extra = f.json_schema_extra
                assert isinstance(extra, dict)
                if extra["group"] != group:
                    continue
                value = getattr(self, name)
                text = (f"— ({_NONE_MEANS.get(name, 'not set')})" if value is None else
                        json.dumps(value) if not isinstance(value, str) else value)
                origin = origins.get(name, "default")
                lines.append(f"  {name:<19} {text}  ({origin})")
        return "\n".join(lines)


def _workload_name(spec: str) -> str:
    """The name a ``--workload`` item gets, as :func:`specmon.control.load.load_workloads` names it
    (read without reading its file: the plan's rules run before any file is opened)."""
    spec = spec.strip()
    name, eq, _ = spec.partition("=")
    if eq:
        return name
    return Path(spec).stem if spec.endswith(".jsonl") or "/" in spec else spec


#: What a field left unset means, as ``--print-plan`` says it.
_NONE_MEANS = {
    "profile": "the demo", "steps": "the demo's 0,1,2,5,10", "grid": "the step count only",
    "workload": "one prompt set", "prompts": "the bundled prompts", "max_tokens": "512; the demo 2048",
    "objective": "tps", "launch_cv_pct": "5% assumed until measured; the demo's server 2%",
    "resolve_pct": "the verdict's own margin", "max_minutes": "10 per setting; the demo 0.4",
    "order": "launches, or given with the guided strategy", "rounds": "twice the settings (replicas)",
    "seed": "drawn once and kept", "measure_schedule": "not measured", "compare_adaptive": "not measured",
    "finish": "ask at a terminal, else last", "record": "a new file in the user data directory",
    "state": "per profile and plan, in the user data directory", "prometheus_port": "not served",
    "replicas": "one server", "config": "~/.config/specmon/config.toml",
}


def flag(name: str) -> str:
    """The command-line option of a plan field (``--max-samples``)."""
    extra = ExperimentPlan.model_fields[name].json_schema_extra
    assert isinstance(extra, dict)
    return str(extra["flag"] or "--" + name.replace("_", "-"))
