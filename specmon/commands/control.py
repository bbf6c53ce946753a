"""``specmon sweep`` and ``specmon report``.

Only ``argparse`` is imported at module level: ``specmon summarize`` builds the
whole parser and must not pay for asyncssh, pydantic or the control layer.

Here the arguments; the plan and its rules are :mod:`specmon.experiment.plan`; running a sweep is
:mod:`specmon.commands.sweeping`, what it prints :mod:`specmon.commands.sweep_output`, both imported
only when a sweep runs (they import what they use at their top).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from specmon.commands.argtypes import (
    LAUNCH_CV_HELP,
    concurrency_list,
    finite_float,
    launch_cv_number,
    launch_cv_pct,
    objective_text,
    positive_float,
    positive_int,
    step_list,
    year_arg,
)
from specmon.commands.exits import EXIT_INPUT, EXIT_OK, fail, write_status
from specmon.literal import plain

if TYPE_CHECKING:  # annotations only: nothing below is imported when the CLI starts
    from collections.abc import Coroutine

    from specmon.experiment.plan import ExperimentPlan



#: ``--finish``: what a profile sweep leaves running.
FINISH_CHOICES = ("winner", "last", "none")
#: The plan's care presets and orders, spelled here so that building the parser imports no pydantic
#: (tests/unit/test_plan_cli.py keeps them equal to specmon.experiment.plan's).
PRESETS = ("quick", "standard", "thorough")
ORDERS = ("launches", "given", "random", "interleave")
DESIGNS = ("rounds", "bai")

SWEEP_EXAMPLES = """\
Restart the server with each setting (0 = no speculation, the baseline), drive
a fixed load, collect until the answer is decided or a stated budget is spent,
and say what to deploy. An interrupted sweep continues where it stopped.

examples:
  specmon sweep --demo                      the simulated server, ~1 minute
  specmon sweep kimi --steps 0,1,3,5 --concurrency 1,8 -y
  specmon sweep kimi --objective itl-p50 --care thorough --print-plan
  specmon sweep kimi -y                     the plan in the profile's tables
  specmon sweep --plan RECORDING --fresh -y run a recorded sweep's plan again
"""

SWEEP_EPILOG = """\
Every other field of the plan is an option too, and a key of a profile's
[profiles.NAME.sweep] or [profiles.NAME.load] table or of a plan file (--plan):
the knobs of --care (--min-samples, --max-samples, --looks, --alpha,
--margin-pct, --precision-pct), --launch-cv, --resolve-pct, --max-minutes,
--strategy, --rounds (replicas), --seed, --prompts, --endpoint, --max-tokens,
--request-timeout, --no-load, --state, --no-record, --prometheus-port,
--no-metrics; the demo's simulated server only: --replicas,
--drift-pct-per-hour, --time-scale. Each layer overrides the one before: the
defaults, the care preset, the profile's tables, --plan, the command line.
`specmon sweep PROFILE --print-plan` shows every field, its value and origin.
"""


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``sweep`` and ``report`` to the ``specmon`` parser."""
    s = subparsers.add_parser(
        "sweep", help="restart the server at each step count, drive load, and say which is fastest",
        formatter_class=argparse.RawDescriptionHelpFormatter, argument_default=argparse.SUPPRESS,
        description=SWEEP_EXAMPLES, epilog=SWEEP_EPILOG)
    s.add_argument("profile", nargs="?", metavar="PROFILE",
                   help="a profile of the config file with a [launch] section (its [sweep] and [load] tables "
                        "hold a plan)")
    target = s.add_argument_group("which server and what is varied")
    target.add_argument("--demo", action="store_true",
                        help="sweep the built-in simulated SGLang server (no GPU, no SSH, under 5 minutes): steps "
                             "0,1,2,5,10 (the real campaign's), its launches 2%% apart")
    target.add_argument("--steps", type=step_list, metavar="LIST",
                        help="step counts to try, e.g. 0,1,2,3,5 (0 = no speculation)")
    target.add_argument("--grid", nargs="+", metavar="NAME=LIST",
                        help="more than the step count: steps=1,2,3 topk=1,4 draft_tokens=4,8 (SGLang EAGLE), "
                             "steps=1,2,3 prompt_lookup_max=2,4 (vLLM n-gram), steps=2,4 spec_type=draft-simple,"
                             "ngram-mod (llama.cpp); each NAME a {NAME} placeholder of the profile; combinations "
                             "the engine refuses are left out, and said")
    load = s.add_argument_group("the load and the objective")
    load.add_argument("--concurrency", type=concurrency_list, metavar="LIST",
                      help="requests in flight, e.g. 1 or 1,8 (default 1: what a single user feels)")
    load.add_argument("--workload", nargs="+", metavar="SET",
                      help="a verdict per prompt set: bundled chat, code, long (e.g. chat,code), or NAME=FILE.jsonl")
    load.add_argument("--objective", type=objective_text, metavar="OBJ",
                      help="what the verdict decides on: tps (default), itl-p50, itl-p99, ttft-p99 (any "
                           "percentile) or goodput:ttft=MS,itl=MS; judged per launch on the requests specmon drives")
    design = s.add_argument_group("how careful, and the design")
    design.add_argument("--care", choices=tuple(PRESETS), metavar="PRESET",
                        help="quick, standard (default) or thorough: sets the samples, looks, error level and "
                             "margin (--print-plan shows them; each can still be set)")
    design.add_argument("--design", choices=DESIGNS,
                        help="rounds (default: every undecided setting each round) or bai (best-arm "
                             "identification: the leader and its closest challenger; settings clearly behind get "
                             "fewer restarts; docs/sweeps.md)")
    design.add_argument("--order", choices=ORDERS,
                        help="launches (default: rounds of launches, every setting at least twice, clearly slower "
                             "ones dropped, until decided or the stated budget is spent); given, random and "
                             "interleave launch each setting once")
    after = s.add_argument_group("after the sweep")
    after.add_argument("--measure-schedule", type=positive_int, nargs="?", const=2, metavar="N",
                       help="over two or more concurrencies: restart on the schedule the sweep derived (vLLM: the "
                            "table in --speculative-config; shown first) and measure it in N launches per load "
                            "(default 2) against the best fixed setting at each")
    after.add_argument("--compare-adaptive", nargs="?", const="", metavar="TIERS",
                       help="restart an SGLang server in its own adaptive mode (TIERS: its tier file on the host, "
                            "else the engine's default tiers; shown first) and measure its regret at every load")
    after.add_argument("--finish", choices=FINISH_CHOICES,
                       help="left running: winner (restart on the declared winner), last (the last setting "
                            "measured), none (stopped); default: ask at a terminal, else last")
    after.add_argument("-y", "--yes", action="store_true", help="restart the server without asking first")
    out = s.add_argument_group("the plan and the output")
    out.add_argument("--plan", metavar="FILE",
                     help="a plan file (TOML: the fields of [sweep] and [load]) or a recording of a sweep: run "
                          "that plan (the options typed here win)")
    out.add_argument("--print-plan", action="store_true",
                     help="show the resolved plan, every field and where its value came from, and run nothing")
    out.add_argument("--format", choices=("table", "json", "markdown"))
    out.add_argument("--record", metavar="PATH",
                     help="recording file (default: a new file in the user data directory)")
    out.add_argument("--fresh", action="store_true", help="ignore saved progress and start the sweep over")
    out.add_argument("--config", metavar="PATH", help="config file (default ~/.config/specmon/config.toml)")
    # Every other field of the plan: an option too, not listed (the epilog and --print-plan name them).
    hidden = argparse.SUPPRESS
    for flag, kw in (
            ("--min-samples", {"type": positive_int}), ("--max-samples", {"type": positive_int}),
            ("--max-minutes", {"type": positive_float}), ("--looks", {"type": positive_int}),
            ("--alpha", {"type": positive_float}), ("--margin-pct", {"type": positive_float}),
            ("--precision-pct", {"type": positive_float}), ("--launch-cv", {"type": launch_cv_number}),
            ("--resolve-pct", {"type": positive_float}), ("--strategy", {"choices": ("grid", "guided")}),
            ("--rounds", {"type": positive_int}), ("--seed", {"type": int}), ("--state", {}),
            ("--no-load", {"action": "store_true"}), ("--endpoint", {"choices": ("completions", "chat")}),
            ("--max-tokens", {"type": positive_int}), ("--prompts", {}),
            ("--request-timeout", {"type": positive_float}), ("--no-record", {"action": "store_true"}),
            ("--prometheus-port", {"type": int}), ("--no-metrics", {"action": "store_true"}),
            # The demo's simulated server only (refused without --demo).
            ("--replicas", {"type": positive_int}), ("--drift-pct-per-hour", {"type": finite_float}),
            ("--time-scale", {"type": positive_float}),
            # A sweep restarts: it has no read-only form; typed anyway, it is refused with a sentence.
            ("--read-only", {"action": "store_true"})):
        s.add_argument(flag, help=hidden, **kw)
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
    """``specmon sweep PROFILE ...`` and ``specmon sweep --demo ...``: the plan resolved, then run."""
    import asyncio
    import sys

    if getattr(args, "read_only", False):
        return fail("a sweep restarts the server and drives load: it cannot run with --read-only")
    from specmon.commands.plan_layers import resolve_plan
    from specmon.config import ConfigError
    from specmon.experiment.plan import PlanError

    try:
        resolved, _ = resolve_plan(args)
    except (PlanError, ConfigError) as exc:
        return fail(str(exc), EXIT_INPUT)
    exp = resolved.plan
    if getattr(args, "print_plan", False):
        for line in exp.shown(resolved.origins).splitlines():
            print(plain(line))
        return EXIT_OK
    if exp.grid is not None:
        for name, why in exp.grid_settings.skipped:
            print(plain(f"sweep: left out {name}: {why}"), file=sys.stderr)
    if exp.workload is not None:
        from specmon.control.load import LoadError

        try:
            exp = exp.with_workload_sets()
        except LoadError as exc:
            return fail(str(exc), EXIT_INPUT)
    exp = exp.invoked_as(getattr(args, "argv", None))
    plan = exp.sweep_plan()
    # The sweep's modules only now: they import the control layer at their top (summarize must not).
    from specmon.commands.sweep_output import _err
    from specmon.commands.sweep_parts import _RECORDERS
    from specmon.commands.sweeping import _sweep_main

    signalled: list[int] = []
    try:
        code = asyncio.run(_until_signal(_sweep_main(exp, plan), signalled))
        # A recording that could not be written (a full disk) makes the status non-zero, and says so.
        for rec in _RECORDERS:
            code = write_status(code, None, rec)
        return code
    except KeyboardInterrupt:
        _leave_at_once()
        print(f"specmon: sweep interrupted; {_again(exp)}", file=sys.stderr)
        return 130
    except asyncio.CancelledError:
        if not signalled:
            raise
        import signal as signals

        _leave_at_once()
        name = signals.Signals(signalled[0]).name
        _err(f"specmon: sweep stopped by {name}; {_again(exp)}")
        if exp.parallel or not exp.demo:
            from specmon.commands.sweep_parts import LEFT_ON_SIGNAL

            # Checked on the host after the signal (sweep_parts.left_note_on_signal; a parallel sweep's
            # replicas each): running, or gone with its cause. Without a check (none started, none
            # answered in time), what specmon did, not what the server does.
            checked = LEFT_ON_SIGNAL if exp.parallel else LEFT_ON_SIGNAL[-1:]
            _err("specmon: a real server is never stopped by a signal to specmon; " + (
                "; ".join(checked) if checked else
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


def _again(exp: ExperimentPlan) -> str:
    """What running the command again does (:func:`specmon.commands.again.again_advice`, said alike
    wherever a sweep stops)."""
    from specmon.commands.again import again_advice

    return again_advice(exp)


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
