"""``specmon connect REPLICASPROFILE``: the fleet view on replicas whose logs are tailed.

A profile listing ``replicas`` (see :mod:`specmon.config`) names a fleet: each replica's log is
followed as ``specmon connect`` follows one server's — over SSH with the profile's settings
(user, port, identity, jump host), or on this machine for a replica without a host — and
the fleet view (:mod:`specmon.ui.fleet_app`) shows them side by side. Each replica has its own
connection, backoff and state: one host lost never stalls the others. Only ``argparse`` is
imported at module level (``summarize`` builds the whole parser).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from specmon.commands.exits import fail

if TYPE_CHECKING:
    from specmon.config import Profile
    from specmon.ingest.fleet import Member
    from specmon.sources.local import LocalTailSource
    from specmon.sources.metrics_feed import MetricsFeed
    from specmon.sources.ssh import SSHTailSource

__all__ = ["connect_replicas", "replica_members"]

#: Options of ``connect`` that belong to one server, with why a replicas fleet refuses them.
_ONE_SERVER = (("log", "--log", "each replica's log is in the profile"),
               ("metrics", "--metrics", "each replica's metrics_url is in the profile"),
               ("record", "--record", "a recording holds one log"),
               ("prometheus_port", "--prometheus-port", "it serves one server's figures"))


def replica_members(args: argparse.Namespace, profile: Profile) -> list[Member]:
    """One follower per replica of ``profile`` (nothing connected yet); options win over the profile.

    Raises:
        ValueError: a replica's settings cannot make a follower (the message names the replica).
    """
    from specmon.ingest.fleet import Member
    from specmon.model.fleet import short_names
    from specmon.sources.local import build_local_source
    from specmon.sources.ssh import DEFAULT_LINES
    from specmon.sources.ssh_options import build_ssh_source

    assert profile.replicas is not None  # the caller's check
    ssh_options = {"port": args.port, "identity": args.identity, "jump": args.jump, "ssh_config": args.ssh_config}
    wheres: list[str] = []
    sources: list[LocalTailSource | SSHTailSource] = []
    for i, entry in enumerate(profile.replicas, start=1):
        source: LocalTailSource | SSHTailSource
        own = {"log": entry.log, "log_glob": entry.log_glob} if (entry.log or entry.log_glob) else {}
        one = profile.model_copy(update={**own, "replicas": None, "host": entry.host})
        try:
            if entry.host is None:  # on this machine: no SSH, as for a one-server profile without a host
                lines = args.lines if args.lines is not None else (
                    profile.lines if profile.lines is not None else DEFAULT_LINES)
                source = build_local_source(None, profile=one, lines=lines, line_cap=args.line_cap)
                wheres.append(str(source.path))
            else:
                source = build_ssh_source(None, profile=one, lines=args.lines, line_cap=args.line_cap,
                                          **ssh_options)
                wheres.append(f"{entry.host}:{one.log or one.log_glob}")
        except ValueError as exc:
            raise ValueError(f"replica {entry.name or i}: {exc}") from None
        sources.append(source)
    names = short_names(wheres)
    for i, entry in enumerate(profile.replicas):
        if entry.name is not None:
            names[i] = entry.name
    for i, name in enumerate(names):  # a derived name equal to a given one: both stay apart
        if names.count(name) > 1:
            names[i] = f"{name}#{i + 1}"
    return [Member(name, where, source, _metrics_feed(entry.metrics_url, source))
            for name, where, source, entry in zip(names, wheres, sources, profile.replicas, strict=True)]


def _metrics_feed(url: str | None, source: LocalTailSource | SSHTailSource) -> MetricsFeed | None:
    """A replica's ``/metrics`` (None: it has none): read here for a replica on this machine, through
    an SSH port forward on its host's connection settings otherwise."""
    if url is None or url == "off":
        return None
    from specmon.sources.metrics_feed import MetricsFeed, fixed_url
    from specmon.sources.ssh import SSHTailSource

    if isinstance(source, SSHTailSource):
        from specmon.commands.forwards import forwarded_metrics

        opener, where = forwarded_metrics(url, source.target)
        return MetricsFeed(opener, where=where)
    return MetricsFeed(fixed_url(url), where=url)


def connect_replicas(args: argparse.Namespace, profile: Profile) -> int:
    """Open the fleet view on ``profile``'s replicas; returns the exit code."""
    from specmon.commands.prom_fleet import fleet_problem, run_fleet_app

    problem = fleet_problem(args, _ONE_SERVER, "a fleet of replicas")
    if problem:
        return fail(problem)
    try:
        members = replica_members(args, profile)
    except ValueError as exc:
        return fail(str(exc))
    from specmon.ingest.fleet import Fleet
    from specmon.ui.fleet_app import FleetOptions, followed_fleet_app

    baseline = args.baseline_tps if args.baseline_tps is not None else profile.baseline_tps
    options = FleetOptions(theme=args.theme, window=max(1, args.window), warmup=args.warmup, baseline_tps=baseline)
    return run_fleet_app(args, followed_fleet_app(Fleet(members, warmup=args.warmup), options=options))
