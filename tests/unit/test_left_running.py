"""A real managed server is left running when specmon exits, recorded, and adopted by the next session.

Real processes: a small server started by the fixed start script through
``LocalRunner``; the record lives in the (per-test) user data directory; the next
controller checks PID and start time with the fixed read-only ``alive.sh``.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.control.servers import load_record, records_dir
from specmon.experiment.plan_restarter import PlanRestarter
from tests.support.ptyproc import running

SERVER = r'''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("steps", sys.argv[1], "The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


def _profile(tmp: Path) -> LaunchProfile:
    script = tmp / "server.py"
    script.write_text(SERVER)
    return LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), "{steps}"],
                         log=str(tmp / "s_{steps}.log"), pidfile=str(tmp / "server.pid"),
                         ready_marker="ready to roll", start_timeout_s=30, stop_grace_s=5, stop_signal="TERM")


def _pid(tmp: Path) -> int:
    return int((tmp / "server.pid").read_text().split()[0])


async def test_recorded_then_adopted_then_forgotten_once_gone(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    pidfile = str(tmp_path / "server.pid")
    first = RestartController(profile, LocalRunner(), host="gpu-box", record_servers=True, ready_poll_s=0.1)
    plan = first.plan_for(3)
    first.describe(plan)
    pid = None
    try:
        view = await first.run(plan)
        assert view.phase.value == "ready", view.message
        pid = _pid(tmp_path)
        record = load_record("gpu-box", pidfile)
        assert record is not None and record.pid == pid and record.steps == 3
        assert records_dir().is_relative_to(Path(os.environ["HOME"]))  # the per-test user data dir
        assert "is left running (PID" in record.left_running_text()
        # specmon exits (the session ends without stopping it): the server runs on.
        assert running(pid)

        # The next session with the same profile: says it still runs, and adopts it.
        second = RestartController(profile, LocalRunner(), host="gpu-box", record_servers=True)
        note = await second.adopt_recorded()
        assert note is not None and f"is still running: PID {pid} (3 steps" in note and "adopted from" in note
        assert second.current_steps == 3 and second.started is not None and second.started.pid == pid
        # Its first restart goes through the pidfile, which names that very server.
        assert "the server recorded in" in second.plan_for(2).stop.display

        # A profile on another host knows nothing of it.
        assert await RestartController(profile, LocalRunner(), host="other").adopt_recorded() is None
    finally:
        await first.close()
        if pid is not None and running(pid):
            os.killpg(pid, signal.SIGTERM)
    for _ in range(200):  # a bound, not a timing assertion
        if pid is None or not running(pid):
            break
        time.sleep(0.05)
    third = RestartController(profile, LocalRunner(), host="gpu-box", record_servers=True)
    note = await third.adopt_recorded()
    assert note == f"the server specmon left running on gpu-box (PID {pid}) has exited since"
    assert third.current_steps is None and load_record("gpu-box", pidfile) is None  # forgotten


async def test_a_record_whose_pid_was_reused_is_not_adopted(tmp_path: Path) -> None:
    """The pidfile names another process (or the PID got reused): never adopted."""
    profile = _profile(tmp_path)
    first = RestartController(profile, LocalRunner(), host="h", record_servers=True, ready_poll_s=0.1)
    plan = first.plan_for(2)
    first.describe(plan)
    pid = None
    try:
        assert (await first.run(plan)).phase.value == "ready"
        pid = _pid(tmp_path)
        start = (tmp_path / "server.pid").read_text().split()[1]
        (tmp_path / "server.pid").write_text(f"{pid} {int(start) + 1}\n")  # someone else's now
        note = await RestartController(profile, LocalRunner(), host="h").adopt_recorded()
        assert note is not None and "names another process now: not adopted" in note
    finally:
        await first.close()
        if pid is not None and running(pid):
            os.killpg(pid, signal.SIGTERM)


async def test_a_stopped_server_is_forgotten_and_the_sweep_records_its_own(tmp_path: Path) -> None:
    profile = _profile(tmp_path)
    pidfile = str(tmp_path / "server.pid")
    restarter = PlanRestarter(profile, LocalRunner(), host="h", show=lambda _t: None, ready_poll_s=0.1,
                              record_servers=True)
    pid = None
    try:
        assert (await restarter(1)).ok
        pid = _pid(tmp_path)
        assert restarter.started is not None and restarter.started.pid == pid
        assert load_record("h", pidfile) == restarter.started
        # The dashboard's controller stops it at the user's request: the record goes.
        c = RestartController(profile, LocalRunner(), host="h", record_servers=True)
        c.last_plan = c.plan_for(1)
        line = await c.stop_server(lambda _t: None)
        assert line is not None and "result=stopped" in line
        assert load_record("h", pidfile) is None and not running(pid)
        await c.close()
    finally:
        if pid is not None and running(pid):
            os.killpg(pid, signal.SIGTERM)
