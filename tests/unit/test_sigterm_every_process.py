"""SIGTERM to any command leaves no process of its own behind (issue 43: "SIGTERM to any command
leaves no process of its own behind within 1 s. A test walks the process tree").

Every process of a run carries a mark in its environment (:mod:`tests.support.proctree`): the
command, its worker processes, the shells it runs and the servers it starts (also the demo's
simulated server, which ``setsid`` takes out of the tree). The test waits until the run has
what it starts (a first frame, a server, workers), sends SIGTERM to the command alone, as a
process manager or a CI timeout does, and times until no marked process is left.

The bound is :data:`~tests.support.hangup.BOUND_S` (two cores shared with another test worker:
a slow exit is load, a hang is the bug); ``bench/bench_hangup.py --sigterm`` measures the 1 s
target, many tries per command.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.hangup import BOUND_S, HangupPty, write_big_log
from tests.support.proctree import all_gone_after, kill_marked, marked, new_mark

PROJECT = Path(__file__).resolve().parents[2]
SMALL = PROJECT / "tests" / "data" / "dashboard" / "sweep" / "sim_eagle3_2step.log"
OTHER = PROJECT / "sample_logs" / "sim_eagle3_3step.log"


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ~60 MB SGLang log: summarize and report are still reading it when the signal comes."""
    return write_big_log(tmp_path_factory.mktemp("big") / "server.log", SMALL)


@pytest.fixture(scope="module")
def big_recording(big_log: Path) -> Path:
    """The big log recorded as ``--record`` does (a source entry, then batches of raw lines)."""
    from specmon.output.recording import Recorder
    from specmon.sources.logfiles import file_year

    path = big_log.with_suffix(".jsonl")
    with Recorder(path, meta={"command": "watch"}) as rec:
        rec.source(str(big_log), baseline=False, year=file_year(big_log))
        with open(big_log, encoding="utf-8") as f:
            lineno, batch = 1, []
            for line in f:
                batch.append(line.rstrip("\n"))
                if len(batch) == 2000:
                    rec.batch(str(big_log), lineno, batch)
                    lineno += len(batch)
                    batch = []
            if batch:
                rec.batch(str(big_log), lineno, batch)
    return path


def _env(tmp_path: Path) -> dict[str, str]:
    temp = tmp_path / "t"
    temp.mkdir(exist_ok=True)
    return {"TMPDIR": str(temp), "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
            "HOME": str(tmp_path / "home"), **new_mark()}


def _until(check: Callable[[], bool], what: str, bound_s: float = 90.0) -> None:
    deadline = time.monotonic() + bound_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"never: {what}")
        time.sleep(0.02)


DASHBOARDS = {
    "demo": (["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5"], "serving", 2),
    "watch": (["watch", str(SMALL)], "Quit", 1),
    "replay": (["replay", str(SMALL), "--speed", "max"], "Quit", 1),
    "fleet-watch": (["watch", str(SMALL), str(OTHER)], "Quit", 1),
}


@pytest.mark.parametrize("command", sorted(DASHBOARDS))
def test_sigterm_to_a_dashboard_leaves_nothing_of_its_own(tmp_path: Path, command: str) -> None:
    args, frame, processes = DASHBOARDS[command]
    env = _env(tmp_path)
    p = HangupPty(args, env)
    try:
        p.wait_for(frame, 90)
        _until(lambda: len(marked(env)) >= processes, f"{processes} processes of {command}")
        time.sleep(0.3)
        at = time.monotonic()
        p.proc.send_signal(signal.SIGTERM)
        took, left = all_gone_after(env, at)
        assert not left and took < BOUND_S, (round(took, 2), left)
        assert p.proc.wait(10) in (128 + signal.SIGTERM, -signal.SIGTERM)
    finally:
        p.kill()
        kill_marked(env)


def _headless(command: str, big_log: Path, big_recording: Path) -> tuple[list[str], Callable[[dict[int, str]], bool]]:
    """The command line, and what of it must be running before the signal (its marked processes)."""

    def workers(found: dict[int, str]) -> bool:  # forked workers carry the command's own command line
        return sum(" -m specmon " in f" {cmd} " for cmd in found.values()) >= 2

    def server(found: dict[int, str]) -> bool:
        return any("specmon.sim.server" in cmd for cmd in found.values())

    def reading(found: dict[int, str]) -> bool:  # one process, the log open: parsing is under way
        return any(_holds(pid, big_log) for pid in found)

    return {
        "sweep-demo": (["sweep", "--demo", "--steps", "1,2", "--time-scale", "100", "--no-record", "--seed", "3"],
                       server),
        "summarize": (["summarize", str(big_log)], workers),
        "parse": (["parse", str(big_log)], reading),
        "report": (["report", str(big_recording), "--format", "json"], workers),
    }[command]


def _holds(pid: int, path: Path) -> bool:
    """Whether ``pid`` has ``path`` open now."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            if os.readlink(f"/proc/{pid}/fd/{fd}") == str(path.resolve()):
                return True
        except OSError:
            continue
    return False


@pytest.mark.parametrize("command", ["sweep-demo", "summarize", "parse", "report"])
def test_sigterm_to_a_headless_command_leaves_nothing_of_its_own(tmp_path: Path, big_log: Path,
                                                                  big_recording: Path, command: str) -> None:
    args, ready = _headless(command, big_log, big_recording)
    env = _env(tmp_path)
    err = tmp_path / "stderr"
    with err.open("w") as stderr:
        p = subprocess.Popen([sys.executable, "-m", "specmon", *args], env={**os.environ, **env}, cwd=PROJECT,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=stderr)
    try:
        _until(lambda: ready(marked(env)) or p.poll() is not None, f"the processes of {command}")
        assert p.poll() is None, f"{command} ended before the signal: {err.read_text()[-2000:]}"
        at = time.monotonic()
        p.send_signal(signal.SIGTERM)
        took, left = all_gone_after(env, at)
        assert not left and took < BOUND_S, (round(took, 2), left, err.read_text()[-1500:])
        assert p.wait(10) in (128 + signal.SIGTERM, -signal.SIGTERM), err.read_text()[-1500:]
        assert "Traceback" not in err.read_text()
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
        kill_marked(env)
