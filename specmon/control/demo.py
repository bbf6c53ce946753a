"""``specmon demo``'s core: the simulated server behind a managed launch profile.

The demo is the whole product with no GPU and no SSH. The simulated SGLang
EAGLE-3 server (:mod:`specmon.sim.server`) is a real process writing a real
log; it is started, restarted and stopped exactly as a real server would be:
through a managed :class:`~specmon.control.launch.LaunchProfile`, the sealed
command plans, the :class:`~specmon.control.runner.LocalRunner` and the
:class:`~specmon.control.restart_controller.RestartController`. Each step count writes its
own log (``sim_{steps}step.log``), so a restart also switches the dashboard to
a new file.

Nothing here imports Textual: the command (``specmon.commands.demo``) builds
the dashboard around what :func:`make_demo` returns.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from specmon.control.adopt import READY_MARKERS
from specmon.control.eta import EtaStore
from specmon.control.launch import LaunchProfile, build_plan
from specmon.control.restart_controller import RestartController
from specmon.control.runner import CommandRunner, LocalRunner
from specmon.sources.local import LocalTailSource
from specmon.sources.pending import PendingSource as PendingSource
from specmon.sources.switching import SourceFactory, SwitchingSource

__all__ = [
    "DEMO_HOST",
    "DemoSetup",
    "PendingSource",
    "demo_profile",
    "local_tail_factory",
    "make_demo",
    "stop_demo_server",
]

#: The host label of the demo's plans (and of its restart-time history).
DEMO_HOST = "localhost (demo)"
#: Simulated seconds per real second: the table fills in about a minute.
DEFAULT_TIME_SCALE = 10.0
#: Wall-clock seconds of the simulated start-up: shard loading and graph capture stay visible. The
#: dashboard's own sweep (s) restarts 13-34 times before its verdict: at 8 s it took 267-271 s on
#: seeds 1 and 3, at 3 s 186-213 s on seeds 2-4 (bench/bench_demo_dashboard_sweep.py).
DEFAULT_STARTUP_S = 3.0
#: The highest step count the demo offers (the real campaign went to 10).
DEMO_STEPS_MAX = 16
#: The simulated server's launch spread (a speed factor per launch drawn from the seed): a steady,
#: dedicated node. Real servers measure 2-20% (vLLM issue 53436: 7.5-19.7% at low concurrency with
#: speculation); at 2% the demo's default sweep decides in a minute or two on most seeds.
DEMO_LAUNCH_CV = 0.02
#: The settings ``sweep --demo`` measures by default: the real campaign's (3 steps, 1.9% behind 2 in
#: the simulated truth, would take hundreds of launches to separate from it).
DEMO_SWEEP_STEPS = (0, 1, 2, 5, 10)


def demo_profile(
    workdir: Path,
    *,
    time_scale: float = DEFAULT_TIME_SCALE,
    startup_s: float = DEFAULT_STARTUP_S,
    seed: int | None = None,
    crash_on_start: bool = False,
    ready_marker: str | None = None,
    start_timeout_s: float = 120.0,
    launch_cv: float = DEMO_LAUNCH_CV,
) -> LaunchProfile:
    """The managed launch profile that runs the simulated server in ``workdir``.

    Args:
        workdir: An absolute folder for the logs, the pidfile and the restart times.
        time_scale: Simulated seconds per real second.
        startup_s: Wall-clock seconds of the start-up.
        seed: The simulator's random seed (None: random).
        crash_on_start: Die during start-up (tests of the crash state).
        ready_marker: The line that says "ready" (default SGLang's; tests of a
            timeout give one that never appears).
        start_timeout_s: Seconds a start may take.
        launch_cv: The simulated server's launch spread (a fraction; 0: every launch alike).

    Returns:
        A validated profile: ``{steps}`` 0 (no speculation) to 16.
    """
    folder = Path(workdir).resolve()
    common = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}",
              # The start script already sends stdout to {log}: append, so both writers share it.
              "--append", "--time-scale", f"{time_scale:g}", "--startup-seconds", f"{startup_s:g}"]
    if seed is not None:
        common += ["--seed", str(int(seed))]
    if launch_cv:
        common += ["--launch-cv", f"{100 * launch_cv:g}"]
    if crash_on_start:
        common.append("--crash-on-start")
    return LaunchProfile(
        mode="managed",
        engine="sglang",
        argv=[*common, "--steps", "{steps}", "--draft-tokens", "{draft_tokens}", "--topk", "{topk}"],
        nospec_argv=[*common, "--steps", "0"],
        cwd=str(folder),
        log=str(folder / "sim_{steps}step.log"),
        pidfile=str(folder / "sim.pid"),
        ready_marker=ready_marker or READY_MARKERS["sglang"],
        steps_min=0,
        steps_max=DEMO_STEPS_MAX,
        start_timeout_s=start_timeout_s,
        stop_grace_s=5,
        stop_signal="TERM",
    )


def local_tail_factory(poll_interval: float = 0.1) -> SourceFactory:
    """``(path, from_start) -> LocalTailSource``: the whole file, or only what comes next."""

    def make(path: str, from_start: bool) -> LocalTailSource:
        return LocalTailSource(path, lines=None if from_start else 0, poll_interval=poll_interval)

    return make


@dataclass
class DemoSetup:
    """What :func:`make_demo` builds.

    Attributes:
        workdir: Where the logs and the pidfile are.
        profile: The managed profile.
        controller: Restarts the simulated server (the first start too).
        source: What the dashboard reads: the current log, switched at each restart.
        steps: The step count of the first start.
    """

    workdir: Path
    profile: LaunchProfile
    controller: RestartController
    source: SwitchingSource
    steps: int


def make_demo(
    workdir: Path,
    *,
    steps: int = 1,
    time_scale: float = DEFAULT_TIME_SCALE,
    startup_s: float = DEFAULT_STARTUP_S,
    seed: int | None = None,
    runner: CommandRunner | None = None,
    profile: LaunchProfile | None = None,
    poll_interval: float = 0.1,
    clock: Callable[[], float] | None = None,
) -> DemoSetup:
    """Build the demo: profile, controller and the dashboard's source. Starts nothing.

    Args:
        workdir: An existing folder (logs, pidfile, restart times).
        steps: The first step count.
        time_scale: Simulated seconds per real second.
        startup_s: Wall-clock seconds of each start-up.
        seed: The simulator's seed.
        runner: Where commands run (default: this machine).
        profile: Another profile (tests: a crash or timeout variant).
        poll_interval: Seconds between two looks at the log.
        clock: Monotonic clock of the controller (tests).

    Raises:
        LaunchError: ``steps`` is out of the profile's range.
    """
    workdir = Path(workdir).resolve()
    profile = profile or demo_profile(workdir, time_scale=time_scale, startup_s=startup_s, seed=seed)
    first_log = build_plan(profile, steps).log or str(workdir / "server.log")
    factory = local_tail_factory(poll_interval)
    source = SwitchingSource(PendingSource(first_log), factory)
    extra = {"clock": clock} if clock is not None else {}
    controller = RestartController(
        profile, runner or LocalRunner(), host=DEMO_HOST,
        eta_store=EtaStore(workdir / "restart_times.json"),
        make_source=factory, on_log_switch=source.switch, **extra,  # type: ignore[arg-type]
    )
    return DemoSetup(workdir, profile, controller, source, steps)


async def stop_demo_server(controller: RestartController, show: Callable[[str], None]) -> str | None:
    """Stop the server the demo started, by the PID in its pidfile (the command shown first).

    A start interrupted half-way may write its pidfile a moment after the first
    look: the pidfile (the demo's, on this machine) is watched for up to a second and the
    stop tried again as soon as it appears, so a closed terminal ends the demo at once in
    the usual case (it always waited the whole second).

    Returns:
        The stop script's result line, or None when nothing was ever started.
    """
    outcome = await controller.stop_server(show)
    if outcome is not None and "no-pidfile" in outcome and controller.interrupted:
        plan = controller.last_plan
        pidfile = Path(plan.pidfile) if plan is not None and plan.pidfile else None
        for _ in range(20):
            await asyncio.sleep(0.05)
            if pidfile is not None and pidfile.exists():
                break
        outcome = await controller.stop_server(show)
    return outcome
