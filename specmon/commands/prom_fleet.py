"""``specmon connect FLEETPROFILE``: the fleet view on the replicas a Prometheus knows.

A profile with ``prometheus = "http://..."`` and ``selector = '{job="vllm"}'`` (see
:mod:`specmon.config`) names a fleet, not one server: ``specmon connect`` opens the fleet
view (:mod:`specmon.ui.fleet_app`) fed by :class:`~specmon.ingest.prom_fleet.PromFleet`
instead of tailing a log. Only ``argparse`` is imported at module level (``summarize``
builds the whole parser).
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from specmon.commands.exits import EXIT_OK, fail, write_status

if TYPE_CHECKING:
    from specmon.config import Profile
    from specmon.ui.fleet_app import FleetApp

__all__ = ["DEFAULT_RATE_WINDOW", "connect_fleet", "fleet_problem", "run_fleet_app", "poll_interval", "fleet_profile"]

#: The rate window when the profile gives none: four scrapes at Prometheus's default 15 s interval.
DEFAULT_RATE_WINDOW = "1m"

#: Options of ``connect`` that belong to one server, with why the fleet view refuses them.
_ONE_SERVER = (("log", "--log", "the replicas' figures come from Prometheus, not a log"),
               ("port", "--port", "nothing is reached over SSH"),
               ("identity", "--identity", "nothing is reached over SSH"),
               ("jump", "--jump", "nothing is reached over SSH"),
               ("ssh_config", "--ssh-config", "nothing is reached over SSH"),
               ("lines", "--lines", "no log is read"),
               ("line_cap", "--line-cap", "no log is read"),
               ("metrics", "--metrics", "Prometheus reads the replicas' counters"),
               ("record", "--record", "a recording holds one log"),
               ("prometheus_port", "--prometheus-port", "it serves one server's figures"),
               ("warmup", "--warmup", "Prometheus's rates have no warm-up samples to leave out"))


def fleet_profile(args: argparse.Namespace) -> Profile | None:
    """The profile ``connect`` names when it is a fleet (read through Prometheus, or replicas), else None.

    A config file that cannot be read is None here: :func:`specmon.commands.remote.plan_connect`
    reads it again and says what is wrong, as for any profile.
    """
    from specmon.config import ConfigError, load_config, split_destination

    try:
        config = load_config(args.config)
        destination, profile = split_destination(args.destination, config, args.profile)
    except ConfigError:
        return None
    if destination is None and profile is not None and (profile.prometheus is not None or profile.replicas):
        return profile
    return None


def poll_interval(window_s: int) -> float:
    """Seconds between two polls: every few seconds, a quarter of the window for short ones."""
    return min(5.0, max(1.0, window_s / 4))


def fleet_problem(args: argparse.Namespace, one_server: tuple[tuple[str, str, str], ...], what: str) -> str | None:
    """Why ``connect`` cannot open a fleet view: an option of one server (``(attr, option, why)``
    each), an unknown theme, no terminal; None when it can."""
    for attr, option, why in one_server:
        if getattr(args, attr, None) not in (None, False):
            return f"{option} does not apply to {what} ({why})"
    from specmon.commands.argtypes import check_theme
    from specmon.commands.terminal import no_terminal

    return check_theme(args.theme) or (None if args.headless else no_terminal("connect"))


def run_fleet_app(args: argparse.Namespace, app: FleetApp) -> int:
    """Run a fleet view until it ends (a signal ends it too); returns the exit code."""
    from specmon.commands.terminal import exit_on_signals

    if not args.no_record:
        print("specmon: the fleet view is not recorded (a recording holds one log)", file=sys.stderr)
    signals = exit_on_signals(lambda: app)
    with signals:
        code = signals.exit_code(int(app.run(headless=args.headless) or EXIT_OK))
    return write_status(code, app)


def connect_fleet(args: argparse.Namespace, profile: Profile) -> int:
    """Open the fleet view on ``profile``'s Prometheus; returns the exit code."""
    problem = fleet_problem(args, _ONE_SERVER, "a fleet read through Prometheus")
    if problem:
        return fail(problem)
    from specmon.engines import adapter
    from specmon.ingest.prom_fleet import PromFleet
    from specmon.records import Engine
    from specmon.sources.prometheus_fleet import PrometheusFleetSource
    from specmon.sources.promql import parse_duration, parse_selector
    from specmon.ui.fleet_app import FleetOptions, prometheus_fleet_app

    assert profile.prometheus is not None and profile.selector is not None  # the profile's validation
    window_s = parse_duration(profile.rate_window or DEFAULT_RATE_WINDOW)
    engine = profile.engine if profile.engine is not None and adapter(profile.engine).counters is not None else None
    source = PrometheusFleetSource(profile.prometheus, parse_selector(profile.selector), window_s=window_s,
                                   engine=engine if engine is not Engine.UNKNOWN else None)
    baseline = args.baseline_tps if args.baseline_tps is not None else profile.baseline_tps
    app = prometheus_fleet_app(PromFleet(source, interval_s=poll_interval(window_s)),
                               options=FleetOptions(theme=args.theme, window=max(1, args.window),
                                                    baseline_tps=baseline))
    return run_fleet_app(args, app)
