"""``specmon sweep`` and ``specmon report``.

Only ``argparse`` is imported at module level: ``specmon summarize`` builds the
whole parser and must not pay for asyncssh, pydantic or the control layer.

Here the arguments and their checks; running a sweep is :mod:`specmon.commands.sweeping`,
what it prints :mod:`specmon.commands.sweep_output` (both as light at import as this).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from specmon.commands.argtypes import (
    LAUNCH_CV_HELP,
    concurrency_list,
    launch_cv_pct,
    objective_arg,
    positive_float,
    positive_int,
    step_list,
    year_arg,
)
from specmon.commands.exits import EXIT_INPUT, EXIT_OK, fail, write_status
from specmon.commands.sweep_output import _err
from specmon.commands.sweep_parts import _RECORDERS
from specmon.commands.sweep_parts import check_steps as check_steps
from specmon.commands.sweeping import _sweep_main
from specmon.commands.sweeping import check_dims as check_dims
from specmon.literal import plain

if TYPE_CHECKING:  # annotations only: nothing below is imported when the CLI starts
    from collections.abc import Coroutine

    from specmon.experiment.sweep_plan import SweepPlan


#: ``--finish``: what a profile sweep leaves running.
FINISH_CHOICES = ("winner", "last", "none")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``sweep`` and ``report`` to the ``specmon`` parser."""
    s = subparsers.add_parser(
        "sweep", help="restart the server at each step count, drive load, and say which is fastest",
        description="Sweep speculative step counts: restart the server with each (0 = no speculation, the "
                    "baseline), drive a fixed workload, collect until the numbers are decided or a budget runs "
                    "out, and print a verdict. Interrupted sweeps continue where they stopped.")
    s.add_argument("profile", nargs="?", metavar="PROFILE",
                   help="a profile of the config file with a [launch] section (not with --demo)")
    s.add_argument("--demo", action="store_true",
                   help="sweep the built-in simulated SGLang server (no GPU, no SSH, under 5 minutes): steps "
                        "0,1,2,5,10 (the real campaign's), its launches 2%% apart")
    s.add_argument("--steps", type=step_list, default=None, metavar="LIST",
                   help="step counts to try, e.g. 0,1,2,3,5 (0 = no speculation)")
    s.add_argument("--grid", nargs="+", default=None, metavar="NAME=LIST",
                   help="sweep more than the step count: e.g. --grid steps=1,2,3 topk=1,4 draft_tokens=4,8 "
                        "(SGLang EAGLE), steps=1,2,3 prompt_lookup_max=2,4 (vLLM n-gram), "
                        "steps=2,4 spec_type=draft-simple,ngram-mod (llama.cpp); each NAME is a {NAME} "
                        "placeholder of the profile; combinations the engine refuses are left out, and said")
    s.add_argument("--concurrency", type=concurrency_list, default=[1], metavar="LIST",
                   help="requests in flight, e.g. 1 or 1,4 (default 1: what a single user feels)")
    s.add_argument("--min-samples", type=positive_int, default=None, metavar="N",
                   help="counted samples before the first look (default 40)")
    s.add_argument("--max-samples", type=positive_int, default=None, metavar="N",
                   help="sample budget per setting: the last look (default 1600)")
    s.add_argument("--max-minutes", type=positive_float, default=None, metavar="M",
                   help="collection time budget per setting, minutes (default 10; demo 0.4)")
    s.add_argument("--looks", type=positive_int, default=5, metavar="K", help="planned looks per setting (default 5)")
    s.add_argument("--replicas", type=positive_int, default=None, metavar="N",
                   help="with --demo: a parallel sweep on N simulated replicas (2-16) on this machine")
    s.add_argument("--rounds", type=positive_int, default=None, metavar="N",
                   help="a parallel sweep over a profile's replicas: rounds at most (default twice the settings)")
    s.add_argument("--alpha", type=positive_float, default=0.05, metavar="A",
                   help="chance of calling two equal settings different, over all looks (default 0.05)")
    s.add_argument("--margin-pct", type=positive_float, default=1.0, metavar="P",
                   help="differences within ±P%% are 'equivalent' (default 1)")
    s.add_argument("--precision-pct", type=positive_float, default=0.5, metavar="P",
                   help="stop a setting once its 95%% interval is within ±P%% (default 0.5)")
    s.add_argument("--launch-cv", type=launch_cv_pct, default=None, metavar="PCT",
                   help=LAUNCH_CV_HELP + "; with --demo also the simulated server's own launch CV (default 2 there)")
    s.add_argument("--drift-pct-per-hour", type=float, default=0.0, metavar="D",
                   help="demo only: the simulated server's slow drift, percent per simulated hour (default 0)")
    s.add_argument("--resolve-pct", type=positive_float, default=None, metavar="P",
                   help="the difference worth resolving, percent: the sweep relaunches settings (--order launches) "
                        "until its intervals are about ±P%% or it runs out of launches")
    s.add_argument("--order", choices=("given", "random", "interleave", "launches"), default=None,
                   help="measuring order (default launches: rounds of launches, every setting launched at least "
                        "twice, interleaved, clearly slower ones dropped, until decided or the stated budget is "
                        "spent; given, random and interleave launch each setting once; guided's default: given)")
    s.add_argument("--objective", type=objective_arg, default=None, metavar="OBJ",
                   help="what the verdict decides on: tps (the default), itl-p50, itl-p99, ttft-p99 (any "
                        "percentile) or goodput:ttft=MS,itl=MS (requests a second within both limits); judged "
                        "per launch on the requests specmon drives (implies --order launches)")
    s.add_argument("--measure-schedule", type=positive_int, nargs="?", const=2, default=None, metavar="N",
                   help="after a sweep over two or more concurrencies, restart the server on the schedule it "
                        "derived (vLLM profiles: the table in --speculative-config; shown first) and measure it in "
                        "N fresh launches per load (default 2) against the best fixed setting at each load")
    s.add_argument("--compare-adaptive", nargs="?", const="", default=None, metavar="TIERS",
                   help="after the sweep, restart an SGLang server in its own adaptive mode (--speculative-adaptive; "
                        "TIERS: its tier file on the host, else the engine's default tiers; shown first) and measure "
                        "it at every concurrency against the best fixed setting: its regret, with a 95%% interval "
                        "(2 launches per load, or --measure-schedule's N)")
    s.add_argument("--strategy", choices=("grid", "guided"), default="grid",
                   help="grid: every step count; guided: measure a few, fit the cost model, and restart only for "
                        "step counts it says could win (default grid)")
    s.add_argument("--seed", type=int, default=None, help="seed of the random order (and the demo server)")
    s.add_argument("--format", choices=("table", "json", "markdown"), default="table")
    s.add_argument("--state", metavar="PATH", default=None,
                   help="progress file for resuming (default: in the user data directory, per profile and plan)")
    s.add_argument("--fresh", action="store_true", help="ignore saved progress and start the sweep over")
    s.add_argument("--no-load", action="store_true",
                   help="do not drive load (the server's own traffic is measured)")
    s.add_argument("--endpoint", choices=("completions", "chat"), default="completions",
                   help="OpenAI-compatible endpoint for the load (default completions)")
    s.add_argument("--max-tokens", type=positive_int, default=None, metavar="N",
                   help="tokens generated per load request (default 512; demo 2048)")
    s.add_argument("--prompts", metavar="FILE", default=None,
                   help='JSONL file of prompts ({"prompt": "..."} per line) instead of the bundled set')
    s.add_argument("--workload", nargs="+", default=None, metavar="SET",
                   help="measure every setting with each named prompt set and give a verdict per workload: "
                        "bundled chat, code, long (e.g. --workload chat,code), or NAME=FILE.jsonl")
    s.add_argument("--request-timeout", type=positive_float, default=300.0, metavar="S",
                   help="upper bound on one load request, seconds (default 300)")
    s.add_argument("--record", metavar="PATH", default=None,
                   help="recording file (default: a new file in the user data directory)")
    s.add_argument("--no-record", action="store_true", help="do not record the session")
    s.add_argument("--prometheus-port", type=int, default=None, metavar="PORT",
                   help="serve the live figures as Prometheus metrics on 127.0.0.1:PORT")
    s.add_argument("--config", metavar="PATH", default=None, help="config file (default ~/.config/specmon/config.toml)")
    s.add_argument("--time-scale", type=positive_float, default=100.0, metavar="S",
                   help="demo only: simulated seconds per real second (default 100)")
    s.add_argument("-y", "--yes", action="store_true", help="restart the server without asking first")
    s.add_argument("--finish", choices=FINISH_CHOICES, default=None,
                   help="what to leave running afterwards: winner (restart on the declared winner), last "
                        "(the last setting measured), none (stop the server); default: ask at a terminal, "
                        "else last")
    s.add_argument("--no-metrics", action="store_true",
                   help="do not read the engine's /metrics counters: measure from the server log only")
    s.set_defaults(func=cmd_sweep)

    r = subparsers.add_parser(
        "report", help="write a report of a recorded session (table, verdict, throughput over time)",
        description="Replay a recording (a JSONL file written by every specmon session) and write a report with "
                    "the per-configuration table, the verdict, the throughput-over-time plot and the cost model.")
    r.add_argument("recording", metavar="RECORDING")
    r.add_argument("--format", choices=("markdown", "html", "json", "csv"), default="markdown")
    r.add_argument("-o", "--output", metavar="FILE", default=None, help="write here instead of standard output")
    r.add_argument("--warmup", type=int, default=None, metavar="N",
                   help="samples excluded at the start of each run (default: as recorded)")
    r.add_argument("--year", type=year_arg, default=None, metavar="YYYY",
                   help="the year of stamps printed without one (vLLM's MM-DD); default: as recorded")
    r.add_argument("--launch-cv", type=launch_cv_pct, default=0.05, metavar="PCT", help=LAUNCH_CV_HELP)
    r.set_defaults(func=cmd_report)


# --------------------------------------------------------------------------- report


def cmd_report(args: argparse.Namespace) -> int:
    """``specmon report RECORDING``."""
    import sys

    from specmon.output.recording import RecordingError
    from specmon.output.report import load_report, read_notes, render_report, write_failure

    if args.warmup is not None and args.warmup < 0:
        return fail("--warmup must be >= 0")
    try:
        data = load_report(args.recording, warmup=args.warmup, year=args.year, launch_cv=args.launch_cv)
    except RecordingError as exc:
        return fail(str(exc), EXIT_INPUT)
    text = render_report(data, args.format)
    failed = write_failure(data)
    # (what was skipped is said whatever the format, CSV too)
    for note in ([failed] if failed else []) + read_notes(data, not failed):
        print(plain(f"specmon: note: {args.recording}: {note}"), file=sys.stderr)
    if args.output:
        from specmon.control.guard import ReadOnlyError, refuse

        try:
            refuse(f"write {args.output}")
        except ReadOnlyError as exc:
            return fail(f"{exc}; leave out -o to print the report")
        from specmon.paths import write_private

        try:
            write_private(args.output, text)  # 0600, whole or not at all
        except OSError as exc:
            return fail(f"cannot write {args.output}: {exc.strerror or exc}")
    else:
        sys.stdout.write(text)
    return EXIT_OK


# --------------------------------------------------------------------------- sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    """``specmon sweep PROFILE ...`` and ``specmon sweep --demo ...``."""
    import asyncio
    import sys


    if getattr(args, "read_only", False):
        return fail("a sweep restarts the server and drives load: it cannot run with --read-only")
    if args.grid is not None and args.profile is None and len(args.grid) > 1 and "=" not in args.grid[-1]:
        # ``sweep --grid steps=1,2 topk=1,4 kimi``: argparse gave the profile to --grid.
        args.profile = args.grid.pop()
    if args.demo and args.profile:
        return fail("give a PROFILE or --demo, not both")
    if args.replicas is not None and not args.demo:
        return fail("--replicas is for the demo (--demo --replicas 4); a real fleet lists its replicas in its profile")
    if args.replicas is not None and not 2 <= args.replicas <= 16:
        return fail("--replicas must be 2 to 16")
    if args.demo and args.rounds is not None and args.replicas is None:
        return fail("--rounds is for a parallel sweep over replicas (a profile's, or --demo --replicas N)")
    if not args.demo and not args.profile:
        return fail("which server? give a PROFILE (a config profile with a [launch] section) or --demo")
    if args.grid is not None:
        from specmon.control.dims import expand_grid, parse_grid

        try:
            grid = parse_grid(args.grid)
            if "steps" in grid and args.steps is not None:
                return fail("give the step counts once: in --grid steps=... or with --steps")
            if "steps" not in grid:
                if args.steps is None:
                    return fail("give the step counts: --grid steps=1,2,3 ... (0 = no speculation)")
                grid = {"steps": tuple(args.steps), **grid}
            args.grid_settings = expand_grid(grid)
        except ValueError as exc:
            return fail(f"--grid: {exc}", EXIT_INPUT)
        for name, why in args.grid_settings.skipped:
            print(plain(f"sweep: left out {name}: {why}"), file=sys.stderr)
        args.steps = list(dict.fromkeys(st for st, _ in args.grid_settings.settings))
    if args.steps is None:
        if not args.demo:
            return fail("give the step counts to try: --steps 0,1,2,3,5 (0 = no speculation)")
        from specmon.control.demo import DEMO_SWEEP_STEPS

        args.steps = list(DEMO_SWEEP_STEPS)
    if args.workload is not None:
        from specmon.control.load import LoadError, load_workloads

        if args.prompts:
            return fail("give --prompts or --workload, not both")
        if args.no_load:
            return fail("--workload names the load's prompt sets: it cannot go with --no-load")
        items = [w for word in args.workload for w in word.split(",") if w.strip()]
        try:
            args.workload_sets = load_workloads(items)
        except LoadError as exc:
            return fail(str(exc), EXIT_INPUT)
    if args.prometheus_port is not None and not 0 <= args.prometheus_port <= 65535:
        return fail("--prometheus-port must be 0..65535")
    if args.record and args.no_record:
        return fail("give --record PATH or --no-record, not both")
    try:
        plan = _plan(args)
    except ValueError as exc:  # SweepError and the rule's own checks
        return fail(str(exc), EXIT_INPUT)
    signalled: list[int] = []
    try:
        code = asyncio.run(_until_signal(_sweep_main(args, plan), signalled))
        # A recording that could not be written (a full disk) makes the status non-zero, and says so.
        for rec in _RECORDERS:
            code = write_status(code, None, rec)
        return code
    except KeyboardInterrupt:
        _leave_at_once()
        print(f"specmon: sweep interrupted; {_again(args)}", file=sys.stderr)
        return 130
    except asyncio.CancelledError:
        if not signalled:
            raise
        import signal as signals

        _leave_at_once()
        name = signals.Signals(signalled[0]).name
        _err(f"specmon: sweep stopped by {name}; {_again(args)}")
        if getattr(args, "parallel", False):
            _err("specmon: every replica is left as it was (a real server is never stopped by a signal to specmon)")
        elif not args.demo:
            from specmon.commands.sweep_parts import LEFT_ON_SIGNAL

            # Checked on the host after the signal (sweep_parts.left_note_on_signal): running, or
            # gone with its cause. Without a check (none started, none answered in time), what
            # specmon did, not what the server does.
            _err("specmon: a real server is never stopped by a signal to specmon; " + (
                LEFT_ON_SIGNAL[-1] if LEFT_ON_SIGNAL else
                "the next connect or sweep with this profile checks whether it still runs and adopts it"))
        return 128 + signalled[0]


def _leave_at_once() -> None:
    """A signal ended the sweep and its clean-up has run: the process ends at once after it.

    The interpreter's own finalisation (a collection over every object, modules torn down)
    took 0.4 s on a quiet machine and 2 s at a load of 9 after the clean-up was done, so a
    SIGTERM'd sweep outlived its second. :func:`specmon.commands.terminal.leave_process`
    flushes the standard streams and gives the atexit handlers their time first.
    """
    from specmon.commands import terminal

    terminal.leave_at_once = True


def _again(args: argparse.Namespace) -> str:
    """What running the command again does: a parallel sweep is not resumed."""
    if getattr(args, "parallel", False):
        return "a parallel sweep is not resumed: running the same command again starts its rounds afresh"
    if getattr(args, "demo", False):
        return "a demo sweep is not resumed: running it again starts afresh"
    from specmon.commands.again import continue_command

    command = continue_command(args)
    return (f"continue it where it stopped with: {command}" if command else
            "run the same command again to continue where it stopped")


async def _until_signal(coro: Coroutine[Any, Any, int], signalled: list[int]) -> int:
    """Run ``coro``; SIGTERM and SIGHUP cancel it like Ctrl+C, so its clean-up runs.

    The ``finally`` blocks then stop the load driver and close the forwards, and the demo
    stops its simulated server and removes its folder; a real server is left running.
    """
    import asyncio
    import signal

    task = asyncio.ensure_future(coro)
    loop = asyncio.get_running_loop()

    def stop(signum: int) -> None:
        if not signalled:
            signalled.append(signum)
            task.cancel()

    handled = []
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            loop.add_signal_handler(sig, stop, sig)
        except (RuntimeError, ValueError):
            break  # not the main thread (embedded, tests): signals are not ours to handle here
        handled.append(sig)
    try:
        return await task
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)


def _plan(args: argparse.Namespace) -> SweepPlan:
    from specmon.experiment.sweep_plan import SweepPlan
    from specmon.model.launches import DEFAULT_LAUNCH_CV
    from specmon.model.objective import Objective
    from specmon.model.stopping import StoppingRule

    min_samples = args.min_samples or 40
    max_samples = args.max_samples or max(1600, min_samples)
    rule = StoppingRule(alpha=args.alpha, looks=args.looks, min_samples=min_samples, max_samples=max_samples,
                        margin_pct=args.margin_pct, precision_pct=args.precision_pct)
    if args.alpha >= 1:
        raise ValueError("--alpha must be below 1")
    grid = getattr(args, "grid_settings", None)
    points = grid.settings if grid is not None and grid.dimensions else ()
    workloads = tuple(getattr(args, "workload_sets", None) or ())
    launch_cv = DEFAULT_LAUNCH_CV if args.launch_cv is None else args.launch_cv
    objective = getattr(args, "objective", None) or Objective()
    # The launch design is the default: it launches every setting at least twice (the launch spread is
    # measured, not assumed) and can reach a verdict; the guided strategy chooses its own order.
    order = args.order or ("given" if args.strategy == "guided" else "launches")
    if args.demo:
        from specmon.control.demo import DEMO_LAUNCH_CV

        # Time compressed 100×: a decode line every ~9 ms, so polling fast keeps looks on time.
        scale = min(args.time_scale, 1000.0)
        return SweepPlan(tuple(args.steps), tuple(args.concurrency), order, args.seed, rule,
                         max_minutes=args.max_minutes or 0.4, settle=2, stall_s=20.0, attach_s=20.0, poll_s=0.1,
                         strategy=args.strategy, points=points, workloads=workloads, launch_cv=launch_cv,
                         resolve_pct=args.resolve_pct, restart_s=1.0, objective=objective, sample_rate=scale,
                         clock=f"the simulated server runs {scale:g}× faster than a real one, its launches "
                               f"{100 * (DEMO_LAUNCH_CV if args.launch_cv is None else args.launch_cv):g}% apart")
    return SweepPlan(tuple(args.steps), tuple(args.concurrency), order, args.seed, rule,
                     max_minutes=args.max_minutes or 10.0, strategy=args.strategy, points=points,
                     workloads=workloads, launch_cv=launch_cv, resolve_pct=args.resolve_pct,
                     objective=objective)
