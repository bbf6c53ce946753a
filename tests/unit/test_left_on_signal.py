"""After SIGTERM, a sweep says what its server does from a check made after the signal (issue 43,
item 7: "one untimed run said 'left running' for a server that had just died").

A real managed server (the simulated SGLang server through the host scripts) is started by a
profile sweep on a pty. Either it still runs when the sweep is signalled (then "left running",
with its PID), or it was killed just before (then "has exited", never "left running").
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from specmon.commands.sweep_parts import _left_note
from specmon.control.runner import LocalRunner
from specmon.experiment.plan_restarter import PlanRestarter
from tests.support.ptyproc import PtyProcess, running
from tests.support.sleeper import sleeper_profile
from tests.support.sweepcli import first_setting_pid, kill_leftover, sigterm, sim_profile, sweep_env


@pytest.mark.parametrize("killed", [False, True], ids=["running", "died-just-before"])
def test_a_signalled_sweep_says_what_it_checked_after_the_signal(tmp_path: Path, killed: bool) -> None:
    _, env = sweep_env(tmp_path)
    config, work = sim_profile(tmp_path)
    p = PtyProcess(["sweep", "--order", "given", "sim", "--config", str(config), "--steps", "0,2",
                    "--max-samples", "5000", "--yes", "--state", str(tmp_path / "state.json"), "--no-record"], env)
    pid = None
    try:
        pid = first_setting_pid(p, str(work / "sim.pid"))
        assert pid is not None
        if killed:
            os.killpg(pid, signal.SIGKILL)
        out = sigterm(p)
        assert "sweep stopped by SIGTERM" in out
        if killed:
            assert f"(PID {pid}) has exited" in out and "left running" not in out, out[-1500:]
        else:
            assert f"is left running (PID {pid}," in out, out[-1500:]
            assert running(pid)
    finally:
        p.kill()
        kill_leftover(pid)


@pytest.mark.parametrize("kill_it", [False, True], ids=["running", "gone"])
async def test_an_unrecorded_start_is_checked_too(tmp_path: Path, kill_it: bool) -> None:
    """No record written (a read-only home, or a restarter that records nothing): the PID and start
    time of the last start are checked all the same, never "left running" unchecked."""
    profile = sleeper_profile(tmp_path)
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
        kill_leftover(pid)
