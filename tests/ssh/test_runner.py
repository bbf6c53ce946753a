"""Runners and managed start/stop, for real: real processes, real signals, real SSH.

The "server" is a small Python script written to tmp_path. Stops go through
the exact plan strings, run by LocalRunner or by SSHRunner against an
in-process asyncssh server on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.server
import os
import signal
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncssh
import pytest

from specmon.control.launch import (
    LaunchProfile,
    ProcessIdentity,
    build_plan,
    parse_result_line,
)
from specmon.control.runner import (
    CommandRunner,
    LocalRunner,
    Result,
    SSHRunner,
    StepEvent,
    execute,
    wait_ready,
)

SERVER = r'''
import signal, subprocess, sys, time
mode = sys.argv[1]

def bye(signum, frame):
    print(f"stopping on signal {signum}", flush=True)
    sys.exit(0)

if mode == "ignore":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
elif mode == "term-only":
    signal.signal(signal.SIGTERM, bye)  # SIGINT stays as inherited
else:
    signal.signal(signal.SIGINT, bye)
    signal.signal(signal.SIGTERM, bye)
if mode == "with-child":
    child = subprocess.Popen([sys.executable, "-c",
        "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"])
    print(f"child {child.pid}", flush=True)
if mode == "exit":
    print("failing at once", flush=True)
    sys.exit(3)
print("SERVER READY", sys.argv[2:], flush=True)
while True:
    time.sleep(0.05)
'''


def proc_state(pid: int) -> str | None:
    """The process's state letter, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(") ", 1)[1].split()[0]


def alive(pid: int) -> bool:
    """Running and not a zombie (PID 1 here may not reap orphans)."""
    return proc_state(pid) not in (None, "Z", "X")


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


def starttime(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])


@pytest.fixture
def reaper() -> Iterator[list[int]]:
    """PIDs a test started: whatever still runs at the end is killed by that PID."""
    pids: list[int] = []
    yield pids
    for pid in pids:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.fixture
def server_script(tmp_path: Path) -> Path:
    path = tmp_path / "fake_server.py"
    path.write_text(SERVER)
    return path


def profile(tmp_path: Path, script: Path, mode: str = "normal", **over: object) -> LaunchProfile:
    fields: dict[str, object] = {
        "argv": [sys.executable, str(script), mode, "--speculative-num-steps", "{steps}",
                 "--speculative-num-draft-tokens", "{draft_tokens}"],
        "env": {"NCCL_PROTO": "LL", "SPECMON_TEST_MARK": "x y"},
        "cwd": str(tmp_path),
        "log": str(tmp_path / "server_{steps}step.log"),
        "pidfile": str(tmp_path / "server.pid"),
        "ready_marker": "SERVER READY",
        "stop_grace_s": 2,
    }
    fields.update(over)
    return LaunchProfile.model_validate(fields)


async def start(prof: LaunchProfile, steps: int, reaper: list[int], runner: CommandRunner | None = None) -> int:
    """Run a full plan (stop, start) and return the new server's PID."""
    report = await execute(build_plan(prof, steps), runner or LocalRunner())
    assert report.ok, [o.summary() for o in report.outcomes]
    pid = report.server_pid
    assert pid is not None
    reaper.append(pid)
    return pid


async def ready(prof: LaunchProfile, steps: int) -> None:
    outcome = await wait_ready(build_plan(prof, steps), LocalRunner(), sleep=lambda _: asyncio.sleep(0.05))
    assert outcome.state == "ready", outcome


# --------------------------------------------------------------------------- LocalRunner


async def test_local_runner_reports_status_and_output() -> None:
    r = await LocalRunner().run("echo out; echo err >&2; exit 3", 10)
    assert r == Result(3, "out\n", "err\n")
    assert not r.ok


async def test_local_runner_timeout_kills_the_command() -> None:
    r = await LocalRunner().run("echo $$; exec sleep 30", 0.5)
    assert r.timed_out and r.exit_status is None
    assert not alive(int(r.stdout.split()[0]))


# --------------------------------------------------------------------------- managed start


async def test_managed_start_records_the_real_server_pid(tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script)
    pid = await start(prof, 3, reaper)
    plan = build_plan(prof, 3)
    # The PID in the pidfile is the server itself, not a shell or setsid.
    assert cmdline(pid) == list(plan.argv or ())
    assert cmdline(pid)[-4:] == ["--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4"]
    recorded = (tmp_path / "server.pid").read_text().split()
    assert recorded == [str(pid), str(starttime(pid))]
    assert os.readlink(f"/proc/{pid}/cwd") == str(tmp_path)
    environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    assert b"NCCL_PROTO=LL" in environ and b"SPECMON_TEST_MARK=x y" in environ
    # Detached: its own session, and SIGINT not ignored (a `cmd &` would ignore it).
    assert os.getsid(pid) == pid
    sigign = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigIgn"))
    assert int(sigign.split()[1], 16) & (1 << (signal.SIGINT - 1)) == 0
    await ready(prof, 3)
    assert "SERVER READY" in (tmp_path / "server_3step.log").read_text()


async def test_start_refuses_while_the_recorded_server_runs(tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script)
    pid = await start(prof, 2, reaper)
    step = build_plan(prof, 2).start
    r = await LocalRunner().run(step.command, 30, stdin=step.stdin)
    assert r.exit_status == 2
    assert parse_result_line(r.stdout, "specmon-start") == {"result": "refused", "reason": "already-running",
                                                             "pid": str(pid)}
    assert alive(pid)


async def test_hostile_arguments_reach_the_server_literally(tmp_path: Path, server_script: Path,
                                                            reaper: list[int]) -> None:
    marker = tmp_path / "pwned"
    evil = [f"$(touch {marker})", f"; touch {marker}", f"`touch {marker}`", "a'b\"c", "*"]
    prof = profile(tmp_path, server_script, argv=[sys.executable, str(server_script), "normal", *evil])
    pid = await start(prof, 1, reaper)
    await ready(prof, 1)  # exec'd by now: before, /proc may still show the start script's shell
    assert cmdline(pid)[3:] == evil
    assert not marker.exists()


@pytest.mark.parametrize(
    ("over", "reason"),
    [
        ({"argv": ["/nonexistent/bin/server", "{steps}"]}, "command-not-found"),
        ({"cwd": "/nonexistent/dir"}, "cwd-missing"),
        ({"log": "/nonexistent/dir/x.log"}, "log-not-writable"),
    ],
)
async def test_start_failures_are_reported_not_hidden(tmp_path: Path, server_script: Path,
                                                      over: dict[str, object], reason: str) -> None:
    plan = build_plan(profile(tmp_path, server_script, **over), 1)
    report = await execute(plan, LocalRunner())
    assert not report.ok
    # Found by the stop, before it signals anything: a start refused after a stop leaves no server.
    assert [o.step.name for o in report.outcomes] == ["stop"]
    assert report.outcomes[-1].fields == {"result": "refused", "reason": reason}
    # The start finds it too, on its own.
    alone = await LocalRunner().run(plan.start.command, 30, stdin=plan.start.stdin)
    assert parse_result_line(alone.stdout, "specmon-start")["reason"] == reason


# --------------------------------------------------------------------------- managed stop


async def test_stop_by_pidfile_stops_exactly_that_pid(tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script)
    pid = await start(prof, 2, reaper)
    await ready(prof, 2)
    # An unrelated process with the very same command line must survive.
    twin_log = tmp_path / "twin.log"
    with twin_log.open("w") as out:
        twin = subprocess.Popen(list(build_plan(prof, 2).argv or ()), stdout=out, cwd=tmp_path)
    reaper.append(twin.pid)
    while "SERVER READY" not in twin_log.read_text():  # exec'd and running
        await asyncio.sleep(0.05)
    assert cmdline(twin.pid) == cmdline(pid)
    r = await LocalRunner().run(build_plan(prof, 2).stop.command, 60)
    assert r.exit_status == 0, r
    assert parse_result_line(r.stdout, "specmon-stop") == {"result": "stopped", "pid": str(pid), "signal": "INT"}
    assert not alive(pid)
    assert alive(twin.pid)
    assert not (tmp_path / "server.pid").exists()
    assert "stopping on signal 2" in (tmp_path / "server_2step.log").read_text()
    twin.kill()
    twin.wait()


async def test_restart_switches_the_step_count(tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script)
    first = await start(prof, 2, reaper)
    events: list[StepEvent] = []
    report = await execute(build_plan(prof, 5), LocalRunner(), on_step=events.append)
    assert report.ok
    assert [(e.step.name, e.phase) for e in events] == [
        ("stop", "started"), ("stop", "finished"), ("start", "started"), ("start", "finished")]
    assert report.outcomes[0].fields["result"] == "stopped"
    second = report.server_pid
    assert second is not None and second != first
    reaper.append(second)
    assert not alive(first)
    assert cmdline(second)[-3] == "5"
    await ready(prof, 5)


async def test_server_ignoring_signals_is_killed_after_the_grace(tmp_path: Path, server_script: Path,
                                                                 reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script, mode="ignore", stop_grace_s=1)
    pid = await start(prof, 1, reaper)
    await ready(prof, 1)
    r = await LocalRunner().run(build_plan(prof, 1).stop.command, 60)
    # It ignores SIGINT, so TERM was sent instead; it ignores that too: SIGKILL.
    assert parse_result_line(r.stdout, "specmon-stop") == {"result": "killed", "pid": str(pid), "signal": "TERM"}
    assert r.exit_status == 0
    assert not alive(pid)


async def test_leftover_children_in_the_server_group_are_killed(tmp_path: Path, server_script: Path,
                                                                reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script, mode="with-child", stop_grace_s=1)
    pid = await start(prof, 1, reaper)
    await ready(prof, 1)
    log = (tmp_path / "server_1step.log").read_text()
    child = int(log.split("child ", 1)[1].split()[0])
    reaper.append(child)
    assert alive(child) and os.getpgid(child) == pid
    r = await LocalRunner().run(build_plan(prof, 1).stop.command, 60)
    # The main process left on SIGINT; its child ignored everything and was
    # killed with the group after the grace period.
    assert parse_result_line(r.stdout, "specmon-stop")["result"] == "killed"
    assert not alive(pid) and not alive(child)


async def test_sigint_ignored_since_birth_falls_back_to_sigterm(tmp_path: Path, server_script: Path,
                                                                reaper: list[int]) -> None:
    log = tmp_path / "adopted.log"
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, str(server_script), "term-only"], stdout=out, stderr=out,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    reaper.append(proc.pid)
    while "SERVER READY" not in log.read_text():
        await asyncio.sleep(0.05)
    prof = profile(tmp_path, server_script, stop_grace_s=30)
    plan = build_plan(prof, 1, adopted=ProcessIdentity(proc.pid, starttime(proc.pid)))
    r = await LocalRunner().run(plan.stop.command, 60)
    assert parse_result_line(r.stdout, "specmon-stop") == {"result": "stopped", "pid": str(proc.pid), "signal": "TERM"}
    assert proc.wait(timeout=30) == 0
    assert "stopping on signal 15" in log.read_text()


# --------------------------------------------------------------------------- stale pidfiles


async def test_stale_pidfile_of_a_dead_process_is_cleared(tmp_path: Path, server_script: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead_start = starttime(dead.pid)
    dead.wait()
    pidfile = tmp_path / "server.pid"
    pidfile.write_text(f"{dead.pid} {dead_start}\n")
    r = await LocalRunner().run(build_plan(profile(tmp_path, server_script), 1).stop.command, 30)
    assert r.exit_status == 0
    fields = parse_result_line(r.stdout, "specmon-stop")
    assert fields["result"] == "not-running" and fields["pid"] == str(dead.pid)
    assert not pidfile.exists()


async def test_pid_reused_by_another_program_is_not_signalled(tmp_path: Path, server_script: Path,
                                                              reaper: list[int]) -> None:
    other = subprocess.Popen(["sleep", "60"])
    reaper.append(other.pid)
    pidfile = tmp_path / "server.pid"
    # Same PID, but not the start time specmon recorded: some other program.
    pidfile.write_text(f"{other.pid} {starttime(other.pid) - 1}\n")
    r = await LocalRunner().run(build_plan(profile(tmp_path, server_script), 1).stop.command, 30)
    assert parse_result_line(r.stdout, "specmon-stop") == {"result": "not-running", "reason": "pid-reused",
                                                            "pid": str(other.pid)}
    assert alive(other.pid)
    assert not pidfile.exists()
    other.kill()
    other.wait()


@pytest.mark.parametrize(
    ("content", "reason"),
    [("not a pid\n", "pidfile-malformed"), ("123; reboot 5\n", "pidfile-malformed"), ("", "pidfile-malformed")],
)
async def test_malformed_pidfile_is_refused_and_blocks_the_start(tmp_path: Path, server_script: Path,
                                                                 content: str, reason: str) -> None:
    pidfile = tmp_path / "server.pid"
    pidfile.write_text(content)
    report = await execute(build_plan(profile(tmp_path, server_script), 1), LocalRunner())
    assert len(report.outcomes) == 1 and not report.ok  # no start after a failed stop
    assert report.outcomes[0].result.exit_status == 2
    assert report.outcomes[0].fields == {"result": "refused", "reason": reason}
    assert pidfile.exists()


async def test_symlinked_pidfile_is_refused(tmp_path: Path, server_script: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text(f"{os.getpid()} {starttime(os.getpid())}\n")
    (tmp_path / "server.pid").symlink_to(target)
    r = await LocalRunner().run(build_plan(profile(tmp_path, server_script), 1).stop.command, 30)
    assert parse_result_line(r.stdout, "specmon-stop") == {"result": "refused", "reason": "pidfile-symlink"}
    assert r.exit_status == 2


async def test_no_pidfile_means_nothing_to_stop(tmp_path: Path, server_script: Path) -> None:
    r = await LocalRunner().run(build_plan(profile(tmp_path, server_script), 1).stop.command, 30)
    assert r.exit_status == 0
    assert parse_result_line(r.stdout, "specmon-stop") == {"result": "not-running", "reason": "no-pidfile"}


# --------------------------------------------------------------------------- readiness


async def test_wait_ready_sees_a_server_that_died(tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script, mode="exit")
    await start(prof, 1, reaper)
    outcome = await wait_ready(build_plan(prof, 1), LocalRunner(), sleep=lambda _: asyncio.sleep(0.05))
    assert outcome.state == "exited"


async def test_wait_ready_gives_up_at_the_timeout(tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script, ready_marker="never printed", start_timeout_s=10)
    await start(prof, 1, reaper)
    now = [0.0]

    async def fake_sleep(seconds: float) -> None:
        now[0] += seconds

    outcome = await wait_ready(build_plan(prof, 1), LocalRunner(), sleep=fake_sleep, clock=lambda: now[0])
    assert outcome.state == "timeout"
    assert outcome.checks == 6  # at 0, 2, 4, 6, 8, 10 s of fake time
    assert parse_result_line(outcome.last.stdout if outcome.last else "", "specmon-ready")["reason"] == "marker"


@contextlib.contextmanager
def health_server(answers: list[int]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 whose /health answers ``answers[0]`` (the test may change it)."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(answers[0])
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/health"
    finally:
        server.shutdown()
        server.server_close()


async def test_a_healthy_server_whose_log_never_shows_the_marker_is_a_wrong_marker(
        tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    """Health answers but the marker never comes: after the grace, say the marker is wrong, not
    wait out the whole start timeout (900 s for a big model) and call it slow."""
    answers = [200]
    with health_server(answers) as url:
        prof = profile(tmp_path, server_script, ready_marker="Application startup completed",
                       health_url=url, start_timeout_s=900)
        await start(prof, 1, reaper)
        now = [0.0]

        async def fake_sleep(seconds: float) -> None:
            now[0] += seconds
            # Health drops once at 20 s: the grace counts from when it answers again.
            answers[0] = 503 if 20 <= now[0] < 22 else 200

        outcome = await wait_ready(build_plan(prof, 1), LocalRunner(), sleep=fake_sleep, clock=lambda: now[0],
                                   marker_grace_s=30)
    assert outcome.state == "no-marker"
    assert 22 + 30 <= now[0] < 22 + 30 + 2 * build_plan(prof, 1).ready.poll_s, now
    assert parse_result_line(outcome.last.stdout if outcome.last else "", "specmon-ready") == {
        "result": "waiting", "reason": "marker", "health": "ok"}


async def test_the_right_marker_with_health_is_ready_and_health_alone_is_not(
        tmp_path: Path, server_script: Path, reaper: list[int]) -> None:
    answers = [503]
    with health_server(answers) as url:
        prof = profile(tmp_path, server_script, health_url=url, start_timeout_s=10)
        await start(prof, 1, reaper)
        now = [0.0]

        async def fake_sleep(seconds: float) -> None:
            now[0] += seconds

        # The marker is in the log but health fails: not ready, and not a wrong marker either.
        while "SERVER READY" not in (tmp_path / "server_1step.log").read_text():
            await asyncio.sleep(0.05)
        outcome = await wait_ready(build_plan(prof, 1), LocalRunner(), sleep=fake_sleep, clock=lambda: now[0],
                                   marker_grace_s=1)
        assert outcome.state == "timeout"
        assert parse_result_line(outcome.last.stdout if outcome.last else "", "specmon-ready")["reason"] == "health"
        answers[0] = 200
        outcome = await wait_ready(build_plan(prof, 1), LocalRunner(), sleep=fake_sleep, clock=lambda: now[0])
        assert outcome.state == "ready"


async def test_execute_only_takes_plans() -> None:
    with pytest.raises(TypeError, match="CommandPlan"):
        await execute("rm -rf /", LocalRunner())  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="CommandPlan"):
        await wait_ready("true", LocalRunner())  # type: ignore[arg-type]


# --------------------------------------------------------------------------- SSHRunner


@pytest.fixture
async def ssh_conn(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[asyncssh.SSHClientConnection]:
    """A real asyncssh server on 127.0.0.1 that runs each command with bash, and a client connected to it."""
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    client_key = asyncssh.generate_private_key("ssh-ed25519")
    spawned: list[int] = []

    async def handle(process: asyncssh.SSHServerProcess) -> None:
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", process.command or "", stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True)
        spawned.append(proc.pid)
        feeding = asyncio.ensure_future(forward_stdin(process, proc))
        out, err = await proc.communicate()
        feeding.cancel()
        process.stdout.write(out.decode())
        process.stderr.write(err.decode())
        process.exit(proc.returncode if proc.returncode >= 0 else 255)

    server = await asyncssh.listen(
        "127.0.0.1", 0, server_host_keys=[host_key], process_factory=handle,
        authorized_client_keys=asyncssh.import_authorized_keys(client_key.export_public_key().decode()))
    port = server.get_port()
    known_hosts = home / ".ssh" / "known_hosts"
    known_hosts.write_text(f"[127.0.0.1]:{port} {host_key.export_public_key().decode()}")
    conn = await asyncssh.connect("127.0.0.1", port, username="specmon", known_hosts=str(known_hosts),
                                  client_keys=[client_key], agent_path=None)
    yield conn
    conn.close()
    server.close()
    for pid in spawned:
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


async def forward_stdin(process: asyncssh.SSHServerProcess, proc: asyncio.subprocess.Process) -> None:
    """The channel's input to the command, then end-of-file (as sshd does)."""
    assert proc.stdin is not None
    try:
        while data := await process.stdin.read(65536):
            proc.stdin.write(data.encode() if isinstance(data, str) else data)
            await proc.stdin.drain()
    except (OSError, asyncssh.Error):
        pass
    finally:
        proc.stdin.close()


async def test_ssh_runner_reports_status_and_output(ssh_conn: asyncssh.SSHClientConnection) -> None:
    r = await SSHRunner(ssh_conn).run("echo out; echo err >&2; exit 3", 10)
    assert r == Result(3, "out\n", "err\n")


async def test_ssh_runner_timeout(ssh_conn: asyncssh.SSHClientConnection) -> None:
    r = await SSHRunner(ssh_conn).run("sleep 30", 0.5)
    assert r.timed_out and r.exit_status is None


async def test_restart_over_ssh(ssh_conn: asyncssh.SSHClientConnection, tmp_path: Path, server_script: Path,
                                reaper: list[int]) -> None:
    prof = profile(tmp_path, server_script)
    runner = SSHRunner(ssh_conn)
    first = await start(prof, 2, reaper, runner)
    report = await execute(build_plan(prof, 4, host="127.0.0.1"), runner)
    assert report.ok, [o.summary() for o in report.outcomes]
    second = report.server_pid
    assert second is not None
    reaper.append(second)
    assert not alive(first) and alive(second)
    assert cmdline(second)[-3:] == ["4", "--speculative-num-draft-tokens", "5"]
    outcome = await wait_ready(build_plan(prof, 4), runner, sleep=lambda _: asyncio.sleep(0.05))
    assert outcome.state == "ready"
    stop = await runner.run(build_plan(prof, 4).stop.command, 60)
    assert parse_result_line(stop.stdout, "specmon-stop")["result"] == "stopped"
    assert not alive(second)
