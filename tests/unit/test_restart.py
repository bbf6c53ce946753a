"""The restart controller without real servers: plan rules, lifecycle tracking, phases, ETA.

The runner here answers the plan's own command strings from a script (which
step gets which result), and the new log arrives from a queue the test fills,
with a fake clock, so every phase change is deterministic. Real processes are
in ``test_restart_sim.py``; the one real process here is the pidfile check.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.control.demo import demo_profile
from specmon.control.launch import (
    LaunchError,
    LaunchProfile,
    build_plan,
    parse_result_line,
)
from specmon.control.restart_controller import RestartController, RestartError
from specmon.control.restart_progress import Phase, plan_label
from specmon.control.runner import LocalRunner, Result
from specmon.control.startup import StartupTracker
from specmon.sim.logwriter import format_line, shutdown_script
from specmon.sources.switching import SwitchingSource
from tests.support.restarting import (  # noqa: F401
    EXITED,
    READY,
    STARTED,
    STOPPED,
    WAITING,
    FakeClock,
    Harness,
    QueueSource,
    ScriptedRunner,
    profile,
    recording_runner,
    startup_lines,
)


async def test_only_the_last_built_and_shown_plan_runs_once(tmp_path: Path) -> None:
    calls, runner = recording_runner()
    c = RestartController(profile(tmp_path), runner)  # type: ignore[arg-type]
    foreign = build_plan(profile(tmp_path), 2)
    with pytest.raises(RestartError, match="did not build"):
        await c.run(foreign)
    plan = c.plan_for(2)
    with pytest.raises(RestartError, match="not shown"):
        await c.run(plan)
    newer = c.plan_for(3)
    with pytest.raises(RestartError, match="was not built by this controller"):
        c.describe(plan)  # an older plan cannot be shown any more
    c.describe(newer)
    c.withdraw(newer)  # the user cancelled
    with pytest.raises(RestartError, match="did not build"):
        await c.run(newer)
    with pytest.raises(RestartError, match="did not build"):
        await c.run("sh -c reboot")  # type: ignore[arg-type]
    assert calls == []  # nothing ever reached the host


async def test_a_plan_runs_only_once(tmp_path: Path) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": Result(2, "specmon-start result=refused "
                                                                              "reason=already-running pid=9\n", "")},
                            [READY])
    h = Harness(tmp_path, runner)
    plan = h.controller.plan_for(2)
    h.controller.describe(plan)
    first = await h.controller.run(plan)
    assert first.phase is Phase.FAILED and "start failed" in first.message and "already-running" in first.message
    with pytest.raises(RestartError):
        await h.controller.run(plan)
    assert runner.kinds == ["specmon-stop", "specmon-start"]


@pytest.mark.parametrize("bad", ["2", 1.5, True, -1, 17, 10**6])
def test_plan_for_validates_steps(tmp_path: Path, bad: object) -> None:
    c = RestartController(profile(tmp_path), LocalRunner())
    with pytest.raises(LaunchError):
        c.plan_for(bad)  # type: ignore[arg-type]


def test_go_back_needs_a_previous_configuration(tmp_path: Path) -> None:
    c = RestartController(profile(tmp_path), LocalRunner(), current_steps=1)
    with pytest.raises(RestartError, match="no earlier configuration"):
        c.go_back_plan()


def test_plan_label() -> None:
    assert plan_label(0) == "no speculation"
    assert plan_label(1) == "1 step"
    assert plan_label(2, 3) == "2 steps, 3 draft tokens"


# --------------------------------------------------------------------------- the new log


def test_tracker_follows_a_healthy_start_up() -> None:
    t = StartupTracker()
    lines = startup_lines(steps=2)
    load_at = next(i for i, line in enumerate(lines) if "checkpoint shards" in line and "32/64" in line)
    t.feed(lines[: load_at + 1])
    assert t.reached is Phase.LOADING and t.load_progress == (32, 64)
    assert t.config is not None and t.config.steps == 2 and t.config.draft_tokens == 3
    t.feed(lines[load_at + 1:])
    assert t.reached is Phase.READY and t.load_progress == (64, 64)
    assert t.graph_progress is not None and t.graph_progress[0] == t.graph_progress[1]
    assert t.crash is None
    # tqdm bars are folded: at most one progress line in a row among the kept lines.
    kept = t.last_lines
    assert len(kept) == 20 and "fired up and ready" in kept[-1]


def test_tracker_names_the_crash_by_its_error_not_its_traceback_header() -> None:
    t = StartupTracker()
    t.feed(startup_lines(crash=True))
    assert t.crash is not None and t.crash.startswith("CUDA out of memory")
    assert any("torch.OutOfMemoryError" in line for line in t.last_lines)
    assert any("Scheduler hit an exception" in line for line in t.last_lines)


def test_traceback_during_a_requested_stop_is_not_a_crash() -> None:
    t = StartupTracker()
    lines = startup_lines()
    stop = [format_line(1_770_000_100.0, s.message, s.ranks) for s in shutdown_script()]
    t.feed(lines + stop + ["Traceback (most recent call last):", "  File \"x.py\", line 1",
                           "KeyboardInterrupt"])
    assert t.crash is None


def test_progress_lines_fold_into_the_latest() -> None:
    t = StartupTracker(keep=5)
    t.feed(["a", "Loading safetensors checkpoint shards:   2% Completed | 1/64 [00:00<00:22,  2.82it/s]",
            "Loading safetensors checkpoint shards:   3% Completed | 2/64 [00:00<00:18,  3.33it/s]", "", "b"])
    assert t.last_lines == ("a", "Loading safetensors checkpoint shards:   3% Completed | 2/64 "
                                 "[00:00<00:18,  3.33it/s]", "b")


# --------------------------------------------------------------------------- switching the dashboard's log


async def test_switching_source_delivers_old_lines_then_begins_the_new_log() -> None:
    first, made = QueueSource("a.log"), []

    def factory(path: str, from_start: bool) -> QueueSource:
        src = QueueSource(path)
        made.append((path, from_start))
        return src

    seen: list[object] = []
    src = SwitchingSource(first, factory, on_begin=lambda name: seen.append(("begin", name)))

    async def consume() -> None:
        async for batch in src.batches():
            seen.append(batch)

    task = asyncio.ensure_future(consume())
    first.queue.put_nowait(["old 1"])
    await asyncio.sleep(0.01)
    first.queue.put_nowait(["old 2"])  # read before the switch: still delivered, before the new log
    await src.switch("b.log", True)
    assert src.name == "b.log" and made == [("b.log", True)] and first.closed
    src.inner.queue.put_nowait(["new 1"])  # type: ignore[attr-defined]
    await asyncio.sleep(0.01)
    await src.close()
    await asyncio.wait_for(task, 2)
    assert seen == [["old 1"], ["old 2"], ("begin", "b.log"), ["new 1"]]


# --------------------------------------------------------------------------- phases, with a fake clock


async def test_phases_elapsed_and_eta_follow_the_log(tmp_path: Path) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING] * 40 + [READY])
    h = Harness(tmp_path, runner, current_steps=1)
    lines = startup_lines(steps=2)
    shard = next(i for i, line in enumerate(lines) if "1/64 [" in line)
    capture = next(i for i, line in enumerate(lines) if "Capture cuda graph begin" in line)
    ready = next(i for i, line in enumerate(lines) if "fired up" in line)
    h.script = [(2.0, lines[:shard + 1]), (6.0, lines[shard + 1:capture]), (9.0, lines[capture:ready]),
                (12.0, lines[ready:])]
    views: list[object] = []
    c = h.controller
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan, on_progress=views.append)
    assert final.phase is Phase.READY, final.message
    phases = [v.phase for v in views]  # type: ignore[attr-defined]
    order = [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] is not p]
    assert order == [Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING, Phase.READY]
    loading = [v for v in views if v.phase is Phase.LOADING]  # type: ignore[attr-defined]
    assert loading[0].load_progress == (1, 64) and loading[-1].load_progress == (64, 64)  # type: ignore[attr-defined]
    assert [p for p, _ in final.done] == [Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING]
    assert final.elapsed_s == pytest.approx(sum(s for _, s in final.done))
    assert h.switches == [(str(tmp_path / "s_2.log"), True)]  # the dashboard follows the new log from its start
    assert c.current_steps == 2 and c.previous_steps == 1 and not c.busy
    assert final.config == "EAGLE3 2 steps"
    # The durations were learned: the next restart has an ETA from the start.
    assert c.eta_store is not None and c.eta_store.count("gpu-box") == 1
    runner.ready = [WAITING] * 40 + [READY]
    h.script = [(2.0, lines[:shard + 1]), (12.0, lines[shard + 1:])]
    plan = c.plan_for(3)
    c.describe(plan)
    views.clear()
    await c.run(plan, on_progress=views.append)
    first_eta = views[0].eta  # type: ignore[attr-defined]
    assert first_eta.remaining_s is not None and first_eta.basis == "1 earlier restart on gpu-box"
    assert first_eta.remaining_s == pytest.approx(final.elapsed_s, abs=0.5)


async def test_crash_in_the_log_ends_the_restart_at_once(tmp_path: Path) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING])
    h = Harness(tmp_path, runner, current_steps=1)
    h.script = [(1.0, startup_lines(crash=True))]
    c = h.controller
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.CRASHED and final.failed
    assert "CUDA out of memory" in final.message
    assert any("OutOfMemoryError" in line for line in final.last_lines)
    assert final.previous_steps == 1
    assert h.clock.now - 100.0 < 10  # not the 30 s timeout
    assert c.eta_store is not None and c.eta_store.count("gpu-box") == 0  # a crash teaches no timing
    back = c.go_back_plan()
    assert back.steps == 1 and back.log == str(tmp_path / "s_1.log")


async def test_process_gone_is_a_crash_even_with_a_quiet_log(tmp_path: Path) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING, EXITED])
    h = Harness(tmp_path, runner, current_steps=1)
    c = h.controller
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.CRASHED and final.message == "the server process exited (no error in its log)"


async def test_timeout_says_how_long_it_waited(tmp_path: Path) -> None:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING])
    h = Harness(tmp_path, runner, profile=profile(tmp_path, start_timeout_s=5))
    h.script = [(1.0, startup_lines()[:30])]
    c = h.controller
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.TIMEOUT and "not ready after 5 s" in final.message
    assert final.last_lines  # what the log said last
    assert final.eta is None


async def test_failed_stop_never_starts(tmp_path: Path) -> None:
    refused = Result(2, "specmon-stop result=refused reason=pidfile-not-owned\n", "")
    runner = ScriptedRunner({"specmon-stop": refused, "specmon-start": STARTED}, [READY])
    h = Harness(tmp_path, runner, current_steps=1)
    c = h.controller
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.FAILED and "stop failed" in final.message and "pidfile-not-owned" in final.message
    assert runner.kinds == ["specmon-stop"]
    assert c.current_steps == 1  # the old server still runs


async def test_connection_loss_is_a_failure_not_a_traceback(tmp_path: Path) -> None:
    class Broken:
        async def run(self, command: str, timeout: float) -> Result:
            raise ConnectionResetError("connection lost")

    c = RestartController(profile(tmp_path), Broken(), host="gpu-box")
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.FAILED and "connection to gpu-box failed" in final.message
    assert not c.busy


async def test_busy_refuses_a_second_restart(tmp_path: Path) -> None:
    gate = asyncio.Event()

    class Slow:
        async def run(self, command: str, timeout: float) -> Result:
            await gate.wait()
            return Result(2, "specmon-stop result=refused reason=x\n", "")

    c = RestartController(profile(tmp_path), Slow())
    plan = c.plan_for(2)
    c.describe(plan)
    task = asyncio.ensure_future(c.run(plan))
    await asyncio.sleep(0.01)
    assert c.busy and c.progress is not None and c.progress.phase is Phase.STOPPING
    with pytest.raises(RestartError, match="in progress"):
        c.plan_for(3)
    gate.set()
    await task
    assert not c.busy


# --------------------------------------------------------------------------- stopping by pidfile


def starttime(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[19])


async def test_exit_stop_uses_the_pidfile_and_spares_a_reused_pid(tmp_path: Path) -> None:
    """The stop at exit kills the recorded process only while its start time matches."""
    prof = demo_profile(tmp_path)
    c = RestartController(prof, LocalRunner(), current_steps=1)
    assert c.stop_step() is None  # nothing started: nothing to stop
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        # The pidfile names the bystander's PID, with another start time: a PID reused since.
        Path(prof.pidfile or "").write_text(f"{bystander.pid} {starttime(bystander.pid) + 1}\n")
        plan = c.plan_for(1)
        c.last_plan = plan  # as after a run
        shown: list[str] = []
        line = await c.stop_server(shown.append)
        assert shown and shown[0].startswith("stop:  SIGTERM the server recorded in")
        assert line is not None and parse_result_line(line, "specmon-stop") == {
            "result": "not-running", "reason": "pid-reused", "pid": str(bystander.pid)}
        assert bystander.poll() is None  # untouched
        assert not Path(prof.pidfile or "").exists()
    finally:
        bystander.kill()
        bystander.wait()
    assert os.path.exists(tmp_path)


# --------------------------------------------------------------------------- the launch table of a profile


LAUNCH_CONFIG = """\
[profiles.kimi]
host = "gpu-box"

[profiles.kimi.launch]
argv = ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "{steps}"]
log = "/data/logs/sglang_{steps}step.log"
ready_marker = "The server is fired up and ready to roll!"
"""


def test_launch_table_is_a_validated_launch_profile(tmp_path: Path) -> None:
    from specmon.config import parse_config

    prof = parse_config(LAUNCH_CONFIG).profile("kimi").launch
    assert isinstance(prof, LaunchProfile) and prof.mode == "managed"
    plan = RestartController(prof, LocalRunner(), host="gpu-box").plan_for(2)
    assert plan.log == "/data/logs/sglang_2step.log"


@pytest.mark.parametrize(("change", "line", "words"), [
    (('ready_marker = "The server is fired up and ready to roll!"', 'ready_markr = "x"'), 7, "unknown key"),
    # Whole-profile checks are reported at the table's header, naming the field.
    (('"{steps}"]', '"{step}"]'), 4, "unknown placeholder {step} in argv[4]"),
    (("log = ", "# log = "), 4, "needs `log`"),
])
def test_launch_table_mistakes_name_the_line(tmp_path: Path, change: tuple[str, str], line: int,
                                              words: str) -> None:
    from specmon.config import ConfigError, parse_config

    with pytest.raises(ConfigError) as info:
        parse_config(LAUNCH_CONFIG.replace(*change), tmp_path / "c.toml")
    assert info.value.line == line, str(info.value)
    assert words in str(info.value) and "profiles.kimi.launch" in str(info.value)
    assert "Value error" not in str(info.value)


async def test_connecting_runner_turns_a_refused_connection_into_a_failed_restart(tmp_path: Path) -> None:
    from specmon.control.connecting_runner import ConnectingRunner

    attempts: list[int] = []

    async def connect() -> object:
        attempts.append(1)
        raise RuntimeError("unknown host gpu-box: not in ~/.ssh/known_hosts")

    c = RestartController(profile(tmp_path), ConnectingRunner(connect), host="gpu-box")
    plan = c.plan_for(2)
    c.describe(plan)
    final = await c.run(plan)
    assert final.phase is Phase.FAILED
    assert final.message == "connection to gpu-box failed: unknown host gpu-box: not in ~/.ssh/known_hosts"
    assert attempts == [1]  # one attempt per command: nothing is retried behind the user's back
