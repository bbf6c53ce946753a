"""After SIGTERM, a sweep says what its server does from a check made after the signal (issue 43,
item 7: "one untimed run said 'left running' for a server that had just died").

A real managed server (the simulated SGLang server through the host scripts) is started by a
profile sweep on a pty. Either it still runs when the sweep is signalled (then "left running",
with its PID), or it was killed just before (then "has exited", never "left running").
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from specmon.commands.sweep_parts import _left_note
from specmon.control.launch import LaunchProfile
from specmon.control.plan_restarter import PlanRestarter
from specmon.control.runner import LocalRunner
from tests.support.net import free_port
from tests.support.ptyproc import PtyProcess, running
from tests.unit.test_signals import _env, _kill_leftover, _server_pid


def _config(tmp_path: Path, work: Path) -> Path:
    port = free_port()
    server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
              "--time-scale", "200", "--startup-seconds", "0.3"]
    config = tmp_path / "specmon.toml"
    config.write_text(
        "[profiles.sim.launch]\n"
        'mode = "managed"\nengine = "sglang"\n'
        f"argv = {json.dumps([*server, '--steps', '{steps}'])}\n"
        f"nospec_argv = {json.dumps([*server, '--steps', '0'])}\n"
        f"log = {json.dumps(str(work / 'sim_{steps}.log'))}\n"
        f"pidfile = {json.dumps(str(work / 'sim.pid'))}\n"
        f"cwd = {json.dumps(str(work))}\n"
        f"port = {port}\n"
        'health_url = "http://127.0.0.1:{port}/health"\n'
        "steps_min = 0\nstart_timeout_s = 60\nstop_grace_s = 5\nstop_signal = \"TERM\"\n")
    return config


@pytest.mark.parametrize("killed", [False, True], ids=["running", "died-just-before"])
def test_a_signalled_sweep_says_what_it_checked_after_the_signal(tmp_path: Path, killed: bool) -> None:
    _, env = _env(tmp_path)
    work = tmp_path / "srv"
    work.mkdir()
    config = _config(tmp_path, work)
    p = PtyProcess(["sweep", "--order", "given", "sim", "--config", str(config), "--steps", "0,2",
                    "--max-samples", "5000", "--yes", "--state", str(tmp_path / "state.json"), "--no-record"], env)
    pid = None
    try:
        p.wait_until(lambda: "measuring" in p.output and _server_pid(str(work / "sim.pid")), "the first setting")
        pid = _server_pid(str(work / "sim.pid"))
        assert pid is not None
        if killed:
            os.killpg(pid, signal.SIGKILL)
        p.proc.send_signal(signal.SIGTERM)
        assert p.wait_exit() == 128 + signal.SIGTERM
        out = p.final_output()
        assert "sweep stopped by SIGTERM" in out
        if killed:
            assert f"(PID {pid}) has exited" in out and "left running" not in out, out[-1500:]
        else:
            assert f"is left running (PID {pid}," in out, out[-1500:]
            assert running(pid)
    finally:
        p.kill()
        _kill_leftover(pid)


SLEEPER = "#!/bin/sh\nexec sleep 600\n"


@pytest.mark.parametrize("kill_it", [False, True], ids=["running", "gone"])
async def test_an_unrecorded_start_is_checked_too(tmp_path: Path, kill_it: bool) -> None:
    """No record written (a read-only home, or a restarter that records nothing): the PID and start
    time of the last start are checked all the same, never "left running" unchecked."""
    script = tmp_path / "server.sh"
    script.write_text(SLEEPER)
    script.chmod(0o755)
    profile = LaunchProfile.model_validate({
        "argv": [str(script), "--speculative-num-steps", "{steps}"], "cwd": str(tmp_path),
        "log": str(tmp_path / "server.log"), "pidfile": str(tmp_path / "server.pid"), "ready_marker": "never",
        "stop_grace_s": 1})
    restarter = PlanRestarter(profile, LocalRunner(), show=lambda _: None, record_servers=False)
    plan = restarter.plan_for(2)
    from specmon.control.runner import execute

    restarter.last_plan = plan
    report = await execute(plan, restarter.runner)
    assert report.ok
    pid = report.server_pid
    assert pid is not None
    from specmon.control.launch import ProcessIdentity

    restarter.identity = ProcessIdentity(pid, int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19]))
    try:
        assert restarter.started is None
        if kill_it:
            os.kill(pid, signal.SIGKILL)
            while running(pid):
                await asyncio.sleep(0.02)
        note = await _left_note(restarter)
        assert note is not None
        assert note[0] is (not kill_it)
        assert ("left running" in note[1]) is (not kill_it)
        if kill_it:
            assert f"(PID {pid}) has exited" in note[1]
    finally:
        _kill_leftover(pid)
