"""The collapse guard on simulated truth: detection delay of a drop to half, and false alarms.

    python bench/bench_collapse.py [--seeds 200]

Streams of the drafter's gain (accepted draft tokens per step) at an engine's log rate, each
sample Gaussian around its level with the given coefficient of variation (the repository's real
SGLang logs: per-line gain CV 0.12-0.25; vLLM's 10 s intervals, themselves means: about 0.05).
Delay: a drop to half at t = 600 s, seconds until the guard is raised (a run raised before the
drop counts as a false alarm, one never raised within 100 s as a miss). False alarms: half-hour
runs with no change; the 25% and 10% dips: a lasting shift of that size at t = 600 s.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specmon.model.collapse import CollapseGuard

CASES = ((0.5, 0.25), (1.0, 0.2), (1.0, 0.25), (2.0, 0.2), (2.0, 0.3), (1.0, 0.4), (10.0, 0.05), (10.0, 0.1))


def first_alarm(seed: int, interval: float, cv: float, *, drop_at: float | None, factor: float, until: float,
                level: float = 1.6) -> float | None:
    rng, guard, t = random.Random(seed), CollapseGuard(), 0.0
    while t < until:
        t += interval * rng.uniform(0.8, 1.2)
        mean = level * (factor if drop_at is not None and t >= drop_at else 1.0)
        change = guard.add(t, max(0.0, rng.gauss(mean, cv * level)))
        if change is not None and change.collapsed:
            return t
    return None


def _q(delays: list[float], p: float) -> str:
    return f"{delays[min(len(delays) - 1, int(p * len(delays)))]:.1f} s" if delays else "—"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=200)
    n = ap.parse_args().seeds
    t0 = time.perf_counter()
    print("| interval | CV | delay median | p95 | max | missed | false alarms (30 min) | 25% dip | 10% dip |")
    print("|---|---|---|---|---|---|---|---|---|")
    for interval, cv in CASES:
        delays, missed, early = [], 0, 0
        for s in range(n):
            at = first_alarm(10_000 + s, interval, cv, drop_at=600, factor=0.5, until=700)
            if at is None:
                missed += 1
            elif at < 600:
                early += 1
            else:
                delays.append(at - 600)
        delays.sort()
        false = sum(first_alarm(s, interval, cv, drop_at=None, factor=1, until=1800) is not None for s in range(n))
        dip25 = sum(first_alarm(s, interval, cv, drop_at=600, factor=0.75, until=1800) is not None for s in range(n))
        dip10 = sum(first_alarm(s, interval, cv, drop_at=600, factor=0.9, until=1800) is not None for s in range(n))
        print(f"| {interval:g} s | {cv:g} | {_q(delays, 0.5)} | {_q(delays, 0.95)} | {_q(delays, 1.0)} "
              f"| {missed + early}/{n} "
              f"| {false}/{n} | {dip25}/{n} | {dip10}/{n} |")
    print(f"\n{n} seeds per cell, {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
