"""Guided search against the grid on simulated campaigns with known truth.

For every seed the simulator's cost model (specmon.sim.model.CostModel) is
perturbed so that the true optimum moves: acceptance scaled and cut off at a
random depth, draft steps dearer or cheaper. Every setting's measurement is a
seeded draw (relative noise like a few minutes of decode lines), so the grid
and the guided strategy see the SAME number for a setting they both measure.
The grid's verdict is the best of all settings; the guided one the best of the
settings it measured. Prints, per space (1-D steps; SGLang's steps x top-k x
draft tokens): how often guided reaches the grid's verdict, how often each
finds the true optimum, and the mean restarts of each with their ratio.

    python bench/bench_guided.py [--seeds 500] [--noise 0.01]
"""

from __future__ import annotations

import argparse
import math
import random
from collections.abc import Callable
from dataclasses import replace

from specmon.model.guided import Measurement, Setting, guided_search
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig, SpecConfigError


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


def chain_space(max_steps: int = 10) -> list[Setting]:
    return [Setting.chain(s) for s in range(max_steps + 1)]


def tree_space() -> list[Setting]:
    out = [Setting.chain(0)]
    for steps in range(1, 7):
        for topk in (1, 2, 4):
            drafts = [steps + 1] if topk == 1 else sorted({2 * steps + 1, topk * steps + 1, steps + 2})
            for d in drafts:
                try:
                    spec = SpecConfig.make(steps, topk, d)
                except SpecConfigError:
                    continue
                s = Setting(spec.steps, spec.topk, spec.draft_tokens)
                if s not in out:
                    out.append(s)
    return out


def measurer(model: CostModel, seed: int, noise: float) -> Callable[[Setting], Measurement]:
    def measure(s: Setting) -> Measurement:
        rng = random.Random(hash((seed, s)) & 0xFFFFFFFF)
        spec = SpecConfig.make(s.steps, s.topk, s.draft_tokens or None)
        true = model.expected_throughput(spec)
        tps = true * (1.0 + rng.gauss(0.0, noise))
        acc = model.expected_accept_len(spec) * (1.0 + rng.gauss(0.0, noise / 3)) if s.steps else 1.0
        return Measurement(s, tps, 1.96 * noise * tps, acc)
    return measure


def tied_with_best(measured: list[Measurement]) -> set[Setting]:
    """The grid's verdict: the best, and every setting it is not separated from (95% interval of the difference)."""
    best = max(measured, key=lambda m: m.tps)
    return {m.setting for m in measured
            if best.tps - m.tps <= math.sqrt(best.half_width ** 2 + m.half_width ** 2)}


def run(space: list[Setting], seeds: int, noise: float) -> dict[str, float]:
    agree = same_verdict = grid_true = guided_true = 0
    restarts = 0
    for seed in range(seeds):
        model = world(seed)
        measure = measurer(model, seed, noise)
        grid = [measure(s) for s in space]
        grid_best = max(grid, key=lambda m: m.tps).setting
        truth = max(space, key=lambda s: model.expected_throughput(SpecConfig.make(s.steps, s.topk,
                                                                                    s.draft_tokens or None)))
        result = guided_search(space, measure)
        agree += result.best.setting == grid_best
        tied = tied_with_best(grid)
        # Same verdict: the grid's separated winner, or (not separated) one of the settings it could not tell apart.
        same_verdict += result.best.setting == grid_best if len(tied) == 1 else result.best.setting in tied
        grid_true += grid_best == truth
        guided_true += result.best.setting == truth
        restarts += result.restarts
    return {"settings": len(space), "agree": agree / seeds, "verdict": same_verdict / seeds, "grid_true": grid_true / seeds,
            "guided_true": guided_true / seeds, "grid_restarts": float(len(space)),
            "guided_restarts": restarts / seeds}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--noise", type=float, default=0.01, help="relative noise of one measured mean (default 1%%)")
    args = ap.parse_args()
    print(f"{args.seeds} seeded campaigns, measurement noise {args.noise:.1%} of the mean")
    print(f"{'space':<34} {'settings':>8} {'same verdict':>12} {'same best':>9} {'grid=truth':>10} {'guided=truth':>12} "
          f"{'restarts grid':>13} {'guided':>7} {'ratio':>6}")
    for name, space in (("1-D: steps 0..10", chain_space()), ("SGLang: steps x top-k x draft", tree_space())):
        r = run(space, args.seeds, args.noise)
        print(f"{name:<34} {r['settings']:>8.0f} {r['verdict']:>12.1%} {r['agree']:>9.1%} {r['grid_true']:>10.1%} "
              f"{r['guided_true']:>12.1%} {r['grid_restarts']:>13.1f} {r['guided_restarts']:>7.2f} "
              f"{r['guided_restarts'] / r['grid_restarts']:>6.2f}")


if __name__ == "__main__":
    main()
