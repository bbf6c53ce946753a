"""Issue 34, item 2, over Debian's real OpenSSH sshd: one controller per server.

Two controllers of one server, as two client machines would be (each its own SSH
connection and its own user data directory, so only the host's lock can keep them apart):
the one that restarted the server holds its lease; the other is refused — restart and stop
alike — with who holds it, since when and what for, while its server runs on untouched.
Once the holder closes (or its connection drops), the other may act.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from pathlib import Path

import asyncssh
import pytest

from specmon.control.launch import LaunchProfile
from specmon.control.lease import LeaseHeld, ServerLease
from specmon.control.restart_controller import RestartController
from specmon.control.runner import SSHRunner
from tests.support.sshd import ClientHome, OpenSSHServer

SERVER = r'''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("steps", sys.argv[1], "The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


async def ssh(server: OpenSSHServer, home: ClientHome) -> asyncssh.SSHClientConnection:
    return await asyncssh.connect("127.0.0.1", server.port, username=server.user,
                                  known_hosts=str(home.known_hosts), client_keys=[home.key], agent_path=None)


def recorded(pidfile: Path) -> tuple[int, int]:
    pid, start = pidfile.read_text().split()[:2]
    return int(pid), int(start)


def running(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


@pytest.mark.sshd
async def test_two_controllers_cannot_fight_over_one_server(openssh_server: OpenSSHServer, client_home: ClientHome,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    run = tmp_path / "run"  # sshd logs in with the account's real home: the test's own run folder
    run.mkdir(mode=0o700)
    pidfile = run / "specmon-31998.pid"
    profile = LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), "{steps}"],
                            log=str(tmp_path / "s_{steps}.log"), port=31998, ready_marker="ready to roll",
                            pidfile=str(run / "specmon-{port}.pid"), start_timeout_s=60, stop_grace_s=5,
                            stop_signal="TERM", steps_min=1, steps_max=4)
    conn_a, conn_b = await ssh(openssh_server, client_home), await ssh(openssh_server, client_home)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "client-a"))
    a = RestartController(profile, SSHRunner(conn_a), host="127.0.0.1", record_servers=True, ready_poll_s=0.1)
    b = RestartController(profile, SSHRunner(conn_b), host="127.0.0.1", record_servers=True, ready_poll_s=0.1,
                          lease_action="sweep")
    try:
        plan = a.plan_for(2)
        a.describe(plan)
        assert (await a.run(plan)).phase.value == "ready"
        assert a.lease is not None and a.lease.held
        first = recorded(pidfile)

        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "client-b"))  # another client machine
        held = await b.lease_note()  # what the second dashboard says as soon as it is up
        assert held is not None and "another specmon controls this server" in held
        plan = b.plan_for(3)
        b.describe(plan)
        view = await b.run(plan)
        assert view.phase.value == "failed"
        assert "another specmon controls this server" in view.message
        assert f"specmon PID {os.getpid()}" in view.message and "for dashboard restarts" in view.message
        assert "lease on 127.0.0.1" in view.message and "since " in view.message
        said: list[str] = []
        b.last_plan = b.plan_for(2)  # as if B had started it: its stop at exit is refused too
        outcome = await b.stop_server(said.append)
        assert outcome is not None and outcome.startswith("stop refused")
        await asyncio.sleep(0.3)
        assert recorded(pidfile) == first and running(first[0])  # untouched
        assert "ready to roll" in (tmp_path / "s_2.log").read_text()

        await a.close()  # the holder goes: its lease with it
        assert not a.lease.held
        assert await b.lease_note() is None and b.lease is not None and not b.lease.held  # a look only
        plan = b.plan_for(3)
        b.describe(plan)
        assert (await b.run(plan)).phase.value == "ready"
        assert recorded(pidfile) != first and not running(first[0])
    finally:
        await b.stop_server(lambda _t: None)
        await b.close()
        conn_a.close()
        conn_b.close()
        if pidfile.exists():
            pid, _ = recorded(pidfile)
            if running(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.sshd
async def test_a_dropped_connection_releases_the_host_lease(openssh_server: OpenSSHServer, client_home: ClientHome,
                                                            tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    conn_a, conn_b = await ssh(openssh_server, client_home), await ssh(openssh_server, client_home)
    (tmp_path / "run").mkdir(mode=0o700)
    pidfile = str(tmp_path / "run" / "specmon-31997.pid")
    try:
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "client-a"))
        a = ServerLease(SSHRunner(conn_a), "127.0.0.1", pidfile, "a sweep")
        await a.acquire()
        monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "client-b"))
        b = ServerLease(SSHRunner(conn_b), "127.0.0.1", pidfile, "dashboard restarts")
        with pytest.raises(LeaseHeld) as caught:
            await b.acquire()
        assert caught.value.holder is not None and caught.value.holder.action == "a sweep"
        assert caught.value.holder.pid == os.getpid()
        assert not b.held
        # The network goes: sshd ends the session, and the lease with it (no stale lock).
        assert openssh_server.drop() >= 1
        for _ in range(100):  # a bound, not a timing assertion
            if not a.held:
                break
            await asyncio.sleep(0.05)
        assert not a.held
        conn_b.close()
        conn_b = await ssh(openssh_server, client_home)
        b = ServerLease(SSHRunner(conn_b), "127.0.0.1", pidfile, "dashboard restarts")
        await b.acquire()
        assert b.held
        await b.release()
        lock = tmp_path / "run" / "specmon-31997.pid.lock"
        assert lock.stat().st_mode & 0o077 == 0 and lock.read_text() == ""  # no holder left named
    finally:
        conn_a.close()
        conn_b.close()
