"""``specmon demo``: the whole product with no GPU and no SSH.

Starts the simulated SGLang EAGLE-3 server (a real process writing a real
log) through a managed launch profile, opens the dashboard on its log, and
lets ``r`` restart it for real with another step count. The server is stopped
by the PID in its pidfile when specmon exits — on ``q``, on Ctrl+C, on
SIGTERM/SIGHUP, or when specmon itself fails.

Only ``argparse`` is imported at module level: ``specmon summarize`` builds the
whole parser and must not pay for Textual.
"""

from __future__ import annotations

import argparse
import sys

from specmon.commands.exits import EXIT_OK, fail, write_status
from specmon.literal import plain

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

__all__ = ["cmd_demo", "register", "run_demo"]


def _scale(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 < value <= 1000:
        raise argparse.ArgumentTypeError(f"must be more than 0 and at most 1000: {text!r}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value <= 600:
        raise argparse.ArgumentTypeError(f"must be between 0 and 600 seconds: {text!r}")
    return value


def _steps(text: str) -> int:
    from specmon.control.demo import DEMO_STEPS_MAX

    if not text.isdigit() or int(text) > DEMO_STEPS_MAX:
        raise argparse.ArgumentTypeError(f"must be a whole number from 0 to {DEMO_STEPS_MAX}: {text!r}")
    return int(text)


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``demo`` to the ``specmon`` command line."""
    p = subparsers.add_parser(
        "demo", help="the whole product with no GPU and no SSH: a simulated server that restarts for real",
        description="Start a simulated SGLang EAGLE-3 server (a real process reproducing a real Kimi-K2.5 "
                    "campaign) and open the dashboard on its log. Press r to restart it with another step count: "
                    "the exact commands are shown first, then weight loading and CUDA-graph capture with an ETA, "
                    "then a new row in the table. The server is stopped when specmon exits.")
    p.add_argument("--steps", type=_steps, default=1, metavar="N",
                   help="step count of the first start (default 1; 0 = no speculation)")
    p.add_argument("--time-scale", type=_scale, default=None, metavar="X",
                   help="simulated seconds per real second (default 10: the table fills in about a minute)")
    p.add_argument("--startup-seconds", type=_seconds, default=None, metavar="S",
                   help="how long each start-up takes, in real seconds (default 8)")
    p.add_argument("--dir", metavar="D", default=None,
                   help="folder for the logs and the pidfile (default: a temporary folder, removed at exit)")
    p.add_argument("--seed", type=int, default=None, help="random seed of the simulated server")
    p.add_argument("--theme", metavar="NAME", help="colour theme (default specmon-dark)")
    from specmon.commands.dashboard import add_session_options

    add_session_options(p)
    p.set_defaults(func=cmd_demo)


def _err(text: str) -> None:
    try:
        print(plain(text, newlines=True), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the terminal went away (SIGHUP): the clean-up goes on without it


def build_demo_app(args: argparse.Namespace, workdir: Path, **app_kwargs: Any) -> tuple[Any, Any]:
    """The dashboard on a new demo in ``workdir``: ``(app, setup)``. Starts nothing yet.

    The first start happens when the dashboard is up (its commands go to the event log first).
    """
    from specmon.control.demo import DEFAULT_STARTUP_S, DEFAULT_TIME_SCALE, DEMO_LAUNCH_CV, make_demo
    from specmon.ui.app import DashboardOptions
    from specmon.ui.factories import make_app
    from specmon.ui.flows.restart import RestartFlow
    from specmon.ui.flows.sweep import SweepFlow

    setup = make_demo(
        workdir, steps=args.steps,
        time_scale=args.time_scale if args.time_scale is not None else DEFAULT_TIME_SCALE,
        startup_s=args.startup_seconds if args.startup_seconds is not None else DEFAULT_STARTUP_S,
        seed=args.seed)
    flow = RestartFlow(setup.controller, initial_steps=args.steps)
    startup = args.startup_seconds if args.startup_seconds is not None else DEFAULT_STARTUP_S
    # The simulated server drives its own traffic (no --port): the sweep measures that, within a
    # demo-sized budget; `s` works as it would on a real server.
    scale = args.time_scale if args.time_scale is not None else DEFAULT_TIME_SCALE
    # The plan's times in the run's clock: a restart takes the simulated start-up, samples come
    # `scale` times faster than a real server's.
    sweeper = app_kwargs.pop("sweeper", None) or SweepFlow(flow, plan_options={
        "max_minutes": 1.0, "poll_s": 0.25, "stall_s": 60.0, "attach_s": max(60.0, 4 * startup),
        "restart_s": startup, "sample_rate": scale,
        "clock": f"the simulated server runs {scale:g}× faster than a real one, its launches "
                 f"{100 * DEMO_LAUNCH_CV:g}% apart"})
    options = app_kwargs.pop("options", None) or DashboardOptions(
        theme=args.theme, prometheus_port=getattr(args, "prometheus_port", None))
    app = make_app(setup.source, options=options, controller=flow, sweeper=sweeper, **app_kwargs)
    return app, setup


def cmd_demo(args: argparse.Namespace) -> int:
    """``specmon demo``."""
    from specmon.commands.terminal import no_terminal

    # A refused option is the answer whatever the terminal: say it first.
    problem = _read_only_problem(args) or no_terminal("demo")
    if problem:
        return fail(problem)
    return run_demo(args, lambda app: app.run())


def _read_only_problem(args: argparse.Namespace) -> str | None:
    if getattr(args, "read_only", False):
        return ("the demo starts and restarts a simulated server: it cannot run with --read-only "
                "(try `specmon replay sample_logs/sim_eagle3_*.log --read-only`)")
    return None


def run_demo(args: argparse.Namespace, run_app: Callable[[Any], Any], **app_kwargs: Any) -> int:
    """Build the demo, run the dashboard with ``run_app``, and always stop the server afterwards.

    Args:
        args: The parsed command line.
        run_app: Runs the app to its end (``app.run()``; tests drive it headless).
        **app_kwargs: Passed to ``make_app`` (tests: clock, themes).

    Returns:
        The exit code.
    """
    import asyncio
    import shutil
    import tempfile
    from pathlib import Path

    from specmon.control.demo import stop_demo_server

    problem = _read_only_problem(args)
    if problem:
        return fail(problem)
    created = args.dir is None
    if created:
        workdir = Path(tempfile.mkdtemp(prefix="specmon-demo-"))
    else:
        workdir = Path(args.dir).expanduser().resolve()
        try:
            workdir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            return fail(f"cannot use --dir {workdir}: {exc.strerror or exc}")
    if args.theme is not None:
        from specmon.commands.argtypes import check_theme

        problem = check_theme(args.theme)
        if problem:
            return fail(problem)

    from specmon.commands.terminal import exit_on_signals

    app: Any = None
    # Like `q` (see exit_on_signals): the finally below stops the server and removes the folder.
    signals = exit_on_signals(lambda: app)
    signals.__enter__()
    setup = None
    code: Any = EXIT_OK
    recorder = None
    try:
        if "recorder" not in app_kwargs:
            from specmon.commands.dashboard import open_recorder

            recorder = open_recorder(args, "demo", {"steps": args.steps})
            if recorder is not None:
                _err(f"specmon: recording to {recorder.path}")
            app_kwargs["recorder"] = recorder
        if getattr(args, "out", None) is not None:
            app_kwargs.setdefault("export_dir", args.out)
        app, setup = build_demo_app(args, workdir, **app_kwargs)
        code = signals.exit_code(run_app(app))
    finally:
        if recorder is not None:
            recorder.close()
        signals.__exit__()
        stopped = True
        if setup is not None:
            try:
                outcome = asyncio.run(stop_demo_server(setup.controller, _err))
            except Exception as exc:
                outcome = f"could not stop the demo server: {exc}"
                stopped = False
            if outcome is not None:
                _err(f"  {outcome}")
                stopped = stopped and ("result=stopped" in outcome or "result=killed" in outcome
                                       or "result=not-running" in outcome)
        if created and stopped:
            shutil.rmtree(workdir, ignore_errors=True)
        elif created:
            _err(f"the demo folder is kept: {workdir}")
    return write_status(int(code or 0), app, recorder)
