"""SIGHUP (the terminal closed) and SIGTERM clean up like ``q``: nothing specmon started is orphaned.

``specmon demo`` and ``specmon sweep --demo`` run as real processes on a pty, as
in a user's terminal; the test waits until the simulated server runs, then
closes the terminal and sends SIGHUP, or sends SIGTERM, and checks that the
server (by the PID its pidfile recorded) is gone and the temporary folder removed.
"""

from __future__ import annotations

import glob
import signal
from pathlib import Path

import pytest

from tests.support.ptyproc import PtyProcess, running
from tests.support.sweepcli import first_setting_pid, kill_leftover, server_pid_in, sigterm, sim_profile, sweep_env


def _send(p: PtyProcess, sig: signal.Signals) -> None:
    if sig is signal.SIGHUP:
        p.hang_up()  # the window closed: nobody reads the terminal any more
    p.proc.send_signal(sig)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_demo_stops_its_server_and_removes_its_folder(tmp_path: Path, sig: signal.Signals) -> None:
    temp, env = sweep_env(tmp_path)
    p = PtyProcess(["demo", "--no-record", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5"], env)
    pid = None
    try:
        p.wait_until(lambda: server_pid_in(f"{temp}/specmon-demo-*/*.pid"), "the simulated server runs")
        pid = server_pid_in(f"{temp}/specmon-demo-*/*.pid")
        assert pid is not None and glob.glob(f"{temp}/specmon-demo-*")
        _send(p, sig)
        assert p.wait_exit() == 128 + sig
        assert not running(pid)
        assert not glob.glob(f"{temp}/specmon-demo-*")
    finally:
        p.kill()
        kill_leftover(pid)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_demo_sweep_stops_its_server_and_removes_its_folder(tmp_path: Path, sig: signal.Signals) -> None:
    temp, env = sweep_env(tmp_path)
    p = PtyProcess(["sweep", "--order", "given", "--demo", "--steps", "0,2,5", "--no-record", "--max-samples", "5000",
                    "--seed", "4"], env)
    pid = None
    try:
        p.wait_until(lambda: "measuring" in p.output and server_pid_in(f"{temp}/specmon-demo-*/sim.pid"),
                     "the sweep measures its first setting")
        pid = server_pid_in(f"{temp}/specmon-demo-*/sim.pid")
        assert pid is not None
        _send(p, sig)
        assert p.wait_exit() == 128 + sig
        assert not running(pid)
        assert not glob.glob(f"{temp}/specmon-demo-*")
        if sig is signal.SIGTERM:  # the terminal is still there to say so
            assert "sweep stopped by SIGTERM" in p.final_output()
    finally:
        p.kill()
        kill_leftover(pid)


def test_a_profile_sweep_stopped_by_sigterm_leaves_the_real_server_running_and_recorded(tmp_path: Path) -> None:
    """A real (managed-profile) server is not the demo: SIGTERM ends the sweep, the server runs on, recorded."""
    import json

    _, env = sweep_env(tmp_path)
    config, work = sim_profile(tmp_path)
    p = PtyProcess(["sweep", "--order", "given", "sim", "--config", str(config), "--steps", "0,2", "--max-samples", "5000", "--yes",
                    "--state", str(tmp_path / "state.json"), "--no-record"], env)
    pid = None
    try:
        pid = first_setting_pid(p, str(work / "sim.pid"))
        assert pid is not None
        out = sigterm(p)
        # Said from a check made after the signal: that very process (PID and start time) runs.
        assert "sweep stopped by SIGTERM" in out and f"is left running (PID {pid}," in out
        assert running(pid)  # a real server is never stopped by a signal to specmon
        records = list((tmp_path / "data" / "specmon" / "servers").glob("*.json"))
        assert len(records) == 1 and json.loads(records[0].read_text())["pid"] == pid
    finally:
        p.kill()
        kill_leftover(pid)


def recorded(path: Path) -> tuple[list[str], list[str]]:
    """The recorded line texts and the meta events of a recording (whatever has been flushed)."""
    import json

    texts, metas = [], []
    if path.exists():
        for raw in path.read_text().splitlines():
            entry = json.loads(raw)
            if entry.get("type") == "line":
                texts.append(entry["text"])
            elif entry.get("type") == "meta":
                metas.append(entry["event"])
    return texts, metas


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_watch_closes_its_recording_on_a_signal(tmp_path: Path, sig: signal.Signals) -> None:
    """``watch``: like q, the recording is flushed and closed (its end entry), and the process exits."""
    _temp, env = sweep_env(tmp_path)
    log = tmp_path / "server.log"
    lines = [f"line {i}" for i in range(200)]
    log.write_text("".join(f"{line}\n" for line in lines))
    recording = tmp_path / "rec.jsonl"
    p = PtyProcess(["watch", str(log), "--record", str(recording)], env)
    try:
        p.wait_until(lambda: len(recorded(recording)[0]) == len(lines), "every line recorded")
        with open(log, "a") as f:
            f.write("one more\n")
        _send(p, sig)
        assert p.wait_exit() == 128 + sig
        texts, metas = recorded(recording)
        assert texts[: len(lines)] == lines and metas[0] == "start" and metas[-1] == "end"
        assert not running(p.proc.pid)
    finally:
        p.kill()
