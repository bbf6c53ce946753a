"""Sweep input is checked before anything restarts; a sweep that could not measure everything says so.

One parser reads a step list for ``--steps`` and for the dashboard's dialog; a
profile's range is checked for every requested step count before the first
restart; a setting that could not be measured makes the exit status 3, and a
start-up crash shows the end of the server's traceback.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.cli import main
from specmon.commands import argtypes
from specmon.commands.argtypes import parse_step_list
from specmon.commands.exits import EXIT_INCOMPLETE
from specmon.ui.screens import sweep_screen
from tests.support.net import free_port
from tests.support.sweepcli import managed_launch

ROOT = Path(__file__).resolve().parents[2]
SEPARATORS = [",", ", ", " ,", " , ", " ", "  ", ",  "]


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(args)
    except SystemExit as exc:  # argparse refuses a bad option value
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


# --------------------------------------------------------------------------- the one parser


def test_the_dialog_and_the_command_line_share_one_parser() -> None:
    assert sweep_screen.parse_step_list is argtypes.parse_step_list


@given(st.lists(st.integers(0, 64), unique=True, min_size=1, max_size=12),
       st.lists(st.sampled_from(SEPARATORS), min_size=12, max_size=12), st.sampled_from(["", " ", "  "]))
def test_any_list_written_with_commas_and_spaces_reads_back(values: list[int], seps: list[str], pad: str) -> None:
    text = pad + "".join(str(v) + (seps[i] if i < len(values) - 1 else "") for i, v in enumerate(values)) + pad
    assert parse_step_list(text, 0, 64) == tuple(values)


@given(st.text(max_size=30))
def test_any_text_is_read_or_refused_with_a_sentence(text: str) -> None:
    try:
        values = parse_step_list(text, 0, 16)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    assert values and all(0 <= v <= 16 for v in values) and len(set(values)) == len(values)
    assert all(c in "0123456789, \t\n\r\x0b\x0c\x1c\x1d\x1e\x1f\x85\xa0" or c.isspace() for c in text)


@given(st.lists(st.integers(0, 16), min_size=1, max_size=4, unique=True), st.integers(0, 3),
       st.sampled_from(["２", "٣", "²", "①", "𝟓"]))
def test_a_non_ascii_digit_is_refused(values: list[int], where: int, digit: str) -> None:
    items = [str(v) for v in values]
    items.insert(min(where, len(items)), digit)
    with pytest.raises(ValueError, match="ASCII digits only"):
        parse_step_list(",".join(items), 0, 16)


@pytest.mark.parametrize("text", [",2", "1,,2", "1,2,", " , 3", "1 ,, 2"])
def test_an_empty_item_is_refused_not_skipped(text: str) -> None:
    with pytest.raises(ValueError, match="empty item"):
        parse_step_list(text, 0, 16)


def test_sizes_and_messages() -> None:
    assert parse_step_list(" 2 , 0  4", 0, 16) == (2, 0, 4)
    with pytest.raises(ValueError, match="out of range: this profile allows 0 to 16"):
        parse_step_list("3,17", 0, 16)
    with pytest.raises(ValueError, match="listed twice"):
        parse_step_list("2,2", 0, 16)
    with pytest.raises(ValueError, match="not a whole number"):
        parse_step_list("9" * 400, 0, None)  # no int() of a huge string


# --------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("steps", ["1,２", ",2", "1,,2", "1,x"])
def test_sweep_refuses_a_bad_step_list_with_exit_2(steps: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["sweep", "--demo", "--steps", steps, "--no-record"], capsys)
    assert code == 2 and "--steps" in err and "Traceback" not in err


def test_a_whole_number_option_refuses_full_width_digits(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["sweep", "--demo", "--min-samples", "４０", "--no-record"], capsys)
    assert code == 2 and "whole number" in err and "Traceback" not in err


def test_demo_steps_outside_its_range_fail_before_any_restart(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_cli(["sweep", "--demo", "--steps", "1,65", "--no-record"], capsys)
    assert code == 2
    assert "--steps 65: the demo server allows step counts 0 to 16; nothing was restarted" in err
    assert "start:" not in err and "result=started" not in err


def test_profile_steps_outside_its_range_fail_before_any_restart(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[profiles.p.launch]\nargv = ["srv", "--n", "{steps}"]\nlog = "/x.log"\n'
                   'ready_marker = "up"\nsteps_max = 8\n')
    code, err = run_cli(["sweep", "--order", "given", "p", "--config", str(cfg), "--steps", "2,9,12", "--yes", "--no-load",
                         "--no-record"], capsys)
    assert code == 2 and "--steps 9, 12: profile 'p' allows step counts 1 to 8; nothing was restarted" in err
    assert "start:" not in err


# --------------------------------------------------------------------------- a setting that could not be measured

WRAPPER = r'''
import os, sys
steps = sys.argv[1]
if steps == "2":
    print("Loading weights", flush=True)
    print("Traceback (most recent call last):", flush=True)
    print('  File "/srv/sglang/model_runner.py", line 88, in load_model', flush=True)
    print("    raise RuntimeError(x)", flush=True)
    print("RuntimeError: draft model checkpoint mismatch for 2 steps", flush=True)
    sys.exit(1)
os.execv(sys.executable, [sys.executable, "-m", "specmon.sim.server", *sys.argv[2:], "--steps", steps])
'''


def test_a_sweep_with_a_crashed_setting_exits_3_and_shows_the_traceback(tmp_path: Path) -> None:
    port = free_port()
    work = tmp_path / "srv"
    work.mkdir()
    wrapper = work / "serve.py"
    wrapper.write_text(WRAPPER)
    server = [sys.executable, str(wrapper), "{steps}", "--log", "{log}", "--append", "--port", "{port}",
              "--time-scale", "200", "--startup-seconds", "0.3", "--seed", "3"]
    config = tmp_path / "specmon.toml"
    config.write_text(managed_launch("sim", work, server, [*server[:2], "0", *server[3:]], port))
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "specmon", "sweep", "--order", "given", "sim", "--config", str(config), "--steps", "0,2",
             "--min-samples", "40", "--max-samples", "120", "--looks", "2", "--yes", "--state",
             str(tmp_path / "state.json"), "--format", "json", "--no-record"],
            cwd=ROOT, env=env, capture_output=True, text=True, timeout=170, stdin=subprocess.DEVNULL)
    finally:
        try:
            os.killpg(int((work / "sim.pid").read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            pass
    assert proc.returncode == EXIT_INCOMPLETE == 3, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert [r["status"] for r in doc["runs"]] == ["done", "failed"]
    assert "1 of 2 requested setting(s) could not be measured (exit 3)" in proc.stderr
    # The end of the traceback, the error itself included, is on stderr.
    assert "Traceback (most recent call last):" in proc.stderr
    assert "RuntimeError: draft model checkpoint mismatch for 2 steps" in proc.stderr
    assert "Loading weights" not in proc.stderr.split("Traceback (most recent call last):")[-1]
