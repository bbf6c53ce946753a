"""``specmon connect``: the dashboard on a log that lives on another machine, over SSH.

Only ``argparse`` is imported at module level: ``specmon summarize`` builds the
whole parser and must not pay for Textual, asyncssh or pydantic. Everything
else is imported inside the functions.

The flow:

1. :func:`plan_connect` reads the config file and the options and builds the
   :class:`~specmon.sources.ssh.SSHTailSource` — no connection yet. Problems
   found here (bad config, unknown profile, no host, no log) are a
   :class:`ConnectError` whose text is printed on stderr; exit code 2.
2. :func:`connect_app` builds the dashboard on that source (through
   :func:`specmon.ui.factories.make_app`, the one factory).
3. :func:`run_connect` runs the app; the SSH connection is opened by the
   app's ingest worker, on the app's own event loop (asyncssh must not run on
   another loop). Beside it, :func:`watch_startup` watches the source: when it
   fails *before it was ever live* (unknown or changed host key, refused
   authentication, no log matching the glob, ``UserKnownHostsFile none``),
   the app exits by itself and the command prints the source's explanation on
   stderr and exits 2 — the user gets one clear message instead of a dashboard
   with nothing in it. A failure after data has flowed (say the host key
   changed across a reconnect) stays on screen, in the header and the event
   log, and is printed again on stderr when the dashboard closes.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from specmon.commands.argtypes import (
    LINE_CAP_HELP,
    check_theme,
    line_cap,
    metrics_url,
    positive_float,
    whole_number,
)
from specmon.commands.exits import EXIT_INPUT, fail, write_status

if TYPE_CHECKING:
    from specmon.control.connecting_runner import ConnectingRunner
    from specmon.control.launch import LaunchProfile
    from specmon.control.runner import LocalRunner
    from specmon.sources.base import LineSource
    from specmon.sources.local import LocalTailSource
    from specmon.sources.ssh import SSHTailSource
    from specmon.ui.app import SpecmonApp
    from specmon.ui.counters import LiveCounters
    from specmon.ui.flows.restart import RestartFlow

__all__ = [
    "ConnectError",
    "ConnectOutcome",
    "ConnectPlan",
    "cmd_connect",
    "connect_app",
    "plan_connect",
    "register",
    "remote_counters",
    "run_connect",
    "watch_startup",
    "with_restart",
]

#: Seconds between two looks at the source while the app starts (cheap: reads a dataclass).
STARTUP_POLL_S = 0.05


class ConnectError(Exception):
    """A problem found before anything connects; ``str()`` is the message for the user."""


@dataclass
class ConnectPlan:
    """What ``specmon connect`` will show, resolved from the options and the profile.

    Attributes:
        source: The SSH tail (not connected yet), or the local tail of a profile without a host
            (the server runs on this machine: no SSH at all).
        baseline_files: Local logs of the server without speculation (from the profile).
        baseline_tps: A known baseline throughput (option, else profile).
        theme: Theme name, or None for the default.
        warmup: Samples excluded at the start of each run (None: engine default).
        window: Batches in the rolling means.
        launch: The profile's ``[launch]`` table (how ``r`` restarts the server), if any.
        metrics: The engine's ``/metrics`` URL as seen from the host (``--metrics``, else the
            profile's ``metrics_url``, else the launch port's), or None (``--no-metrics``, none known).
    """

    source: SSHTailSource | LocalTailSource
    baseline_files: list[str]
    baseline_tps: float | None
    theme: str | None
    warmup: int | None
    window: int
    launch: LaunchProfile | None = None
    metrics: str | None = None
    #: The config's profiles and its file, for the sentence when the destination is neither a host nor one.
    profile_names: tuple[str, ...] = ()
    config_file: str = ""
    #: The profile's sweep plan ([sweep] and [load]): what ``s`` in the dashboard sweeps with.
    sweep: dict[str, Any] | None = None

    @property
    def local(self) -> bool:
        """The server runs on this machine (a profile without a host): read and restarted here."""
        from specmon.sources.local import LocalTailSource

        return isinstance(self.source, LocalTailSource)


@dataclass
class ConnectOutcome:
    """How the dashboard ended.

    Attributes:
        code: The process exit code.
        message: What to print on stderr (None: nothing).
    """

    code: int
    message: str | None = None


# -- argument types ------------------------------------------------------------------------------

def _port(text: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (1-65535): {text!r}")
    return int(text)


# -- planning (no Textual, no connection) ----------------------------------------------------------

def plan_connect(args: argparse.Namespace) -> ConnectPlan:
    """Resolve the config file, the profile and the options into a :class:`ConnectPlan`.

    Precedence, as with ssh: options on the command line, then the
    destination string, then the profile, then ``~/.ssh/config`` (read when
    connecting).

    Args:
        args: The parsed ``connect`` options.

    Raises:
        ConnectError: bad or missing config file, unknown profile, no host, no
            log, an invalid value, or a missing baseline file; the message says
            what to do.
    """
    from specmon import paths
    from specmon.config import ConfigError, load_config, split_destination
    from specmon.sources.logfiles import LogFileError, check_readable
    from specmon.sources.ssh_options import build_ssh_source

    try:
        config = load_config(args.config)
        destination, profile = split_destination(args.destination, config, args.profile)
    except ConfigError as exc:
        raise ConnectError(str(exc)) from None
    if destination is None and profile is None:
        raise ConnectError(
            "which host? pass it: specmon connect [USER@]HOST[:PORT] --log /path/to/server.log, "
            "or name a profile: specmon connect PROFILE (profiles live in ~/.config/specmon/config.toml)"
        )
    source: SSHTailSource | LocalTailSource
    try:
        if destination is None and profile is not None and not profile.host:
            # A profile without a host is a server on this machine (specmon on the GPU box itself):
            # its log is tailed here and `r` runs its launch commands here, with no SSH at all.
            source = _local_source(args, profile)
        else:
            source = build_ssh_source(
                destination, log=args.log, profile=profile, port=args.port, identity=args.identity,
                jump=args.jump, ssh_config=args.ssh_config, lines=args.lines, line_cap=args.line_cap,
            )
    except ValueError as exc:
        if destination is not None and profile is None and not args.log and config.profiles:
            # `connect kimi` with no log: a profile's name was the likelier meaning than a host's.
            named = _profile_sentence(destination, tuple(sorted(config.profiles)), str(args.config or paths.config_file()))
            if named:
                raise ConnectError(f"{destination!r} is not a profile{named}; to follow a host of that name, "
                                   f"pass its log: specmon connect {destination} --log /path/to/server.log") from None
        raise ConnectError(str(exc)) from None
    baseline_files: list[str] = []
    if profile is not None and profile.baseline_file:
        try:
            baseline_files.append(str(check_readable(profile.baseline_file)))
        except LogFileError as exc:
            raise ConnectError(f"the profile's baseline_file: {exc}") from None
    problem = check_theme(args.theme)
    if problem:
        raise ConnectError(problem)
    baseline_tps = args.baseline_tps if args.baseline_tps is not None else (
        profile.baseline_tps if profile is not None else None)
    launch = profile.launch if profile is not None else None
    return ConnectPlan(source=source, baseline_files=baseline_files, baseline_tps=baseline_tps,
                       theme=args.theme, warmup=args.warmup, window=max(1, args.window),
                       launch=launch, metrics=_metrics_url(args, profile, launch),
                       profile_names=tuple(sorted(config.profiles)),
                       config_file=str(args.config or paths.config_file()), sweep=_profile_plan(profile))


def _profile_plan(profile: Any) -> dict[str, Any] | None:
    """A profile's [sweep] and [load] tables as plan values (None: it has neither)."""
    if profile is None or not (profile.sweep or profile.load):
        return None
    from specmon.experiment.plan_sources import from_profile

    return from_profile(profile.sweep, profile.load)


def not_a_profile(args: argparse.Namespace, plan: ConnectPlan) -> str:
    """What to add when a bare destination does not resolve: it is no profile either (``connect kimi``).

    A bare word (no user, port or dot) may have been meant as a profile's name: the sentence names
    the profiles that exist, the nearest first. "" for anything else (an address, ``user@host``,
    ``--profile`` given).
    """
    dest = args.destination
    if dest is None or args.profile is not None:
        return ""
    named = _profile_sentence(dest, plan.profile_names, plan.config_file)
    return f"; nor is {dest!r} a profile{named}" if named else ""


def _profile_sentence(dest: str, names: tuple[str, ...], config_file: str) -> str:
    """``: did you mean 'kimi-prod'? the profiles in FILE are ...`` for a bare word; "" for a host-like one."""
    import re

    from specmon.literal import plain
    from specmon.suggest import did_you_mean

    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", dest):
        return ""  # user@host, host:port, a dotted name or an address: a host was meant
    where = plain(config_file)
    if not names:
        return f" ({where} defines none)"
    return f": {did_you_mean(dest, names)}the profiles in {where} are {', '.join(names)}"


def _local_source(args: argparse.Namespace, profile: Any) -> LocalTailSource:
    """The tail of a log on this machine, for a profile without a host (options win over it)."""
    import glob
    import os

    from specmon.sources.lines import DEFAULT_MAX_LINE
    from specmon.sources.local import LocalTailSource
    from specmon.sources.ssh import DEFAULT_LINES

    for option in ("port", "identity", "jump", "ssh_config"):
        if getattr(args, option, None) is not None:
            flag = {"port": "--port", "identity": "--identity", "jump": "--jump", "ssh_config": "--ssh-config"}[option]
            raise ValueError(f"{flag} is for SSH, and this profile has no 'host': its server runs on this "
                             "machine (add host = ... to the profile to reach it over SSH)")
    path = args.log or profile.log
    if not path and profile.log_glob:
        matches = [m for m in glob.glob(os.path.expanduser(profile.log_glob)) if os.path.isfile(m)]
        if not matches:
            raise ValueError(f"no file on this machine matches the profile's log_glob {profile.log_glob!r}")
        path = max(matches, key=os.path.getmtime)  # the newest match, as over SSH
    if not path:
        raise ValueError("which log? pass it: specmon connect PROFILE --log /path/to/server.log "
                         "(or set 'log' or 'log_glob' in the profile)")
    if not path.strip() or any(ord(c) < 32 or c == "\x7f" for c in path):
        raise ValueError(f"invalid log path {path!r}")
    lines = args.lines if args.lines is not None else (
        profile.lines if profile.lines is not None else DEFAULT_LINES)
    cap = args.line_cap or profile.line_cap or DEFAULT_MAX_LINE
    from specmon.smallfile import InputError, check_input

    try:  # a device, a directory or a missing folder: said now, not a deaf or silent dashboard
        check_input(os.path.expanduser(path), "log file", stream=True, wait=True,
                    hint="pass the log file (a FIFO is followed as a stream)")
    except InputError as exc:
        raise ValueError(str(exc)) from None
    return LocalTailSource(os.path.expanduser(path), lines=lines, max_line=cap)


def _metrics_url(args: argparse.Namespace, profile: Any, launch: LaunchProfile | None) -> str | None:
    """Where the engine's counters are, as seen from the host; None when off or unknown."""
    if getattr(args, "no_metrics", False):
        return None
    given = getattr(args, "metrics", None)
    if given:
        return str(given)
    configured = getattr(profile, "metrics_url", None)
    if configured == "off":
        return None
    if configured:
        return str(configured)
    if launch is not None and launch.port is not None:
        from specmon.sources.metrics import metrics_url_for

        return metrics_url_for(launch.port, engine=launch.engine if launch.engine != "unknown" else getattr(profile, "engine", None))
    return None


def remote_counters(plan: ConnectPlan, **kwargs: Any) -> LiveCounters | None:
    """The engine's counters for the dashboard, read through an SSH local port forward to the host.

    The server's port stays on the host: the dashboard opens its own verified SSH
    connection inside the running app (like the load driver), forwards a free local
    port to the metrics URL's host:port as the host sees it, and scrapes that about
    once a second. None when the plan has no metrics URL.

    Args:
        plan: From :func:`plan_connect` (its source not wrapped yet: the SSH target is read from it).
        **kwargs: Passed to :class:`~specmon.ui.counters.LiveCounters` (``interval_s``, ``window``, ...).
    """
    if plan.metrics is None:
        return None
    from specmon.ui.counters import LiveCounters

    kwargs.setdefault("window", plan.window)
    if plan.local:  # the server's port is on this machine: read it directly
        from specmon.sources.metrics_feed import fixed_url

        return LiveCounters(fixed_url(plan.metrics), where=plan.metrics, **kwargs)
    from specmon.sources.ssh import SSHTailSource

    assert isinstance(plan.source, SSHTailSource)
    from specmon.commands.forwards import forwarded_metrics

    opener, where = forwarded_metrics(plan.metrics, plan.source.target)
    return LiveCounters(opener, where=where, **kwargs)


# -- the dashboard -------------------------------------------------------------------------------

def connect_app(plan: ConnectPlan, **kwargs: Any) -> SpecmonApp:
    """The dashboard for a :class:`ConnectPlan`: the baseline files first (read at once), then the SSH tail.

    Args:
        plan: From :func:`plan_connect`.
        **kwargs: Passed to :func:`specmon.ui.factories.make_app` (``options``, ``clock``,
            ``user_themes``, ``controller``, ...). Without ``options``, the
            plan's settings are used.
    """
    import time

    from specmon.ingest.live import FeedInput
    from specmon.sources.replay import ReplayClock, ReplaySource
    from specmon.ui.app import DashboardOptions
    from specmon.ui.factories import make_app

    if "options" not in kwargs:
        kwargs["options"] = DashboardOptions(theme=plan.theme, baseline_tps=plan.baseline_tps,
                                             warmup=plan.warmup, window=plan.window)
    wall = kwargs.get("clock", time.time)
    inputs = []
    for path in plan.baseline_files:
        # Reference data, not part of the live show: read at max speed before the tail starts.
        replay = ReplaySource(path, ReplayClock(None), wall_clock=wall)
        inputs.append(FeedInput(replay, baseline=True, year=replay.year))
    if not inputs:
        return make_app(plan.source, **kwargs)
    inputs.append(FeedInput(plan.source))
    return make_app(inputs, **kwargs)


def with_restart(plan: ConnectPlan, **kwargs: Any,
                 ) -> tuple[ConnectPlan, RestartFlow, ConnectingRunner | LocalRunner]:
    """Give the dashboard ``r``: restart the remote server over SSH, the commands confirmed first.

    With a profile's ``[launch]`` table, ``r`` restarts through it; without
    one, the server writing the followed log is adopted once the dashboard is
    up (a read-only probe over SSH; if none is found, ``r`` stays greyed out
    and the event log says why). Nothing connects here: the runner opens its
    own verified SSH connection on first use, inside the running app.

    Args:
        plan: From :func:`plan_connect`.
        **kwargs: Passed to :func:`specmon.ui.widgets.restart_progress.live_restart`
            (``eta_store``, ``pidfile``).

    Returns:
        The plan with its source wrapped (it follows the new log after a
        restart: give it to :func:`connect_app` and :func:`run_connect`), the
        controller for the app, and the runner (close it when the app ends).
    """
    import dataclasses

    from specmon.control.connecting_runner import ConnectingRunner
    from specmon.control.runner import LocalRunner
    from specmon.sources.local import LocalTailSource
    from specmon.sources.ssh import SSHTailSource
    from specmon.ssh import connect as sshconfig
    from specmon.ui.flows.restart import live_restart

    if isinstance(plan.source, LocalTailSource):
        # This machine: the launch commands run here with bash, the new log is tailed here.
        local = plan.source
        local_runner = LocalRunner()
        source, flow = live_restart(
            local,
            lambda path, from_start: LocalTailSource(path, lines=None if from_start else 0,
                                                     max_line=local.max_line),
            local_runner, host="localhost", launch=plan.launch, log=str(local.path), **kwargs)
        return dataclasses.replace(plan, source=source), flow, local_runner  # type: ignore[arg-type]
    target = plan.source.target
    remote = plan.source
    runner = ConnectingRunner(lambda: sshconfig.connect(target))
    source, flow = live_restart(
        remote,
        # A new or truncated log is read whole; an old one from its end.
        lambda path, from_start: SSHTailSource(target, path, lines=None if from_start else 0,
                                               max_line=remote.max_line),
        runner, host=target.label, launch=plan.launch, log=remote.path, **kwargs)
    return dataclasses.replace(plan, source=source), flow, runner  # type: ignore[arg-type]


async def watch_startup(app: SpecmonApp, source: LineSource, *, poll: float = STARTUP_POLL_S) -> str | None:
    """Exit the app when the source fails before it was ever live; return the reason.

    A source that fails on its first connection (host key, authentication, no
    log) has nothing to show: the command should print why and exit, not
    leave an empty dashboard. Once the source has been live (or delivered a
    line), a later failure is shown in the dashboard instead, and this
    returns None.

    Args:
        app: The running dashboard.
        source: The SSH source it reads.
        poll: Seconds between two looks at ``source.status``.

    Returns:
        The failure's explanation when the app was told to exit, else None.
    """
    import asyncio

    from specmon.sources.base import ConnectionState

    while True:
        status = source.status
        if status.state is ConnectionState.LIVE or status.lines:
            return None
        if status.state is ConnectionState.FAILED:
            app.exit(EXIT_INPUT, return_code=EXIT_INPUT)
            return status.detail or "the connection failed"
        if status.state is ConnectionState.ENDED:
            return None
        await asyncio.sleep(poll)


async def run_connect(app: SpecmonApp, source: LineSource, *, headless: bool = False) -> ConnectOutcome:
    """Run the dashboard (on the current event loop) and decide the exit code and message.

    Args:
        app: From :func:`connect_app`.
        source: The SSH source the app reads (watched for a start-up failure).
        headless: Run without a terminal (tests).
    """
    import asyncio
    import contextlib

    from specmon.sources.base import ConnectionState

    watcher = asyncio.ensure_future(watch_startup(app, source))
    try:
        result = await app.run_async(headless=headless)
    finally:
        if not watcher.done():
            watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
    startup_failure = None if watcher.cancelled() else watcher.result()
    if startup_failure is not None:
        return ConnectOutcome(EXIT_INPUT, startup_failure)
    if source.status.state is ConnectionState.FAILED:
        # Seen in the dashboard already; repeated so it survives the screen being cleared.
        return ConnectOutcome(EXIT_INPUT, f"connection failed: {source.status.detail}")
    return ConnectOutcome(result if isinstance(result, int) else int(app.return_code or 0))


def cmd_connect(args: argparse.Namespace) -> int:
    """``specmon connect [USER@]HOST[:PORT] --log PATH`` / ``specmon connect PROFILE``."""
    import asyncio

    from specmon.commands.prom_fleet import connect_fleet, fleet_profile

    fleet = fleet_profile(args)
    if fleet is not None and fleet.prometheus is not None:  # a fleet's Prometheus: the fleet view, no SSH
        return connect_fleet(args, fleet)
    if fleet is not None:  # replicas: the fleet view, each replica's log followed as one server's
        from specmon.commands.replicas import connect_replicas

        return connect_replicas(args, fleet)
    try:
        plan = plan_connect(args)
    except ConnectError as exc:
        return fail(str(exc))
    from specmon.commands.terminal import no_terminal

    problem = None if args.headless else no_terminal("connect")
    if problem:
        return fail(problem)
    from specmon.commands.dashboard import open_recorder
    from specmon.commands.terminal import exit_on_signals, say

    recorder = open_recorder(args, "connect", {"destination": args.destination, "log": args.log})
    counters = remote_counters(plan)  # before with_restart: it reads the SSH target of the plain source
    tail = plan.source  # the SSH tail itself (with_restart wraps it): says why it failed for good
    plan, flow, runner = with_restart(plan)
    sweeper = None
    if plan.sweep is not None and flow.controller is not None:
        from specmon.experiment.plan import ExperimentPlan
        from specmon.ui.flows.sweep import SweepFlow

        try:  # the profile's plan for `s`: its care, loads, objective and load settings (the dialog picks the steps)
            parts = ExperimentPlan.dashboard_parts(plan.sweep)
        except ValueError as exc:  # (a prompts file that cannot be read: one sentence)
            return fail(f"the profile's [sweep]/[load]: {exc}")
        sweeper = SweepFlow(flow, plan_options=parts[0], load_options=parts[1])
    app = connect_app(plan, recorder=recorder, controller=flow, counters=counters,
                      export_dir=getattr(args, "out", None), sweeper=sweeper)
    app.options.prometheus_port = getattr(args, "prometheus_port", None)
    left: list[str] = []

    async def run_and_close() -> ConnectOutcome:
        try:
            return await run_connect(app, plan.source, headless=args.headless)
        finally:
            try:
                # Checked on the host while the connection is there: never "left running" unchecked.
                note = await asyncio.wait_for(_left_running(flow), LEFT_CHECK_S)
            except (Exception, asyncio.CancelledError):
                note = _unchecked(flow)
            if note:
                left.append(note)
            runner.close()  # on the loop the connection lives on: it is gone after asyncio.run

    # SIGTERM and SIGHUP (a closed terminal) end it like q: connections closed, the recording
    # closed with its end entry, a server it started left running and said so.
    signals = exit_on_signals(lambda: app)
    try:
        with signals:
            outcome = asyncio.run(run_and_close())
    finally:
        if recorder is not None:
            recorder.close()
    if signals.signalled:
        outcome = ConnectOutcome(signals.exit_code(outcome.code))
    from specmon.ssh.connect import ErrorKind

    if outcome.message and getattr(tail, "failure_kind", None) is ErrorKind.UNKNOWN_NAME:
        outcome = ConnectOutcome(outcome.code, outcome.message + not_a_profile(args, plan))
    if outcome.message:
        fail(outcome.message, outcome.code)
    for note in left:
        say(f"specmon: {note}")
    return write_status(outcome.code, app, recorder)


def _unchecked(flow: Any) -> str | None:
    """What is said when the check could not finish in time: that it was not checked."""
    controller = getattr(flow, "controller", None)
    who = getattr(controller, "started", None)
    if controller is None or who is None:
        return None
    return (f"the server specmon started on {controller.host} (PID {who.pid}) was not checked before exit; "
            "the next connect or sweep with this profile checks it")


#: How long the exit waits for the host to say whether the server it leaves still runs (over the
#: connection already open: a closed one is not opened again to ask, the exit must stay quick).
LEFT_CHECK_S = 2.0


async def _left_running(flow: Any) -> str | None:
    """What becomes of the real server this session started (or adopted from a record), checked on the host.

    Left running only when its PID still runs with the recorded start time; a gone one is
    recorded as exited, with its cause, and said so.
    """
    controller = getattr(flow, "controller", None)
    plan = getattr(controller, "last_plan", None)
    if controller is None or getattr(controller, "started", None) is None:
        return None
    from specmon.control.launch import expand
    from specmon.control.servers import left_running_note, load_record

    profile = controller.profile
    pidfile = plan.pidfile if plan is not None else expand(
        profile.pidfile_template(), {"port": str(profile.port)} if profile.port is not None else {})
    record = load_record(controller.host, pidfile) if pidfile else None
    if record is None or record.state != "running":
        return record.exited_text() if record is not None else None
    if getattr(controller.runner, "connected", True) is False:
        return (f"the server specmon started on {record.host} (PID {record.pid}) was not checked (no connection "
                "to the host now); the next connect or sweep with this profile checks it")
    return (await left_running_note(record, controller.runner))[1]


# -- the command line ------------------------------------------------------------------------------

def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``connect`` to the ``specmon`` command line."""
    c = subparsers.add_parser(
        "connect", help="tail a log on another machine over SSH and show the dashboard",
        description="Follow a server log over SSH and show the dashboard. Reads ~/.ssh/config "
                    "(Host aliases, HostName, User, Port, IdentityFile, ProxyJump, "
                    "ServerAliveInterval), uses the SSH agent and the default keys, and always "
                    "verifies the host key against known_hosts. Survives network drops: it "
                    "reconnects with backoff and resumes without losing or repeating a line.",
        epilog="Examples: specmon connect root@gpu-box --log /data/logs/sglang.log; "
               "specmon connect gpu-box:2222 -J bastion --log ~/server.log; "
               "specmon connect kimi   (a profile in ~/.config/specmon/config.toml); "
               "specmon connect FLEET   (a profile listing replicas, or with prometheus and selector: the fleet "
               "view, docs/fleet.md)")
    c.add_argument("destination", nargs="?", metavar="[USER@]HOST[:PORT] | PROFILE",
                   help="where the server runs (an ssh alias works), or the name of a profile "
                        "(default: the config's default_profile)")
    c.add_argument("--log", metavar="PATH",
                   help="the server log on the host (default: the profile's 'log', else the newest "
                        "file matching its 'log_glob')")
    c.add_argument("--profile", metavar="NAME", help="use this profile of the config file")
    c.add_argument("--config", metavar="PATH",
                   help="the config file (default: ~/.config/specmon/config.toml)")
    c.add_argument("-p", "--port", type=_port, default=None, metavar="PORT",
                   help="SSH port (overrides HOST:PORT, the profile and ~/.ssh/config)")
    c.add_argument("-i", "--identity", metavar="FILE", help="private key file, like ssh -i")
    c.add_argument("-J", "--jump", metavar="[USER@]HOST[:PORT][,...]",
                   help="connect through jump host(s), like ssh -J ('none' = direct)")
    c.add_argument("-F", "--ssh-config", metavar="FILE",
                   help="an OpenSSH client config file instead of ~/.ssh/config")
    c.add_argument("--lines", type=whole_number, default=None, metavar="N",
                   help="start with the last N lines of the log (default: the profile's, else 1000)")
    c.add_argument("--line-cap", type=line_cap, default=None, metavar="SIZE", help=LINE_CAP_HELP)
    c.add_argument("--baseline-tps", type=positive_float, default=None, metavar="X",
                   help="a known baseline throughput in tokens/s (default: the profile's)")
    c.add_argument("--theme", metavar="NAME",
                   help="colour theme: specmon-dark (default), specmon-light, specmon-contrast, "
                        "or one from your themes folder")
    c.add_argument("--warmup", type=whole_number, default=None, metavar="N",
                   help="samples excluded at the start of each run, per rank (default: engine's)")
    c.add_argument("--window", type=whole_number, default=20, metavar="N",
                   help="batches in the rolling means (default 20)")
    m = c.add_mutually_exclusive_group()
    m.add_argument("--metrics", type=metrics_url, default=None, metavar="URL",
                   help="the engine's Prometheus /metrics as the host sees it, read through an SSH port "
                        "forward about once a second (default: the profile's metrics_url, else "
                        "http://127.0.0.1:PORT/metrics for its launch port)")
    m.add_argument("--no-metrics", action="store_true",
                   help="do not read the engine's counters: every figure from the log")
    # For tests and CI: run the app without a terminal. Hidden: not a user feature.
    c.add_argument("--headless", action="store_true", help=argparse.SUPPRESS)
    from specmon.commands.dashboard import add_session_options

    add_session_options(c)  # --prometheus-port, --record PATH, --no-record
    c.set_defaults(func=cmd_connect)
