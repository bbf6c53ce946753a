"""SIGTERM to ``specmon connect`` (over Debian's sshd) leaves no process of its own behind: none of
the processes it started here, and no per-connection sshd for it on the host (issue 43)."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support.hangup import BOUND_S, HangupPty
from tests.support.proctree import all_gone_after, kill_marked, new_mark
from tests.support.sshd import ClientHome, OpenSSHServer

SMALL = Path(__file__).resolve().parents[1] / "data" / "dashboard" / "sweep" / "sim_eagle3_2step.log"


@pytest.mark.sshd
def test_sigterm_ends_connect_and_its_session_on_the_host(openssh_server: OpenSSHServer, client_home: ClientHome,
                                                          tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SMALL.read_text())
    env = {"HOME": str(client_home.path), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config"), **new_mark()}
    p = HangupPty(["connect", f"{openssh_server.user}@127.0.0.1", "-p", str(openssh_server.port),
                   "--log", str(log), "--lines", "1000"], env)
    try:
        p.wait_for("Quit", 90)
        deadline = time.monotonic() + 30
        while not openssh_server.connection_pids() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert openssh_server.connection_pids(), "connect never opened its session"
        time.sleep(0.3)
        at = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        took, left = all_gone_after(env, at)
        assert not left and took < BOUND_S, (round(took, 2), left)
        while openssh_server.connection_pids() and time.monotonic() - at < BOUND_S:
            time.sleep(0.02)
        assert not openssh_server.connection_pids(), "its sshd session outlived it"
        assert p.proc.wait(10) in (128 + signal.SIGTERM, -signal.SIGTERM)
    finally:
        p.kill()
        kill_marked(env)
