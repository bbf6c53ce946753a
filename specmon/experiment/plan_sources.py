"""Where a plan comes from: the layers it is resolved from, a profile's tables, a plan file or a recording.

:func:`resolve` merges the layers (later ones win), fills the care preset's knobs, checks every rule of
:class:`~specmon.experiment.plan.ExperimentPlan`, and names the layer each field came from (``--print-plan``).
:func:`load_plan_file` reads ``--plan``: a TOML plan file, or a recording's plan (only its first entries:
a recording may be gigabytes). :func:`check_profile_table` checks a profile's ``[sweep]`` or ``[load]``
table when the config is loaded, before any sweep.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from specmon.control.counts import parse_step_list
from specmon.experiment.plan import _CARE_KNOBS, PRESETS, RUN_ONLY, ExperimentPlan, PlanError

__all__ = ["Resolved", "check_profile_table", "from_profile", "load_plan_file", "origin_of", "resolve"]


@dataclass(frozen=True)
class Resolved:
    """A resolved plan and the layer each of its fields came from."""

    plan: ExperimentPlan
    origins: dict[str, str]


def _message(exc: ValidationError, where: str) -> str:
    """A pydantic error as one sentence, naming the layer when it is a file."""
    parts = []
    for e in exc.errors():
        loc = ".".join(str(x) for x in e["loc"])
        msg = str(e["msg"]).removeprefix("Value error, ")
        parts.append(f"{loc}: {msg}" if loc else msg)
    text = "; ".join(parts)
    return f"{where}: {text}" if where else text


def resolve(layers: Sequence[tuple[str, Mapping[str, Any]]], *, fleet: bool = False) -> Resolved:
    """The plan from ``layers`` (``(where, values)``, later ones win) with each field's origin.

    Raises:
        PlanError: an unknown field in a layer, a value of the wrong type, or a rule broken (one sentence).
    """
    merged: dict[str, Any] = {}
    origins: dict[str, str] = {}
    for where, values in layers:
        unknown = [k for k in values if k not in ExperimentPlan.model_fields]
        if unknown:
            from specmon.suggest import did_you_mean

            name = unknown[0]
            raise PlanError(f"{where}: unknown plan field {name!r}: {did_you_mean(name, ExperimentPlan.model_fields)}"
                            f"(the plan's fields: {', '.join(ExperimentPlan.model_fields)})")
        for k, v in values.items():
            merged[k] = v
            origins[k] = where
    preset = str(merged.get("care", "standard"))
    for knob in _CARE_KNOBS:
        if knob not in origins and preset in PRESETS:
            origins[knob] = f"care {preset}"
    try:
        plan = ExperimentPlan.model_validate(merged, context={"fleet": fleet})
    except ValidationError as exc:
        raise PlanError(_message(exc, "")) from None
    plan._fleet = fleet
    return Resolved(plan=plan, origins=origins)


def from_profile(sweep: Mapping[str, Any] | None, load: Mapping[str, Any] | None) -> dict[str, Any]:
    """A profile's ``[sweep]`` and ``[load]`` tables as plan values (``load`` holds the load's fields only)."""
    out = dict(sweep or {})
    for k, v in (load or {}).items():
        f = ExperimentPlan.model_fields.get(k)
        extra = f.json_schema_extra if f is not None else None
        if not isinstance(extra, dict) or extra["group"] != "load":
            raise PlanError(f"{k!r} is not a load field (the load's: "
                            f"{', '.join(n for n, g in _fields_of('load'))})")
        out[k] = v
    return _normalised(out)


def _fields_of(group: str) -> list[tuple[str, Any]]:
    return [(n, f) for n, f in ExperimentPlan.model_fields.items()
            if isinstance(f.json_schema_extra, dict) and f.json_schema_extra["group"] == group]


def _normalised(values: Mapping[str, Any]) -> dict[str, Any]:
    """Lists written as a profile writes them: ``steps = "0,1,3"`` or ``[0, 1, 3]``; ``grid`` as a table."""
    out = dict(values)
    for name, least, what in (("steps", 0, "step counts"), ("concurrency", 1, "concurrency levels")):
        if isinstance(out.get(name), str):
            try:
                out[name] = list(parse_step_list(out[name], least, None, what=what))
            except ValueError as exc:
                raise PlanError(f"{name}: {exc}") from None
        elif isinstance(out.get(name), int) and not isinstance(out.get(name), bool):
            out[name] = [out[name]]
    if isinstance(out.get("grid"), Mapping):
        out["grid"] = [f"{k}={','.join(str(x) for x in v) if isinstance(v, list) else v}"
                       for k, v in out["grid"].items()]
    if isinstance(out.get("workload"), str):
        out["workload"] = [out["workload"]]
    for name in ("launch_cv_pct", "alpha", "margin_pct", "precision_pct", "resolve_pct", "max_minutes"):
        v = out.get(name)
        if isinstance(v, float) and math.isnan(v):
            raise PlanError(f"{name}: not a number")
    return out


#: A plan file is read whole up to this; a recording only as far as its first entries.
PLAN_FILE_LIMIT = 1 << 20


def load_plan_file(path: str) -> dict[str, Any]:
    """Plan values from ``--plan PATH``: a plan file (TOML: the fields of a profile's [sweep] and [load],
    in one table or under ``[sweep]`` and ``[load]``) or a specmon recording (the plan it was made with).

    Raises:
        PlanError: not readable, not a plan, or a recording that holds none.
    """
    from specmon.smallfile import open_bytes

    with open_bytes(Path(path), "plan file", PlanError) as f:  # a FIFO or a device: one sentence, no wait
        data = f.read(PLAN_FILE_LIMIT + 1)
    text = data.decode("utf-8", "replace")
    head = text.lstrip()[:1]
    if head == "{":  # a recording (JSON lines): its first entry is the meta that holds the plan
        return _plan_in_recording(path, text)
    if len(data) > PLAN_FILE_LIMIT:
        raise PlanError(f"{path}: larger than a plan file ({PLAN_FILE_LIMIT >> 10} KiB), and not a recording")
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise PlanError(f"{path}: neither a plan file (TOML) nor a recording: {exc}") from None
    if "sweep" in doc or "load" in doc:
        extra = [k for k in doc if k not in ("sweep", "load")]
        if extra:
            raise PlanError(f"{path}: a plan file holds [sweep] and [load] tables, or the fields alone: {extra[0]!r}")
        return from_profile(doc.get("sweep"), doc.get("load"))
    return _normalised(doc)


def _plan_in_recording(path: str, text: str) -> dict[str, Any]:
    for line in text.splitlines()[:64]:  # the plan is in the recording's first entries
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if isinstance(entry, dict) and isinstance(entry.get("plan"), dict):
            return {k: v for k, v in entry["plan"].items() if k not in RUN_ONLY}
    raise PlanError(f"{path}: a recording without a plan (recorded by a sweep of specmon before plans were "
                    "recorded, or not by a sweep)")


def origin_of(path: str) -> str:
    """How ``--print-plan`` names a plan file's layer."""
    return f"--plan {Path(path).name}"


def check_profile_table(table: str, value: Mapping[str, Any]) -> None:
    """A profile's ``[sweep]`` or ``[load]`` table: known fields, each of its type and range (the rules
    between fields wait for the other layers). Raises PlanError naming the first wrong one."""
    try:
        values = from_profile(value, None) if table == "sweep" else from_profile(None, value)
        named = [k for k in ("profile", "demo") if k in values]
        if named:
            raise PlanError(f"{named[0]!r}: a profile's plan does not name its server (the profile is the server)")
        unknown = [k for k in values if k not in ExperimentPlan.model_fields]
        if unknown:
            from specmon.suggest import did_you_mean

            raise PlanError(f"unknown plan field {unknown[0]!r}: "
                            f"{did_you_mean(unknown[0], ExperimentPlan.model_fields)}"
                            "(`specmon sweep --print-plan` lists the fields)")
        ExperimentPlan.check_values(values)
    except PlanError as exc:
        raise PlanError(f"[{table}]: {exc}") from None
