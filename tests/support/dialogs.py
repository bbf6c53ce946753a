"""Fixed dialogs and restart states for snapshot and pilot tests of the dashboard's screens.

Plans are built from a profile with fixed paths, so the commands they show are the
same on every machine; nothing here runs a command.
"""

from __future__ import annotations

import random

from specmon.control.eta import estimate
from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase, RestartProgress
from specmon.control.runner import LocalRunner
from specmon.control.startup import StartupTracker
from specmon.sim.logwriter import format_line, startup_script
from specmon.sim.model import SpecConfig


def fixed_profile(**kw: object) -> LaunchProfile:
    """An SGLang EAGLE-3 profile with fixed paths and a secret in its argv and env (shown redacted)."""
    fields: dict[str, object] = dict(
        engine="sglang",
        argv=["python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
              "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "{steps}",
              "--speculative-num-draft-tokens", "{draft_tokens}", "--api-key", "s3cret", "--port", "{port}"],
        env={"NCCL_PROTO": "LL", "HF_TOKEN": "hf_abc"}, cwd="/srv/sglang",
        log="/srv/sglang/logs/sglang_{steps}step.log", pidfile="/run/specmon/sglang.pid", port=30000,
        ready_marker="The server is fired up and ready to roll!", steps_min=0,
        nospec_argv=["python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5"])
    fields.update(kw)
    return LaunchProfile.model_validate(fields)


def fixed_controller(current_steps: int | None = 1) -> RestartController:
    """A controller on ``gpu-box`` for :func:`fixed_profile` (its runner is never called here)."""
    return RestartController(fixed_profile(), LocalRunner(), host="gpu-box", current_steps=current_steps)


def startup_lines(steps: int = 2, crash: bool = False) -> list[str]:
    """A simulated SGLang start-up of 600 s (seeded)."""
    script = startup_script(SpecConfig.make(steps), random.Random(3), 600.0, crash_at=0.4 if crash else None)
    return [format_line(1_770_000_000.0 + s.at, s.message, s.ranks) for s in script]


def loading_view() -> RestartProgress:
    """A restart 4m 42s in, loading shard 29/64, with two earlier restarts on the host."""
    tracker = StartupTracker()
    lines = startup_lines()
    upto = next(i for i, line in enumerate(lines) if "| 29/64 [" in line)
    tracker.feed(lines[:upto + 1])
    medians = {"stopping": 14.0, "starting": 35.0, "loading": 470.0, "capturing": 180.0}
    eta = estimate(medians, "loading", 233.0, load_progress=tracker.load_progress, runs=2, host="gpu-box")
    return RestartProgress(
        phase=Phase.LOADING, steps=2, label="2 steps, 3 draft tokens", host="gpu-box",
        log="/srv/sglang/logs/sglang_2step.log", elapsed_s=282.0, phase_elapsed_s=233.0,
        done=((Phase.STOPPING, 12.0), (Phase.STARTING, 37.0)), load_progress=tracker.load_progress,
        eta=eta, message="start: result=started pid=48211 starttime=91234", last_lines=tracker.last_lines,
        previous_steps=1, config=tracker.config.label if tracker.config else None)


def crashed_view() -> RestartProgress:
    """A start-up that died of CUDA OOM while loading, with somewhere to go back to (1 step)."""
    tracker = StartupTracker()
    tracker.feed(startup_lines(crash=True))
    return RestartProgress(
        phase=Phase.CRASHED, steps=2, label="2 steps, 3 draft tokens", host="gpu-box",
        log="/srv/sglang/logs/sglang_2step.log", elapsed_s=151.0, phase_elapsed_s=0.0,
        done=((Phase.STOPPING, 12.0), (Phase.STARTING, 37.0), (Phase.LOADING, 102.0)),
        load_progress=tracker.load_progress, message=tracker.crash or "",
        last_lines=tracker.last_lines, previous_steps=1)


def ready_view() -> RestartProgress:
    """A restart that reached ready after 11m 39s."""
    return RestartProgress(
        phase=Phase.READY, steps=2, label="2 steps, 3 draft tokens", host="gpu-box",
        log="/srv/sglang/logs/sglang_2step.log", elapsed_s=699.0, phase_elapsed_s=0.0,
        done=((Phase.STOPPING, 12.0), (Phase.STARTING, 37.0), (Phase.LOADING, 470.0), (Phase.CAPTURING, 180.0)),
        message="ready: 2 steps, 3 draft tokens on gpu-box", previous_steps=1)


def screen_state(app: object) -> str:
    """What the top screen shows, for a timed-out wait: its class, and a restart dialog's input."""
    from textual.widgets import Input

    from specmon.ui.screens.restart_dialog import RestartDialog

    screen = app.screen  # type: ignore[attr-defined]
    if not isinstance(screen, RestartDialog):
        return f"screen {type(screen).__name__}"
    error = screen.query_one("#restart-error").render()
    return (f"restart dialog: input {screen.query_one(Input).value!r}, focused {screen.focused!r}, "
            f"error {str(error)!r}")
