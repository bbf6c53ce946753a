"""What specmon starts gets default signal dispositions and an empty signal mask (issue 43, item 5).

Under ``nohup specmon sweep ... &`` the server specmon started had SIGINT, SIGQUIT and SIGHUP
ignored (``SigIgn: 0x1001007``): an ignored signal survives exec, Python's ``restore_signals``
resets only PIPE, XFZ and XFSZ, and POSIX sh cannot undo an ignore it started with. Here the
caller really inherits the ignores and blocks (a helper process sets them, then runs specmon's
code), and the started process's ``/proc/PID/status`` is read: by :class:`LocalRunner`, and by
the host's start script (``start.sh``) with each of its ways to reset (perl, python3, env) and
without any; a start that could not reset them is said to the user, once a session.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.control.launch import LaunchProfile, build_plan, inherited_signals_note, parse_result_line
from specmon.control.restart_progress import Phase
from specmon.control.runner import Result
from specmon.experiment.plan_restarter import PlanRestarter
from tests.support.restarting import READY, STOPPED, WAITING, Harness, ScriptedRunner, startup_lines
from tests.support.restarting import profile as restart_profile
from tests.support.sleeper import sleeper_profile

PROJECT = Path(__file__).resolve().parents[2]
#: What ``nohup cmd &`` in a non-interactive shell leaves ignored.
NOHUP_BACKGROUND = (signal.SIGHUP, signal.SIGINT, signal.SIGQUIT)
#: Signals a caller may leave ignored or blocked. Not SIGKILL/SIGSTOP (cannot be), not SIGCHLD
#: ignored (the caller's own waits would fail: that caller has other troubles), not 32/33 (the C
#: library's own).
CATCHABLE = [s for s in range(1, 65) if s not in (signal.SIGKILL, signal.SIGSTOP, 32, 33)]

#: Runs ``LocalRunner().run(COMMAND)`` after ignoring and blocking the signals it is given, as a
#: process started under them would: the dispositions are really inherited, not patched.
LOCAL_HELPER = r'''
import asyncio, json, signal, sys
from specmon.control.runner import LocalRunner
ignore, block, command = json.loads(sys.argv[1])
for s in ignore:
    signal.signal(s, signal.SIG_IGN)
signal.pthread_sigmask(signal.SIG_BLOCK, block)
result = asyncio.run(LocalRunner().run(command, 30))
print(result.stdout, end="")
'''


def masks(status: str) -> dict[str, int]:
    """``SigIgn`` and ``SigBlk`` of a ``/proc/PID/status`` text, as numbers."""
    out = {}
    for line in status.splitlines():
        key, _, value = line.partition(":")
        if key in ("SigIgn", "SigBlk"):
            out[key] = int(value.strip(), 16)
    return out


def bits(signals: list[int] | tuple[int, ...]) -> int:
    return sum(1 << (s - 1) for s in set(signals))


def run_local(ignore: list[int], block: list[int], command: str) -> str:
    done = subprocess.run([sys.executable, "-c", LOCAL_HELPER, json.dumps([ignore, block, command])],
                          capture_output=True, text=True, timeout=60, cwd=PROJECT)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.skipif(not os.environ.get("SPECMON_EXPECT_IGNORED"), reason="CI's nohup step sets it")
def test_this_run_really_inherited_the_ignores() -> None:
    """Under CI's ``nohup ... &`` step: the suite itself runs with those signals ignored, so the
    tests here (and the named start test) ran under an inherited SIG_IGN, not a plain shell."""
    names = os.environ["SPECMON_EXPECT_IGNORED"].split(",")
    ignored = masks(Path("/proc/self/status").read_text())["SigIgn"]
    wanted = bits([signal.Signals[f"SIG{name}"] for name in names])
    assert ignored & wanted == wanted, hex(ignored)


def test_a_command_run_under_nohup_and_background_gets_the_defaults() -> None:
    seen = masks(run_local([int(s) for s in NOHUP_BACKGROUND], [signal.SIGUSR1, signal.SIGTERM],
                           "exec cat /proc/self/status"))
    assert seen == {"SigIgn": 0, "SigBlk": 0}


def test_the_helper_really_passes_its_ignores_on_without_the_reset() -> None:
    """The check above could not pass by accident: the same helper's own state has them."""
    seen = masks(run_local([int(s) for s in NOHUP_BACKGROUND], [signal.SIGUSR1],
                           "exec cat /proc/$PPID/status"))
    assert seen["SigIgn"] & bits(NOHUP_BACKGROUND) == bits(NOHUP_BACKGROUND)
    assert seen["SigBlk"] & bits([signal.SIGUSR1])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ignore=st.lists(st.sampled_from([s for s in CATCHABLE if s != signal.SIGCHLD]), max_size=12),
       block=st.lists(st.sampled_from(CATCHABLE), max_size=12))
def test_any_inherited_ignores_and_blocks_are_reset(ignore: list[int], block: list[int]) -> None:
    """This process itself ignores and blocks them while the runner starts the command (restored after)."""
    from specmon.control.runner import LocalRunner

    before = {s: signal.getsignal(s) for s in set(ignore)}
    old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, block)
    try:
        for s in before:
            signal.signal(s, signal.SIG_IGN)
        out = asyncio.run(LocalRunner().run("exec cat /proc/self/status", 30)).stdout
    finally:
        for s, handler in before.items():
            signal.signal(s, handler if handler is not None else signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
    assert masks(out) == {"SigIgn": 0, "SigBlk": 0}, (ignore, block)


# --------------------------------------------------------------------------- the host's start script

SERVER = "#!/bin/sh\n# A server that leaves every disposition as it found it.\nexec sleep 600\n"


def _profile(tmp_path: Path) -> LaunchProfile:
    return sleeper_profile(tmp_path, SERVER)


def _inherit(ignore: tuple[int, ...], block: tuple[int, ...]):  # type: ignore[no-untyped-def]
    def child() -> None:  # between fork and exec: what the start script's shell starts with
        for s in ignore:
            signal.signal(s, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, block)
    return child


def _path_without(tmp_path: Path, *missing: str) -> str:
    """A PATH holding every command of this machine's but ``missing`` (each as a symbolic link)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for directory in ("/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if any(name == m or name.startswith(m + ".") or name.startswith(m + "5") for m in missing):
                continue
            link = folder / name
            if not link.exists() and not link.is_symlink():
                link.symlink_to(Path(directory) / name)
    return str(folder)


def _server_status(pid: int) -> str:
    """``/proc/PID/status`` once the recorded PID has exec'd the server (``sleep``)."""
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                return Path(f"/proc/{pid}/status").read_text()
        except OSError:
            break
        time.sleep(0.02)
    raise AssertionError(f"PID {pid} never became the server")


def start_under(tmp_path: Path, ignore: tuple[int, ...], block: tuple[int, ...],
                path: str | None = None) -> tuple[dict[str, str], dict[str, int]]:
    """Run the plan's start step with the caller's dispositions; the result line and the server's masks."""
    step = build_plan(_profile(tmp_path), 2).start
    env = dict(os.environ)
    if path is not None:
        env["PATH"] = path
    done = subprocess.run(["sh", "-c", step.command], input=step.stdin, capture_output=True, text=True,
                          timeout=60, env=env, preexec_fn=_inherit(ignore, block))
    fields = parse_result_line(done.stdout, "specmon-start")
    assert fields.get("result") == "started", done.stdout + done.stderr
    pid = int(fields["pid"])
    try:
        return fields, masks(_server_status(pid))
    finally:
        os.kill(pid, signal.SIGKILL)


def test_the_start_script_gives_the_server_default_dispositions_and_an_empty_mask(tmp_path: Path) -> None:
    fields, seen = start_under(tmp_path, NOHUP_BACKGROUND, (signal.SIGUSR1, signal.SIGTERM))
    assert fields["signals"] == "default"
    assert seen == {"SigIgn": 0, "SigBlk": 0}


@pytest.mark.parametrize(("missing", "said"), [(("perl",), "default"), (("perl", "python3"), "dispositions"),
                                               (("perl", "python3", "env"), "inherited")])
def test_without_perl_the_next_way_is_taken_and_said(tmp_path: Path, missing: tuple[str, ...], said: str) -> None:
    fields, seen = start_under(tmp_path, NOHUP_BACKGROUND, (), _path_without(tmp_path, *missing))
    assert fields["signals"] == said
    if said == "inherited":  # nothing could reset them: said so, not claimed
        assert seen["SigIgn"] & bits(NOHUP_BACKGROUND) == bits(NOHUP_BACKGROUND)
    else:
        assert seen["SigIgn"] == 0


# --------------------------------------------------------------------------- said to the user when not reset


def test_a_start_that_could_not_reset_says_so_in_its_note(tmp_path: Path) -> None:
    """The host script's own answer, read: ``inherited`` and ``dispositions`` are said, ``default`` not."""
    fields, _ = start_under(tmp_path, NOHUP_BACKGROUND, (), _path_without(tmp_path, "perl", "python3", "env"))
    note = inherited_signals_note(fields, "gpu-box")
    assert note is not None and note.startswith(
        "the server on gpu-box was started with the signal dispositions specmon inherited: the host has neither "
        "perl nor python3")
    assert "signal mask" in (inherited_signals_note({"signals": "dispositions"}, "h") or "")
    assert inherited_signals_note({"signals": "default"}, "h") is None
    assert inherited_signals_note({}, "h") is None  # a custom start says nothing: nothing is claimed


def _start_saying(signals: str) -> Result:
    return Result(0, f"specmon-start result=started pid=11 starttime=5 signals={signals}\n", "")


@pytest.mark.parametrize("signals", ["inherited", "default"])
async def test_the_dashboards_restarts_say_it_once_a_session(tmp_path: Path, signals: str) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": _start_saying(signals)}, [WAITING] * 40 + [READY])
    h = Harness(tmp_path, runner, current_steps=1)
    c = h.controller
    said = []
    for steps in (2, 3):  # two restarts on the same host: said after the first only
        runner.ready = [WAITING] * 40 + [READY]
        h.script = [(1.0, startup_lines(steps=steps))]
        plan = c.plan_for(steps)
        c.describe(plan)
        final = await c.run(plan)
        assert final.phase is Phase.READY, final.message
        said.append(c.warnings.take())
    if signals == "inherited":
        assert said == [[inherited_signals_note({"signals": "inherited"}, "gpu-box")], []]
    else:
        assert said == [[], []]


async def test_a_sweeps_restarts_say_it_once(tmp_path: Path) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": _start_saying("inherited")}, [READY])
    shown: list[str] = []
    restarter = PlanRestarter(restart_profile(tmp_path), runner, host="gpu-box", show=shown.append, ready_poll_s=0.01)
    for steps in (2, 3, 2):
        outcome = await restarter(steps)
        assert outcome.ok, outcome.detail
    warnings = [line for line in shown if "warning:" in line]
    assert warnings == [f"  warning: {inherited_signals_note({'signals': 'inherited'}, 'gpu-box')}"]
