"""Why a server exited at once: command-line parser errors, and the log's last lines sent with the verdict.

A server given a bad flag exits within a second, before the restart's tail has read
its log; the restart said "the server process exited (no error in its log)" with no
lines. Two mechanisms fix the class, tested here with generated cases:

* :func:`usage_error` knows a command-line parser's refusal, tried on real ``argparse``
  output for generated programs and arguments (vLLM and SGLang use argparse) and on
  llama.cpp's parser messages; it never takes an engine's logged line for one.
* ``ready.sh`` (the real script, run by ``sh``) sends the log's last lines, numbered,
  with ``result=exited``; the tracker feeds only the ones its tail had not delivered,
  whatever the tail had read by then.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.control.launch import READY_SCRIPT
from specmon.control.restart_progress import Phase
from specmon.control.runner import Result, log_tail_of
from specmon.control.startup import LINES_KEPT, StartupTracker
from specmon.parsing.lifecycle import usage_error
from specmon.records import Engine
from tests.support.restarting import STARTED, STOPPED, WAITING, Harness, ScriptedRunner

PROJECT = Path(__file__).resolve().parents[2]

ident = st.from_regex(r"[a-z][a-z0-9_]{0,10}", fullmatch=True)
progs = st.one_of(
    ident,
    st.builds(lambda a, b: f"{a}_{b}.py", ident, ident),
    st.builds(lambda a, b: f"{a}.{b}", ident, ident),
    st.builds(lambda a, b: f"{a} {b}", ident, ident),  # a subcommand: "vllm serve"
    st.builds(lambda a, b: f"python -m {a}.{b}", ident, ident),  # Python 3.14's prog for -m
)


def argparse_refusal(prog: str, flags: list[str], mistake: str, value: str) -> list[str]:
    """What a real argparse parser prints to stderr when it refuses ``mistake``."""
    parser = argparse.ArgumentParser(prog=prog)
    for flag in flags:
        parser.add_argument(f"--{flag}", type=int)
    parser.add_argument("--required-flag", required=(mistake == "missing"))
    argv = {"unknown": ["--required-flag", "x", f"--{value}-typo", "1"],
            "bad-int": ["--required-flag", "x", f"--{flags[0]}", value],
            "missing": [],
            }[mistake]
    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.raises(SystemExit):
        parser.parse_args(argv)
    return err.getvalue().splitlines()


@settings(max_examples=200, deadline=None)
@given(prog=progs, flags=st.lists(ident, min_size=1, max_size=4, unique=True),
       mistake=st.sampled_from(["unknown", "bad-int", "missing"]),
       value=st.from_regex(r"[a-z][a-z.]{0,8}", fullmatch=True))
def test_a_real_argparse_refusal_is_known_by_its_error_line(prog: str, flags: list[str], mistake: str,
                                                             value: str) -> None:
    lines = argparse_refusal(prog, flags, mistake, value)
    found = [usage_error(line) for line in lines]
    assert found[-1] is not None and found[-1].startswith(f"{prog}: error: ")
    assert lines[-1].startswith(found[-1].removesuffix("..."))
    assert all(f is None for f in found[:-1]), lines  # the usage text itself is not the error


@given(arg=st.from_regex(r"-{1,2}[a-z][a-z\-]{0,20}", fullmatch=True),
       why=st.from_regex(r"[a-z][a-z ]{0,40}", fullmatch=True))
def test_llama_cpp_argument_errors_are_known(arg: str, why: str) -> None:
    # common/arg.cpp: an unknown flag, and a flag whose value its handler refused.
    assert usage_error(f"error: invalid argument: {arg}") == f"error: invalid argument: {arg}"
    assert usage_error(f'error while handling argument "{arg}": {why}') is not None


LOGGED = st.sampled_from([
    "INFO 12-01 10:00:00 [api_server.py:1] {}: error: {}",
    "[2026-12-01 10:00:00 TP0] {}: error: {}",
    "(EngineCore_DP0 pid=12) {}: error: {}",
    "srv  log_server_r: {}: error: {}",
    "2026-12-01T10:00:00.123456789Z {}: error: {}",
    "the {} said error: {}",
])


@given(shape=LOGGED, who=ident, what=st.from_regex(r"[a-z][a-z ]{0,30}", fullmatch=True))
def test_an_engine_s_logged_error_is_not_a_usage_error(shape: str, who: str, what: str) -> None:
    assert usage_error(shape.format(who, what)) is None


def test_no_line_of_the_real_logs_is_taken_for_a_usage_error() -> None:
    roots = [PROJECT.parent / "shared" / "real_logs", PROJECT / "tests" / "data", PROJECT / "sample_logs"]
    files = [p for root in roots if root.is_dir() for p in root.rglob("*.log")]
    assert len(files) > 20
    wrong = [(p.name, line) for p in files for line in p.read_text(errors="replace").splitlines()
             if usage_error(line) is not None]
    assert wrong == []


def test_the_tracker_names_a_usage_error_only_before_start_up_began() -> None:
    t = StartupTracker(engine=Engine.VLLM)
    t.feed(["usage: vllm serve [model_tag] [options]", "vllm: error: unrecognized arguments: --max-model-lenn 1024"])
    assert t.crash == "vllm: error: unrecognized arguments: --max-model-lenn 1024"
    running = StartupTracker(engine=Engine.VLLM)
    running.feed(["INFO 12-01 10:00:00 [loader.py:1] Starting to load model /m...",
                  "error: something a model's own code printed"])
    assert running.reached is Phase.LOADING and running.crash is None


# --------------------------------------------------------------------------- ready.sh's last words


def run_ready_script(tmp_path: Path, content: bytes) -> Result:
    """The real ready.sh (as the plan runs it) for a server whose pidfile names no process."""
    log = tmp_path / "server.log"
    log.write_bytes(content)
    pidfile = tmp_path / "server.pid"
    pidfile.write_text("999999999 1\n")
    done = subprocess.run(["sh", "-c", READY_SCRIPT, "specmon-ready", str(pidfile), str(log), "READY", ""],
                          capture_output=True, timeout=30)
    return Result(done.returncode, done.stdout.decode("utf-8", "replace"), done.stderr.decode())


words = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 :=.,\-]{0,60}", fullmatch=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(words, min_size=0, max_size=90), partial=st.booleans(), data=st.data())
def test_the_tracker_ends_with_the_log_s_last_lines_whatever_its_tail_read(
        tmp_path: Path, lines: list[str], partial: bool, data: st.DataObject) -> None:
    complete = len(lines) - 1 if partial and lines else len(lines)
    content = "".join(f"{line}\n" for line in lines[:complete]) + ("".join(lines[complete:]))
    result = run_ready_script(tmp_path, content.encode())
    assert result.exit_status == 3 and "result=exited" in result.stdout
    excerpt = log_tail_of(result.stdout)
    assert excerpt is not None
    first, tail = excerpt
    assert tail == tuple(lines[-40:])
    assert first == max(1, len(lines) - len(tail) + 1)
    # What the live tail had delivered (complete lines only): anything from nothing to all.
    seen = data.draw(st.integers(0, complete), label="lines the tail delivered")
    t = StartupTracker()
    t.feed(lines[:seen])
    t.catch_up(first, tail)
    assert t.lines_seen == len(lines)
    fed = lines[:seen] + lines[max(seen, first - 1):]  # a gap wider than the excerpt is skipped
    assert t.last_lines == tuple(x for x in fed if x.strip())[-LINES_KEPT:]


def test_a_log_without_a_newline_anywhere_and_a_missing_log(tmp_path: Path) -> None:
    result = run_ready_script(tmp_path, b"vllm: error: unrecognized arguments: --x")
    assert log_tail_of(result.stdout) == (1, ("vllm: error: unrecognized arguments: --x",))
    (tmp_path / "server.log").unlink()
    done = subprocess.run(["sh", "-c", READY_SCRIPT, "specmon-ready", str(tmp_path / "server.pid"),
                           str(tmp_path / "server.log"), "READY", ""], capture_output=True, text=True, timeout=30)
    assert done.returncode == 3 and log_tail_of(done.stdout) is None


async def test_an_exit_before_the_tail_read_anything_is_named_from_the_last_words(tmp_path: Path) -> None:
    refusal = argparse_refusal("vllm serve", ["max-model-len"], "unknown", "max-model-lenn")
    stdout = (f"specmon-ready result=exited\nspecmon-ready log-tail lines={len(refusal)} partial=0\n"
              + "".join(f"{line}\n" for line in refusal))
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING, Result(3, stdout, "")])
    h = Harness(tmp_path, runner, current_steps=1)  # its tail delivers nothing
    c = h.controller
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.CRASHED
    assert final.message == f"the server process exited: {refusal[-1]}"
    assert final.last_lines == tuple(refusal)
