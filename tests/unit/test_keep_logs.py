"""A managed start never destroys a log, and each run is read from where it began.

Real processes: the fixed start/stop scripts run through ``LocalRunner``, a small
server writes numbered lines into the log, and the log is followed with a real
``LocalTailSource``. Every server is stopped by the PID the start script recorded.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import pytest

from specmon.control.launch import LaunchProfile, build_plan
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.experiment.plan_restarter import LogFollower, PlanRestarter
from specmon.sources.local import LocalTailSource
from specmon.sources.switching import SwitchingSource

LINES = 40
SERVER = r'''
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
for i in range(int(sys.argv[2])):
    print(f"run {os.getpid()} steps {sys.argv[1]} line {i}", flush=True)
print("The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


def _profile(tmp: Path, log: str) -> LaunchProfile:
    script = tmp / "server.py"
    script.write_text(SERVER)
    return LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), "{steps}", str(LINES)],
                         log=log, pidfile=str(tmp / "server.pid"), ready_marker="ready to roll",
                         start_timeout_s=30, stop_grace_s=5, stop_signal="TERM", steps_min=1, steps_max=4)


def _run_lines(lines: list[str]) -> dict[str, list[int]]:
    """``pid -> line numbers`` of the numbered lines in ``lines``."""
    out: dict[str, list[int]] = {}
    for text in lines:
        words = text.split()
        if len(words) == 6 and words[0] == "run":
            out.setdefault(words[1], []).append(int(words[5]))
    return out


def _all_files(tmp: Path, stem: str) -> list[str]:
    lines: list[str] = []
    for path in sorted(tmp.glob(stem + "*")):
        lines += path.read_text().splitlines()
    return lines


def _stop_leftover(pidfile: Path) -> None:
    try:
        os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


async def _until(condition: object, what: str) -> None:
    for _ in range(600):  # a bound, not a timing assertion
        if condition():  # type: ignore[operator]
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


def test_the_confirmation_says_the_old_log_is_kept(tmp_path: Path) -> None:
    plan = build_plan(_profile(tmp_path, str(tmp_path / "server.log")), 2)
    text = plan.describe()
    assert f"an earlier {tmp_path}/server.log is kept, moved aside to server.log.<UTC time>" in text
    assert ">>" in plan.start.display and "never overwritten" in text


async def test_one_fixed_log_path_restarted_twice_keeps_every_line(tmp_path: Path) -> None:
    """Three starts into the same path: all 3×LINES lines survive, and each run reads only its own."""
    log = tmp_path / "server.log"
    profile = _profile(tmp_path, str(log))
    segments: list[list[str]] = [[]]
    switching = SwitchingSource(LocalTailSource(str(log), lines=None, poll_interval=0.05),
                                lambda p, start: LocalTailSource(p, lines=None if start else 0, poll_interval=0.05),
                                on_begin=lambda name: segments.append([]))

    async def pump() -> None:
        async for batch in switching.batches():
            segments[-1].extend(batch)

    task = asyncio.ensure_future(pump())
    controller = RestartController(profile, LocalRunner(), on_log_switch=switching.switch, ready_poll_s=0.1)
    pids: list[str] = []
    try:
        for _ in range(3):
            plan = controller.plan_for(2)
            controller.describe(plan)
            view = await controller.run(plan)
            assert view.phase.value == "ready", view.message
            pids.append((tmp_path / "server.pid").read_text().split()[0])
            await _until(lambda: len(_run_lines(segments[-1]).get(pids[-1], [])) == LINES, "the run's lines read")
        await controller.stop_server(lambda _text: None)
    finally:
        await switching.close()
        task.cancel()
        _stop_leftover(tmp_path / "server.pid")
    on_disk = _run_lines(_all_files(tmp_path, "server.log"))
    assert sorted(on_disk) == sorted(pids)  # three runs, none destroyed
    assert all(sorted(v) == list(range(LINES)) for v in on_disk.values())
    assert len(list(tmp_path.glob("server.log.*"))) == 2  # the two earlier runs, moved aside
    assert set(_run_lines(log.read_text().splitlines())) == {pids[-1]}  # the current file: the last run only
    # The last segment (the last run's file, read from its start) holds the last run's lines only, once each.
    assert _run_lines(segments[-1]) == {pids[-1]: list(range(LINES))}


class _Collect:
    """The part of ``RecordedIngest`` a ``LogFollower`` uses: one list of lines per source."""

    def __init__(self) -> None:
        self.sources: list[tuple[str, list[str]]] = []

    def begin_source(self, name: str) -> None:
        self.sources.append((name, []))

    def feed(self, batch: list[str]) -> None:
        self.sources[-1][1].extend(batch)


@pytest.mark.parametrize("order", [(1, 2, 1), (3, 3)])
async def test_a_sweep_returning_to_a_step_count_keeps_the_earlier_run(tmp_path: Path,
                                                                       order: tuple[int, ...]) -> None:
    """The sweep's restarter going back to a step count (the same log path) keeps the earlier run's log."""
    profile = _profile(tmp_path, str(tmp_path / "s_{steps}.log"))
    ingest = _Collect()
    follower = LogFollower(ingest, lambda p, end: LocalTailSource(p, lines=0 if end else None, poll_interval=0.05))
    restarter = PlanRestarter(profile, LocalRunner(), follower=follower, show=lambda _t: None, ready_poll_s=0.1)
    pids: list[str] = []
    try:
        for steps in order:
            outcome = await restarter(steps)
            assert outcome.ok, outcome.detail
            pids.append((tmp_path / "server.pid").read_text().split()[0])
            await _until(lambda: len(_run_lines(ingest.sources[-1][1]).get(pids[-1], [])) == LINES,
                         "the run's lines read")
        await restarter.stop_server()
    finally:
        await follower.stop()
        _stop_leftover(tmp_path / "server.pid")
    on_disk = _run_lines(_all_files(tmp_path, "s_"))
    assert sorted(on_disk) == sorted(pids)
    assert all(sorted(v) == list(range(LINES)) for v in on_disk.values())
    # Each source the sweep read holds exactly its own run, from its first line.
    assert [_run_lines(lines) for _, lines in ingest.sources] == [{pid: list(range(LINES))} for pid in pids]

