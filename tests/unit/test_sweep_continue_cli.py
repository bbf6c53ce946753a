"""The CLI's advice after a stopped sweep names the exact command that continues it, and that command does
(issue 42, item 6): what was typed, less --fresh (it would delete the saved state), with the program as run."""

from __future__ import annotations

import shlex
import signal
from pathlib import Path

import pytest

from specmon.commands.again import continue_command, program
from tests.support.ptyproc import PtyProcess
from tests.support.sweepcli import first_setting_pid, kill_leftover, server_pid, sigterm, sim_profile, sweep_env


def test_the_command_is_what_was_typed_less_fresh() -> None:
    argv = ["sweep", "kimi prod", "--steps", "0,2", "--fresh", "--yes"]
    assert continue_command(argv) == "specmon sweep 'kimi prod' --steps 0,2 --yes"
    assert continue_command(None) is None


def test_the_program_is_named_as_it_can_be_run_again(tmp_path: Path) -> None:
    assert program("/somewhere/not/on/path/specmon") == ["/somewhere/not/on/path/specmon"]
    assert program(".venv/bin/specmon") == [".venv/bin/specmon"]
    assert program("/x/specmon/__main__.py")[1:] == ["-m", "specmon"]


def test_a_sweep_stopped_by_sigterm_names_the_command_that_continues_it(tmp_path: Path) -> None:
    _, env = sweep_env(tmp_path)
    config, work = sim_profile(tmp_path)
    state = tmp_path / "state.json"
    typed = ["sweep", "sim", "--config", str(config), "--steps", "0,2", "--max-samples", "5000", "--yes",
             "--state", str(state), "--no-record", "--order", "given", "--fresh"]
    pids: list[int | None] = []
    p = PtyProcess(typed, env)
    try:
        pids.append(first_setting_pid(p, str(work / "sim.pid")))
        out = sigterm(p)
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
        pids.append(server_pid(str(work / "sim.pid")))
        for pid in pids:
            kill_leftover(pid)


def test_the_advice_after_a_stop_names_the_command_or_says_why_none_continues() -> None:
    from specmon.commands.control import _again
    from specmon.experiment.plan_sources import resolve

    typed = ["sweep", "kimi", "--steps", "0,2", "--fresh"]
    one = resolve([("command line", {"profile": "kimi", "steps": [0, 2], "fresh": True})]).plan
    assert _again(one.invoked_as(typed)) == "continue it where it stopped with: specmon sweep kimi --steps 0,2"
    demo = resolve([("command line", {"demo": True})]).plan
    assert "not resumed" in _again(demo.invoked_as(["sweep", "--demo"]))
    fleet = resolve([("command line", {"profile": "fleet", "steps": [0, 2]})], fleet=True).plan
    assert "not resumed" in _again(fleet.invoked_as(["sweep", "fleet"]))


@pytest.mark.parametrize("kind", ["one server", "demo", "parallel"])
def test_a_lost_server_gets_the_same_advice_as_a_signal(kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The advice after a lost server comes from the one place a stop by a signal takes it from
    (commands/again.py): the command that continues a one-server sweep; a demo's sweep and a parallel one
    are not resumed, said so (the demo was told to "run the same command again to continue")."""
    from specmon.commands.control import _again
    from specmon.commands.exits import EXIT_INCOMPLETE
    from specmon.commands.sweep_output import _print_result
    from specmon.experiment.plan_sources import resolve
    from specmon.model.stopping import StoppingRule
    from tests.support.sweepsim import run_sweep

    typed, fields = {"one server": (["sweep", "kimi", "--steps", "0,2"], {"profile": "kimi", "steps": [0, 2]}),
                     "demo": (["sweep", "--demo"], {"demo": True}),
                     "parallel": (["sweep", "fleet"], {"profile": "fleet", "steps": [0, 2]})}[kind]
    exp = resolve([("command line", {**fields, "format": "json"})], fleet=kind == "parallel").plan.invoked_as(typed)
    result = run_sweep(1, steps=(0, 2), rule=StoppingRule(looks=2, min_samples=20, max_samples=60))
    lost = "the server (PID 4242) exited with status 1"
    assert _print_result(exp, result, {"server_lost": lost}) == EXIT_INCOMPLETE
    err = capsys.readouterr().err
    advice = _again(exp)  # what a stop by a signal says
    assert f"sweep: stopped: {lost}; {advice} (exit {EXIT_INCOMPLETE})" in err
    if kind == "one server":
        assert advice == "continue it where it stopped with: specmon sweep kimi --steps 0,2"
    else:
        assert "not resumed" in advice and "to continue" not in err
    from specmon.commands.again import again_advice

    assert again_advice(exp) == advice  # the one place both take it from
