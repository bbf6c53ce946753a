"""What ``specmon connect`` shows: the countdown while reconnecting, the status line, failures.

Apps are built with the connect command's own factory (:func:`connect_app`) on
a fixed clock, animations off, no user themes. The countdown tests use a real
:class:`SSHTailSource` pointed at a closed port on 127.0.0.1 (connection
refused: a network error, retried) with a fake clock and a sleep that returns
only when the test says so; nothing else needs SSH.
"""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest

from specmon.commands.remote import (
    ConnectOutcome,
    ConnectPlan,
    connect_app,
    run_connect,
    watch_startup,
)
from specmon.sources.base import ConnectionState, SourceStatus
from specmon.sources.ssh import Backoff, SSHTailSource
from specmon.ssh.connect import SSHTarget
from tests.support.app_factory import (
    FIXED_NOW,
    ROOT,
    StaticSource,
    header_text,
    options,
    settle_source,
    wait_for,
)
from tests.support.logtext import campaign
from tests.support.sshd import ClientHome

SIZE = (110, 30)
NAME = "root@gpu-box:/data/logs/sglang.log"


class FakeClock:
    """Wall clock that moves only when the test says so."""

    def __init__(self, now: float = FIXED_NOW) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


class Gate:
    """A backoff sleep that returns only when the test opens the gate."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.delays: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        await self.event.wait()
        self.event.clear()


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def plan_for(source: Any, **kw: Any) -> ConnectPlan:
    return ConnectPlan(source=source, baseline_files=[], baseline_tps=None, theme=None, warmup=None, window=20,
                       **kw)


def app_for(source: Any, clock: Any = lambda: FIXED_NOW) -> Any:
    return connect_app(plan_for(source), options=options(), clock=clock, user_themes=None)


async def run_headless(app: Any, source: Any) -> ConnectOutcome:
    """Run the dashboard as ``specmon connect`` does, headless; a hang is a failure, not a pass."""
    task = asyncio.ensure_future(run_connect(app, source, headless=True))
    done, _ = await asyncio.wait({task}, timeout=60)
    if task not in done:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        raise AssertionError("the dashboard did not exit")
    return task.result()


@pytest.fixture
def in_repo(client_home: ClientHome, monkeypatch: pytest.MonkeyPatch) -> ClientHome:
    """HOME in tmp (no ~/.ssh of anyone's), working directory the repository."""
    monkeypatch.chdir(ROOT)
    return client_home


# -- the countdown, from a real SSH source ------------------------------------------------------


async def test_countdown_in_the_header_while_reconnecting(in_repo: ClientHome) -> None:
    clock, gate = FakeClock(), Gate()
    # Ceiling 8 s on the first attempt, jitter fixed at one half: the next try is in 4 s.
    source = SSHTailSource(SSHTarget("127.0.0.1", port=closed_port()), "/data/logs/sglang.log",
                           backoff=Backoff(base=8.0, rand=lambda: 0.5), clock=clock, sleep=gate.sleep)
    app = app_for(source, clock)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: source.status.state is ConnectionState.RECONNECTING, "a failed attempt")
        app.refresh_now()
        text = header_text(app)
        assert "reconnecting in 4 s (attempt 1): cannot connect" in text
        assert "retrying in" not in text  # the countdown is said once, and it moves
        clock.now += 1.2
        app.refresh_now()
        assert "reconnecting in 3 s (attempt 1)" in header_text(app)
        # The failure is in the event log too, while nothing else arrives.
        await wait_for(pilot, lambda: any("cannot connect" in e.text for e in app.feeder.session.events),
                       "the failure in the event log")
        gate.event.set()  # the backoff ends: attempt 2 fails too, with a ceiling of 16 s
        await wait_for(pilot, lambda: source.status.attempts == 2, "a second attempt")
        app.refresh_now()
        assert "reconnecting in 8 s (attempt 2)" in header_text(app)
        assert gate.delays == [4.0, 8.0]


def test_reconnecting_in_4s_snapshot(snap_compare: Any, in_repo: ClientHome) -> None:
    """The dashboard of a connected host between two attempts: countdown, data kept, events."""
    status = SourceStatus(state=ConnectionState.RECONNECTING, retry_at=FIXED_NOW + 4, attempts=2,
                          detail="connection lost: Connection reset by peer; retrying in 4.0s (attempt 2)",
                          bytes=61_234, last_line_at=FIXED_NOW - 9, latency_ms=14.0,
                          events=["connection lost: Connection reset by peer; retrying in 4.0s (attempt 2)"])
    source = StaticSource([campaign(2, 94.0, 40, acc=2.4)], name=NAME, status=status)
    app = app_for(source)

    async def run_before(pilot: Any) -> None:
        await settle_source(pilot.app, source, pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


# -- the status line ------------------------------------------------------------------------------


async def test_live_status_line_shows_latency_bytes_and_last_line(in_repo: ClientHome) -> None:
    status = SourceStatus(state=ConnectionState.LIVE, latency_ms=12.4, bytes=1_234_567, last_line_at=FIXED_NOW - 4)
    source = StaticSource([campaign(2, 94.0, 10)], name=NAME, status=status)
    app = app_for(source)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        assert "live · 12 ms · 1.2 MB · last line 4s ago" in header_text(app)
        # A server that stopped logging is visible although the link is fine.
        status.last_line_at = FIXED_NOW - 95
        app.refresh_now()
        assert "live · 12 ms · 1.2 MB · quiet 1m 35s" in header_text(app)


# -- failures: exit at start-up, stay on screen later ---------------------------------------------


async def test_failure_before_live_exits_the_app_with_the_message(in_repo: ClientHome) -> None:
    detail = "unknown host root@gpu-box:22: ... trust it with: ssh-keyscan -t ed25519 gpu-box >> ~/.ssh/known_hosts"
    source = StaticSource([], name=NAME, status=SourceStatus(state=ConnectionState.FAILED, detail=detail))
    app = app_for(source)
    outcome = await run_headless(app, source)
    assert (outcome.code, outcome.message) == (2, detail)


async def test_failure_after_live_stays_on_screen_and_is_repeated_on_exit(in_repo: ClientHome) -> None:
    detail = "WARNING: THE HOST KEY OF ROOT@GPU-BOX:22 HAS CHANGED. ..."
    source = StaticSource([campaign(2, 94.0, 10)], name=NAME,
                          status=SourceStatus(state=ConnectionState.FAILED, detail=detail))
    app = app_for(source)
    seen: list[str] = []

    async def look_then_quit() -> None:
        while not (source.delivered.is_set() and app.is_running):
            await asyncio.sleep(0.02)
        await asyncio.sleep(3 * 0.05)  # several start-up polls: the app must not exit by itself
        assert app.is_running
        app.refresh_now()
        seen.append(header_text(app))
        await app.action_quit()

    quitter = asyncio.ensure_future(look_then_quit())
    outcome = await run_headless(app, source)
    await quitter
    assert "failed: WARNING: THE HOST KEY" in seen[0]
    assert (outcome.code, outcome.message) == (2, f"connection failed: {detail}")


async def test_quit_while_live_exits_0(in_repo: ClientHome) -> None:
    source = StaticSource([campaign(2, 94.0, 10)], name=NAME)
    app = app_for(source)

    async def quit_when_delivered() -> None:
        await source.delivered.wait()
        await app.action_quit()

    quitter = asyncio.ensure_future(quit_when_delivered())
    outcome = await run_headless(app, source)
    await quitter
    assert (outcome.code, outcome.message) == (0, None)


async def test_watch_startup_leaves_a_live_source_alone(in_repo: ClientHome) -> None:
    source = StaticSource([campaign(2, 94.0, 3)], name=NAME)
    app = app_for(source)
    async with app.run_test(size=SIZE) as pilot:
        assert await asyncio.wait_for(watch_startup(app, source, poll=0.01), 30) is None
        await settle_source(app, source, pilot)
        assert app.is_running
