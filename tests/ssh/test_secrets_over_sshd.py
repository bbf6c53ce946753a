"""Issue 34, item 3, over Debian's real OpenSSH sshd: a profile's secret env never on a command line.

A managed start with ``HF_TOKEN`` in its ``env`` runs through sshd, the login shell, the start
script and the server; a thread reads every ``/proc/*/cmdline`` on the machine (sshd runs here)
as fast as it can for the whole start. The token must never appear there, and the server must
still receive it (it logs the token's digest, never the token). The files specmon wrote are
0600 in 0700 folders.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import stat
import sys
import threading
from pathlib import Path

import asyncssh
import pytest

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import SSHRunner
from specmon.control.servers import records_dir
from tests.support.sshd import ClientHome, OpenSSHServer

SECRET = "hf_" + "Q7x" * 12  # a token shape, long enough to be unmistakable
SERVER = r'''
import hashlib, os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("token-digest", hashlib.sha256(os.environ.get("HF_TOKEN", "").encode()).hexdigest(), flush=True)
print("The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


class CmdlineWatch:
    """Reads every process's command line in a loop until stopped; keeps the ones holding ``needle``."""

    def __init__(self, needle: bytes) -> None:
        self.needle = needle
        self.hits: list[tuple[int, bytes]] = []
        self.scans = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            for name in os.listdir("/proc"):
                if not name.isdigit():
                    continue
                try:
                    with open(f"/proc/{name}/cmdline", "rb") as f:
                        data = f.read()
                except OSError:
                    continue
                if self.needle in data:
                    self.hits.append((int(name), data))
            self.scans += 1

    def __enter__(self) -> CmdlineWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def private(path: Path, mode: int) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == mode


@pytest.mark.sshd
async def test_secret_env_reaches_the_server_but_no_command_line(
        openssh_server: OpenSSHServer, client_home: ClientHome, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    log = tmp_path / "server.log"
    pidfile = tmp_path / "run" / "server.pid"
    pidfile.parent.mkdir(mode=0o700)
    profile = LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), "{steps}"],
                            env={"HF_TOKEN": SECRET, "NCCL_PROTO": "LL"}, log=str(log), pidfile=str(pidfile),
                            ready_marker="ready to roll", start_timeout_s=60, stop_grace_s=5, stop_signal="TERM",
                            steps_min=1, steps_max=4)
    conn = await asyncssh.connect("127.0.0.1", openssh_server.port, username=openssh_server.user,
                                  known_hosts=str(client_home.known_hosts), client_keys=[client_home.key],
                                  agent_path=None)
    controller = RestartController(profile, SSHRunner(conn), host="127.0.0.1", ready_poll_s=0.1,
                                   record_servers=True)
    try:
        plan = controller.plan_for(2)
        shown = controller.describe(plan, exact=True)
        assert SECRET not in shown and SECRET not in plan.start.command
        with CmdlineWatch(SECRET.encode()) as watch:
            view = await controller.run(plan)
            await asyncio.sleep(0.3)  # the server itself, running
        assert view.phase.value == "ready", view.message
        assert watch.scans > 20  # the scan really ran through the start
        assert watch.hits == [], f"the secret was on a command line: {watch.hits[:3]}"
        digest = hashlib.sha256(SECRET.encode()).hexdigest()
        assert f"token-digest {digest}" in log.read_text()  # the server got it, exactly
        records = list(records_dir().glob("*.json"))
        assert len(records) == 1 and private(records[0], 0o600) and private(records_dir(), 0o700)
        assert private(records_dir().parent, 0o700)
        assert SECRET not in records[0].read_text()
    finally:
        await controller.stop_server(lambda _t: None)
        conn.close()
