"""Issue 34, item 4: no predictable pidfile in a shared folder; nothing stopped before it is checked.

The real host scripts run (``LocalRunner``, ``bash -c``), a real server process runs, and the
test plays the other user of the host (specmon runs as root here: files and a process are
handed to ``nobody``). Whatever was planted — a pidfile of another user, a symlink, a folder,
a FIFO, a run folder others can enter — the restart is refused *before* the stop, so the
server keeps running; a pidfile naming another user's process never gets it signalled.
"""

from __future__ import annotations

import os
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.control.launch import LaunchProfile, ProcessIdentity, build_plan, parse_result_line
from specmon.control.runner import LocalRunner, execute

NOBODY = 65534
pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="plays another user: needs root to chown")


def starttime(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def server(**kw: object) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True,
                            **kw)  # type: ignore[call-overload]


def profile(tmp_path: Path, pidfile: str | None) -> LaunchProfile:
    return LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, "-c", "import time; time.sleep(60)"],
                         log=str(tmp_path / "s.log"), pidfile=pidfile, port=31999, ready_marker="x",
                         stop_grace_s=2, stop_signal="TERM", steps_min=1, steps_max=4)


def stop_result(stdout: str) -> dict[str, str]:
    return parse_result_line(stdout, "specmon-stop")


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    h = tmp_path / "home"
    h.mkdir()
    monkeypatch.setenv("HOME", str(h))
    return h


async def test_the_default_pidfile_is_in_a_private_folder_of_the_home(tmp_path: Path, home: Path) -> None:
    plan = build_plan(profile(tmp_path, None), 2)
    assert plan.pidfile == "~/.cache/specmon/run/specmon-31999.pid"
    report = await execute(plan, LocalRunner())
    try:
        assert report.ok, [o.summary() for o in report.outcomes]
        run = home / ".cache" / "specmon" / "run"
        pidfile = run / "specmon-31999.pid"
        assert stat.S_IMODE(run.stat().st_mode) == 0o700 and run.stat().st_uid == os.geteuid()
        pid = int(pidfile.read_text().split()[0])
        assert pid == report.server_pid and alive(pid)
        stop = await LocalRunner().run(plan.stop.command, 30)
        assert stop_result(stop.stdout)["result"] == "stopped" and not pidfile.exists()
    finally:
        if report.server_pid:
            try:
                os.kill(report.server_pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


PLANTS = ("foreign-file", "symlink", "directory", "fifo")


def plant(path: Path, kind: str, elsewhere: Path) -> None:
    if kind == "foreign-file":
        path.write_text("1 1\n")
        os.chown(path, NOBODY, NOBODY)
    elif kind == "symlink":
        elsewhere.write_text("")
        path.symlink_to(elsewhere)
    elif kind == "directory":
        path.mkdir()
    else:
        os.mkfifo(path)


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(PLANTS), adopted=st.booleans(), what=st.sampled_from(("pidfile", "log")))
async def test_a_planted_file_never_takes_the_server_down(tmp_path: Path, kind: str, adopted: bool,
                                                          what: str) -> None:
    shared = tmp_path / f"shared-{kind}-{adopted}-{what}-{time.monotonic_ns()}"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # a /tmp
    mine = shared / "mine"
    mine.mkdir(mode=0o700)
    pidfile = (shared if what == "pidfile" else mine) / "specmon-31999.pid"
    log = (shared if what == "log" else mine) / "server.log"
    victim = server()
    try:
        me = ProcessIdentity(victim.pid, starttime(victim.pid))
        if not adopted and what == "log":
            pidfile.write_text(f"{me.pid} {me.starttime}\n")  # the server specmon started, recorded
        plant(pidfile if what == "pidfile" else log, kind, shared / "elsewhere")
        prof = profile(tmp_path, str(pidfile)).model_copy(update={"log": str(log)})
        plan = build_plan(prof, 2, adopted=me if adopted else None)
        report = await execute(plan, LocalRunner())
        assert not report.ok and len(report.outcomes) == 1  # refused at the stop: no start was tried
        fields = report.outcomes[0].fields
        assert fields["result"] == "refused", fields
        assert fields["reason"] in (f"{what}-not-owned", f"{what}-symlink"), fields
        time.sleep(0.1)
        assert alive(victim.pid) and starttime(victim.pid) == me.starttime
    finally:
        victim.kill()
        victim.wait()


@pytest.mark.parametrize("mode", [0o755, 0o750, 0o705, 0o777, 0o1777])
async def test_a_run_folder_others_can_enter_is_refused_before_the_stop(tmp_path: Path, home: Path,
                                                                        mode: int) -> None:
    run = home / ".cache" / "specmon" / "run"
    run.mkdir(parents=True)
    os.chmod(run, mode)
    victim = server()
    try:
        me = ProcessIdentity(victim.pid, starttime(victim.pid))
        plan = build_plan(profile(tmp_path, None), 2, adopted=me)
        report = await execute(plan, LocalRunner())
        assert report.outcomes[0].fields == {"result": "refused", "reason": "rundir-not-private"}
        assert len(report.outcomes) == 1 and alive(victim.pid)
    finally:
        victim.kill()
        victim.wait()


async def test_a_run_folder_of_another_user_is_refused(tmp_path: Path, home: Path) -> None:
    run = home / ".cache" / "specmon" / "run"
    run.mkdir(parents=True, mode=0o700)
    os.chown(run, NOBODY, NOBODY)
    plan = build_plan(profile(tmp_path, None), 2)
    report = await execute(plan, LocalRunner())
    assert report.outcomes[0].fields == {"result": "refused", "reason": "rundir-not-owned"}


async def test_our_pidfile_naming_another_users_process_never_signals_it(tmp_path: Path, home: Path) -> None:
    other = subprocess.Popen(["sleep", "60"], start_new_session=True, user=NOBODY, group=NOBODY, cwd="/")
    try:
        time.sleep(0.05)
        plan = build_plan(profile(tmp_path, None), 2)
        run = home / ".cache" / "specmon" / "run"
        run.mkdir(parents=True, mode=0o700)
        (run / "specmon-31999.pid").write_text(f"{other.pid} {starttime(other.pid)}\n")
        stop = await LocalRunner().run(plan.stop.command, 30)
        assert stop_result(stop.stdout) == {"result": "refused", "reason": "not-our-process", "pid": str(other.pid)}
        assert alive(other.pid)
    finally:
        other.kill()
        other.wait()


def test_the_pidfile_may_be_in_the_home_but_not_above_it(tmp_path: Path) -> None:
    assert build_plan(profile(tmp_path, "~/run/{port}.pid"), 2).pidfile == "~/run/31999.pid"
    for bad in ("~/../x.pid", "~/", "run.pid", "~user/x.pid"):
        with pytest.raises(ValueError):
            profile(tmp_path, bad)
    assert shlex.split(build_plan(profile(tmp_path, None), 2).stop.command)[4] == \
        "~/.cache/specmon/run/specmon-31999.pid"
