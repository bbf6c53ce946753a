"""Parallel sweep results without running a sweep: simulated launches fitted and judged as the runner does.

:func:`campaign` draws a rotated campaign of launches (replica and launch effects, per-sample noise);
:func:`parallel_result` fits it and decides on it with the runner's own functions; ``force`` gives a
decision of that kind on the same fit instead (for the width tests, which need every kind of verdict
drawn with any numbers).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from specmon.experiment.fleet_sweep import FleetPlan, FleetSweepResult, LaunchRecord
from specmon.experiment.stats.replica_effects import (
    EQUIVALENT,
    UNDECIDED,
    WINNER,
    FleetDecision,
    FleetFit,
    FleetLaunch,
    decide,
    fit_fleet,
)
from specmon.experiment.stats.rotation import assign
from specmon.model.launches import launch_of


def campaign(seed: int, truth: dict[int, float], rounds: int, *, replicas: Sequence[str] = ("r1", "r2", "r3", "r4"),
             replica_cv: float = 0.10, launch_cv: float = 0.05, noise: float = 0.05) -> list[FleetLaunch]:
    """``rounds`` rotated rounds over ``replicas``, each launch 40 samples around its setting's truth."""
    rng = np.random.default_rng(seed)
    b = {n: rng.normal(0.0, replica_cv) for n in replicas}
    out = []
    for k in range(rounds):
        for n, s in assign(list(replicas), list(truth), k, seed).items():
            mu = truth[s] * math.exp(b[n] + rng.normal(0.0, launch_cv))
            launch = launch_of(mu * (1 + rng.normal(0.0, noise, 40)))
            assert launch is not None
            out.append(FleetLaunch(n, s, k, launch))
    return out


def forced(ff: FleetFit, kind: str, level: float) -> FleetDecision:
    """A decision of ``kind`` on ``ff``'s leader, every other setting judged that way, with its real interval."""
    leader = max(ff.means, key=lambda s: ff.means[s])
    rest = {s: ff.ratio_pct(leader, s, level) for s in ff.means if s != leader}
    if kind == WINNER:
        return FleetDecision(WINNER, leader, rest, {}, {}, level)  # type: ignore[arg-type]
    if kind == EQUIVALENT:
        return FleetDecision(EQUIVALENT, leader, {}, rest, {}, level)  # type: ignore[arg-type]
    return FleetDecision(UNDECIDED, leader, {}, {}, rest, level)


def parallel_result(plan: FleetPlan, launches: Sequence[FleetLaunch], *, force: str | None = None,
                    stopped: bool = False) -> FleetSweepResult:
    """The result a parallel sweep over ``launches`` ends with: fitted, and decided at its last look
    (``force``: a decision of that kind instead; ``"empty"``: nothing fitted)."""
    rounds = 1 + max((x.round for x in launches), default=0)
    replicas = sorted({x.replica for x in launches})
    records = [LaunchRecord(x.round + 1, x.replica, int(x.setting), True, mean=x.launch.mean,  # type: ignore[call-overload]
                            samples=x.launch.n) for x in launches]
    ff = None if force == "empty" else fit_fleet(launches, plan.launch_cv)
    d = None
    if ff is not None and force is None:
        d = decide(ff, list(plan.steps), level=plan.level, margin_pct=plan.margin_pct, last=True)
    elif ff is not None and force is not None and len(ff.means) > 1:
        d = forced(ff, force, plan.level)
    return FleetSweepResult(plan, 7, replicas, records, ff, d, rounds, 60.0 * rounds, stopped, list(launches))


def rounds_agree_with_launches(doc: Mapping[str, Any], steps: tuple[int, ...], *, barred: bool = False) -> None:
    """The JSON's per-round record says what ran and why a later round holds fewer settings."""
    rounds = doc["rounds"]
    assert [r["round"] for r in rounds] == list(range(1, doc["rounds_run"] + 1))
    open_now = set(steps)
    for r in rounds:
        ran = {x["replica"]: x["steps"] for x in doc["launches"] if x["round"] == r["round"]}
        assert ran == r["layout"], (ran, r)
        held = set(r["layout"].values())
        assert held <= open_now, (r, open_now)
        if not barred and len(r["layout"]) >= len(open_now):  # enough replicas: every open setting runs this round
            assert held == open_now, (r, open_now)
        counts = Counter(r["layout"].values())
        # Balanced within the round (a replica barred from a setting may have to double another).
        assert barred or max(counts.values()) - min(counts.values()) <= 1, r
        gone = {x["steps"] for x in r["left_out"]}
        assert gone <= open_now and all(x["why"] for x in r["left_out"]), r
        open_now -= gone
