"""SIGHUP (the terminal closed) and SIGTERM clean up like ``q``: nothing specmon started is orphaned.

``specmon demo`` and ``specmon sweep --demo`` run as real processes on a pty, as
in a user's terminal; the test waits until the simulated server runs, then
closes the terminal and sends SIGHUP, or sends SIGTERM, and checks that the
server (by the PID its pidfile recorded) is gone and the temporary folder removed.
"""

from __future__ import annotations

import glob
import os
import signal
from pathlib import Path

import pytest

from tests.support.ptyproc import PtyProcess, running


def _server_pid(pattern: str) -> int | None:
    for name in glob.glob(pattern):
        try:
            pid = int(Path(name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if running(pid):
            return pid
    return None


def _kill_leftover(pid: int | None) -> None:
    if pid is not None and running(pid):
        os.killpg(pid, signal.SIGKILL)  # the server leads its own process group (setsid)


def _env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    temp = tmp_path / "t"
    temp.mkdir()
    return temp, {"TMPDIR": str(temp), "XDG_DATA_HOME": str(tmp_path / "data"),
                  "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home")}


def _send(p: PtyProcess, sig: signal.Signals) -> None:
    if sig is signal.SIGHUP:
        p.hang_up()  # the window closed: nobody reads the terminal any more
    p.proc.send_signal(sig)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_demo_stops_its_server_and_removes_its_folder(tmp_path: Path, sig: signal.Signals) -> None:
    temp, env = _env(tmp_path)
    p = PtyProcess(["demo", "--no-record", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5"], env)
    pid = None
    try:
        p.wait_until(lambda: _server_pid(f"{temp}/specmon-demo-*/*.pid"), "the simulated server runs")
        pid = _server_pid(f"{temp}/specmon-demo-*/*.pid")
        assert pid is not None and glob.glob(f"{temp}/specmon-demo-*")
        _send(p, sig)
        assert p.wait_exit() == 128 + sig
        assert not running(pid)
        assert not glob.glob(f"{temp}/specmon-demo-*")
    finally:
        p.kill()
        _kill_leftover(pid)


@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_demo_sweep_stops_its_server_and_removes_its_folder(tmp_path: Path, sig: signal.Signals) -> None:
    temp, env = _env(tmp_path)
    p = PtyProcess(["sweep", "--demo", "--steps", "0,2,5", "--no-record", "--max-samples", "5000",
                    "--seed", "4"], env)
    pid = None
    try:
        p.wait_until(lambda: "measuring" in p.output and _server_pid(f"{temp}/specmon-demo-*/sim.pid"),
                     "the sweep measures its first setting")
        pid = _server_pid(f"{temp}/specmon-demo-*/sim.pid")
        assert pid is not None
        _send(p, sig)
        assert p.wait_exit() == 128 + sig
        assert not running(pid)
        assert not glob.glob(f"{temp}/specmon-demo-*")
        if sig is signal.SIGTERM:  # the terminal is still there to say so
            assert "sweep stopped by SIGTERM" in p.final_output()
    finally:
        p.kill()
        _kill_leftover(pid)
