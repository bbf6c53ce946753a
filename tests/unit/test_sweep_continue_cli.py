"""The CLI's advice after a stopped sweep names the exact command that continues it, and that command does
(issue 42, item 6): what was typed, less --fresh (it would delete the saved state), with the program as run."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import sys
from pathlib import Path

from specmon.commands.again import continue_command, program
from tests.support.net import free_port
from tests.support.ptyproc import PtyProcess, running


def _env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """specmon's folders and the temp folder in the test's own (its state, records and servers)."""
    temp = tmp_path / "t"
    temp.mkdir()
    return temp, {"TMPDIR": str(temp), "XDG_DATA_HOME": str(tmp_path / "data"),
                  "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home")}


def _server_pid(pidfile: str) -> int | None:
    try:
        pid = int(Path(pidfile).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if running(pid) else None


def _kill_leftover(pid: int | None) -> None:
    if pid is not None and running(pid):
        os.killpg(pid, signal.SIGKILL)  # the server leads its own process group (setsid)


def test_the_command_is_what_was_typed_less_fresh() -> None:
    args = argparse.Namespace(argv=["sweep", "kimi prod", "--steps", "0,2", "--fresh", "--yes"])
    assert continue_command(args) == "specmon sweep 'kimi prod' --steps 0,2 --yes"
    assert continue_command(argparse.Namespace()) is None


def test_the_program_is_named_as_it_can_be_run_again(tmp_path: Path) -> None:
    assert program("/somewhere/not/on/path/specmon") == ["/somewhere/not/on/path/specmon"]
    assert program(".venv/bin/specmon") == [".venv/bin/specmon"]
    assert program("/x/specmon/__main__.py")[1:] == ["-m", "specmon"]


def test_a_sweep_stopped_by_sigterm_names_the_command_that_continues_it(tmp_path: Path) -> None:
    _, env = _env(tmp_path)
    port = free_port()
    work = tmp_path / "srv"
    work.mkdir()
    server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
              "--time-scale", "200", "--startup-seconds", "0.3"]
    config = tmp_path / "specmon.toml"
    config.write_text(
        "[profiles.sim.launch]\n"
        'mode = "managed"\nengine = "sglang"\n'
        f"argv = {json.dumps([*server, '--steps', '{steps}'])}\n"
        f"nospec_argv = {json.dumps([*server, '--steps', '0'])}\n"
        f"log = {json.dumps(str(work / 'sim_{steps}.log'))}\n"
        f"pidfile = {json.dumps(str(work / 'sim.pid'))}\n"
        f"cwd = {json.dumps(str(work))}\n"
        f"port = {port}\n"
        'health_url = "http://127.0.0.1:{port}/health"\n'
        "steps_min = 0\nstart_timeout_s = 60\nstop_grace_s = 5\nstop_signal = \"TERM\"\n")
    state = tmp_path / "state.json"
    typed = ["sweep", "sim", "--config", str(config), "--steps", "0,2", "--max-samples", "5000", "--yes",
             "--state", str(state), "--no-record", "--order", "given", "--fresh"]
    pids: list[int | None] = []
    p = PtyProcess(typed, env)
    try:
        p.wait_until(lambda: "measuring" in p.output and _server_pid(str(work / "sim.pid")), "the first setting")
        pids.append(_server_pid(str(work / "sim.pid")))
        p.proc.send_signal(signal.SIGTERM)
        assert p.wait_exit() == 128 + signal.SIGTERM
        out = p.final_output()
        assert "continue it where it stopped with: " in out, out[-2000:]
        line = out.split("continue it where it stopped with: ", 1)[1].splitlines()[0].strip()
        words = shlex.split(line)
        assert words[1:3] == ["-m", "specmon"]  # run as `python -m specmon`: named so
        assert words[3:] == [w for w in typed if w != "--fresh"]
        assert state.exists()
    finally:
        p.kill()
    again = PtyProcess(words[3:], env)  # exactly the words it named
    try:
        again.wait_until(lambda: "resuming" in again.output, "the sweep to go on from its state")
        again.proc.send_signal(signal.SIGTERM)
        again.wait_exit()
    finally:
        again.kill()
        pids.append(_server_pid(str(work / "sim.pid")))
        for pid in pids:
            _kill_leftover(pid)


def test_the_advice_after_a_stop_names_the_command_or_says_why_none_continues() -> None:
    from specmon.commands.control import _again

    typed = ["sweep", "kimi", "--steps", "0,2", "--fresh"]
    assert _again(argparse.Namespace(argv=typed, demo=False)) == \
        "continue it where it stopped with: specmon sweep kimi --steps 0,2"
    assert "not resumed" in _again(argparse.Namespace(argv=["sweep", "--demo"], demo=True))
    assert "not resumed" in _again(argparse.Namespace(argv=["sweep", "fleet"], demo=False, parallel=True))
