"""Where a sweep's plan comes from: the layers the command line gathers, in the order they override.

The plan's defaults, its care preset, a profile's ``[sweep]`` and ``[load]`` tables, a plan file or a
recording (``--plan``), then the options typed (argparse leaves out the ones not typed, so only those
override). The rules are the plan's own (:mod:`specmon.experiment.plan`); here only the gathering.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from specmon.config import Profile
    from specmon.experiment.plan_sources import Resolved
    from specmon.experiment.sweep_plan import SweepPlan

#: Options of ``sweep`` that are not plan fields (the invocation's own).
NOT_PLAN = frozenset({"func", "command", "argv", "plan", "print_plan", "read_only"})
#: An option whose plan field has another name.
RENAMED = {"launch_cv": "launch_cv_pct"}


def typed_options(args: argparse.Namespace) -> dict[str, Any]:
    """The plan fields typed on the command line (the sweep parser's defaults are SUPPRESS)."""
    typed = {RENAMED.get(k, k): v for k, v in vars(args).items() if k not in NOT_PLAN}
    grid, profile = typed.get("grid"), typed.get("profile")
    if grid is not None and profile is None and len(grid) > 1 and "=" not in grid[-1]:
        # ``sweep --grid steps=1,2 topk=1,4 kimi``: argparse gave the profile to --grid.
        typed["grid"], typed["profile"] = grid[:-1], grid[-1]
    return typed


def resolve_plan(args: argparse.Namespace) -> tuple[Resolved, Profile | None]:
    """The resolved plan of ``specmon sweep`` and the profile it targets (None: the demo).

    Raises:
        PlanError: a plan file, a profile's table or the resolved plan refused (one sentence).
        ConfigError: the config file or the profile (as ``connect`` says it).
    """
    from specmon.experiment.plan import PlanError
    from specmon.experiment.plan_sources import from_profile, load_plan_file, origin_of, resolve

    typed = typed_options(args)
    layers: list[tuple[str, dict[str, Any]]] = []
    from_file: dict[str, Any] = {}
    plan_path = getattr(args, "plan", None)
    if plan_path:
        from_file = load_plan_file(plan_path)
        if "profile" in typed or typed.get("demo"):  # the server typed here replaces the file's
            from_file.pop("profile", None)
            from_file.pop("demo", None)
    demo = typed.get("demo", from_file.get("demo", False))
    name = typed.get("profile", from_file.get("profile"))
    profile = None
    fleet = False
    if name and not demo:
        from specmon.config import ConfigError, load_config

        try:
            config = load_config(typed.get("config"))
            profile = config.profile(name)
        except ConfigError:
            # What no profile could make right (the demo's own options on a real server) is said first.
            why = typed_problem(typed)
            if why:
                raise PlanError(why) from None
            raise
        fleet = profile.replicas is not None
        if profile.sweep:
            layers.append((f"profile {name} [sweep]", from_profile(profile.sweep, None)))
        if profile.load:
            layers.append((f"profile {name} [load]", from_profile(None, profile.load)))
    if from_file:
        layers.append((origin_of(plan_path or ""), from_file))
    layers.append(("command line", typed))
    return resolve(layers, fleet=fleet), profile


def typed_problem(typed: dict[str, Any]) -> str | None:
    """A rule the options typed break whatever a profile holds: the demo's own options without --demo."""
    from pydantic import ValidationError

    from specmon.experiment.plan import ExperimentPlan

    try:
        plan = ExperimentPlan.model_validate(typed, context={"fields_only": True})
    except ValidationError:
        return None  # (said in full when the plan is resolved)
    return plan.demo_problem()


def sweep_plan_of(args: argparse.Namespace) -> SweepPlan:
    """The one-server runtime plan the options ``args`` resolve to (raises PlanError)."""
    resolved, _ = resolve_plan(args)
    return resolved.plan.sweep_plan()
