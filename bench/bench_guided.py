"""Guided search against the grid, both through the real sweep runner, on simulated campaigns with known truth.

For every seed the simulator's cost model (specmon.sim.model.CostModel) is
perturbed so that the true optimum moves: acceptance scaled and cut off at a
random depth, draft steps and verified tokens dearer or cheaper, tree branches
more or less useful. Each campaign is then swept twice by
specmon.experiment.sweep_run.Sweep — the code ``specmon sweep`` runs — against the
simulated server of specmon.sim.sweepworld (instant restarts, decode lines
with the model's noise, seeded per setting so both strategies read the same
lines for a setting both measure): once with ``--strategy grid``, once with
``--strategy guided``. Looks, the sequential stopping rule and the verdict are
the runner's own.

Prints, per space (1-D steps; SGLang's steps x top-k x draft tokens): how
often guided reaches the grid's verdict (the same winner; or, when the grid
separates nothing, a winner the grid could not tell from its best), how often
each names the true optimum, the mean restarts of each and their ratio.

    python bench/bench_guided.py [--seeds 200] [--space chain|tree|both]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from dataclasses import dataclass, replace

from specmon.control.dims import Point, check_point
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig, SpecConfigError
from specmon.sim.sweepworld import SweepWorld


def world(seed: int) -> CostModel:
    """A deployment whose best setting differs from seed to seed."""
    rng = random.Random(seed)
    scale = rng.uniform(0.7, 1.35)
    cut = rng.randint(2, 9)
    base = list(DEFAULT_MODEL.acceptance)
    # A smooth decay to the cut-off depth, then the collapse past the drafter's horizon.
    acc = []
    for k, p in enumerate(base, start=1):
        smooth = min(0.97, scale * (0.8 * 0.82 ** (k - 1) if k <= cut else p * 0.5))
        acc.append(smooth * (1.0 if k <= cut else 0.1))
    return replace(DEFAULT_MODEL, acceptance=tuple(acc), draft_step_ms=rng.uniform(0.6, 3.5),
                   verify_per_token_ms=rng.uniform(0.4, 1.6), topk_accept_gain=rng.uniform(0.15, 0.5))


Setting = tuple[int, Point]


def chain_space(max_steps: int = 10) -> list[Setting]:
    return [(s, ()) for s in range(max_steps + 1)]


def tree_space() -> list[Setting]:
    """SGLang's space: steps 1-6 x top-k 1, 2, 4 x a few draft-token counts, and no speculation."""
    out: list[Setting] = [(0, ())]
    for steps in range(1, 7):
        for topk in (1, 2, 4):
            drafts = [steps + 1] if topk == 1 else sorted({2 * steps + 1, topk * steps + 1, steps + 2})
            for d in drafts:
                try:
                    SpecConfig.make(steps, topk, d)
                except SpecConfigError:
                    continue
                point = check_point({"topk": topk, "draft_tokens": d})
                if (steps, point) not in out:
                    out.append((steps, point))
    return out


def plan_for(space: list[Setting], strategy: str, seed: int) -> SweepPlan:
    steps = tuple(dict.fromkeys(s for s, _ in space))
    points = tuple(space) if any(p for _, p in space) else ()
    return SweepPlan(steps, seed=seed, rule=StoppingRule(), max_minutes=None, strategy=strategy, points=points)


@dataclass
class Outcome:
    best: Setting | None
    separated: bool
    tied: set[Setting]
    restarts: int


def sweep(space: list[Setting], model: CostModel, seed: int, strategy: str) -> Outcome:
    w = SweepWorld(seed, model)
    s = Sweep(plan_for(space, strategy, seed), session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep)
    result: SweepResult = asyncio.run(s.run())
    v = result.verdict
    cell = result.winner_cell(v)
    best = cell.setting if cell is not None else None
    tied: set[Setting] = set()
    if v is not None and cell is not None:
        top = cell.summary()
        for c in result.cells:
            sm = c.summary()
            if top is not None and sm is not None and top.ci95_low is not None and sm.ci95_high is not None \
                    and sm.ci95_high >= top.ci95_low:
                tied.add(c.setting)
    return Outcome(best, bool(v and v.separated), tied, s.restarts)


def truth(space: list[Setting], model: CostModel) -> Setting:
    w = SweepWorld(0, model)
    return max(space, key=lambda st: w.expected(st[0], dict(st[1])))


def run(space: list[Setting], seeds: int) -> dict[str, float]:
    agree = grid_true = guided_true = 0
    grid_restarts = guided_restarts = 0
    for seed in range(seeds):
        model = world(seed)
        grid = sweep(space, model, seed, "grid")
        guided = sweep(space, model, seed, "guided")
        true = truth(space, model)
        if grid.separated:
            agree += guided.best == grid.best
        else:
            agree += guided.best is not None and (guided.best == grid.best or guided.best in grid.tied)
        grid_true += grid.best == true
        guided_true += guided.best == true
        grid_restarts += grid.restarts
        guided_restarts += guided.restarts
    return {"settings": len(space), "verdict": agree / seeds, "grid_true": grid_true / seeds,
            "guided_true": guided_true / seeds, "grid_restarts": grid_restarts / seeds,
            "guided_restarts": guided_restarts / seeds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--space", choices=("chain", "tree", "both"), default="both")
    args = ap.parse_args()
    print(f"{args.seeds} seeded campaigns per space, each swept by the sweep runner with both strategies")
    print(f"{'space':<32} {'settings':>8} {'same verdict':>12} {'grid=truth':>10} {'guided=truth':>12} "
          f"{'restarts grid':>13} {'guided':>7} {'ratio':>6} {'seconds':>8}")
    spaces = [("1-D: steps 0..10", chain_space()), ("SGLang: steps x top-k x draft", tree_space())]
    if args.space != "both":
        spaces = spaces[:1] if args.space == "chain" else spaces[1:]
    for name, space in spaces:
        t0 = time.perf_counter()
        r = run(space, args.seeds)
        print(f"{name:<32} {r['settings']:>8.0f} {r['verdict']:>12.1%} {r['grid_true']:>10.1%} "
              f"{r['guided_true']:>12.1%} {r['grid_restarts']:>13.2f} {r['guided_restarts']:>7.2f} "
              f"{r['guided_restarts'] / r['grid_restarts']:>6.2f} {time.perf_counter() - t0:>8.0f}", flush=True)


if __name__ == "__main__":
    main()
