"""``connect``'s counters: the engine's /metrics read through an SSH local port forward (in-process asyncssh).

The metrics page is a real HTTP endpoint on 127.0.0.1 (tests/support/metricspage.py);
the scrape reaches it only through the SSH server's forward, which the server records.
"""

from __future__ import annotations

import asyncio
import contextlib
import time

from specmon.cli import build_parser
from specmon.commands.remote import plan_connect, remote_counters
from specmon.ui.counters import LiveCounters
from tests.support.metricspage import MetricsPage
from tests.support.net import free_port
from tests.support.sshd import AsyncSSHServer

LIMIT_S = 30.0


def _plan(ssh_port: int, *extra: str):  # type: ignore[no-untyped-def]
    args = build_parser().parse_args(["connect", f"127.0.0.1:{ssh_port}", "--log", "/tmp/none.log", "--no-record",
                                      *extra])
    return plan_connect(args)


async def _until(condition, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await asyncio.sleep(0.05)


async def _running(counters: LiveCounters):  # type: ignore[no-untyped-def]
    return asyncio.ensure_future(counters.run())


async def _stop(counters: LiveCounters, task: asyncio.Task[None]) -> None:
    await counters.close()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


async def test_counters_are_read_through_the_forward(asyncssh_server: AsyncSSHServer) -> None:
    with MetricsPage("") as page:
        gen = [0.0]

        def step() -> None:
            gen[0] += 50
            page.page = f"vllm:generation_tokens_total {gen[0]}\n"

        page.on_get = step
        plan = _plan(asyncssh_server.port, "--metrics", page.url)
        assert plan.metrics == page.url
        counters = remote_counters(plan, interval_s=0.05)
        assert counters is not None
        task = await _running(counters)
        try:
            await _until(lambda: counters.available and counters.scraper is not None
                         and len(counters.scraper.samples) >= 2, "two samples through the forward")
            assert counters.scraper is not None
            assert not counters.scraper.url.endswith(f":{page.port}/metrics")  # a forwarded local port
            assert ("127.0.0.1", page.port) in asyncssh_server.forwards  # it went through the SSH server
            assert counters.scraper.engine == "vllm"
        finally:
            await _stop(counters, task)


async def test_the_default_is_the_launch_port_and_no_metrics_turns_it_off(asyncssh_server: AsyncSSHServer) -> None:
    assert _plan(asyncssh_server.port).metrics is None  # no profile, no port: nothing to guess
    plan = _plan(asyncssh_server.port, "--no-metrics")
    assert plan.metrics is None and remote_counters(plan) is None


async def test_an_unreachable_host_is_a_reason_not_a_crash(asyncssh_server: AsyncSSHServer) -> None:
    plan = _plan(free_port(), "--metrics", "http://127.0.0.1:9/metrics")  # nobody listens for SSH there
    counters = remote_counters(plan, interval_s=0.05)
    assert counters is not None
    task = await _running(counters)
    try:
        await _until(lambda: counters.problem is not None, "the reason")
        assert "cannot reach the engine's /metrics" in counters.reason()
        assert "through an SSH port forward" in counters.reason()
        assert not counters.available
    finally:
        await _stop(counters, task)
