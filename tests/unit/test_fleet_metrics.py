"""A replica's own ``/metrics`` beside its log (issue 31): a replica whose engine stops answering
is shown down at once, not quiet 30 s after its last stats line.

The fleet reads each replica's log with its follower and, when the profile gives the replica a
``metrics_url``, scrapes that URL with a real :class:`~specmon.sources.metrics.MetricsScraper`
(tests/support/metricspage.py serves it over real HTTP on 127.0.0.1; closing it shuts the port,
like a server that was killed). The rule: two scrapes in a row that find nothing answering make
the replica ``down``, unless its log says more (it stopped, crashed, or is still loading).
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.cli import build_parser
from specmon.commands.replicas import replica_members
from specmon.config import ConfigError, load_config
from specmon.ingest.fleet import Fleet, Member
from specmon.model.fleet import DOWN_AFTER_REFUSED, FleetModel, ReplicaInput, ReplicaState
from specmon.model.session import Session
from specmon.parsing import parse_lines
from specmon.sources.local import LocalTailSource
from specmon.sources.metrics_feed import MetricsFeed, fixed_url
from tests.support.logtext import campaign
from tests.support.metricspage import MetricsPage


def _session(lines: list[str]) -> Session:
    s = Session()
    for rec in parse_lines(lines, year=2026):
        s.ingest(rec)
    return s


SERVING = campaign(2, 90.0, 20)
STOPPED = [*SERVING, "[2026-12-04 17:44:45] INFO:     Shutting down"]
LOADING = campaign(2, 90.0, 0)[:1]  # its server_args line only: the launch has not served


@settings(max_examples=60, deadline=None)
@given(refused=st.integers(0, 6), log=st.sampled_from(["serving", "stopped", "loading"]),
       age=st.floats(0.0, 100.0))
def test_down_needs_two_refused_scrapes_and_yields_to_what_the_log_tells(refused: int, log: str, age: float) -> None:
    lines = {"serving": SERVING, "stopped": STOPPED, "loading": LOADING}[log]
    inp = ReplicaInput("r", "r.log", _session(lines), lines=len(lines), last_sample_at=1000.0 - age,
                       metrics_refused=refused, metrics_detail="cannot read http://127.0.0.1:9/metrics (ConnectError)")
    row = FleetModel().snapshot([inp], 1000.0).replicas[0]
    if log == "stopped":
        assert row.state is ReplicaState.STOPPED
    elif log == "loading":
        assert row.state is ReplicaState.STARTING
    elif refused >= DOWN_AFTER_REFUSED:
        assert row.state is ReplicaState.DOWN and "ConnectError" in row.detail
    else:
        assert row.state is (ReplicaState.QUIET if age > 30.0 else ReplicaState.LIVE)


def _member(tmp_path: Path, name: str, url: str) -> Member:
    log = tmp_path / f"{name}.log"
    log.write_text("\n".join(SERVING) + "\n")
    return Member(name, str(log), LocalTailSource(str(log), lines=None, poll_interval=0.05),
                  MetricsFeed(fixed_url(url), where=url, interval_s=0.1))


async def _rows(fleet: Fleet) -> dict[str, object]:
    return {r.name: r for r in FleetModel().snapshot(fleet.inputs(), time.time()).replicas}


async def _until(fleet: Fleet, name: str, state: ReplicaState, limit_s: float = 10.0) -> object:
    deadline = time.monotonic() + limit_s
    while True:
        row = (await _rows(fleet))[name]
        if row.state is state:  # type: ignore[attr-defined]
            return row
        assert time.monotonic() < deadline, f"{name} never {state.value}: {row}"
        await asyncio.sleep(0.05)


async def test_a_replica_whose_engine_stops_answering_is_down_at_once_and_the_others_stay_live(
        tmp_path: Path) -> None:
    """Three replicas: one whose /metrics answers, one whose answers HTTP 501 (a llama-server without
    --metrics: an engine that answers is not down), one whose port is shut mid-run: that one is down
    within a few scrapes, with the URL and the error, while its log still looks live."""
    alive, no_metrics, killed = MetricsPage(""), MetricsPage(None), MetricsPage("")
    fleet = Fleet([_member(tmp_path, "alive", alive.url), _member(tmp_path, "plain", no_metrics.url),
                   _member(tmp_path, "killed", killed.url)])
    task = asyncio.create_task(fleet.run())
    try:
        for name in ("alive", "plain", "killed"):
            await _until(fleet, name, ReplicaState.LIVE)
        await asyncio.sleep(0.5)  # several scrapes of each
        assert all(r.state is ReplicaState.LIVE for r in (await _rows(fleet)).values())  # type: ignore[attr-defined]
        killed.close()
        shut = time.monotonic()
        row = await _until(fleet, "killed", ReplicaState.DOWN)
        assert time.monotonic() - shut < 5.0  # not the 30 s of a quiet log
        assert killed.url in row.detail and "does not answer" in row.detail  # type: ignore[attr-defined]
        rows = await _rows(fleet)
        assert rows["alive"].state is ReplicaState.LIVE and rows["plain"].state is ReplicaState.LIVE  # type: ignore[attr-defined]
    finally:
        await fleet.close()
        await task
        alive.close()
        no_metrics.close()


def test_a_replicas_metrics_url_is_checked_and_read_here_or_through_its_host(tmp_path: Path) -> None:
    """metrics_url per replica: an http(s) URL or off, as a one-server profile's; a replica on this
    machine reads it directly, one on a host through an SSH port forward on that host's settings."""
    config = tmp_path / "config.toml"
    config.write_text('[profiles.f]\nuser = "u"\n'
                      '[[profiles.f.replicas]]\nname = "here"\nlog = "/l/a.log"\nmetrics_url = "http://127.0.0.1:8000/metrics"\n'
                      '[[profiles.f.replicas]]\nname = "there"\nhost = "gpu-2"\nlog = "/l/a.log"\n'
                      'metrics_url = "http://127.0.0.1:8001/metrics"\n'
                      '[[profiles.f.replicas]]\nname = "none"\nhost = "gpu-3"\nlog = "/l/a.log"\nmetrics_url = "off"\n')
    args = build_parser().parse_args(["connect", "f", "--config", str(config), "--no-record"])
    members = {m.name: m for m in replica_members(args, load_config(config).profile("f"))}
    assert members["here"].metrics is not None and members["here"].metrics.where == "http://127.0.0.1:8000/metrics"
    there = members["there"].metrics
    assert there is not None and there.where == "127.0.0.1:8001 on u@gpu-2, through an SSH port forward"
    assert members["none"].metrics is None
    for bad in ("ftp://x/metrics", "http://127.0.0.1:99999/metrics", "not a url"):
        config.write_text(f'[profiles.f]\n[[profiles.f.replicas]]\nlog = "/l/a.log"\nmetrics_url = "{bad}"\n')
        with pytest.raises(ConfigError, match="metrics_url"):
            load_config(config)


async def test_closing_the_fleet_does_not_wait_for_a_hanging_scrape(tmp_path: Path) -> None:
    """A replica's /metrics whose way never opens (an SSH forward hanging on a host): the fleet still
    closes at once, and its scraping task ends (nothing of it keeps running)."""
    import contextlib
    from collections.abc import AsyncIterator

    @contextlib.asynccontextmanager
    async def hangs() -> AsyncIterator[str]:
        await asyncio.Event().wait()
        yield "http://127.0.0.1:9/metrics"

    log = tmp_path / "r.log"
    log.write_text("\n".join(SERVING) + "\n")
    fleet = Fleet([Member("r", str(log), LocalTailSource(str(log), lines=None, poll_interval=0.05),
                          MetricsFeed(hangs, where="a hanging forward"))])
    task = asyncio.create_task(fleet.run())
    await _until(fleet, "r", ReplicaState.LIVE)
    started = time.monotonic()
    await fleet.close()
    await asyncio.wait_for(task, 2.0)
    assert time.monotonic() - started < 0.5
    scraping = fleet.replicas[0].metrics_task
    assert scraping is not None
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(scraping, 1.0)
    assert scraping.done()
