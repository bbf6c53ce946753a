"""Crashes known by what they do (issue 43, item 6 and item 7's causes): a crash is the end of serving.

- the process is gone: the engine's, the executor's or a wrapper's word of a death, a signal, a
  C/C++ abort (``file.cpp:LINE: message`` with no ``GGML_ASSERT``, ``Aborted``, ``core dumped``):
  certain, whatever follows;
- or an exception with no serving after it: pending until the input ends, a restart or a death
  confirms it; serving after it demotes it to an error the server caught.

Generated logs interleave caught errors and a final fatal with each engine's serving lines; both
parse paths (the line parser and the bulk path) must agree on every one. The cause given is the
first fatal line (a traceback named by its exception line), not the last line written. Real
excerpts: ``tests/data/crash_logs`` and ``tests/data/cli_logs`` (their SOURCES.md).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.control.load import LoadReport, RequestResult
from specmon.experiment.fleet_sweep import Arm, FleetPlan, FleetSweep
from specmon.experiment.sweep_plan import RestartOutcome
from specmon.model.analysis import crashes
from specmon.model.last_words import death_cause
from specmon.model.session import ServerState, Session
from specmon.parsing import parse_lines
from specmon.records import EngineStats
from tests.support.crashlogs import NAME, exceptions, run_both, serving, traceback_frames
from tests.support.fleetsim import FleetWorld

ROOT = Path(__file__).resolve().parents[2]
CRASHES = ROOT / "tests" / "data" / "crash_logs"
CLI = ROOT / "tests" / "data" / "cli_logs"

_exc = exceptions()


def _run_both(tmp_path: Path, lines: list[str]) -> Session:
    return run_both(tmp_path, lines, lambda r: (r.state, r.crash_cause, r.errors_survived, len(r.throughput)))


# -- what a caught error looks like, and each engine's fatal words --------------------------------

@st.composite
def _caught(draw: st.DrawFn) -> tuple[list[str], str]:
    """A traceback or an out-of-memory error the server logs for one request: (lines, its cause)."""
    if draw(st.booleans()):
        oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
        return ["Traceback (most recent call last):", *draw(traceback_frames()), oom], oom[oom.index("CUDA"):]
    exc = draw(_exc)
    return ["Traceback (most recent call last):", *draw(traceback_frames()), exc], exc


@st.composite
def _fatal(draw: st.DrawFn, engine: str) -> tuple[list[str], str]:
    """A certain end in ``engine``'s (or its wrapper's, or a shell's) words: (lines, the first cause)."""
    frames, exc = draw(traceback_frames()), draw(_exc)
    n = draw(st.integers(1, 9999))
    shell = [(["Killed"], "Killed"), (["Aborted (core dumped)"], "Aborted (core dumped)"),
             ([f"./serve.sh: line 3: {n} Killed                  server --port 8000"],
              f"./serve.sh: line 3: {n} Killed                  server --port 8000")]
    if engine == "sglang":
        who = draw(st.sampled_from(["Scheduler", "DetokenizerManager", "TpModelWorkerClient", "DataParallelController"]))
        own = [([f"[2025-10-22 10:59:00 TP0] {who} hit an exception: Traceback (most recent call last):", *frames,
                 exc, "[2025-10-22 10:59:01] Received sigquit from a child process. It usually means the child failed."],
                exc)]
    elif engine == "vllm":
        died = f"Worker proc VllmWorker-{n % 8} died unexpectedly, shutting down executor."
        pre = "ERROR 10-22 10:59:01 [core.py:502] "
        own = [([f"ERROR 10-22 10:59:00 [multiproc_executor.py:140] {died}", f"{pre}EngineCore encountered a fatal error.",
                 f"{pre}Traceback (most recent call last):", *(pre + f for f in frames), pre + exc], died),
               ([f"{pre}EngineCore encountered a fatal error.", f"{pre}Traceback (most recent call last):",
                 *(pre + f for f in frames), pre + exc], exc)]
    else:
        sig = draw(st.sampled_from(["killed", "aborted (core dumped)", "segmentation fault (core dumped)",
                                    "exit status 1"]))
        abort = f"/src/ggml/src/ggml-cuda/ggml-cuda.cu:{n}: CUDA error"
        own = [([abort, "CUDA error: an illegal memory access was encountered"], abort),
               ([f"[DEBUG] <qwen> cmd.Wait() returned error: {sig}" if sig.startswith("exit") else
                 f"[DEBUG] <qwen> cmd.Wait() returned error: signal: {sig}"],
                f"cmd.Wait() returned error: {sig}" if sig.startswith("exit") else
                f"cmd.Wait() returned error: signal: {sig}"),
               ([f'time=2025-10-22T10:59:00.346Z level=ERROR source=sched.go:451 msg="error loading llama server" '
                 f'error="llama runner process has terminated: signal: {sig}"'],
                f'runner process has terminated: signal: {sig}"')]
    return draw(st.sampled_from(own + shell))


_SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(data=st.data(), engine=st.sampled_from(["sglang", "vllm", "llamacpp"]), first=st.integers(6, 10),
       caught=st.integers(0, 3), end=st.sampled_from(["none", "certain", "certain+more", "pending"]))
def test_caught_errors_are_events_and_the_end_of_serving_is_the_crash(
        tmp_path: Path, data: st.DataObject, engine: str, first: int, caught: int, end: str) -> None:
    i = 0
    lines: list[str] = []

    def serve(n: int) -> None:
        nonlocal i
        lines.extend(serving(engine, i + k) for k in range(n))
        i += n

    serve(first)
    causes = []
    for _ in range(caught):
        block, cause = data.draw(_caught())
        lines.extend(block)
        causes.append(cause)
        serve(data.draw(st.integers(1, 4)))
    want = None
    if end.startswith("certain"):
        block, want = data.draw(_fatal(engine))
        lines.extend(block)
        if end == "certain+more":
            serve(3)
    elif end == "pending":
        block, want = data.draw(_caught())
        lines.extend(block)
    session = _run_both(tmp_path, lines)
    runs = session.runs
    # Every caught error is kept as one, with its own first words, and called no crash.
    assert [c for r in runs for _line, c in r.errors_survived] == causes
    found = crashes(runs)
    if want is None:
        assert found == [] and runs[-1].state is ServerState.SERVING
        return
    assert [c.error for c in found] == [want]
    assert runs[0].state is ServerState.CRASHED and runs[0].crash_cause == want
    if end == "certain+more":
        # A certain end: what is served after it is another launch's.
        assert len(runs) == 2 and runs[1].state is ServerState.SERVING
    else:
        assert len(runs) == 1


# -- the named shapes, on real excerpts ---------------------------------------------------------------

REAL = {
    "llamacpp_tq3_cuda_abort_no_assert_11.log": "/home/gdevenyi/llama/llama.cpp-tq3/ggml/src/ggml-cuda/ggml-cuda.cu:107: CUDA error",
    "llamaswap_child_abort_core_dumped_155.log": "cmd.Wait() returned error: signal: aborted (core dumped)",
    "ollama_runner_terminated_signal_4912.log": 'runner process has terminated: signal: terminated"',
    "vllm_v1_worker_died_llmscaler_154.log": "Worker proc VllmWorker-3 died unexpectedly, shutting down executor.",
    "vllm_v1_worker_died_art_201.log": "Worker proc VllmWorker-1 died unexpectedly, shutting down executor.",
}


def test_real_deaths_are_crashes_named_by_their_first_fatal_line(tmp_path: Path) -> None:
    for name, cause in REAL.items():
        lines = (CRASHES / name).read_text(encoding="utf-8").splitlines()
        session = _run_both(tmp_path, lines)
        assert [c.error for c in crashes(session.runs)] == [cause], name
        # A log's tail says the same: not its last line.
        assert death_cause(lines) == cause, name
        assert lines[-1].strip() not in cause


def test_an_engines_announced_traceback_is_named_by_its_exception_not_the_parents_sigquit(tmp_path: Path) -> None:
    pre = "ERROR 10-22 10:59:01 [core.py:502] "
    lines = [serving("vllm", i) for i in range(4)]
    lines += [f"{pre}EngineCore encountered a fatal error.", f"{pre}Traceback (most recent call last):",
              f'{pre}  File "/x/core.py", line 1, in run', f"{pre}RuntimeError: CUDA error: misaligned address",
              "ERROR 10-22 10:59:02 [async_llm.py:1] vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue."]
    assert crashes(_run_both(tmp_path, lines).runs)[0].error == "RuntimeError: CUDA error: misaligned address"


def test_a_stop_is_explained_by_its_signal_not_by_the_last_line_written() -> None:
    lines = [serving("sglang", i) for i in range(6)]
    sigterm = "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
    lines += [f"[2025-10-22 10:59:00] {sigterm}", "Traceback (most recent call last):",
              '  File "/x/y.py", line 1, in f', "asyncio.exceptions.CancelledError",
              "INFO:     Finished server process [1234]"]
    assert death_cause(lines) == sigterm
    # llama-swap stopping its own child is a stop too, not a crash.
    assert death_cause(["[DEBUG] <m> cmd.Wait() returned error: signal: terminated"]) == \
        "cmd.Wait() returned error: signal: terminated"
    session = Session()
    for rec in parse_lines(["[DEBUG] <m> cmd.Wait() returned error: signal: terminated"]):
        session.ingest(rec)
    assert crashes(session.runs) == []
    # llama-server stopped by a second signal (its first one hung it) is stopped, not dead.
    second = "Received second interrupt, terminating immediately."
    assert death_cause([serving("llamacpp", 0), second]) == second
    session = Session()
    for rec in parse_lines([serving("llamacpp", i) for i in range(3)] + [second]):
        session.ingest(rec)
    assert crashes(session.runs) == [] and session.runs[-1].state is ServerState.STOPPED
    # Lines that say nothing of an end leave the caller's last line; a caught error names nothing.
    assert death_cause([serving("vllm", i) for i in range(3)]) is None
    assert death_cause(["Traceback (most recent call last):", "ValueError: bad request",
                        *(serving("vllm", i) for i in range(3))]) is None


@settings(max_examples=60, deadline=None)
@given(dirs=st.lists(NAME, max_size=4), stem=NAME, ext=st.sampled_from(["c", "cc", "cpp", "cu", "h", "hpp", "m", "metal"]),
       n=st.integers(1, 99999), msg=st.from_regex(r"[A-Za-z][\w ().=<>!-]{0,40}", fullmatch=True),
       lead=st.sampled_from(["", "/", "./"]))
def test_a_native_abort_is_known_by_its_file_line_shape_in_every_engine(
        dirs: list[str], stem: str, ext: str, n: int, msg: str, lead: str) -> None:
    line = f"{lead}{'/'.join([*dirs, stem])}.{ext}:{n}: {msg}"
    for first in ("sglang", "vllm", "llamacpp"):
        session = Session()
        for rec in parse_lines([serving(first, i) for i in range(3)] + [line]):
            session.ingest(rec)
        assert [c.error for c in crashes(session.runs)] == [line.strip()], first
    # A compiler's "file:line:column:" or glog's "file:line]" is no abort.
    for friend in (f"{stem}.{ext}:{n}:5: warning: {msg}", f"E0904 07:15:26.325699  5796 {stem}.{ext}:{n}] {msg}"):
        session = Session()
        for rec in parse_lines([friend]):
            session.ingest(rec)
        assert crashes(session.runs) == []


def test_lines_that_only_look_fatal_end_nothing() -> None:
    friends = ["INFO 10-22 10:00:00 [async_llm.py:1] Aborted request chatcmpl-123.",
               "Killed 3 requests", "INFO:     127.0.0.1:5 - \"POST /v1/completions HTTP/1.1\" 500 Internal Server Error",
               "/x/y.py:12: UserWarning: the tokenizer is slow",
               "[DEBUG] <m> cmd.Wait() returned error: <nil>"]
    session = Session()
    for rec in parse_lines([serving("vllm", 0), *friends, serving("vllm", 1)]):
        session.ingest(rec)
    assert crashes(session.runs) == [] and len(session.runs) == 1


def test_a_command_line_tools_totals_are_no_servers_samples(tmp_path: Path) -> None:
    want = {"llamacpp_speculative_cli_perf_10594.log": [], "llamacpp_print_timings_main_2237.log": [],
            # llama-cli's block, then the same prompt through llama-server: only the server's line.
            "llamacpp_cli_and_server_timings_9013.log": [(15, 11.94)]}
    for name, samples in want.items():
        lines = (CLI / name).read_text(encoding="utf-8").splitlines()
        got = [(r.line, r.gen_throughput) for r in parse_lines(lines) if isinstance(r, EngineStats)]
        assert got == samples, name
        session = _run_both(tmp_path, lines)
        assert sum(len(r.throughput) + r.excluded_warmup + r.excluded_idle for r in session.runs) == len(samples)


# -- every report format says the crash --------------------------------------------------------------

def test_the_crash_reaches_every_summarize_format(tmp_path: Path) -> None:
    died = "Worker proc VllmWorker-2 died unexpectedly, shutting down executor."
    log = tmp_path / "vllm.log"
    log.write_text("\n".join([*(serving("vllm", i) for i in range(8)),
                              f"ERROR 10-22 10:59:00 [multiproc_executor.py:140] {died}",
                              "INFO:     Shutting down"]) + "\n")

    def summarize(fmt: str) -> str:
        done = subprocess.run([sys.executable, "-m", "specmon", "summarize", str(log), "--format", fmt],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert "Traceback" not in done.stderr
        return done.stdout

    doc = json.loads(summarize("json"))
    assert [c["error"] for c in doc["crashes"]] == [died]
    for fmt in ("table", "markdown", "csv"):
        # The table and Markdown wrap the sentence to the width: compare with the spaces folded.
        assert died in " ".join(summarize(fmt).split()), fmt


# -- a replica that dies during a parallel sweep ------------------------------------------------------

def test_a_replica_that_dies_mid_launch_is_reported_with_its_cause_when_seen() -> None:
    world = FleetWorld(3, {0: 100.0, 2: 130.0})
    arms = world.arms()
    victim = world.replicas[1]
    state: dict[str, float | None] = {"died_at": None}
    dead = [False]

    async def check() -> str | None:
        return "the server measured (PID 4242) has exited: Killed" if dead[0] else None

    restart = victim.restart

    async def revive(steps: int, dims: object = None) -> RestartOutcome:
        dead[0] = False
        return await restart(steps, dims)

    arms[1] = Arm(victim.name, revive, victim.session, victim, check=check)
    sleep = world.sleep

    async def deadly_sleep(seconds: float) -> None:
        await sleep(seconds)
        if not dead[0] and state["died_at"] is None and world.now > 1.5 and victim.loaded:
            # kill -9 early in round 1's launch: no line, the load's requests refused.
            victim.mean, dead[0], state["died_at"] = None, True, world.now

    events: list[str] = []
    plan = FleetPlan((0, 2), samples=40, settle=1, seed=5, rounds=2, check_s=5.0, poll_s=1.0)
    sweep = FleetSweep(plan, arms, clock=world.clock, sleep=deadly_sleep, on_event=lambda e: events.append(e.text))
    result = asyncio.run(sweep.run())
    failed = [r for r in result.records if not r.ok]
    assert [(r.replica, r.round) for r in failed] == [(victim.name, 1)]
    assert "has exited: Killed" in failed[0].text and "counted samples" not in failed[0].text
    # Seen within a check's interval or two of the death, not after the launch's 10-minute budget.
    died_at = state["died_at"]
    assert isinstance(died_at, float)
    assert failed[0].began + failed[0].seconds - died_at <= 2 * plan.check_s + 2 * plan.poll_s
    assert any(f"{victim.name}:" in e and "has exited: Killed" in e for e in events)


def test_a_launch_whose_requests_all_failed_says_what_they_met() -> None:
    world = FleetWorld(3, {0: 100.0, 2: 130.0})
    arms = world.arms()
    victim = world.replicas[2]

    class Refused:
        async def start(self, concurrency: int, workload: str | None = None) -> None:
            victim.mean = None  # its server is gone: nothing is served

        async def stop(self) -> LoadReport:
            fail = [RequestResult(i, 0, False, 0.0, 0.01, error="connection refused (is the server up?)")
                    for i in range(88)]
            return LoadReport(1, 0.0, 1.0, results=fail)

    arms[2] = Arm(victim.name, victim.restart, victim.session, Refused())
    plan = FleetPlan((0, 2), samples=20, settle=1, seed=5, rounds=1, stall_s=30.0)
    result = asyncio.run(FleetSweep(plan, arms, clock=world.clock, sleep=world.sleep).run())
    failed = [r for r in result.records if not r.ok]
    assert [r.replica for r in failed] == [victim.name]
    assert "88 of 88 requests failed: connection refused (is the server up?)" in failed[0].text
    assert failed[0].errors == 88


def test_a_gone_servers_recorded_cause_is_what_ended_it_not_its_last_line() -> None:
    """``exit_cause`` reads the log tail alive.sh / ready.sh send (their ``log-tail`` block)."""
    from specmon.control.servers import exit_cause

    def block(lines: list[str]) -> str:
        return f"specmon-alive result=gone\nspecmon-alive log-tail lines={len(lines) + 40} partial=0\n" + "\n".join(lines)

    sigterm = "SIGTERM received. signum=None frame=None. Draining requests and shutting down..."
    stopped = [serving("sglang", 1), f"[2025-10-22 10:59:00] {sigterm}", "INFO:     Finished server process [1234]"]
    assert exit_cause(block(stopped)) == sigterm
    crashed = [serving("sglang", 1), "[2025-10-22 10:59:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
               '  File "/x/scheduler.py", line 1, in run', "RuntimeError: CUDA error: an illegal memory access was encountered",
               "[2025-10-22 10:59:01] Received sigquit from a child process. It usually means the child failed."]
    assert exit_cause(block(crashed)) == "RuntimeError: CUDA error: an illegal memory access was encountered"
    # Lines that say nothing of an end: the last one, as before.
    assert exit_cause(block([serving("vllm", 1), "INFO:     waiting"])) == "INFO:     waiting"


def test_the_crash_reaches_every_report_format_of_a_recording(tmp_path: Path) -> None:
    from specmon.output.recording import write_lines_recording

    died = "Worker proc VllmWorker-2 died unexpectedly, shutting down executor."
    rec = tmp_path / "rec.jsonl"
    write_lines_recording(rec, [("vllm.log", [*(serving("vllm", i) for i in range(8)),
                                              f"ERROR 10-22 10:59:00 [multiproc_executor.py:140] {died}"])])

    def report(fmt: str) -> str:
        done = subprocess.run([sys.executable, "-m", "specmon", "report", str(rec), "--format", fmt],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert "Traceback" not in done.stderr
        return done.stdout

    assert [c["error"] for c in json.loads(report("json"))["crashes"]] == [died]
    for fmt in ("markdown", "html", "csv"):
        # Markdown wraps the sentence at 80 columns: compare with the spaces folded.
        assert died in " ".join(report(fmt).split()), fmt


def test_the_event_log_says_a_pending_error_until_the_server_is_gone() -> None:
    session = Session()
    lines = [*(serving("vllm", i) for i in range(3)), "Traceback (most recent call last):",
             '  File "/x/y.py", line 1, in f', "RuntimeError: boom"]
    for rec in parse_lines(lines):
        session.ingest(rec)
    said = [e.text for e in session.events if e.level == "error"]
    assert said and all(t.startswith("error (serving stopped?): ") for t in said)
    pending = [session.runs[0].crash_pending]
    killed = list(parse_lines([*lines, "Killed"]))[-1]  # the shell's word of its death, line 7
    session.ingest(killed)
    pending.append(session.runs[0].crash_pending)
    assert pending == [True, False] and session.events[-1].text == "crash: Killed"
    assert crashes(session.runs)[0].error == "RuntimeError: boom"


def test_a_replica_that_logs_a_caught_error_mid_launch_goes_on_being_measured() -> None:
    world = FleetWorld(4, {0: 100.0, 2: 130.0})
    victim = world.replicas[0]
    sleep = world.sleep
    said = [False]

    async def sleep_then_err(seconds: float) -> None:
        await sleep(seconds)
        if not said[0] and world.now > 4.0 and victim.loaded:
            said[0] = True
            for rec in parse_lines(["Traceback (most recent call last):", '  File "/x/serving.py", line 1, in f',
                                    "ValueError: the prompt is too long"]):
                victim.session.ingest(rec)

    plan = FleetPlan((0, 2), samples=20, settle=1, seed=5, rounds=1, check_s=2.0)
    result = asyncio.run(FleetSweep(plan, world.arms(), clock=world.clock, sleep=sleep_then_err).run())
    assert said[0] and all(r.ok for r in result.records), [r.text for r in result.records]
    # Not cut short at the error: the whole launch, with nothing said against it.
    mine = next(r for r in result.records if r.replica == victim.name)
    assert mine.samples == plan.samples and mine.text == ""
    run = victim.session.runs[-1]
    assert run.state is ServerState.SERVING and [c for _l, c in run.errors_survived] == ["ValueError: the prompt is too long"]
