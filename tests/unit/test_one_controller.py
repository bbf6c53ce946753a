"""Issue 34, item 2: two real specmon sweeps on one server cannot fight; a sweep notices its server go.

Real processes: the simulated SGLang server (its own built-in load), started by the fixed host
scripts; ``specmon sweep`` through its real entry point. While one sweep measures, a second
one on the same profile is refused with who holds the server, since when and what for, and
the first one's server runs on untouched. And a sweep whose server is killed and replaced
behind its back (another process writing the same log) stops, says so, and keeps none of the
replacement's samples.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import specmon.experiment.sweep_run as sweep_run
from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.experiment.plan_restarter import LogFollower, PlanRestarter, controller_restarter
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.session import Session
from specmon.model.stopping import StoppingRule
from specmon.output.recording import RecordedIngest
from specmon.sources.local import LocalTailSource

ROOT = Path(__file__).resolve().parents[2]


def sim_argv(scale: int = 50) -> list[str]:
    return [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--time-scale", str(scale),
            "--startup-seconds", "0.3", "--steps", "{steps}", "--seed", "3"]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def kill_recorded(pidfile: Path) -> None:
    try:
        os.kill(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


class Lines:
    """A process's stderr, read line by line in a thread (so the test can wait for one)."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.lines: list[str] = []
        assert proc.stderr is not None
        stream = proc.stderr
        self._thread = threading.Thread(target=lambda: self.lines.extend(iter(stream.readline, "")), daemon=True)
        self._thread.start()

    def wait_for(self, text: str, seconds: float = 90.0) -> None:
        deadline = time.monotonic() + seconds  # a bound, not a timing assertion
        while time.monotonic() < deadline:
            if any(text in line for line in self.lines):
                return
            time.sleep(0.05)
        raise AssertionError(f"never said {text!r}: {''.join(self.lines)[-2000:]}")


def test_a_second_sweep_is_refused_while_the_first_measures(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o700)
    config = tmp_path / "specmon.toml"
    config.write_text(
        "[profiles.sim]\n[profiles.sim.launch]\nmode = \"managed\"\nengine = \"sglang\"\n"
        f"argv = {json.dumps(sim_argv())}\n"
        f"log = {json.dumps(str(tmp_path / 'sim_{steps}.log'))}\npidfile = {json.dumps(str(run / 'sim.pid'))}\n"
        "ready_marker = \"ready to roll\"\nstart_timeout_s = 60\nstop_grace_s = 5\nstop_signal = \"TERM\"\n")
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "HOME": str(tmp_path / "home")}
    common = ["sweep", "--order", "given", "sim", "--config", str(config), "--steps", "1,2", "--no-load", "--yes", "--no-record",
              "--no-metrics", "--finish", "none", "--min-samples", "100000", "--max-samples", "200000",
              "--max-minutes", "2"]
    first = subprocess.Popen([sys.executable, "-m", "specmon", *common, "--state", str(tmp_path / "a.json")],
                             cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    said = Lines(first)
    try:
        said.wait_for("sweep: measuring")
        server = int((run / "sim.pid").read_text().split()[0])
        second = subprocess.run([sys.executable, "-m", "specmon", *common, "--state", str(tmp_path / "b.json")],
                                cwd=ROOT, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                                timeout=120)
        assert second.returncode != 0
        err = second.stderr
        assert "another specmon controls this server" in err, err[-2000:]
        assert f"specmon PID {first.pid}" in err and "for a sweep" in err and "since " in err
        assert "nothing was restarted" in err and "start: result=started" not in err
        assert int((run / "sim.pid").read_text().split()[0]) == server and alive(server)
        assert first.poll() is None  # the first sweep measures on
    finally:
        first.send_signal(signal.SIGTERM)
        try:
            first.wait(30)
        finally:
            if first.poll() is None:
                first.kill()
            kill_recorded(run / "sim.pid")


@pytest.mark.parametrize("driver", ["headless", "dashboard"])
async def test_a_sweep_whose_server_is_replaced_stops_and_keeps_none_of_its_samples(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, driver: str) -> None:
    monkeypatch.setattr(sweep_run, "SERVER_CHECK_S", 0.3)  # where Sweep reads it
    profile = LaunchProfile(mode="managed", engine="sglang", argv=sim_argv(100), log=str(tmp_path / "sim_{steps}.log"),
                            pidfile=str(tmp_path / "sim.pid"), ready_marker="ready to roll", start_timeout_s=60,
                            stop_grace_s=5, stop_signal="TERM")
    session = Session()
    follower = LogFollower(RecordedIngest(session, None),
                           lambda p, from_end: LocalTailSource(p, lines=0 if from_end else None, poll_interval=0.05))
    restart: Any
    if driver == "headless":
        restarter = PlanRestarter(profile, LocalRunner(), follower=follower, show=lambda _t: None, ready_poll_s=0.1)
        restart, check = restarter, restarter.check_server
    else:  # the dashboard's sweep: its restart controller restarts, and answers the check
        async def switch(path: str, from_start: bool) -> None:
            await follower.follow(path, from_end=not from_start)

        controller = RestartController(profile, LocalRunner(), on_log_switch=switch, ready_poll_s=0.1)
        restart, check = controller_restarter(controller), controller.check_server
    rule = StoppingRule(min_samples=100000, max_samples=200000)
    sweep = Sweep(SweepPlan((2,), rule=rule, max_minutes=2.0, poll_s=0.05, settle=0), session=session,
                  restart=restart, server_check=check)
    task = asyncio.ensure_future(sweep.run())
    try:
        for _ in range(1200):  # a bound, not a timing assertion
            if sweep.current is not None and sweep.current.n >= 20:
                break
            await asyncio.sleep(0.05)
        cell = sweep.cells[0]
        assert cell.n >= 20, "never measured"
        log = tmp_path / "sim_2.log"
        decode = [line for line in log.read_text().splitlines() if line.startswith("[") and "Decode batch" in line]
        kill_recorded(tmp_path / "sim.pid")
        at_kill = cell.n
        # Another process takes over the log: were these measured, the verdict would mix servers.
        with log.open("a") as f:
            for _ in range(40):
                f.write("\n".join(decode[-5:]) + "\n")
                f.flush()
                await asyncio.sleep(0.05)
        result = await asyncio.wait_for(task, 60)
    finally:
        if not task.done():
            task.cancel()
        await follower.stop()
        kill_recorded(tmp_path / "sim.pid")
    assert sweep.lost is not None and "has exited" in sweep.lost
    assert cell.n <= at_kill  # nothing after the kill, nor since the last check that passed
    assert cell.status == "pending" and not result.finished
