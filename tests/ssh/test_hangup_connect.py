"""Closing the terminal ends ``specmon connect`` (over Debian's sshd) within a second, every time
(issue 34, item 10; the local commands are in ``tests/unit/test_hangup_exit.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.hangup import BOUND_S, hang_up_times
from tests.support.sshd import ClientHome, OpenSSHServer

SMALL = Path(__file__).resolve().parents[1] / "data" / "dashboard" / "sweep" / "sim_eagle3_2step.log"


@pytest.mark.sshd
def test_closing_the_terminal_ends_connect_within_a_second(openssh_server: OpenSSHServer, client_home: ClientHome,
                                                           tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(SMALL.read_text())
    env = {"HOME": str(client_home.path), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    took = hang_up_times(["connect", f"{openssh_server.user}@127.0.0.1", "-p", str(openssh_server.port),
                           "--log", str(log), "--lines", "1000"], env, first_frame="source:")
    assert all(t < BOUND_S for t in took), [round(t, 2) for t in took]
