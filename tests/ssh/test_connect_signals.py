"""``specmon connect`` in a real terminal (a pty) over Debian's sshd: SIGHUP and SIGTERM clean up like ``q``.

The process exits with 128 + the signal, its recording is closed (every line read, then
the ``end`` entry), and nothing survives it: not specmon, not the helper it ran on the
host (the sshd session serving it ends once the connection is closed).
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.support.ptyproc import PtyProcess, running
from tests.support.sshd import ClientHome, OpenSSHServer, _descendants


def recorded(path: Path) -> tuple[list[str], list[str]]:
    texts, metas = [], []
    if path.exists():
        for raw in path.read_text().splitlines():
            entry = json.loads(raw)
            if entry.get("type") == "line":
                texts.append(entry["text"])
            elif entry.get("type") == "meta":
                metas.append(entry["event"])
    return texts, metas


@pytest.mark.sshd
@pytest.mark.parametrize("sig", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_connect_cleans_up_on_a_signal(openssh_server: OpenSSHServer, client_home: ClientHome, tmp_path: Path,
                                       sig: signal.Signals) -> None:
    log = tmp_path / "server.log"
    lines = [f"line {i}" for i in range(300)]
    log.write_text("".join(f"{line}\n" for line in lines))
    recording = tmp_path / "rec.jsonl"
    env = {"HOME": str(client_home.path), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    p = PtyProcess(["connect", f"{openssh_server.user}@127.0.0.1", "-p", str(openssh_server.port),
                    "--log", str(log), "--lines", "1000", "--record", str(recording)], env)
    try:
        p.wait_until(lambda: len(recorded(recording)[0]) == len(lines), "every line recorded")
        sessions = openssh_server.connection_pids()
        assert sessions  # the tail's connection, served by its own sshd process
        helpers = [pid for s in sessions for pid in _descendants(s)]
        if sig is signal.SIGHUP:
            p.hang_up()
        p.proc.send_signal(sig)
        assert p.wait_exit() == 128 + sig
        texts, metas = recorded(recording)
        assert texts == lines and metas[0] == "start" and metas[-1] == "end"
        deadline = time.monotonic() + 30  # a bound against a hang, not a timing assertion
        while any(running(pid) for pid in [*sessions, *helpers]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [pid for pid in [*sessions, *helpers] if running(pid)], "the remote helper outlived specmon"
    finally:
        p.kill()
