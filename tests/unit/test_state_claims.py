"""Issue 34, item 5: "left running" only for a PID alive with its recorded start time.

Real processes through the real host scripts (``LocalRunner``). A server that exits at once
(a bad flag), one killed behind specmon's back, and a sweep whose only start fails and ends
with ``--finish none`` are each recorded as exited with their cause, never "left running",
and the next session is never told to adopt the dead PID.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.control.servers import left_running_note, load_record
from specmon.experiment.plan_restarter import PlanRestarter

ROOT = Path(__file__).resolve().parents[2]

EXITS = r'''
import sys
print("usage: launch_server [-h] --model-path MODEL", flush=True)
print("launch_server: error: unrecognized arguments: %s" % sys.argv[1], flush=True)
sys.exit(2)
'''
RUNS = r'''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


def profile(tmp: Path, body: str, arg: str = "--bogus") -> LaunchProfile:
    script = tmp / "server.py"
    script.write_text(body)
    return LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), arg, "{steps}"],
                         log=str(tmp / "s.log"), pidfile=str(tmp / "s.pid"), ready_marker="ready to roll",
                         start_timeout_s=30, stop_grace_s=3, stop_signal="TERM", steps_min=1, steps_max=4)


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz-"), min_size=3, max_size=12))
async def test_a_start_that_exits_at_once_is_recorded_exited_with_its_cause(tmp_path: Path, flag: str) -> None:
    flag = "--" + flag.strip("-") + "x"
    work = tmp_path / flag
    work.mkdir()
    restarter = PlanRestarter(profile(work, EXITS, flag), LocalRunner(), host="h", show=lambda _t: None,
                              ready_poll_s=0.1, record_servers=True)
    outcome = await restarter(2)
    assert not outcome.ok
    assert restarter.started is None  # nothing is claimed
    record = load_record("h", str(work / "s.pid"))
    assert record is not None and record.state == "exited"
    assert f"unrecognized arguments: {flag}" in record.cause
    # The next session says what happened, once, and adopts nothing.
    c = RestartController(profile(work, EXITS, flag), LocalRunner(), host="h", record_servers=True)
    note = await c.adopt_recorded()
    assert note is not None and "has exited" in note and flag in note and "adopted" not in note
    assert c.started is None and load_record("h", str(work / "s.pid")) is None


async def test_a_server_killed_behind_specmons_back_is_never_left_running(tmp_path: Path) -> None:
    c = RestartController(profile(tmp_path, RUNS), LocalRunner(), host="h", record_servers=True, ready_poll_s=0.1)
    plan = c.plan_for(2)
    c.describe(plan)
    view = await c.run(plan)
    assert view.phase.value == "ready", view.message
    record = load_record("h", str(tmp_path / "s.pid"))
    assert record is not None and c.started is not None
    state, text = await left_running_note(record, LocalRunner())
    assert state == "running" and "is left running (PID" in text
    os.kill(record.pid, signal.SIGKILL)
    for _ in range(200):
        if not alive(record.pid):
            break
        time.sleep(0.02)
    state, text = await left_running_note(record, LocalRunner())
    assert state == "gone" and "left running" not in text and "has exited" in text
    assert "ready to roll" in text  # its log's last words
    again = load_record("h", str(tmp_path / "s.pid"))
    assert again is not None and again.state == "exited"
    await c.close()  # gives the lease back: its holder ends with it


def test_finish_none_after_a_failed_start_claims_nothing(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(EXITS)
    config = tmp_path / "specmon.toml"
    config.write_text(
        "[profiles.bad]\n[profiles.bad.launch]\nmode = \"managed\"\nengine = \"sglang\"\n"
        f"argv = {json.dumps([sys.executable, str(script), '--bogus', '{steps}'])}\n"
        f"log = {json.dumps(str(tmp_path / 's.log'))}\npidfile = {json.dumps(str(tmp_path / 's.pid'))}\n"
        "ready_marker = \"ready to roll\"\nstart_timeout_s = 30\nstop_grace_s = 3\n")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}
    for finish in ("none", "last"):
        proc = subprocess.run([sys.executable, "-m", "specmon", "sweep", "--order", "given", "bad", "--config", str(config), "--steps",
                               "1", "--no-load", "--yes", "--no-record", "--fresh", "--finish", finish,
                               "--no-metrics"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
                              stdin=subprocess.DEVNULL)
        assert proc.returncode != 0
        assert "left running" not in proc.stderr, proc.stderr[-2000:]
        assert "unrecognized arguments: --bogus" in proc.stderr
        assert "result=started pid=" in proc.stderr  # the start itself did report a PID
    records = list((tmp_path / "data" / "specmon" / "servers").glob("*.json"))
    assert all(json.loads(r.read_text())["state"] == "exited" for r in records)


@pytest.mark.parametrize("kill_it", [True, False])
async def test_the_sweep_exit_note_is_checked_on_the_host(tmp_path: Path, kill_it: bool) -> None:
    from specmon.commands.sweep_parts import _left_note

    restarter = PlanRestarter(profile(tmp_path, RUNS), LocalRunner(), host="h", show=lambda _t: None,
                              ready_poll_s=0.1, record_servers=True)
    assert (await restarter(1)).ok
    pid = restarter.started.pid
    try:
        if kill_it:
            os.kill(pid, signal.SIGKILL)
            for _ in range(200):
                if not alive(pid):
                    break
                time.sleep(0.02)
        note = await _left_note(restarter)
        assert note is not None
        running, text = note
        assert running is (not kill_it)
        assert ("is left running" in text) is (not kill_it)
    finally:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def test_connect_says_at_exit_only_what_it_checked(tmp_path: Path) -> None:
    from types import SimpleNamespace

    from specmon.commands.remote import _left_running
    from specmon.control.connecting_runner import ConnectingRunner

    c = RestartController(profile(tmp_path, RUNS), LocalRunner(), host="h", record_servers=True, ready_poll_s=0.1)
    plan = c.plan_for(2)
    c.describe(plan)
    assert (await c.run(plan)).phase.value == "ready"
    assert c.started is not None
    pid = c.started.pid
    flow = SimpleNamespace(controller=c)
    try:
        assert "is left running (PID" in (await _left_running(flow) or "")
        # No connection open at exit (a dropped SSH link): not opened again to ask, and not claimed.
        c.runner = ConnectingRunner(lambda: asyncio.sleep(0))  # type: ignore[arg-type,return-value]
        text = await _left_running(flow) or ""
        assert "not checked" in text and "left running" not in text
        c.runner = LocalRunner()
        os.kill(pid, signal.SIGKILL)
        for _ in range(200):
            if not alive(pid):
                break
            time.sleep(0.02)
        text = await _left_running(flow) or ""
        assert "has exited" in text and "left running" not in text
    finally:
        await c.close()
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
