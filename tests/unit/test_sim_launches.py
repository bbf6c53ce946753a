"""The simulator's launch variance: each start of a setting draws its own speed, seeded, with drift."""

from __future__ import annotations

import asyncio
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.sim.model import launch_speed
from specmon.sim.server import parse_args
from specmon.sim.sweepworld import SweepWorld


def test_launch_speed_has_mean_one_and_the_cv_asked_for() -> None:
    rng = random.Random(1)
    xs = [launch_speed(rng, 0.08) for _ in range(40_000)]
    assert statistics.fmean(xs) == pytest.approx(1.0, abs=0.002)
    assert statistics.stdev(xs) == pytest.approx(0.08, rel=0.03)
    assert launch_speed(rng, 0.0) == 1.0


@settings(max_examples=50, deadline=None)
@given(st.floats(0.0, 0.3), st.floats(0.0, 10.0), st.floats(-5.0, 5.0), st.integers(0, 2**31))
def test_drift_scales_the_launch_linearly_and_the_seed_fixes_it(cv: float, hours: float, drift: float,
                                                               seed: int) -> None:
    base = launch_speed(random.Random(seed), cv)
    moved = launch_speed(random.Random(seed), cv, hours=hours, drift_pct_per_hour=drift)
    assert moved == pytest.approx(max(0.05, base * (1 + drift / 100 * hours)))


def _speeds(seed: int, cv: float) -> list[float]:
    w = SweepWorld(seed, launch_cv=cv, restart_s=60.0)

    async def go() -> None:
        for steps in (0, 2, 0, 2, 0, 2):
            await w.restart(steps)
            await w.sleep(1.0)

    asyncio.run(go())
    return w.speeds


def test_sweepworld_launches_differ_seeded_and_the_lines_follow() -> None:
    a, b = _speeds(3, 0.05), _speeds(3, 0.05)
    assert a == b and len(set(a)) == 6  # the same seed replays the same launches; each start differs
    assert _speeds(4, 0.05) != a
    assert _speeds(3, 0.0) == [1.0] * 6  # launch CV 0: every launch alike (the old world)
    w = SweepWorld(5, launch_cv=0.2, alias={3: 2})
    asyncio.run(w.restart(3))
    asyncio.run(w.sleep(1.0))
    run = w.session.runs[-1]
    assert run.config is not None and run.config.steps == 3  # logs 3 steps ...
    assert w.expected(3) == w.expected(2)  # ... runs like 2 steps (a known equal)
    assert statistics.fmean(run.throughput) == pytest.approx(w.expected(2) * w.speed, rel=0.1)


def test_the_simulated_server_takes_a_launch_cv() -> None:
    args = parse_args(["--steps", "2", "--log", "/tmp/x.log", "--launch-cv", "7", "--drift-pct-per-hour", "2"])
    assert args.launch_cv == 7.0 and args.drift_pct_per_hour == 2.0
    with pytest.raises(SystemExit):
        parse_args(["--steps", "2", "--log", "/tmp/x.log", "--launch-cv", "120"])


def test_replica_cv_gives_each_port_its_own_speed_the_same_at_every_launch(tmp_path) -> None:
    import io
    import math
    import statistics

    from specmon.sim.model import SpecConfig
    from specmon.sim.server import SimServer, parse_args

    def speed(port: int, seed: int = 7) -> float:
        args = parse_args(["--steps", "2", "--log", str(tmp_path / f"s{port}.log"), "--port", str(port),
                           "--seed", str(seed), "--replica-cv", "10"])
        return SimServer(args, SpecConfig.make(2), io.StringIO()).launch_model().speed

    speeds = {port: speed(port) for port in range(18000, 18040)}
    assert all(speed(port) == s for port, s in list(speeds.items())[:5])  # fixed per port (and seed)
    assert len(set(speeds.values())) == len(speeds)
    logs = [math.log(s) for s in speeds.values()]
    assert 0.05 < statistics.stdev(logs) < 0.16  # about the 10% asked for (40 ports)
    assert speed(18000, seed=8) != speeds[18000]
