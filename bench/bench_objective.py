"""Sweeps that decide on a latency or goodput objective, validated on simulated truth (issue 32, item 3).

Each campaign is a whole ``Sweep`` (launch design, stopping rule, adjusted level) against
:class:`specmon.sim.sweepworld.SweepWorld` with client requests (per-request noise, a launch CV,
15-minute restarts). Three questions, many seeds each:

- **equal settings** (``3`` steps runs exactly like ``2``): how often is one of them named?
  (the promise: at most alpha = 5% over every look);
- **a known difference** (no speculation against 2 steps, 5.5% apart in ITL at concurrency 1):
  how often is the truly better one named, and is the wrong one ever named?
- **coverage**: does the final 95% interval of each setting's ITL p50 cover its truth (the median
  request's time per token at launch factor 1; launches vary around it by the launch CV)?

    .venv/bin/python bench/bench_objective.py [--seeds 200] [--objective itl-p50]

Prints one line per question. Figures in bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import time

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.objective import parse_objective
from specmon.model.stopping import StoppingRule
from specmon.sim.sweepworld import SweepWorld


def campaign(seed: int, steps: tuple[int, ...], objective: str, alias: dict[int, int] | None,
             launch_cv: float) -> tuple[Sweep, SweepWorld]:
    world = SweepWorld(seed, launch_cv=launch_cv, restart_s=900.0, lines_per_poll=10, requests=True, alias=alias)
    plan = SweepPlan(steps, (1,), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0,
                     launch_cv=0.05, resolve_pct=5.0, objective=parse_objective(objective))
    sweep = Sweep(plan, session=world.session, restart=world.restart, load=world, clock=world.clock,
                  sleep=world.sleep)
    asyncio.run(sweep.run())
    return sweep, world


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--objective", default="itl-p50")
    ap.add_argument("--launch-cv", type=float, default=0.05, help="the simulated launch CV (a fraction)")
    args = ap.parse_args()
    t0 = time.monotonic()
    false = 0
    hours_equal = []
    for seed in range(args.seeds):
        sweep, world = campaign(seed, (2, 3), args.objective, {3: 2}, args.launch_cv)
        (ov,) = sweep.result().objective_verdicts
        false += ov.separated
        hours_equal.append(world.now / 3600)
    named = wrong = 0
    covered = total = 0
    hours = []
    for seed in range(args.seeds):
        sweep, world = campaign(10_000 + seed, (0, 2), args.objective, None, args.launch_cv)
        (ov,) = sweep.result().objective_verdicts
        truth = {s: world.request_truth(s, 1)[0] * 1000 for s in (0, 2)}
        best = min(truth, key=lambda s: truth[s])
        if ov.separated:
            named += ov.winner_steps == best
            wrong += ov.winner_steps != best
        for row in ov.rows:
            if row.ci95 is not None and args.objective.startswith("itl-p50"):
                total += 1
                # The median request of a launch at factor 1: per-token time x exp(0) (lognormal noise).
                covered += row.ci95[0] <= truth[row.steps] <= row.ci95[1]
        hours.append(world.now / 3600)
    n = args.seeds
    print(f"objective {args.objective}, simulated launch CV {100 * args.launch_cv:g}%, {n} campaigns per row, "
          f"{time.monotonic() - t0:.0f} s")
    print(f"  equal settings called different: {false}/{n} ({100 * false / n:.1f}%), "
          f"median {sorted(hours_equal)[n // 2]:.1f} simulated h")
    truth_gap = 100 * (1 - world.request_truth(2, 1)[0] / world.request_truth(0, 1)[0])
    print(f"  a {truth_gap:.1f}% lower ITL named: {named}/{n} ({100 * named / n:.1f}%), wrong one named {wrong}, "
          f"median {sorted(hours)[n // 2]:.1f} simulated h")
    if total:
        print(f"  95% intervals of ITL p50 covering the truth: {covered}/{total} ({100 * covered / total:.1f}%)")
    assert math.isfinite(truth_gap)


if __name__ == "__main__":
    main()
