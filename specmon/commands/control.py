"""``specmon sweep`` and ``specmon report``.

Only ``argparse`` is imported at module level: ``specmon summarize`` builds the
whole parser and must not pay for asyncssh, pydantic or the control layer.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from specmon.commands.argtypes import (
    LAUNCH_CV_HELP,
    concurrency_list,
    launch_cv_pct,
    positive_float,
    positive_int,
    step_list,
    year_arg,
)
from specmon.commands.exits import EXIT_INCOMPLETE, EXIT_INPUT, EXIT_NOTHING, EXIT_OK, fail, write_status
from specmon.literal import markdown_text, plain

if TYPE_CHECKING:  # annotations only: nothing below is imported when the CLI starts
    from collections.abc import Coroutine, Sequence

    from specmon.config import Profile
    from specmon.control.launch import LaunchProfile
    from specmon.control.load import LoadConfig
    from specmon.control.runner import Result
    from specmon.control.sweep_plan import LoadControl, SweepEvent, SweepPlan
    from specmon.control.sweep_result import SweepResult
    from specmon.model.session import Session
    from specmon.output.recording import RecordedIngest, Recorder


#: ``--finish``: what a profile sweep leaves running.
FINISH_CHOICES = ("winner", "last", "none")


def check_steps(profile: LaunchProfile, steps: Sequence[int], whose: str) -> str | None:
    """One sentence when a requested step count is outside the profile's range, before any restart.

    Args:
        profile: The launch profile the sweep restarts with.
        steps: The requested step counts.
        whose: Names the profile in the message (``profile 'kimi'``, ``the demo server``).

    Returns:
        The message, or None when every step count can be started.
    """
    lo, hi = profile.steps_min, profile.steps_max
    bad = [s for s in steps if not lo <= s <= hi]
    if not bad:
        return None
    listed = ", ".join(str(s) for s in bad)
    extra = " (0 needs a no-speculation command)" if 0 in bad and lo > 0 else ""
    return (f"--steps {listed}: {whose} allows step counts {lo} to {hi}{extra}; nothing was restarted")


def check_dims(profile: LaunchProfile, plan: SweepPlan, whose: str) -> str | None:
    """One sentence when the sweep varies a dimension the profile's command does not use.

    A grid over ``topk`` with a command that has no ``{topk}`` would restart the
    same server again and again under different names: refused before any restart.
    """
    from specmon.control.dims import used_placeholders

    templates = [*(profile.argv or []), *(profile.start or []), *profile.env.values()]
    used = used_placeholders(templates)
    missing = [d for d in plan.dimensions if d != "steps" and d not in used]
    if not missing:
        return None
    names = ", ".join("{" + d + "}" for d in missing)
    return f"--grid varies {', '.join(missing)}, but {whose}'s command has no {names}; nothing was restarted"


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
                   help="sweep the built-in simulated SGLang server (no GPU, no SSH, under 3 minutes)")
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
    s.add_argument("--alpha", type=positive_float, default=0.05, metavar="A",
                   help="chance of calling two equal settings different, over all looks (default 0.05)")
    s.add_argument("--margin-pct", type=positive_float, default=1.0, metavar="P",
                   help="differences within ±P%% are 'equivalent' (default 1)")
    s.add_argument("--precision-pct", type=positive_float, default=0.5, metavar="P",
                   help="stop a setting once its 95%% interval is within ±P%% (default 0.5)")
    s.add_argument("--launch-cv", type=launch_cv_pct, default=None, metavar="PCT",
                   help=LAUNCH_CV_HELP + "; with --demo also the simulated server's own launch CV (default 0 there)")
    s.add_argument("--drift-pct-per-hour", type=float, default=0.0, metavar="D",
                   help="demo only: the simulated server's slow drift, percent per simulated hour (default 0)")
    s.add_argument("--resolve-pct", type=positive_float, default=None, metavar="P",
                   help="the difference worth resolving, percent: the sweep relaunches settings (--order launches) "
                        "until its intervals are about ±P%% or it runs out of launches")
    s.add_argument("--order", choices=("given", "random", "interleave", "launches"), default="given",
                   help="measuring order (random and interleave keep drift from favouring one setting; launches: "
                        "rounds of launches, each setting relaunched, interleaved, until resolved — "
                        "the default with --resolve-pct)")
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
                   help="tokens generated per load request (default 512; demo 1024)")
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
    from specmon.output.report import load_report, render_report, write_failure

    if args.warmup is not None and args.warmup < 0:
        return fail("--warmup must be >= 0")
    try:
        data = load_report(args.recording, warmup=args.warmup, year=args.year, launch_cv=args.launch_cv)
    except RecordingError as exc:
        return fail(str(exc), EXIT_INPUT)
    text = render_report(data, args.format)
    failed = write_failure(data)
    if failed:
        print(plain(f"specmon: note: {args.recording}: {failed}"), file=sys.stderr)
    elif data.read.truncated_tail:
        print(plain(f"specmon: note: {args.recording} ends mid-line (the recorder was killed); the last entry was "
                    "skipped"), file=sys.stderr)
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
        args.steps = [0, 1, 2, 3, 5]
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
        print("specmon: sweep interrupted; run the same command again to continue where it stopped",
              file=sys.stderr)
        return 130
    except asyncio.CancelledError:
        if not signalled:
            raise
        import signal as signals

        name = signals.Signals(signalled[0]).name
        _err(f"specmon: sweep stopped by {name}; run the same command again to continue where it stopped")
        if not args.demo:
            _err("specmon: the server is left running (a real server is never stopped by a signal to specmon); "
                 "the next connect or sweep with this profile adopts it")
        return 128 + signalled[0]


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
    from specmon.control.sweep_plan import SweepPlan
    from specmon.model.launches import DEFAULT_LAUNCH_CV
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
    order = "launches" if args.resolve_pct is not None and args.order == "given" else args.order
    if args.demo:
        # Time compressed 100×: a decode line every ~9 ms, so polling fast keeps looks on time.
        return SweepPlan(tuple(args.steps), tuple(args.concurrency), order, args.seed, rule,
                         max_minutes=args.max_minutes or 0.4, settle=2, stall_s=20.0, attach_s=20.0, poll_s=0.1,
                         strategy=args.strategy, points=points, workloads=workloads, launch_cv=launch_cv,
                         resolve_pct=args.resolve_pct, restart_s=1.0)
    return SweepPlan(tuple(args.steps), tuple(args.concurrency), order, args.seed, rule,
                     max_minutes=args.max_minutes or 10.0, strategy=args.strategy, points=points,
                     workloads=workloads, launch_cv=launch_cv, resolve_pct=args.resolve_pct)


def _err(text: str) -> None:
    import sys

    try:
        print(plain(text, newlines=True), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the terminal went away (SIGHUP): the clean-up goes on without it


def _on_event(ev: SweepEvent) -> None:
    if ev.kind in ("look",):
        _err(f"  {ev.text}")
    else:
        _err(f"sweep: {ev.text}")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _recorder(args: argparse.Namespace, kind: str, warmup: int | None, meta: dict[str, Any]) -> Recorder | None:
    from specmon.output.recording import Recorder, new_recording_path

    if args.no_record:
        return None
    path = args.record or new_recording_path(kind)
    try:
        rec = Recorder(path, meta=meta, warmup=warmup)
    except OSError as exc:
        _err(f"specmon: not recording: cannot write {path}: {exc.strerror or exc}")
        return None
    _err(f"sweep: recording to {rec.path}")
    _RECORDERS.append(rec)
    return rec


#: The recordings this process opened (``cmd_sweep`` reads their write errors at the end).
_RECORDERS: list[Recorder] = []


def _print_result(args: argparse.Namespace, result: SweepResult, extra: dict[str, Any]) -> int:
    import json
    import sys

    from specmon.control.sweep_result import analyses_from_cells
    from specmon.model.costmodel import build_cost_model

    doc = result.to_json()
    verdict = result.verdict
    cost = None
    # The cost-model panel explains a line of step counts; over more dimensions its rows would repeat
    # step counts, so it is left out (the guided strategy's own model explains what it skipped).
    if verdict is not None and not result.plan.points:
        cost = build_cost_model(analyses_from_cells(result.cells, verdict.concurrency or 1),
                                concurrency=verdict.concurrency)
    doc["cost_model"] = cost.to_json() if cost else None
    doc.update({k: v for k, v in extra.items() if not k.startswith("_")})
    if args.format == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        from specmon.output.tables import to_markdown, to_rich

        console = None
        if args.format != "markdown":
            from rich.console import Console
            from rich.text import Text

            console = Console()
            if not console.is_terminal:
                console.width = max(console.width, 110)  # piped: keep rows whole
        for v in result.verdicts:
            if console is None:
                on = f", {v.workload} prompts" if v.workload else ""
                sys.stdout.write(f"### Concurrency {v.concurrency}{on}\n\n" + to_markdown(v.analysis).rsplit(
                    "**Verdict:**", 1)[0] + f"**Verdict:** {markdown_text(v.sentence)}\n\n")
            else:
                on = f", {v.workload} prompts" if v.workload else ""
                table = to_rich(v.analysis, title=f"specmon sweep — concurrency {v.concurrency}{on}")
                table.caption = None  # the sweep's own verdict (adjusted for its looks) is printed below
                console.print(table)
                console.print(Text.assemble(("Verdict:", "bold"), " ", plain(v.sentence)))
        if cost is not None:
            text = "\n".join(cost.lines())
            sys.stdout.write(f"```\n{text}\n```\n" if args.format == "markdown" else text + "\n")
        sys.stdout.write(result.restart_note + "\n")
        differ = result.winners_differ()
        if differ:
            sys.stdout.write(differ + "\n")
        launch = extra.get("_launch")
        for schedule in result.schedules():
            lines = schedule.describe(vllm_base=_vllm_base(launch), sglang_problem=_sglang_problem(launch, result))
            text = "\n".join(lines)
            sys.stdout.write(f"```\n{text}\n```\n" if args.format == "markdown" else text + "\n")
        for cell in result.cells:
            if cell.status == "failed":
                sys.stdout.write(f"failed: {cell.label or cell.key}: {cell.text}\n")
            elif cell.status == "skipped":
                sys.stdout.write(f"skipped: {cell.setting_label}: {cell.text}\n")
    left = extra.get("server_left_on")
    if isinstance(left, dict) and left.get("text"):
        _err(f"sweep: {left['text']}")
    note = extra.get("_left_note")
    if note and not (isinstance(left, dict) and left.get("running") is False and left.get("text") == note):
        _err(f"sweep: {note}")
    if extra.get("server_lost"):
        _err(f"sweep: stopped: {extra['server_lost']}; run the same command again to continue (exit "
             f"{EXIT_INCOMPLETE})")
        return EXIT_INCOMPLETE
    failed = [c for c in result.cells if c.status == "failed"]
    if failed:
        _err(f"sweep: {len(failed)} of {len(result.cells)} requested setting(s) could not be measured "
             f"(exit {EXIT_INCOMPLETE})")
        return EXIT_INCOMPLETE
    if verdict is None or verdict.best is None:
        return EXIT_NOTHING
    return EXIT_OK


def _vllm_base(launch: LaunchProfile | None) -> dict[str, Any] | None:
    """The profile's own vLLM ``--speculative-config`` (method, draft model), for the schedule's flag;
    None when the profile has none or it cannot be read (the flag then says what to add)."""
    import json
    import re

    if launch is None or launch.engine != "vllm" or not launch.argv:
        return None
    argv = list(launch.argv)
    for i, token in enumerate(argv):
        value = None
        if token == "--speculative-config" and i + 1 < len(argv):
            value = argv[i + 1]
        elif token.startswith("--speculative-config="):
            value = token.split("=", 1)[1]
        if value is None:
            continue
        try:
            # The profile's placeholders ({steps}, {draft_tokens}) stand where numbers go.
            doc = json.loads(re.sub(r"\{[a-z_]+\}", "0", value))
        except ValueError:
            return None
        if not isinstance(doc, dict):
            return None
        return {k: v for k, v in doc.items()
                if k not in ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")}
    return None


def _sglang_problem(launch: LaunchProfile | None, result: SweepResult) -> str | None:
    """Why SGLang's adaptive mode would not run the swept setting (None when it would, or when unknown)."""
    from specmon.model.schedule import sglang_unsupported

    if launch is not None and launch.engine not in ("sglang", "unknown"):
        return None  # another engine's profile: the SGLang form is shown as it is, for reference
    for v in result.verdicts:
        for row in v.analysis.rows:
            cfg = row.config
            if cfg is not None and cfg.steps:
                return sglang_unsupported(cfg.algorithm, cfg.topk)
    return None


async def _with_prometheus(args: argparse.Namespace, session: Session,
                           coro: Coroutine[Any, Any, SweepResult]) -> SweepResult | None:
    if args.prometheus_port is None:
        return await coro
    from specmon.output.prometheus import PrometheusExporter

    exporter = PrometheusExporter.for_session(session, args.prometheus_port)
    try:
        await exporter.start()
    except OSError as exc:
        _err(f"specmon: {exc.strerror or exc}")
        coro.close()
        return None
    _err(f"sweep: Prometheus metrics at http://127.0.0.1:{exporter.port}/metrics")
    try:
        return await coro
    finally:
        await exporter.close()


async def _sweep_main(args: argparse.Namespace, plan: SweepPlan) -> int:
    if args.demo:
        return await _demo(args, plan)
    return await _real(args, plan)


def _load_options(args: argparse.Namespace, base_url: str, time_scale: float = 1.0,
                  max_tokens: int = 512) -> LoadConfig:
    from specmon.control.load import BUNDLED_PROMPTS, LoadConfig, load_prompts

    prompts = load_prompts(args.prompts) if args.prompts else BUNDLED_PROMPTS
    return LoadConfig(base_url, endpoint=args.endpoint, prompts=prompts, max_tokens=args.max_tokens or max_tokens,
                      request_timeout_s=args.request_timeout, time_scale=time_scale)


async def _demo(args: argparse.Namespace, plan: SweepPlan) -> int:
    import sys
    import tempfile

    from specmon.control.demo import DEMO_STEPS_MAX
    from specmon.control.launch import LaunchProfile
    from specmon.control.load import BackgroundLoad, LoadDriver, LoadError
    from specmon.control.plan_restarter import LogFollower, PlanRestarter
    from specmon.control.runner import LocalRunner
    from specmon.control.sweep_plan import SweepError
    from specmon.control.sweep_run import Sweep
    from specmon.model.session import Session
    from specmon.output.recording import RecordedIngest
    from specmon.sources.local import LocalTailSource

    scale = min(args.time_scale, 1000.0)
    with tempfile.TemporaryDirectory(prefix="specmon-demo-") as tmp:
        port = _free_port()
        server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
                  "--time-scale", f"{scale:g}", "--startup-seconds", "0.5"]
        if args.seed is not None:
            server += ["--seed", str(args.seed)]
        if args.launch_cv:  # the simulated server's own launches differ by this much
            server += ["--launch-cv", f"{100 * args.launch_cv:g}"]
        if args.drift_pct_per_hour:
            import time

            server += ["--drift-pct-per-hour", f"{args.drift_pct_per_hour:g}", "--drift-origin", f"{time.time():.3f}"]
        if getattr(args, "workload_sets", None):
            server += ["--task-acceptance"]  # the simulated drafter does better on code than on chat
        profile = LaunchProfile(
            mode="managed", engine="sglang",
            argv=[*server, "--steps", "{steps}", "--topk", "{topk}", "--draft-tokens", "{draft_tokens}"],
            nospec_argv=[*server, "--steps", "0"],
            log=f"{tmp}/sim_{{steps}}step.log", pidfile=f"{tmp}/sim.pid", port=port, cwd=tmp,
            health_url="http://127.0.0.1:{port}/health", steps_min=0, start_timeout_s=60,
            # One limit for the demo's dialog, `demo --steps` and `sweep --demo` (they said 16 and 32).
            steps_max=DEMO_STEPS_MAX,
            stop_grace_s=5, stop_signal="TERM")
        problem = check_steps(profile, plan.steps, "the demo server") or check_dims(profile, plan, "the demo server")
        if problem:
            return fail(problem, EXIT_INPUT)
        try:
            load_cfg = _load_options(args, f"http://127.0.0.1:{port}", scale, 1024)
        except LoadError as exc:
            return fail(str(exc), EXIT_INPUT)
        session = Session()
        rec = _recorder(args, "sweep-demo", None, {"command": "sweep --demo", "steps": list(plan.steps)})
        ingest = RecordedIngest(session, rec)
        follower = LogFollower(ingest, lambda path, from_end: LocalTailSource(
            path, lines=0 if from_end else None, poll_interval=0.05))
        restarter = PlanRestarter(profile, LocalRunner(), follower=follower, ready_poll_s=0.2, show=_err)
        load = None if args.no_load else BackgroundLoad(LoadDriver(load_cfg), cap_s=600.0,
                                                             workloads=getattr(args, "workload_sets", None))
        try:
            sweep = Sweep(plan, session=session, restart=restarter, load=load, state_path=f"{tmp}/sweep.json",
                          resume=False, recorder=rec, on_event=_on_event)
        except SweepError as exc:
            return fail(str(exc), EXIT_INPUT)
        try:
            result = await _with_prometheus(args, session, sweep.run())
        finally:
            if load is not None:
                await load.stop()
            outcome = await restarter.stop_server()
            if outcome:
                _err(f"  {outcome}")
            await follower.stop()
            ingest.close()
            if rec is not None:
                rec.close()
        if result is None:
            return EXIT_INPUT
        extra = {"demo": {"time_scale": scale, "port": port}, "recording": str(rec.path) if rec else None}
        return _print_result(args, result, extra)


async def _real(args: argparse.Namespace, plan: SweepPlan) -> int:
    import hashlib
    import json
    import re
    import sys

    from pydantic import ValidationError

    from specmon import paths
    from specmon.config import ConfigError, load_config
    from specmon.control.launch import LaunchError, LaunchProfile
    from specmon.control.load import BackgroundLoad, LoadDriver, LoadError
    from specmon.control.plan_restarter import LogFollower, PlanRestarter
    from specmon.control.sweep_state import finished_state
    from specmon.model.session import Session
    from specmon.output.recording import RecordedIngest

    try:
        config = load_config(args.config)
        profile = config.profile(args.profile)
    except ConfigError as exc:
        return fail(str(exc))
    if not profile.launch:
        return fail(f"profile {args.profile!r} has no [launch] section: the sweep needs to know how to restart "
                     "the server (see `specmon sweep --help` and the README's launch profiles)")
    try:
        launch = LaunchProfile.model_validate(profile.launch)
    except ValidationError as exc:
        msgs = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        return fail(f"profile {args.profile!r} [launch]: {msgs}")
    host = profile.host or "localhost"
    problem = check_steps(launch, plan.steps, f"profile {args.profile!r}") or check_dims(
        launch, plan, f"profile {args.profile!r}")
    if problem:
        return fail(problem)
    restarter_probe = PlanRestarter(launch, _NoRunner(), host=host)
    try:
        # Every setting's commands are built (and so validated) before the first restart.
        plans = [restarter_probe.plan_for(s, dict(p) or None) for s, p in plan.settings]
    except LaunchError as exc:
        return fail(f"profile {args.profile!r}: {exc}")
    if not args.no_load and launch.port is None:
        return fail("the launch profile has no `port`, so the load driver cannot reach the server: add it, "
                     "or pass --no-load to measure the server's own traffic")
    # One state file per profile *and plan*: rerunning the same command resumes it; a sweep with
    # other steps or settings starts its own instead of tripping over the old one.
    digest = hashlib.sha256(json.dumps(plan.identity(), sort_keys=True).encode()).hexdigest()[:10]
    state = args.state or str(paths.sweeps_dir() /
                              f"{re.sub(r'[^A-Za-z0-9_.-]', '_', args.profile)}-{digest}.json")
    if args.fresh:
        import os

        if os.path.exists(state):
            os.remove(state)
    if not finished_state(state, plan):  # a finished sweep only shows its verdict: nothing restarts
        upto = "up to " if plan.strategy == "guided" else ""
        _err(f"sweep: {upto}{len(plans)} restart(s) on {host}; the first one:")
        _err(plans[0].describe())
        if plan.points:
            _err("the others differ in: " + "; ".join(
                f"{p.describe().splitlines()[0].split('(', 1)[-1].rstrip(')')}" for p in plans[1:]))
        if not args.yes:
            if not sys.stdin.isatty():
                return fail("this restarts the server; pass --yes to confirm when not at a terminal")
            answer = input(f"Restart the server on {host} up to {len(plans)} times? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                return fail("cancelled", 1)
    session = Session()
    rec = _recorder(args, "sweep", None, {"command": "sweep", "profile": args.profile, "host": host,
                                          "steps": list(plan.steps)})
    ingest = RecordedIngest(session, rec)
    try:
        if profile.host:
            return await _real_remote(args, plan, launch, profile, session, ingest, rec, state)
        from specmon.control.runner import LocalRunner
        from specmon.sources.local import LocalTailSource

        follower = LogFollower(ingest, lambda path, from_end: LocalTailSource(path, lines=0 if from_end else None))
        restarter = PlanRestarter(launch, LocalRunner(), host=host, follower=follower, show=_err,
                                  record_servers=True)
        load = None
        if not args.no_load:
            try:
                load = BackgroundLoad(LoadDriver(_load_options(args, f"http://127.0.0.1:{launch.port}")),
                                      workloads=getattr(args, "workload_sets", None))
            except LoadError as exc:
                return fail(str(exc), EXIT_INPUT)
        target_url = _metrics_target(args, profile, launch)
        counters = _scraper(target_url) if target_url else None
        return await _run_profile_sweep(args, plan, session, restarter, load, state, rec, follower, counters)
    finally:
        ingest.close()
        if rec is not None:
            rec.close()


async def _run_profile_sweep(args: argparse.Namespace, plan: SweepPlan, session: Session, restarter: Any,
                             load: LoadControl | None, state: str, rec: Recorder | None, follower: Any,
                             counters: Any = None) -> int:
    """Run a profile's sweep (local or remote alike), finish as asked, and print its result.

    The server's lease is taken first and held to the end (the --finish restart included): no
    other specmon restarts or stops it meanwhile, and this sweep does not start while another
    one, or a dashboard that restarted it, controls it.
    """
    from specmon.control.lease import LeaseHeld, lease_for
    from specmon.control.sweep_state import finished_state

    if finished_state(state, plan):  # only its verdict is shown: nothing to control
        return await _run_leased(args, plan, session, restarter, load, state, rec, follower, counters)
    lease = lease_for(restarter.profile, restarter.runner, restarter.host, "a sweep")
    try:
        await lease.acquire()
    except LeaseHeld as exc:
        await follower.stop()
        return fail(f"{exc}; nothing was restarted")
    except (ConnectionError, OSError) as exc:
        await follower.stop()
        return fail(f"{exc}; nothing was restarted")
    if lease.host_note:
        _err(f"sweep: {lease.host_note}")
    try:
        return await _run_leased(args, plan, session, restarter, load, state, rec, follower, counters)
    finally:
        await lease.release()


async def _run_leased(args: argparse.Namespace, plan: SweepPlan, session: Session, restarter: Any,
                      load: LoadControl | None, state: str, rec: Recorder | None, follower: Any,
                      counters: Any) -> int:
    from specmon.control.sweep_plan import SweepError
    from specmon.control.sweep_run import Sweep

    try:
        # At every look (and every few seconds) the sweep checks that its server is the one it started.
        sweep = Sweep(plan, session=session, restart=restarter, load=load, state_path=state,
                      recorder=rec, on_event=_on_event, counters=counters, server_check=restarter.check_server)
    except SweepError as exc:
        await follower.stop()
        return fail(str(exc), EXIT_INPUT)
    if counters is not None:
        _err(f"sweep: reading the engine's counters at {counters.url} (about once a second)")
    try:
        result = await _with_prometheus(args, session, sweep.run())
        left = None
        if result is not None and sweep.server_setting is not None:
            left = await _finish(args, result, restarter, sweep.server_setting)
        # Checked on the host before it is said: PID *and* start time still running.
        note = await _left_note(restarter)
    finally:
        await follower.stop()
    if result is None:
        return EXIT_INPUT
    if note is not None and isinstance(left, dict) and left.get("running") and not note[0]:
        left.update(steps=None, running=False, text=note[1])
        note = None
    if rec is not None and left is not None:
        rec.meta("sweep-finish", **left)
    return _print_result(args, result, {"recording": str(rec.path) if rec else None, "server_left_on": left,
                                        "_left_note": note[1] if note else None, "server_lost": sweep.lost,
                                        "_launch": getattr(restarter, "profile", None)})


async def _left_note(restarter: Any) -> tuple[bool, str] | None:
    """``(running, text)`` about the server the sweep started, once checked on the host (None: none left).

    Only a process alive with the recorded start time is "left running"; a gone one is recorded
    as exited, with its cause; one the host cannot be asked about is said so.
    """
    record = getattr(restarter, "started", None)
    if record is None:
        return None
    from specmon.control.servers import left_running_note

    state, text = await left_running_note(record, restarter.runner)
    return state == "running", text


def _finish_choice(args: argparse.Namespace, winner: tuple[int, Any] | None) -> str:
    """``--finish``, or the answer at a terminal; ``last`` without a terminal (nothing unasked happens)."""
    import sys

    if args.finish is not None:
        return str(args.finish)
    if not sys.stdin.isatty():
        return "last"
    what = f"restart on the winner ({_steps_text(winner)})" if winner is not None else "no winner declared"
    try:
        answer = input(f"Sweep done; {what}. Leave the server on [w]inner / [l]ast / [n]one (stop it)? "
                       f"[{'W' if winner is not None else 'L'}] ").strip().lower()
    except EOFError:
        return "last"
    if not answer:
        return "winner" if winner is not None else "last"
    return {"w": "winner", "l": "last", "n": "none"}.get(answer[0], "last")


def _steps_text(setting: int | tuple[int, Any] | None) -> str:
    if isinstance(setting, tuple):
        steps, point = setting
        if point:
            from specmon.control.dims import label

            return label(steps, point)
        setting = steps
    return "no speculation" if setting == 0 else f"{setting} speculative steps"


async def _finish(args: argparse.Namespace, result: SweepResult, restarter: Any,
                  last: tuple[int, Any]) -> dict[str, Any]:
    """Leave the server as asked; returns what the report records about it."""
    v = result.verdict
    cell = result.winner_cell(v) if v is not None and v.separated else None
    winner = cell.setting if cell is not None else None
    choice = _finish_choice(args, winner)
    doc: dict[str, Any] = {"finish": choice, "steps": last[0], "running": True}
    if last[1]:
        doc["dims"] = dict(last[1])
    if choice == "none":
        outcome = await restarter.stop_server()
        doc.update(steps=None, running=False, text=f"server stopped as asked (--finish none){': ' + outcome if outcome else ''}")
        doc.pop("dims", None)
    elif choice == "winner" and winner is None:
        doc["text"] = (f"no winner declared: the server is left running with the last setting measured "
                       f"({_steps_text(last)})")
    elif choice == "winner" and winner != last:
        assert winner is not None
        _err(f"sweep: restarting on the winner ({_steps_text(winner)})")
        outcome = await (restarter(winner[0], dict(winner[1])) if winner[1] else restarter(winner[0]))
        if outcome.ok:
            doc.update(steps=winner[0], text=f"the server is left running on the winner ({_steps_text(winner)})")
            if winner[1]:
                doc["dims"] = dict(winner[1])
        else:
            doc.update(steps=None, running=None,
                       text=f"restart on the winner ({_steps_text(winner)}) failed: {outcome.detail}")
    elif choice == "winner":
        doc["text"] = f"the server is left running on the winner ({_steps_text(winner)}), the last setting measured"
    else:
        doc["text"] = (f"the server is left running with the last setting measured ({_steps_text(last)}); "
                       "restart it with the winner with --finish winner, from the dashboard (r) or your own command")
    return doc


async def _real_remote(args: argparse.Namespace, plan: SweepPlan, launch: LaunchProfile, profile: Profile,
                       session: Session, ingest: RecordedIngest, rec: Recorder | None, state: str) -> int:
    from specmon.control.load import BackgroundLoad, LoadDriver, LoadError, forwarded_base_url
    from specmon.control.plan_restarter import LogFollower, PlanRestarter
    from specmon.control.runner import SSHRunner
    from specmon.sources.ssh import SSHTailSource
    from specmon.ssh.connect import SSHError, connect, target_from_options

    try:
        target = target_from_options(None, profile=profile)
    except ValueError as exc:
        return fail(str(exc))
    try:
        link = await connect(target)
    except SSHError as exc:
        return fail(str(exc))
    try:
        follower = LogFollower(ingest, lambda path, from_end: SSHTailSource(target, path,
                                                                           lines=0 if from_end else None))
        restarter = PlanRestarter(launch, SSHRunner(link.conn), host=target.label, follower=follower, show=_err,
                                  record_servers=True)

        # The server's ports stay on the host: the load and the /metrics scrapes go through SSH
        # local forwards (one per host:port).
        import contextlib
        from urllib.parse import urlsplit

        metrics = _metrics_target(args, profile, launch)
        wanted: list[tuple[str, int]] = []
        if not args.no_load:
            assert launch.port is not None  # checked before connecting
            wanted.append(("127.0.0.1", launch.port))
        if metrics:
            m = urlsplit(metrics)
            key = (m.hostname or "127.0.0.1", m.port or (443 if m.scheme == "https" else 80))
            if key not in wanted:
                wanted.append(key)
        async with contextlib.AsyncExitStack() as stack:
            local: dict[tuple[str, int], str] = {}
            for host, port in wanted:
                try:
                    local[(host, port)] = await stack.enter_async_context(
                        forwarded_base_url(link.conn, port, remote_host=host))
                except Exception as exc:
                    return fail(f"cannot forward a local port to {host}:{port} on {target.label}: {exc}")
            load = None
            if not args.no_load:
                try:
                    load = BackgroundLoad(LoadDriver(_load_options(args, local[wanted[0]])),
                                          workloads=getattr(args, "workload_sets", None))
                except LoadError as exc:
                    return fail(str(exc), EXIT_INPUT)
            counters = None
            if metrics:
                m = urlsplit(metrics)
                base = local[(m.hostname or "127.0.0.1", m.port or (443 if m.scheme == "https" else 80))]
                counters = _scraper(base + (m.path or "/metrics") + (f"?{m.query}" if m.query else ""))
            return await _run_profile_sweep(args, plan, session, restarter, load, state, rec, follower, counters)
    finally:
        link.close()


def _metrics_target(args: argparse.Namespace, profile: Profile, launch: LaunchProfile) -> str | None:
    """The engine's /metrics URL as seen from the server's host, or None (``--no-metrics``, ``off``, no port)."""
    if getattr(args, "no_metrics", False) or profile.metrics_url == "off":
        return None
    if profile.metrics_url:
        return profile.metrics_url
    if launch.port is None:
        return None
    from specmon.sources.metrics import metrics_url_for

    return metrics_url_for(launch.port)


def _scraper(url: str) -> Any:
    from specmon.sources.metrics import MetricsScraper

    return MetricsScraper(url)


class _NoRunner:
    """A runner for building plans up front only (never runs anything)."""

    async def run(self, command: str, timeout: float) -> Result:
        raise RuntimeError("not for running")
