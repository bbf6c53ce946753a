"""Mistakes answered at once: a mistyped command, profile key or profile name gets "did you mean" and the
valid list; a host name that never resolved ends ``connect`` with exit 2 and the name whole (issue 42, item 7)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.cli import build_parser, main
from specmon.config import ConfigError, Profile, parse_config, valid_keys
from specmon.control.launch import LaunchProfile
from specmon.suggest import close_words

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
LETTERS = "abcdefghijklmnopqrstuvwxyz_"


def exits(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit code and stderr of ``specmon ARGV`` run in this process (argparse exits by SystemExit)."""
    try:
        code = main(argv)
    except SystemExit as exc:
        code = int(exc.code or 0)
    return code, capsys.readouterr().err


@st.composite
def misspelled(draw: st.DrawFn, words: list[str]) -> tuple[str, str]:
    """A valid word and one slip of it: a letter dropped, doubled, swapped with the next, or replaced."""
    word = draw(st.sampled_from(words))
    i = draw(st.integers(0, len(word) - 1))
    kind = draw(st.sampled_from(["drop", "double", "swap", "replace"]))
    if kind == "drop":
        typo = word[:i] + word[i + 1:]
    elif kind == "double":
        typo = word[:i] + word[i] + word[i:]
    elif kind == "swap" and i + 1 < len(word):
        typo = word[:i] + word[i + 1] + word[i] + word[i + 2:]
    else:
        typo = word[:i] + draw(st.sampled_from(LETTERS)) + word[i + 1:]
    return word, typo


def test_an_unknown_command_gets_did_you_mean_and_the_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = exits(["summarise", "x.log"], capsys)
    assert code == 2
    assert "invalid choice: 'summarise': did you mean summarize?" in err
    for command in COMMANDS:
        assert command in err
    assert "Traceback" not in err and err.count("\n") == 1


def test_a_word_near_nothing_gets_the_list_only(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = exits(["xyzzy"], capsys)
    assert code == 2 and "did you mean" not in err and "valid: summarize" in err


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(misspelled(COMMANDS))
def test_any_one_slip_in_a_command_is_answered_with_it(capsys: pytest.CaptureFixture[str],
                                                       case: tuple[str, str]) -> None:
    word, typo = case
    if typo in COMMANDS or not typo:
        return  # a slip that makes another command (or nothing) is not a mistake argparse sees
    code, err = exits([typo], capsys)
    assert code == 2
    assert "did you mean" in err and word in err.split("did you mean", 1)[1].split("?", 1)[0]


def config_error(text: str) -> str:
    with pytest.raises(ConfigError) as info:
        parse_config(text)
    return str(info.value)


def test_unknown_profile_keys_get_did_you_mean_and_the_valid_keys() -> None:
    message = config_error('[profiles.kimi]\nhots = "gpu-box"\n[profiles.kimi.launch]\ncommand = ["python3"]\n')
    assert "unknown key 'hots': did you mean 'host'?" in message
    assert "unknown key 'command': did you mean 'argv' or 'start'" in message
    assert "(valid keys here: " + ", ".join(Profile.model_fields) + ")" in message
    assert ", ".join(LaunchProfile.model_fields) in message


def test_the_valid_keys_follow_the_table_the_key_is_in() -> None:
    assert valid_keys([]) == ["default_profile", "profiles"]
    assert valid_keys(["profiles", "any-name"]) == list(Profile.model_fields)
    assert valid_keys(["profiles", "any-name", "launch"]) == list(LaunchProfile.model_fields)
    assert "launch_port" in valid_keys(["profiles", "fleet", "replicas", "0"])
    assert valid_keys(["profiles", "x", "host"]) == []  # a string has no keys


PROFILE_KEYS = [k for k in Profile.model_fields if k not in ("launch", "replicas")]


@settings(max_examples=80, deadline=None)
@given(misspelled(PROFILE_KEYS))
def test_any_one_slip_in_a_profile_key_is_answered_with_it(case: tuple[str, str]) -> None:
    word, typo = case
    if typo in Profile.model_fields or not typo or typo[0] == "_":
        return
    message = config_error(f'[profiles.p]\n{typo} = "x"\n')
    assert f"unknown key {typo!r}: did you mean" in message
    assert repr(word) in message.split("did you mean", 1)[1].split("?", 1)[0]


def test_close_words_prefers_the_nearest_and_takes_a_prefix() -> None:
    assert close_words("kimi", ["other", "kimi-prod"]) == ["kimi-prod"]
    assert close_words("hots", ["port", "host", "user"])[0] == "host"
    assert close_words("zzz", ["host"]) == []


def write_profiles(tmp_path: Path) -> Path:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.kimi-prod]\nhost = "gpu-box"\nlog = "/x.log"\n'
                      '[profiles.other]\nhost = "gpu"\nlog = "/y.log"\n')
    return config


def test_connect_a_profile_name_that_does_not_exist_names_the_profiles(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = write_profiles(tmp_path)
    code, err = exits(["connect", "kimi", "--config", str(config), "--headless", "--no-record"], capsys)
    assert code == 2
    assert "'kimi' is not a profile: did you mean 'kimi-prod'?" in err
    assert "kimi-prod, other" in err and "--log" in err
    assert err.count("\n") == 1


def run_connect(*argv: str) -> tuple[subprocess.CompletedProcess[str], float]:
    env = {**os.environ, "COLUMNS": "200"}
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "specmon", "connect", *argv, "--headless", "--no-record"],
                          capture_output=True, text=True, timeout=30, cwd=ROOT, env=env)
    return done, time.monotonic() - started


def test_connect_to_a_name_that_never_resolved_exits_2_at_once_with_the_name_whole() -> None:
    done, took = run_connect("nosuchhost", "--log", "/x")
    assert done.returncode == 2, done.stderr
    assert took < 10
    # "does not resolve" (no such name) or "could not be resolved" (no name server answered, offline)
    assert re.search(r"'nosuchhost' (does not resolve|could not be resolved)", done.stderr), done.stderr
    assert "check the spelling" in done.stderr
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr


def test_connect_to_an_unresolved_bare_word_names_the_profiles_too(tmp_path: Path) -> None:
    done, _ = run_connect("kimi", "--log", "/x", "--config", str(write_profiles(tmp_path)))
    assert done.returncode == 2, done.stderr
    assert re.search(r"'kimi' (does not resolve|could not be resolved)", done.stderr), done.stderr
    assert "nor is 'kimi' a profile: did you mean 'kimi-prod'? the profiles in" in done.stderr


def test_a_mistyped_option_gets_did_you_mean(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = exits(["summarize", "x.log", "--formt", "json"], capsys)
    assert code == 2 and "unrecognized arguments: --formt json: did you mean --format?" in err
    code, err = exits(["summarize", "x.log", "--zzzzzz"], capsys)
    assert code == 2 and "did you mean" not in err
