"""``specmon replay`` and ``specmon watch``: open the dashboard on saved or local logs.

Only ``argparse`` is imported here at module level: ``specmon summarize`` builds
the whole parser and must not pay for importing Textual. The dashboard is
imported inside the command functions.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from specmon.commands.argtypes import (
    LINE_CAP_HELP,
    check_theme,
    line_cap,
    metrics_url,
    out_dir,
    positive_float,
    whole_number,
)
from specmon.commands.exits import EXIT_OK, fail, write_status
from specmon.commands.terminal import no_terminal
from specmon.literal import plain

if TYPE_CHECKING:  # annotations only: the dashboard (Textual) is imported inside the commands
    from specmon.ui.app import DashboardOptions

__all__ = ["register"]

def _speed(text: str) -> float | None:
    if text.lower() == "max":
        return None
    try:
        value = float(text.rstrip("xX×"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a speed: {text!r} (a number like 10, or 'max')") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"speed must be positive: {text!r}")
    return value


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--theme", metavar="NAME",
                   help="colour theme: specmon-dark (default), specmon-light, specmon-contrast, "
                        "or one from your themes folder")
    p.add_argument("--warmup", type=whole_number, default=None, metavar="N",
                   help="samples excluded at the start of each run, per rank (default: engine's)")
    p.add_argument("--window", type=whole_number, default=20, metavar="N",
                   help="batches in the rolling means (default 20)")


def _options(args: argparse.Namespace, *, baseline_tps: float | None = None, loop: bool = False) -> DashboardOptions:
    from specmon.ui.app import DashboardOptions

    return DashboardOptions(theme=args.theme, baseline_tps=baseline_tps, warmup=args.warmup,
                            window=max(1, args.window), loop=loop,
                            prometheus_port=getattr(args, "prometheus_port", None))


def _port(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"not a port (0-65535; 0 = any free port): {text!r}")
    return int(text)


def add_session_options(p: argparse.ArgumentParser, *, record: bool = True) -> None:
    """``--prometheus-port``, ``--out DIR``, and for live sessions ``--record PATH`` / ``--no-record``."""
    p.add_argument("--prometheus-port", type=_port, default=None, metavar="PORT",
                   help="serve the live figures as Prometheus metrics on 127.0.0.1:PORT/metrics")
    p.add_argument("--out", type=out_dir, default=None, metavar="DIR", dest="out",
                   help="where exports (e) and sweep reports go (default: the exports folder in specmon's "
                        "data directory; the path is shown after each write)")
    if record:
        g = p.add_mutually_exclusive_group()
        g.add_argument("--record", metavar="PATH", default=None,
                       help="record the session to this file (default: a new file in the recordings folder)")
        g.add_argument("--no-record", action="store_true",
                       help="do not record the session (by default every line is recorded, for replay and reports)")


def open_recorder(args: argparse.Namespace, kind: str, meta: dict[str, object] | None = None):  # type: ignore[no-untyped-def]
    """The session's :class:`~specmon.output.recording.Recorder`, or None (``--no-record``, or it cannot be written)."""
    if getattr(args, "no_record", True):
        return None
    from specmon.output.recording import Recorder, new_recording_path

    path = args.record or new_recording_path(kind)
    try:
        return Recorder(path, meta={"command": kind, **(meta or {})}, warmup=getattr(args, "warmup", None))
    except OSError as exc:
        print(plain(f"specmon: not recording: cannot write {path}: {exc.strerror or exc}"), file=sys.stderr)
        return None


def _recorded_warmup(path: str) -> int | None:
    """The warm-up a recording was made with (replay uses it unless --warmup is given)."""
    from specmon.output.recording_reader import is_recording, read_recording
    from specmon.recording_format import RecordingError

    if not is_recording(path):
        return None
    try:
        first = next(read_recording(path))
    except (RecordingError, StopIteration):
        return None
    value = first.get("warmup")
    return value if isinstance(value, int) else None


def _not_a_log(path: str | None) -> str | None:
    """A sentence when the path to watch cannot be followed (an empty or deaf dashboard otherwise).

    A directory, a device (``/dev/zero`` never ends), a socket, or a log whose folder does not
    exist is refused at once; a missing log in an existing folder is waited for (``tail -F``),
    and a FIFO is followed as a stream.
    """
    import os

    from specmon.smallfile import InputError, check_input

    if not path:
        return None
    where = os.path.expanduser(path)
    if os.path.isdir(where):
        return f"{path} is a directory, not a log file: pass the log itself, e.g. specmon watch {path}/server.log"
    try:
        check_input(where, "log file", stream=True, wait=True,
                    hint="pass the log file (a FIFO is followed as a stream)")
    except InputError as exc:
        return str(exc)
    return None


def cmd_replay(args: argparse.Namespace) -> int:
    """``specmon replay FILE...``: the dashboard driven by saved logs."""
    from specmon.sources.logfiles import LogFileError, check_readable

    if args.baseline and args.baseline_tps is not None:
        return fail("give either --baseline FILE or --baseline-tps X, not both")
    try:
        for path in [*args.baseline, *args.files]:
            check_readable(path)
    except LogFileError as exc:
        return fail(str(exc))
    problem = check_theme(args.theme) or no_terminal("replay")
    if problem:
        return fail(problem)
    from specmon.ui.factories import replay_app

    if args.warmup is None and args.files:
        args.warmup = _recorded_warmup(args.files[0])
    try:  # a recording swapped for a FIFO after its check is refused when it is opened again
        app = replay_app(args.files, speed=args.speed, baseline_files=args.baseline,
                         options=_options(args, baseline_tps=args.baseline_tps, loop=args.loop),
                         export_dir=getattr(args, "out", None))
    except LogFileError as exc:
        return fail(str(exc))
    return write_status(int(app.run() or 0), app)


def watch_app_for(args: argparse.Namespace, *, recorder: Any = None, counters: Any = None) -> Any:
    """The app ``specmon watch`` runs: the dashboard for one log, the fleet view for several.

    One path builds exactly what ``specmon watch PATH`` always built (:func:`specmon.ui.factories.watch_app`);
    two or more build :func:`specmon.ui.fleet_app.fleet_app`, one replica per log.
    """
    paths = getattr(args, "paths", None) or [args.path]
    if len(paths) > 1:
        from specmon.ui.fleet_app import FleetOptions, fleet_app

        return fleet_app(paths, lines=args.lines, max_line=args.line_cap,
                         options=FleetOptions(theme=args.theme, window=max(1, args.window), warmup=args.warmup,
                                              baseline_tps=args.baseline_tps))
    from specmon.ui.factories import watch_app

    return watch_app(args.path, lines=args.lines, max_line=args.line_cap,
                     options=_options(args, baseline_tps=args.baseline_tps), recorder=recorder, counters=counters,
                     export_dir=getattr(args, "out", None))


def cmd_watch(args: argparse.Namespace) -> int:
    """``specmon watch PATH...``: the dashboard following a local log; several logs: the fleet view."""
    paths = getattr(args, "paths", None) or [args.path]
    if len(paths) > 1:
        return _watch_fleet(args, paths)
    problem = check_theme(args.theme)
    if problem:
        return fail(problem)
    problem = _not_a_log(args.path) or no_terminal("watch")
    if problem:
        return fail(problem)
    from specmon.commands.terminal import exit_on_signals

    recorder = open_recorder(args, "watch", {"path": str(args.path)})
    if recorder is not None:
        print(plain(f"specmon: recording to {recorder.path}"), file=sys.stderr)
    counters = None
    if args.metrics:
        from specmon.ui.counters import LiveCounters, fixed_url

        counters = LiveCounters(fixed_url(args.metrics), where=args.metrics, window=max(1, args.window))
    app = watch_app_for(args, recorder=recorder, counters=counters)
    # SIGTERM and SIGHUP (a closed terminal) end it like q: the recording gets its end entry.
    signals = exit_on_signals(lambda: app)
    code = EXIT_OK
    try:
        with signals:
            code = signals.exit_code(int(app.run() or 0))
    finally:
        if recorder is not None:
            recorder.close()
    return write_status(code, app, recorder)


def _watch_fleet(args: argparse.Namespace, paths: list[str]) -> int:
    """``specmon watch LOG1 LOG2 ...``: the fleet view, one replica per log."""
    problem = check_theme(args.theme)
    if problem:
        return fail(problem)
    seen: set[str] = set()
    for path in paths:
        problem = _not_a_log(path)
        if problem:
            return fail(problem)
        if path in seen:
            return fail(f"{path} is given twice: each log is one replica")
        seen.add(path)
    # What belongs to one server only: the fleet view says so instead of doing it for the first log.
    for given, option, what in ((args.record, "--record", "a recording holds one log"),
                                (args.metrics, "--metrics", "it reads one server's counters"),
                                (args.prometheus_port is not None, "--prometheus-port",
                                 "it serves one server's figures")):
        if given:
            return fail(f"{option} works with one log ({what}): watch that replica alone, "
                        f"e.g. specmon watch {paths[0]} {option} ...")
    problem = no_terminal("watch")
    if problem:
        return fail(problem)
    from specmon.commands.terminal import exit_on_signals

    if not args.no_record:
        print("specmon: the fleet view is not recorded (a recording holds one log)", file=sys.stderr)
    app = watch_app_for(args)
    signals = exit_on_signals(lambda: app)
    with signals:
        code = signals.exit_code(int(app.run() or 0))
    return write_status(code, app)


class _Paths(argparse.Action):
    """``PATH...``: ``paths`` gets every path, ``path`` the first (one path: the dashboard, as before)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        given = [str(v) for v in values]
        namespace.paths = given
        setattr(namespace, self.dest, given[0])


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``replay`` and ``watch`` to the ``specmon`` command line."""
    r = subparsers.add_parser(
        "replay", help="drive the dashboard from saved logs, paced by their timestamps",
        description="Replay logs into the live dashboard, paced by their own timestamps "
                    "(speed 1 = real time). Keys: p pause, +/- speed, b baseline, e export, "
                    "t theme, ? help, q quit.",
        epilog="example: specmon replay sample_logs/sim_eagle3_{nospec,1step,2step,3step,5step,10step}.log "
               "--speed 60   (a 12-minute start-up passes in 12 seconds)")
    r.add_argument("files", nargs="+", metavar="FILE",
                   help="server logs, or a specmon recording (replayed input by input: the same table)")
    r.add_argument("--speed", type=_speed, default=1.0, metavar="X",
                   help="log seconds per second (default 1 = real time), or 'max'")
    r.add_argument("--loop", action="store_true", help="start again at the end (demos)")
    g = r.add_mutually_exclusive_group()
    g.add_argument("--baseline", metavar="FILE", action="append", default=[],
                   help="a log of the server without speculation, used as the baseline")
    g.add_argument("--baseline-tps", type=positive_float, metavar="X",
                   help="a known baseline throughput in tokens/s (e.g. 88.8)")
    _add_common(r)
    add_session_options(r, record=False)
    r.set_defaults(func=cmd_replay)

    w = subparsers.add_parser(
        "watch", help="follow a log on this machine (like tail -F) in the dashboard; several logs: the fleet view",
        description="Follow a local log file through rotation and truncation and show the dashboard. "
                    "Several logs (one per replica of a deployment) open the fleet view: a row per replica, "
                    "a row per configuration pooled over its replicas, outliers marked (docs/fleet.md).")
    w.add_argument("path", metavar="PATH", nargs="+", action=_Paths,
                   help="the log; two or more logs: the fleet view, one replica per log")
    w.add_argument("--lines", type=whole_number, default=None, metavar="N",
                   help="start with the last N lines (default: the whole file)")
    w.add_argument("--line-cap", type=line_cap, default=None, metavar="SIZE",
                   help=LINE_CAP_HELP.replace("the profile's line_cap, else ", ""))
    w.add_argument("--baseline-tps", type=positive_float, metavar="X",
                   help="a known baseline throughput in tokens/s")
    w.add_argument("--metrics", type=metrics_url, default=None, metavar="URL",
                   help="also read the engine's Prometheus counters about once a second, e.g. "
                        "http://127.0.0.1:8000/metrics (vLLM, llama-server --metrics, SGLang --enable-metrics)")
    _add_common(w)
    add_session_options(w)
    w.set_defaults(func=cmd_watch)
