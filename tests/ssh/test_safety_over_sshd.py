"""Issue 15's host-side items over Debian's real OpenSSH sshd (the unit tests run them locally).

* A managed start never destroys a log: three starts into one fixed log path over SSH keep
  all three runs on the host (two moved aside), and the tail over SSH reads each run from
  where it began, once.
* Adoption only of a server that provably writes the followed log: over SSH, a server
  writing another file is refused with what was found; the one writing it is adopted.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest

from specmon.control.adopt import AdoptError
from specmon.control.adopt_controller import controller_for_running_server
from specmon.control.connecting_runner import ConnectingRunner
from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import SSHRunner
from specmon.sources.ssh import SSHTailSource
from specmon.sources.switching import SwitchingSource
from specmon.ssh.connect import SSHTarget
from tests.support.fakeserver import FAKE_SERVER
from tests.support.sshd import ClientHome, OpenSSHServer

LINES = 30
SERVER = r'''
import os, signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
for i in range(int(sys.argv[2])):
    print(f"run {os.getpid()} steps {sys.argv[1]} line {i}", flush=True)
print("The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


async def until(condition: Callable[[], object], what: str) -> None:
    for _ in range(1800):  # 90 s bound (a login may wait out a stale pyenv lock), not a timing assertion
        if condition():
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"never happened: {what}")


async def ssh_connect(server: OpenSSHServer, home: ClientHome) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect("127.0.0.1", server.port, username=server.user,
                                  known_hosts=str(home.known_hosts), client_keys=[home.key], agent_path=None)


def run_lines(lines: list[str]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for text in lines:
        words = text.split()
        if len(words) == 6 and words[0] == "run":
            out.setdefault(words[1], []).append(int(words[5]))
    return out


def kill_recorded(pidfile: Path) -> None:
    try:
        os.killpg(int(pidfile.read_text().split()[0]), signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


@pytest.mark.sshd
async def test_fixed_log_path_over_ssh_keeps_every_run(openssh_server: OpenSSHServer, client_home: ClientHome,
                                                       tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    profile = LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), "{steps}", str(LINES)],
                            log=str(log), pidfile=str(tmp_path / "server.pid"), ready_marker="ready to roll",
                            start_timeout_s=60, stop_grace_s=5, stop_signal="TERM", steps_min=1, steps_max=4)
    target = SSHTarget("127.0.0.1", port=openssh_server.port, user=openssh_server.user)
    segments: list[list[str]] = [[]]
    switching = SwitchingSource(
        SSHTailSource(target, str(log), lines=None, poll_interval=0.05),
        lambda p, start: SSHTailSource(target, p, lines=None if start else 0, poll_interval=0.05),
        on_begin=lambda name: segments.append([]))

    async def pump() -> None:
        async for batch in switching.batches():
            segments[-1].extend(batch)

    task = asyncio.ensure_future(pump())
    conn = await ssh_connect(openssh_server, client_home)
    controller = RestartController(profile, SSHRunner(conn), host="127.0.0.1", on_log_switch=switching.switch,
                                   ready_poll_s=0.1)
    pids: list[str] = []
    try:
        for _ in range(3):
            plan = controller.plan_for(2)
            controller.describe(plan)  # shown first, as the confirmation screen does
            view = await controller.run(plan)
            assert view.phase.value == "ready", view.message
            pids.append((tmp_path / "server.pid").read_text().split()[0])
            await until(lambda: len(run_lines(segments[-1]).get(pids[-1], [])) == LINES, "the run's lines read")
        await controller.stop_server(lambda _text: None)
    finally:
        await switching.close()
        task.cancel()
        conn.close()
        kill_recorded(tmp_path / "server.pid")
    on_disk: dict[str, list[int]] = {}
    for path in sorted(tmp_path.glob("server.log*")):
        for pid, numbers in run_lines(path.read_text().splitlines()).items():
            on_disk.setdefault(pid, []).extend(numbers)
    assert sorted(on_disk) == sorted(pids) and all(sorted(v) == list(range(LINES)) for v in on_disk.values())
    assert len(list(tmp_path.glob("server.log.*"))) == 2  # the two earlier runs, moved aside
    assert run_lines(segments[-1]) == {pids[-1]: list(range(LINES))}  # the last run, from its start, once


@pytest.mark.sshd
async def test_adoption_over_ssh_needs_proof(openssh_server: OpenSSHServer, client_home: ClientHome,
                                             tmp_path: Path) -> None:
    pkg = tmp_path / "pkg" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    writes = tmp_path / "other.log"
    with writes.open("w") as out:
        p = subprocess.Popen([sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
                              "--speculative-num-steps", "3"], cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                             env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "pkg")})
    runner = ConnectingRunner(lambda: ssh_connect(openssh_server, client_home))
    try:
        await until(lambda: "ready to roll" in writes.read_text(), "the fake server ready")
        followed = tmp_path / "followed.log"
        with pytest.raises(AdoptError) as caught:
            await controller_for_running_server(runner, host="127.0.0.1", log=str(followed))
        text = str(caught.value)
        assert "not adopting" in text and f"PID {p.pid}" in text and f"writes {writes}" in text
        c, server = await controller_for_running_server(runner, host="127.0.0.1", log=str(writes))
        assert server.pid == p.pid and c.adopted == server.identity
    finally:
        runner.close()
        p.kill()
        p.wait()
