"""The fleet model: replicas read from real log files by the watch machinery, pooled and compared.

Every fleet here is written as log files (``tests/support/logtext.py``) and read by
:class:`specmon.ingest.fleet.Fleet` (a local follower and a feeder per file, as ``specmon
watch`` reads one), then summarised by :class:`specmon.model.fleet.FleetModel`.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest.fleet import Fleet
from specmon.model.fleet import (
    ACCEPT_FALL_MIN_WINDOWS,
    ACCEPT_FALL_RATIO,
    NORMAL_MAD_SCALE,
    OUTLIER_K,
    FleetModel,
    FleetSnapshot,
    ReplicaState,
    acceptance_fell,
    mad_normal,
    robust_outliers,
    short_names,
)
from tests.support.logtext import campaign, decode, ready, server_args

CRASH_LOG = Path(__file__).resolve().parents[1] / "data" / "dashboard" / "crash_3step.log"


def write(path: Path, lines: Sequence[str]) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    return str(path)


async def _read(paths: Sequence[str], *, settle: Sequence[int] | None = None, window: int = 20,
                fleet_hook: object = None) -> tuple[FleetSnapshot, Fleet]:
    fleet = Fleet.local(paths, poll_interval=0.05)
    if callable(fleet_hook):
        fleet_hook(fleet)
    task = asyncio.create_task(fleet.run())
    try:
        want = list(settle) if settle is not None else [
            sum(1 for _ in open(p, "rb")) if os.path.isfile(p) else 0 for p in paths]
        for _ in range(1000):
            if all(r.feeder.lines >= n for r, n in zip(fleet.replicas, want, strict=True)):
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the fleet never read its logs")
        await asyncio.sleep(0.05)  # a poll or two more: states of missing files settle
        return FleetModel(window=window).snapshot(fleet.inputs(), time.time()), fleet
    finally:
        await fleet.close()
        await task


def read_fleet(paths: Sequence[str], **kw: object) -> FleetSnapshot:
    """The fleet's snapshot once every replica has read its whole log."""
    snap, _ = asyncio.run(_read(paths, **kw))  # type: ignore[arg-type]
    return snap


# -- names ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("paths", "names"), [
    (["/logs/r1/server.log", "/logs/r2/server.log"], ["r1", "r2"]),
    (["/logs/a.log", "/logs/b.log"], ["a.log", "b.log"]),
    (["a.log", "b.log"], ["a.log", "b.log"]),
    (["/x/host1/sglang/server.log", "/x/host2/sglang/server.log"], ["host1", "host2"]),
    # A common end that would leave a name empty stays.
    (["/a/x.log", "/a/b/x.log"], ["x.log", "b/x.log"]),
    (["/logs/[bold]x[/bold].log", "/logs/y.log"], ["[bold]x[/bold].log", "y.log"]),
])
def test_names_are_what_differs_between_the_paths(paths: list[str], names: list[str]) -> None:
    assert short_names(paths) == names


@given(st.lists(st.lists(st.sampled_from(["a", "b", "logs", "server.log", "x.log"]), min_size=1, max_size=4)
                .map("/".join), min_size=2, max_size=6, unique=True))
@settings(max_examples=60)
def test_names_are_never_empty_and_never_equal(paths: list[str]) -> None:
    names = short_names(paths)
    assert all(names) and len(set(names)) == len(names)


# -- the robust scale ----------------------------------------------------------------------------------

@given(st.lists(st.floats(min_value=-1e6, max_value=1e6, allow_nan=False), min_size=1, max_size=40))
@settings(max_examples=60)
def test_the_robust_scale_is_scipys_median_abs_deviation_normal(values: list[float]) -> None:
    from scipy.stats import median_abs_deviation

    x = np.array(values)
    assert mad_normal(x) == pytest.approx(float(median_abs_deviation(x, scale="normal")), rel=1e-12, abs=1e-9)
    from scipy.special import ndtri

    assert float(ndtri(0.75)) == NORMAL_MAD_SCALE


@given(st.lists(st.floats(min_value=1.0, max_value=500.0), min_size=3, max_size=30), st.floats(2.0, 5.0))
@settings(max_examples=80)
def test_the_outlier_rule_is_the_median_and_mad_of_the_others_by_scipy(values: list[float], k: float) -> None:
    """The rule, written plainly with scipy (the others of each replica, one at a time), gives the same flags."""
    from scipy.stats import median_abs_deviation

    from specmon.model.fleet import OUTLIER_SCALE_FLOOR

    want = {}
    for i, x in enumerate(values):
        others = np.array(values[:i] + values[i + 1:])
        med = float(np.median(others))
        scale = max(float(median_abs_deviation(others, scale="normal")), OUTLIER_SCALE_FLOOR * med)
        if abs(x - med) / scale > k:
            want[i] = (x - med) / scale
    got = robust_outliers(dict(enumerate(values)), k=k)
    assert set(got) == set(want)
    for i, (z, rel) in got.items():
        assert z == pytest.approx(want[i], rel=1e-9)
        assert rel == pytest.approx(values[i] / float(np.median(values[:i] + values[i + 1:])) - 1)


def test_false_alarms_on_alike_replicas_are_rare() -> None:
    """Alike replicas (their means spread by a launch CV of 3% or 5%): 20,000 generated fleets of 3 to
    16 replicas. The MAD of two to four others is often near zero; the 5% floor on the scale keeps
    the false alarms rare."""
    rng = np.random.default_rng(31)
    for cv, per_replica_max, per_fleet_max in ((0.03, 0.0005, 0.002), (0.05, 0.006, 0.03)):
        flagged = replicas = fleets_flagged = 0
        for _ in range(10_000):
            n = int(rng.integers(3, 17))
            means = 100.0 * (1 + cv * rng.standard_normal(n))
            hits = robust_outliers(dict(enumerate(means)))
            flagged += len(hits)
            replicas += n
            fleets_flagged += bool(hits)
        assert flagged / replicas < per_replica_max, (cv, flagged / replicas)
        assert fleets_flagged / 10_000 < per_fleet_max, (cv, fleets_flagged / 10_000)


def test_outliers_need_three_replicas_and_are_two_sided() -> None:
    assert robust_outliers({"a": 100.0, "b": 60.0}) == {}
    hits = robust_outliers({"a": 100.0, "b": 101.0, "c": 99.0, "d": 140.0})
    assert list(hits) == ["d"] and hits["d"][0] > OUTLIER_K and hits["d"][1] == pytest.approx(0.4)


# -- the model on generated fleets --------------------------------------------------------------------

configs = st.sampled_from([None, 1, 2, 3, 5])


@given(st.dictionaries(configs, st.tuples(st.integers(1, 5), st.floats(40.0, 300.0)), min_size=1, max_size=3),
       st.randoms(use_true_random=False))
@settings(max_examples=30)
def test_each_configuration_is_pooled_over_its_replicas(fleet: dict[int | None, tuple[int, float]],
                                                        rnd: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths, means = [], {}
        for steps, (count, speed) in fleet.items():
            for j in range(count):
                mean = speed * (1 + 0.02 * rnd.uniform(-1, 1))  # type: ignore[attr-defined]
                paths.append(write(Path(tmp) / f"c{steps}-r{j}" / "server.log", campaign(steps, mean, 30)))
                means.setdefault(steps, []).append(mean)
        snap = read_fleet(paths)
    assert len(snap.replicas) == len(paths)
    assert all(r.state is ReplicaState.LIVE and r.tps_mean is not None for r in snap.replicas)
    assert len(snap.configs) == len(fleet)
    for steps, (count, _) in fleet.items():
        label = "no speculation" if steps is None else f"EAGLE3 {steps} step{'s' if steps != 1 else ''}"
        pool = next(p for p in snap.configs if p.label == label)
        assert pool.replicas == count and pool.pooled == count
        assert pool.covers == (f"{count} replicas" if count > 1 else "1 replica only (within its run)")
        members = [r for r in snap.replicas if r.config == label]
        assert len(members) == count
        # Each replica one unit: the plain mean of the replicas' run means.
        assert pool.tps_mean == pytest.approx(sum(r.tps_mean for r in members) / count)  # type: ignore[misc]
        assert pool.tps_low is not None and pool.tps_high is not None
        assert pool.tps_low <= pool.tps_mean <= pool.tps_high
        if count == 1:
            only = members[0]
            assert pool.tps_half == pytest.approx(only.tps_half)
    if any(c > 1 for c, _ in fleet.values()):
        assert snap.between.startswith("replica CV")
    else:
        assert "within one replica" in snap.between


@given(st.integers(3, 8), st.floats(40.0, 300.0), st.sampled_from([1, 2, 3]), st.randoms(use_true_random=False))
@settings(max_examples=25)
def test_a_replica_30_percent_slower_is_flagged_and_alike_ones_are_not(alike: int, speed: float, steps: int,
                                                                      rnd: object) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for j in range(alike):
            mean = speed * (1 + 0.03 * rnd.uniform(-1, 1))  # type: ignore[attr-defined]
            paths.append(write(Path(tmp) / f"r{j:02d}.log", campaign(steps, mean, 40, spread=speed * 0.03)))
        slow = rnd.randrange(alike + 1)  # type: ignore[attr-defined]
        paths.insert(slow, write(Path(tmp) / "slow.log", campaign(steps, speed * 0.7, 40, spread=speed * 0.03)))
        # A second configuration on the same hosts never takes part in the first one's comparison.
        paths.append(write(Path(tmp) / "other.log", campaign(steps + 1, speed * 2, 40)))
        snap = read_fleet(paths)
    flagged = [r for r in snap.replicas if r.flags]
    assert [r.name for r in flagged] == ["slow.log"], [(r.name, r.reasons) for r in flagged]
    assert flagged[0].flags == ("slow",)
    assert "below the median" in flagged[0].reasons[0]
    pool = next(p for p in snap.configs if p.replicas == alike + 1)
    assert pool.outliers == 1


def test_alike_replicas_of_a_fleet_are_not_flagged() -> None:
    """Many fleets of alike replicas (3% launch spread, noisy samples), read from their logs: no flag."""
    rng = np.random.default_rng(7)
    flagged = total = 0
    for fleet in range(6):
        with tempfile.TemporaryDirectory() as tmp:
            paths = []
            n = int(rng.integers(3, 9))
            for j in range(n):
                mean = 90.0 * (1 + 0.03 * rng.standard_normal())
                lines = [server_args(2), ready(5)]
                lines += [decode(6 + i, float(mean + 6 * rng.standard_normal()), 2.1 + 0.2 * rng.standard_normal(),
                                 0.7) for i in range(60)]
                paths.append(write(Path(tmp) / f"f{fleet}" / f"r{j}.log", lines))
            snap = read_fleet(paths)
        flagged += sum(1 for r in snap.replicas if r.flags)
        total += n
    assert flagged == 0, f"{flagged} of {total} alike replicas flagged"


def _acceptance_log(values: Sequence[float], tput: float = 94.0) -> list[str]:
    lines = [server_args(2), ready(5)]
    lines += [decode(6 + i, tput, v, v / 3) for i, v in enumerate(values)]
    return lines


def test_falling_acceptance_is_flagged_by_its_own_run_mean(tmp_path: Path) -> None:
    steady = [2.5 + 0.05 * ((i * 7) % 5 - 2) for i in range(80)]
    fell = steady[:60] + [1.3] * 20  # the last window: 1.3 against a run mean of ~2.2 (0.59×)
    short = [2.5] * 30 + [1.0] * 20  # fewer than three windows of samples: not judged yet
    paths = [write(tmp_path / "steady.log", _acceptance_log(steady)),
             write(tmp_path / "fell.log", _acceptance_log(fell)),
             write(tmp_path / "short.log", _acceptance_log(short))]
    snap = read_fleet(paths)
    by = {r.name: r for r in snap.replicas}
    assert by["steady.log"].flags == ()
    assert by["short.log"].flags == ()
    assert by["fell.log"].flags == ("acc-fell",)
    assert "accept length fell: 1.30 over the last 20 samples" in by["fell.log"].reasons[0]
    assert by["fell.log"].accept_len_recent == pytest.approx(1.3)


def test_the_falling_acceptance_rule() -> None:
    w = 20
    assert acceptance_fell([2.0] * (ACCEPT_FALL_MIN_WINDOWS * w - 1), w) is None
    drop = [2.0] * (ACCEPT_FALL_MIN_WINDOWS * w - w) + [1.0] * w
    recent, mean = acceptance_fell(drop, w)  # type: ignore[misc]
    assert recent == 1.0 and recent < ACCEPT_FALL_RATIO * mean
    # Just above the cut: not flagged.
    mild = [2.0] * 40 + [1.6] * w
    assert acceptance_fell(mild, w) is None


def test_a_bad_replica_is_its_own_state_and_never_stops_the_others(tmp_path: Path) -> None:
    good = [write(tmp_path / f"good{j}.log", campaign(2, 90.0 + j, 30)) for j in range(3)]
    garbage = tmp_path / "garbage.log"
    garbage.write_bytes(os.urandom(4000) + b"\n[bold]not markup[/bold]\x1b[31m\n" + os.urandom(2000) + b"\n")
    missing = str(tmp_path / "never.log")
    directory = tmp_path / "a-directory"
    directory.mkdir()
    crashed = str(tmp_path / "crash.log")
    shutil.copy(CRASH_LOG, crashed)
    paths = [*good, str(garbage), missing, str(directory), crashed]
    snap = read_fleet(paths, settle=[31, 31, 31, 1, 0, 0, 90])
    by = {r.name: r for r in snap.replicas}
    for j in range(3):
        assert by[f"good{j}.log"].state is ReplicaState.LIVE and by[f"good{j}.log"].samples > 0
    assert by["garbage.log"].state is ReplicaState.NO_DATA and "none with stats" in by["garbage.log"].detail
    assert by["never.log"].state is ReplicaState.MISSING and by["never.log"].state_text == "no file yet"
    assert by["a-directory"].state is ReplicaState.UNREADABLE and "directory" in by["a-directory"].detail
    assert by["crash.log"].state is ReplicaState.CRASHED and "CUDA out of memory" in by["crash.log"].detail
    pool = next(p for p in snap.configs if p.label == "EAGLE3 2 steps")
    assert pool.replicas == 3 and pool.covers == "3 replicas"


def test_a_log_that_disappears_keeps_its_numbers_and_says_so(tmp_path: Path) -> None:
    paths = [write(tmp_path / f"r{j}.log", campaign(2, 90.0, 30)) for j in range(3)]

    async def scenario() -> FleetSnapshot:
        fleet = Fleet.local(paths, poll_interval=0.02)
        task = asyncio.create_task(fleet.run())
        try:
            for _ in range(1000):
                if all(r.feeder.lines >= 32 for r in fleet.replicas):
                    break
                await asyncio.sleep(0.01)
            os.remove(paths[1])
            for _ in range(1000):
                if "file not found" in fleet.replicas[1].source.status.detail:
                    break
                await asyncio.sleep(0.01)
            return FleetModel().snapshot(fleet.inputs(), time.time())
        finally:
            await fleet.close()
            await task

    snap = asyncio.run(scenario())
    gone = snap.replicas[1]
    assert gone.state is ReplicaState.MISSING and gone.state_text == "file gone"
    assert gone.tps_mean is not None and gone.samples == 25
    assert [r.state for r in snap.replicas] == [ReplicaState.LIVE, ReplicaState.MISSING, ReplicaState.LIVE]


def test_a_reader_error_is_that_replicas_state(tmp_path: Path) -> None:
    paths = [write(tmp_path / f"r{j}.log", campaign(1, 80.0, 20)) for j in range(3)]

    def break_second(fleet: Fleet) -> None:
        async def boom() -> None:
            raise RuntimeError("disk on fire [red]x[/red]")

        fleet.replicas[1].feeder.run = boom  # type: ignore[method-assign]

    snap = read_fleet(paths, settle=[22, 0, 22], fleet_hook=break_second)
    assert snap.replicas[1].state is ReplicaState.UNREADABLE
    assert snap.replicas[1].detail == "reading stopped: RuntimeError: disk on fire [red]x[/red]"
    assert snap.replicas[0].state is snap.replicas[2].state is ReplicaState.LIVE


def test_a_log_last_written_long_ago_is_quiet_not_live(tmp_path: Path) -> None:
    old = write(tmp_path / "old.log", campaign(2, 90.0, 20))
    new = write(tmp_path / "new.log", campaign(2, 90.0, 20))
    past = time.time() - 100
    os.utime(old, (past, past))
    snap = read_fleet([old, new])
    assert snap.replicas[0].state is ReplicaState.QUIET and snap.replicas[0].state_text.startswith("quiet 1m 4")
    assert snap.replicas[1].state is ReplicaState.LIVE
