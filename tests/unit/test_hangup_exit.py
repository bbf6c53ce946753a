"""Closing the terminal ends specmon within a second, every time (issue 34, item 10).

Processes were found alive hours after their terminal closed, every thread in a futex wait:
Textual's output thread died on EIO (or SIGCONT restarted application mode on the dead
terminal) and the app's next writes waited for ever on its full queue. Here the pty is the
process's controlling terminal and the test only closes the master, as a closing window does:
the kernel sends SIGHUP (and SIGCONT), and every read and write fails with EIO. Repeated for
``demo``, ``watch`` (a small log, and mid-ingest of an 80 MB one), ``replay``, and ``connect``
over Debian's sshd (``tests/ssh/test_hangup_connect.py``), at several moments after the first frame.

Measured on this 2-core machine shared with other jobs: 0.15-0.6 s after the change, 15 s+
(never, within the bound) before it for ``demo`` and ``watch``.
"""

from __future__ import annotations

import glob
import os
import signal
from pathlib import Path

import pytest

from tests.support.hangup import BOUND_S, HangupPty, hang_up_times, write_big_log
from tests.support.ptyproc import running

PROJECT = Path(__file__).resolve().parents[2]
SMALL = PROJECT / "tests" / "data" / "dashboard" / "sweep" / "sim_eagle3_2step.log"


@pytest.fixture(scope="module")
def huge_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 58 MB SGLang log of one long run (300,000 decode lines): its ingest is still running
    when the terminal closes."""
    return write_big_log(tmp_path_factory.mktemp("huge") / "server.log", SMALL)


def _env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "t"
    temp.mkdir(exist_ok=True)
    return {"TMPDIR": str(temp), "XDG_DATA_HOME": str(tmp_path / "data"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home")}


def _stop_demo_servers(tmp_path: Path) -> None:
    for name in glob.glob(f"{tmp_path}/t/specmon-demo-*/*.pid"):
        try:
            pid = int(Path(name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue
        if running(pid):
            os.killpg(pid, signal.SIGKILL)


@pytest.mark.parametrize("command", ["demo", "watch", "watch-mid-ingest", "replay", "fleet-watch"])
def test_closing_the_terminal_ends_specmon_within_a_second(tmp_path: Path, huge_log: Path, command: str) -> None:
    args = {"demo": ["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5"],
            "watch": ["watch", str(SMALL)],
            "watch-mid-ingest": ["watch", str(huge_log)],
            "replay": ["replay", str(SMALL), "--speed", "max"],
            "fleet-watch": ["watch", str(SMALL), str(PROJECT / "sample_logs" / "sim_eagle3_3step.log")]}[command]
    # The demo's server first: a terminal closed during its start waits a second more for a late
    # pidfile (control/demo.py: stop_demo_server, so that no server is orphaned).
    first_frame = "serving" if command == "demo" else "specmon"
    try:
        took = hang_up_times(args, _env(tmp_path), first_frame)
    finally:
        _stop_demo_servers(tmp_path)
    assert all(t < BOUND_S for t in took), [round(t, 2) for t in took]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_sigterm_and_ctrl_c_end_watch_mid_ingest_within_a_second(tmp_path: Path, huge_log: Path,
                                                                 sig: signal.Signals) -> None:
    """SIGTERM, and Ctrl+C typed on the terminal (the key, not a signal: the app's raw mode reads it)."""
    import time

    p = HangupPty(["watch", str(huge_log)], _env(tmp_path))
    try:
        # The app's own first frame (its footer), not "specmon: recording to ...", which the command
        # prints before the app starts: a ^C typed then is no key yet (and a pytest-xdist worker's
        # children inherit SIGINT ignored, so it was lost and the app ran on: 2 of 3 loaded runs).
        p.wait_for("Quit", 90)
        time.sleep(0.5)
        at = time.monotonic()
        if sig is signal.SIGINT:
            assert p.master is not None
            os.write(p.master, b"\x03")
        else:
            p.proc.send_signal(sig)
        took = p.gone_after(at)
        assert took < BOUND_S, round(took, 2)
        # Ctrl+C is read as the key (exit 0) once the app's raw mode is on; on a loaded machine it
        # was seen arriving as the terminal's SIGINT instead (exit 130 = 128 + SIGINT, the code the
        # README gives for a signal), in 2 of ~6 full runs. Either way it ends at once: that is the claim.
        wanted = (128 + sig,) if sig is signal.SIGTERM else (0, 128 + sig)
        assert p.proc.wait(10) in (*wanted, -sig)
    finally:
        p.kill()
