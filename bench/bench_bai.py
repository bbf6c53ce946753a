"""Best-arm identification against today's launch design, on simulated truth from the seeds' campaign.

The truth is the seeds' campaign (issue 44): settings 0, 1, 2, 5 and 10 steps at 88.7, 85.1,
93.4, 86.2 and 60.2 tok/s; every launch runs at its own speed (a lognormal factor with the
condition's launch CV) with the simulator's within-launch noise; a restart costs 15 minutes; a
decode line arrives every second. For each condition, 200 campaigns (seeds) of

* **today** — the launch design as it is the default now (:mod:`specmon.experiment.stats.design`:
  ``to_launch`` launches every undecided setting each round, looks geometric over the planned
  rounds, rescheduled on the variance, Bonferroni ``α/(2K)``);
* **bai** — the best-arm design (:mod:`specmon.experiment.stats.bai`: warm-up of two launches each, then
  the leader and its most ambiguous challenger per round, looks fixed in advance, ``α/K``),

both calling the very functions :class:`specmon.experiment.rounds.LaunchRounds` calls, each launch's
mean and batch-means error drawn from their laws rather than line by line (as
``bench/bench_launches.py`` does), the same seeds' launch factors for both designs.

Reported: the answer (2 steps named, a wrong winner, equivalence, no answer), the coverage of
the interval of best − runner-up (the verdict's adjusted one and the 95% one), launches
(restarts) and hours per campaign (median and mean). ``--equal``: five settings at 88.7 tok/s
(any winner named is a false one). ``--runner N``: N seeds of the best-arm design through the
real sweep runner (:class:`specmon.experiment.sweep_run.Sweep` on SweepWorld, line by line).

    python bench/bench_bai.py [--seeds 200] [--cv 5 2] [--runner 5]
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_launches import LAUNCH_CV_ASSUMED, POLL, RATE, calibrate_w, noise_of

from specmon.experiment.rounds import effective_rule
from specmon.experiment.stats import bai
from specmon.experiment.stats.design import (
    MAX_LAUNCHES,
    extend,
    judge_round,
    launch_samples,
    plan,
    reschedule,
    summaries,
    to_launch,
)
from specmon.model.launches import Estimate, Launch
from specmon.model.stats import Summary
from specmon.model.stopping import SLOWER, StoppingRule, adjusted_difference
from specmon.sim.model import launch_speed

RESTART_S = 900.0
#: Exploration (``--looks``): the best-arm design's looks, instead of :func:`bai.look_rounds`.
LOOKS: tuple[int, ...] | None = None
RESOLVE_PCT = 5.0
#: The seeds' campaign (issue 44).
CAMPAIGN = {0: 88.7, 1: 85.1, 2: 93.4, 5: 86.2, 10: 60.2}
BEST = 2


@dataclass
class World:
    """Known truth: per-setting means, launch factors from a seeded stream, within-launch noise."""

    seed: int
    means: dict[int, float]
    cv: float
    w: float
    now: float = 0.0
    restarts: int = 0
    rng: random.Random = field(init=False)

    def __post_init__(self) -> None:
        self.rng = random.Random(zlib.crc32(repr((self.seed, "within")).encode()))

    def launch(self, key: int, n: int) -> Launch:
        """A finished launch of ``n`` lines: its mean and batch-means error, drawn from their laws."""
        self.restarts += 1
        self.now += RESTART_S + n / RATE
        rng = random.Random(zlib.crc32(repr((self.seed, "launch", key, self.restarts)).encode()))
        mu = self.means[key] * launch_speed(rng, self.cv)
        k = n // max(1, math.isqrt(n))
        mean = mu * (1 + math.sqrt(self.w / n) * self.rng.gauss(0, 1))
        se = mu * math.sqrt(self.w / n) * math.sqrt(self.rng.gammavariate((k - 1) / 2, 2) / (k - 1))
        return Launch(mean, se, float(k - 1), n, f"{key}/{self.restarts}")


@dataclass
class Outcome:
    named: int | None
    equivalent: bool
    covers_adjusted: bool
    covers_95: bool
    restarts: int
    hours: float
    per_setting: dict[int, int]
    #: Settings dropped as slower along the way (with equal settings, each one a false call).
    dropped: frozenset[int] = frozenset()


def _one_launch(world: World, launches: dict[Hashable, list[Launch]], key: int, rule: StoppingRule) -> None:
    noise = noise_of(launches, RESTART_S)
    m_new = launch_samples(noise, rule.min_samples, rule.max_samples)
    ns = [x.n for x in launches[key]]
    n = rule.min_samples
    while n < rule.max_samples and extend(noise, [*ns, n], m_new):
        n += POLL
    launches[key].append(world.launch(key, n))


Chooser = Callable[[list[Hashable], dict[Hashable, int], dict[Hashable, Summary], int], list[Hashable]]


def campaign(world: World, design: str, rule: StoppingRule | None = None, z: float | None = None) -> Outcome:
    """One campaign of ``design`` (``today`` or ``bai``), as :meth:`LaunchRounds.run` runs it.

    ``z`` (exploration only, not a shipped design): the best-arm design judged after every round
    with each test at the two-sided level of a normal critical value ``z`` — what a looser level
    would buy, with no union bound behind it.
    """
    rule = rule or StoppingRule()
    keys: list[Hashable] = list(world.means)
    if design == "bai" and z is not None:
        from scipy.stats import norm

        looks = LOOKS or tuple(range(bai.WARMUP, bai.MAX_ROUNDS + 1))
        judge_rule = replace(rule, looks=1, alpha=4 * float(norm.sf(z)), max_samples=1 << 40)
    elif design == "bai":
        looks = LOOKS or bai.look_rounds()
        judge_rule = bai.rule_for(rule, looks)
    else:
        judge_rule, looks = effective_rule(rule, RESOLVE_PCT, LAUNCH_CV_ASSUMED, RESTART_S)
    launches: dict[Hashable, list[Launch]] = {k: [] for k in keys}
    done: set[Hashable] = set()
    slower: set[int] = set()
    round_no = 0
    while round_no < looks[-1]:
        round_no += 1
        active = [k for k in keys if k not in done]
        _, sums = summaries({k: v for k, v in launches.items() if v}, LAUNCH_CV_ASSUMED)
        counts = {k: len(v) for k, v in launches.items()}
        if design == "bai":
            pick = bai.to_launch(active, counts, sums, 0, round_no, judge_rule.test_level)
        else:
            leader = max(sums, key=lambda k: sums[k].mean) if sums else None
            pick = to_launch(active, counts, leader, 0, round_no)
        for key in pick:
            _one_launch(world, launches, int(key), rule)  # type: ignore[call-overload]
        if round_no in looks:
            _, sums = summaries(launches, LAUNCH_CV_ASSUMED)
            decisions = judge_round(judge_rule, sums, active, last=round_no == looks[-1])
            done |= {k for k, d in decisions.items() if d.stop}
            slower |= {int(k) for k, d in decisions.items() if d.reason == SLOWER}  # type: ignore[call-overload]
            if len(done) == len(keys):
                break
            if design != "bai" and round_no < looks[-1]:
                needed = plan(RESOLVE_PCT, noise_of(launches, RESTART_S), 2, judge_rule.test_level, rule.min_samples,
                              rule.max_samples).launches
                looks = reschedule(looks, round_no, needed, MAX_LAUNCHES)
    _, sums = summaries(launches, LAUNCH_CV_ASSUMED)
    out = verdict(world, sums, judge_rule, {int(k): len(v) for k, v in launches.items()})  # type: ignore[call-overload]
    return replace(out, dropped=frozenset(slower))


def verdict(world: World, sums: dict[Hashable, Summary], rule: StoppingRule, per: dict[int, int]) -> Outcome:
    """The sweep's verdict (best against runner-up at the rule's adjusted level) and its coverage."""
    best, runner = sorted(sums, key=lambda k: sums[k].mean, reverse=True)[:2]
    d = adjusted_difference(sums[best], sums[runner], rule.test_level)
    separated = d.known and d.low > 0  # type: ignore[operator]
    margin = rule.margin_pct / 100.0 * sums[best].mean
    equivalent = not separated and d.known and -margin < d.low and d.high < margin  # type: ignore[operator]
    truth = world.means[int(best)] - world.means[int(runner)]  # type: ignore[call-overload]
    covers_adj = d.known and d.low <= truth <= d.high  # type: ignore[operator]
    a, b = sums[best].model, sums[runner].model
    assert isinstance(a, Estimate) and isinstance(b, Estimate)
    _, lo, hi = a.difference(b, 0.95)
    covers_95 = lo is not None and hi is not None and lo <= truth <= hi
    named = int(best) if separated else None  # type: ignore[call-overload]
    return Outcome(named, bool(equivalent), bool(covers_adj), covers_95, world.restarts, world.now / 3600, per)


def flat_boundary(looks: tuple[int, ...], alpha: float = 0.05, draws: int = 400_000) -> float:
    """The flat two-sided boundary of a group-sequential test at ``looks`` (Pocock's, for these rounds).

    The critical value ``c`` with ``P(max_k |Z_k| > c) = alpha`` for a Brownian motion seen at the
    rounds of ``looks`` (information proportional to the round: the two contenders launched every
    round), by simulation with a fixed seed. Exploration only: it assumes a known variance and
    balanced launches, which the launch model's t statistics and LUCB's allocation are not.
    """
    import numpy as np

    r = np.asarray(looks, dtype=float)
    steps = np.diff(np.concatenate([[0.0], r]))
    rng = np.random.default_rng(20261207)
    walk = np.cumsum(rng.standard_normal((draws, len(r))) * np.sqrt(steps), axis=1) / np.sqrt(r)
    return float(np.quantile(np.abs(walk).max(axis=1), 1 - alpha))


def run(means: dict[int, float], cv: float, seeds: int, w: float, design: str,
        z: float | None = None) -> list[Outcome]:
    return [campaign(World(seed, dict(means), cv, w), design, z=z) for seed in range(seeds)]


def pct(xs: list[bool]) -> str:
    return f"{100 * sum(xs) / max(1, len(xs)):5.1f}%"


def report(label: str, design: str, out: list[Outcome], best: int | None) -> None:
    restarts = [o.restarts for o in out]
    hours = [o.hours for o in out]
    named_best = [o.named == best for o in out] if best is not None else [False for _ in out]
    wrong = [o.named is not None and o.named != best for o in out]
    per = {k: statistics.mean(o.per_setting.get(k, 0) for o in out) for k in CAMPAIGN}
    per_text = " ".join(f"{k}:{v:.1f}" for k, v in per.items())
    if best is None:  # equal settings: a drop as slower is a false call
        per_text += f" | some setting dropped as slower {pct([bool(o.dropped) for o in out])}"
    else:
        per_text += f" | {best} dropped {pct([best in o.dropped for o in out])}"
    print(f"{label:<18} {design:>5} | {pct(named_best):>7} {pct(wrong):>7} {pct([o.equivalent for o in out]):>6} "
          f"{pct([o.named is None and not o.equivalent for o in out]):>7} | {pct([o.covers_adjusted for o in out]):>7} "
          f"{pct([o.covers_95 for o in out]):>6} | {statistics.median(restarts):6.0f} {statistics.mean(restarts):6.1f} "
          f"{max(restarts):4d} | {statistics.median(hours):6.1f} {statistics.mean(hours):6.1f} | {per_text}")


def runner_check(seeds: int, cv: float) -> None:
    """The best-arm design through the real sweep runner (SweepWorld, line by line): what it names."""
    import asyncio

    from specmon.experiment.sweep_plan import SweepPlan
    from specmon.experiment.sweep_run import Sweep
    from specmon.sim.sweepworld import SweepWorld

    for seed in range(seeds):
        t0 = time.time()
        world = SweepWorld(seed, launch_cv=cv, restart_s=RESTART_S, lines_per_poll=POLL)
        p = SweepPlan(tuple(CAMPAIGN), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=POLL / RATE,
                      settle=2, launch_cv=LAUNCH_CV_ASSUMED, resolve_pct=RESOLVE_PCT, design=bai.NAME)  # --design bai
        sweep = Sweep(p, session=world.session, restart=world.restart, load=world, clock=world.clock,  # type: ignore[arg-type]
                      sleep=world.sleep)
        result = asyncio.run(sweep.run())
        v = result.verdict
        assert v is not None
        named = v.best.steps if v.separated and v.best is not None else None
        truth = {k: round(world.expected(k), 1) for k in CAMPAIGN}
        per = {c.steps: len(c.launches()) for c in result.cells}
        print(f"real runner, seed {seed}: named {named}, equivalent {v.equivalent}, restarts {result.restarts} "
              f"{per}, level {v.level:.4f}, {world.now / 3600:.1f} h simulated, truth {truth} "
              f"({time.time() - t0:.0f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--cv", type=float, nargs="*", default=[5.0, 2.0])
    ap.add_argument("--designs", nargs="*", default=["today", "bai"])
    ap.add_argument("--no-equal", action="store_true", help="skip the five-equal-settings condition")
    ap.add_argument("--z", default=None,
                    help="exploration: the best-arm design judged at every round (or at --looks) at critical value Z "
                         "(a normal quantile, as a t test's level), or 'flat': the group-sequential boundary for "
                         "those looks (flat_boundary); no union bound behind either")
    ap.add_argument("--looks", default=None, help="exploration: the best-arm design's looks, e.g. 2,5,8,11,14,17,20,25,40")
    ap.add_argument("--warmup", type=int, default=None, help="exploration: launches of every setting before LUCB picks")
    ap.add_argument("--runner", type=int, default=0, help="seeds of the bai design through the real runner")
    args = ap.parse_args()
    global LOOKS
    if args.looks:
        LOOKS = tuple(int(x) for x in args.looks.split(","))
    if args.warmup:
        bai.WARMUP = args.warmup
    z = None
    if args.z is not None:
        z = flat_boundary(LOOKS or tuple(range(bai.WARMUP, bai.MAX_ROUNDS + 1))) if args.z == "flat" else float(args.z)
        print(f"exploration: every look at z = {z:.3f}, looks {list(LOOKS) if LOOKS else 'every round'}, "
              f"warm-up {bai.WARMUP}")
    t0 = time.time()
    w = calibrate_w()
    print(f"w = {w:.4f} per line; restart {RESTART_S / 60:.0f} min; {args.seeds} campaigns per condition; "
          f"assumed launch CV {100 * LAUNCH_CV_ASSUMED:g}%; bai looks at rounds {list(bai.look_rounds())}")
    head = (f"{'condition':<18} {'rule':>5} | {'2 named':>7} {'wrong':>7} {'equiv':>6} {'none':>7} | "
            f"{'adj cov':>7} {'95%cov':>6} | {'med L':>6} {'mean L':>6} {'max':>4} | {'med h':>6} {'mean h':>6} | "
            "mean launches per setting")
    print(head)
    print("-" * len(head))
    for cv in args.cv:
        for design in args.designs:
            report(f"campaign CV {cv:g}%", design, run(CAMPAIGN, cv / 100, args.seeds, w, design, z), BEST)
        if not args.no_equal:
            equal = dict.fromkeys(CAMPAIGN, 88.7)
            for design in args.designs:
                report(f"5 equal CV {cv:g}%", design, run(equal, cv / 100, args.seeds, w, design, z), None)
            pair = {0: 88.7, 2: 88.7}  # the guarantee the verdict states: two equal settings called different
            for design in args.designs:
                report(f"2 equal CV {cv:g}%", design, run(pair, cv / 100, args.seeds, w, design, z), None)
    if args.runner:
        runner_check(args.runner, 0.05)
    print(f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
