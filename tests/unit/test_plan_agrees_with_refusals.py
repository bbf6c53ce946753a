"""The plan's validators and the 52 refusals they replaced agree (issue 41).

Before the refusals spread over ``commands/control.py``, ``commands/sweeping.py`` and
``commands/fleet_sweeping.py`` were deleted, their plan-level logic was copied here, verbatim but
for the ``fail(...)`` calls (which became ``return`` of the sentence), as the oracle
:func:`old_refusal`. Hypothesis generates option sets over every plan field, valid and not, as
argparse hands them over, and the plan (:func:`specmon.experiment.plan.resolve`) must refuse
exactly what the old code refused, for one server and for a parallel sweep over replicas.

One difference is intended and asserted: ``--drift-pct-per-hour`` and ``--time-scale`` are the
demo's simulated server's; the old code ignored them on a real server, the plan refuses them.
Checks that depend on the server (the profile's [launch], its step range, its engine's schedule
form, reading prompt files) are not plan rules: they stay where the profile is known.
"""

from __future__ import annotations

import argparse
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.experiment.plan import PlanError
from specmon.experiment.plan_sources import resolve
from specmon.experiment.sweep_plan import SweepError

# --------------------------------------------------------------------------- the oracle (old code)


def _old_plan(args: argparse.Namespace) -> Any:
    """commands/control.py ``_plan`` as it was (b76d983)."""
    from specmon.experiment.sweep_plan import SweepPlan
    from specmon.model.launches import DEFAULT_LAUNCH_CV
    from specmon.model.objective import Objective
    from specmon.model.stopping import StoppingRule

    min_samples = args.min_samples or 40
    max_samples = args.max_samples or max(1600, min_samples)
    rule = StoppingRule(alpha=args.alpha, looks=args.looks, min_samples=min_samples, max_samples=max_samples,
                        margin_pct=args.margin_pct, precision_pct=args.precision_pct)
    if args.alpha >= 1:
        raise ValueError("--alpha must be below 1")
    grid = getattr(args, "grid_settings", None)
    points = grid.settings if grid is not None and grid.dimensions else ()
    workloads = tuple(getattr(args, "workload_sets", None) or ())
    launch_cv = DEFAULT_LAUNCH_CV if args.launch_cv is None else args.launch_cv
    objective = getattr(args, "objective", None) or Objective()
    order = args.order or ("given" if args.strategy == "guided" else "launches")
    return SweepPlan(tuple(args.steps), tuple(args.concurrency), order, args.seed, rule,
                     max_minutes=args.max_minutes or 10.0, strategy=args.strategy, points=points,
                     workloads=workloads, launch_cv=launch_cv, resolve_pct=args.resolve_pct,
                     objective=objective)


_NOT_FOR_FLEET = (
    ("grid", None), ("workload", None), ("state", None), ("fresh", False), ("resolve_pct", None),
    ("strategy", "grid"), ("order", "given"), ("prometheus_port", None), ("measure_schedule", None),
    ("compare_adaptive", None), ("objective", None),
)


def _old_refused_option(args: argparse.Namespace) -> str | None:
    """commands/fleet_sweeping.py ``refused_option`` as it was."""
    for attr, default in _NOT_FOR_FLEET:
        if attr == "objective" and getattr(getattr(args, attr, None), "is_tps", True):
            continue
        if getattr(args, attr, default) not in (default, None) or (default is False and getattr(args, attr, False)):
            return f"--{attr} does not apply"
    if len(args.concurrency) != 1:
        return "a parallel sweep runs one concurrency"
    return _old_fleet_plan(args)


def _old_fleet_plan(args: argparse.Namespace) -> str | None:
    """commands/fleet_sweeping.py ``fleet_plan`` as it was: the FleetPlan's own refusals."""
    from specmon.experiment.fleet_sweep import FleetPlan
    from specmon.model.launches import DEFAULT_LAUNCH_CV

    try:
        FleetPlan(tuple(args.steps), args.concurrency[0], samples=args.min_samples or 40, rounds=args.rounds,
                  seed=args.seed, alpha=args.alpha, margin_pct=args.margin_pct,
                  launch_cv=DEFAULT_LAUNCH_CV if args.launch_cv is None else args.launch_cv,
                  launch_minutes=args.max_minutes or 10.0)
    except (SweepError, ValueError) as exc:
        return str(exc)
    return None


def old_refusal(args: argparse.Namespace, fleet: bool) -> str | None:
    """Every plan-level refusal of cmd_sweep, _plan, _demo, _real, _schedule_problem and refused_option,
    in the order they ran (``fleet``: the profile lists replicas)."""
    from specmon.control.dims import expand_grid, parse_grid

    if args.demo and args.profile:
        return "give a PROFILE or --demo, not both"
    if args.replicas is not None and not args.demo:
        return "--replicas is for the demo"
    if args.replicas is not None and not 2 <= args.replicas <= 16:
        return "--replicas must be 2 to 16"
    if args.demo and args.rounds is not None and args.replicas is None:
        return "--rounds is for a parallel sweep"
    if not args.demo and not args.profile:
        return "which server?"
    if args.grid is not None:
        try:
            grid = parse_grid(args.grid)
            if "steps" in grid and args.steps is not None:
                return "give the step counts once"
            if "steps" not in grid:
                if args.steps is None:
                    return "give the step counts"
                grid = {"steps": tuple(args.steps), **grid}
            args.grid_settings = expand_grid(grid)
        except ValueError as exc:
            return f"--grid: {exc}"
        args.steps = list(dict.fromkeys(s for s, _ in args.grid_settings.settings))
    if args.steps is None:
        if not args.demo:
            return "give the step counts to try"
        args.steps = [0, 1, 2, 5, 10]
    if args.workload is not None:
        if args.prompts:
            return "give --prompts or --workload, not both"
        if args.no_load:
            return "--workload cannot go with --no-load"
        from specmon.control.load import LoadError, load_workloads

        items = [w for word in args.workload for w in word.split(",") if w.strip()]
        try:
            args.workload_sets = load_workloads(items)
        except LoadError as exc:
            return str(exc)
    if args.prometheus_port is not None and not 0 <= args.prometheus_port <= 65535:
        return "--prometheus-port must be 0..65535"
    if args.record and args.no_record:
        return "give --record PATH or --no-record, not both"
    try:
        plan = _old_plan(args)
    except (ValueError, SweepError) as exc:
        return str(exc)
    if args.demo and args.replicas:  # run_fleet_demo -> run_fleet_sweep
        return _old_refused_option(args)
    if args.demo:  # _demo
        if args.measure_schedule or args.compare_adaptive is not None:
            return "--measure-schedule and --compare-adaptive restart a real server"
        return None
    if fleet:  # _real -> run_fleet_sweep
        return _old_refused_option(args)
    if args.rounds is not None:
        return "--rounds is for a parallel sweep over a profile's replicas"
    # _schedule_problem, its plan-level part
    if args.compare_adaptive is not None:
        if plan.workloads:
            return "--compare-adaptive measures one workload"
        if args.no_load:
            return "--compare-adaptive compares loads specmon drives"
        if args.compare_adaptive and not args.compare_adaptive.startswith("/"):
            return "--compare-adaptive: the tier file is a path on the server's host, absolute"
    if not args.measure_schedule:
        return None
    if len(plan.concurrency) < 2:
        return "--measure-schedule needs a schedule"
    if plan.points:
        return "--measure-schedule: a schedule varies the step count alone"
    if plan.workloads:
        return "--measure-schedule deploys one schedule"
    if args.no_load:
        return "--measure-schedule compares loads specmon drives"
    return None


# --------------------------------------------------------------------------- generated option sets

#: argparse's defaults of the old parser (what a field holds when its option was not typed).
OLD_DEFAULTS: dict[str, Any] = {
    "profile": None, "demo": False, "steps": None, "grid": None, "concurrency": [1], "min_samples": None,
    "max_samples": None, "max_minutes": None, "looks": 5, "replicas": None, "rounds": None, "alpha": 0.05,
    "margin_pct": 1.0, "precision_pct": 0.5, "launch_cv": None, "drift_pct_per_hour": 0.0, "resolve_pct": None,
    "order": None, "objective": None, "measure_schedule": None, "compare_adaptive": None, "strategy": "grid",
    "seed": None, "format": "table", "state": None, "fresh": False, "no_load": False, "endpoint": "completions",
    "max_tokens": None, "prompts": None, "workload": None, "request_timeout": 300.0, "record": None,
    "no_record": False, "prometheus_port": None, "config": None, "time_scale": 100.0, "yes": False, "finish": None,
    "no_metrics": False,
}

_counts = st.lists(st.integers(0, 12), min_size=1, max_size=5, unique=True)
_grids = st.one_of(
    st.just(["steps=1,2", "topk=1,4"]), st.just(["topk=1,4"]), st.just(["steps=0,2,3"]),
    st.just(["steps=1,2", "draft_tokens=4,8"]), st.just(["nosuch=1"]), st.just(["steps=1,2", "topk=1,4", "topk=2"]),
    st.just(["steps=x"]), st.just(["steps=2,4", "spec_type=ngram-mod,draft-simple"]),
)
_OPTIONS: dict[str, st.SearchStrategy[Any]] = {
    "profile": st.sampled_from(["kimi", "srv-1"]),
    "demo": st.just(True),
    "steps": _counts,
    "grid": _grids,
    "concurrency": st.lists(st.integers(1, 64), min_size=1, max_size=3, unique=True),
    "min_samples": st.integers(1, 3000),
    "max_samples": st.integers(1, 3000),
    "max_minutes": st.floats(0.01, 100),
    "looks": st.integers(1, 12),
    "replicas": st.integers(1, 20),
    "rounds": st.integers(1, 20),
    "alpha": st.floats(0.001, 2.0),
    "margin_pct": st.floats(0.01, 20),
    "precision_pct": st.floats(0.01, 20),
    "launch_cv": st.floats(0, 0.99),
    "drift_pct_per_hour": st.floats(-5, 5),
    "resolve_pct": st.floats(0.1, 20),
    "order": st.sampled_from(["given", "random", "interleave", "launches"]),
    "objective": st.sampled_from(["tps", "itl-p50", "ttft-p99", "goodput:ttft=200,itl=30"]),
    "measure_schedule": st.integers(1, 4),
    "compare_adaptive": st.sampled_from(["", "/etc/tiers.json", "tiers.json"]),
    "strategy": st.sampled_from(["grid", "guided"]),
    "seed": st.integers(0, 1 << 30),
    "format": st.sampled_from(["table", "json", "markdown"]),
    "state": st.just("/tmp/state.json"),
    "fresh": st.just(True),
    "no_load": st.just(True),
    "endpoint": st.sampled_from(["completions", "chat"]),
    "max_tokens": st.integers(1, 4096),
    "prompts": st.just("/tmp/prompts.jsonl"),
    "workload": st.sampled_from([["chat"], ["chat,code"], ["code", "long"], ["chat,chat"]]),
    "request_timeout": st.floats(0.5, 900),
    "record": st.just("/tmp/rec.jsonl"),
    "no_record": st.just(True),
    "prometheus_port": st.integers(-10, 70000),
    "time_scale": st.floats(1, 2000),
    "yes": st.just(True),
    "finish": st.sampled_from(["winner", "last", "none"]),
    "no_metrics": st.just(True),
}


@st.composite
def option_sets(draw: st.DrawFn) -> dict[str, Any]:
    """A few options typed, as argparse hands them over (the rest at their defaults)."""
    names = draw(st.lists(st.sampled_from(sorted(_OPTIONS)), max_size=7, unique=True))
    return {n: draw(_OPTIONS[n]) for n in names}


def _cli_layer(typed: dict[str, Any]) -> dict[str, Any]:
    """The same options as the plan's command-line layer (``--launch-cv`` is a percent there,
    ``--objective`` its text)."""
    out = dict(typed)
    if "launch_cv" in out:
        out["launch_cv_pct"] = out.pop("launch_cv") * 100
    return out


def _namespace(typed: dict[str, Any]) -> argparse.Namespace:
    from specmon.model.objective import parse_objective

    ns = argparse.Namespace(**{**OLD_DEFAULTS, **typed})
    if ns.objective is not None:
        ns.objective = parse_objective(ns.objective)
    ns.steps = list(ns.steps) if ns.steps is not None else None
    return ns


def _new_refusal(typed: dict[str, Any], fleet: bool) -> str | None:
    try:
        resolve([("command line", _cli_layer(typed))], fleet=fleet)
    except PlanError as exc:
        return str(exc)
    return None


def _demo_only_change(typed: dict[str, Any]) -> bool:
    """The intended difference: the demo's server options given for a real server."""
    return not typed.get("demo") and (typed.get("drift_pct_per_hour", 0.0) != 0.0
                                      or typed.get("time_scale", 100.0) != 100.0)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(typed=option_sets(), fleet=st.booleans())
def test_the_plan_refuses_what_the_old_refusals_refused(typed: dict[str, Any], fleet: bool) -> None:
    fleet = fleet and bool(typed.get("profile")) and not typed.get("demo")  # only a profile lists replicas
    old = old_refusal(_namespace(typed), fleet)
    new = _new_refusal(typed, fleet)
    if old is None and _demo_only_change(typed):
        assert new is not None and "demo" in new, (typed, new)
        return
    assert (old is None) == (new is None), f"{typed} fleet={fleet}: old {old!r}, new {new!r}"


def test_named_cases_agree() -> None:
    """The refusals the CLI tests name, one each, refused by both with the same words."""
    cases = [
        ({"demo": True, "profile": "kimi"}, False, "not both"),
        ({}, False, "which server?"),
        ({"profile": "kimi"}, False, "give the step counts to try"),
        ({"profile": "kimi", "steps": [1], "grid": ["steps=1,2"]}, False, "once"),
        ({"demo": True, "replicas": 40}, False, "2 to 16"),
        ({"profile": "kimi", "steps": [1, 2], "rounds": 3}, False, "--rounds"),
        ({"profile": "kimi", "steps": [1, 2], "rounds": 3}, True, None),
        ({"profile": "kimi", "steps": [1, 2], "grid": None, "workload": ["chat"]}, True, "--workload"),
        ({"profile": "kimi", "steps": [1, 2], "measure_schedule": 2}, False, "two or more concurrencies"),
        ({"demo": True, "measure_schedule": 2, "concurrency": [1, 8]}, False, "demo"),
        ({"profile": "kimi", "steps": [1, 2], "compare_adaptive": "t.json"}, False, "absolute"),
        ({"profile": "kimi", "steps": [1, 2], "alpha": 1.5}, False, "below 1"),
    ]
    for typed, fleet, words in cases:
        old = old_refusal(_namespace(typed), fleet)
        new = _new_refusal(typed, fleet)
        assert (old is None) == (new is None) == (words is None), (typed, old, new)
        if words is not None:
            assert new is not None and words in new, (typed, new)
