"""LiveCounters' segments on generated scrape histories: the figures never blend two servers or two runs.

A real :class:`~specmon.sources.metrics.MetricsScraper` reads a real HTTP page on
127.0.0.1 (tests/support/metricspage.py) whose vLLM counters follow a generated
history: steps with their own acceptance, restarts (every counter from zero), a
failed scrape (HTTP 501) with the same server back (a blip: the figures go on), the
server gone and back restarted, and new runs in the log. After every scrape the
accept-length figure LiveCounters puts in the snapshot is checked against the
history: its mean is exactly the mean over the steps since the last restart or
new run that lie within the window's seconds up to the newest one (a server
unreadable for longer than the window leaves none of its earlier figures in the mean), or the log's figure
when there are none yet.
"""

from __future__ import annotations

import asyncio
import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.model.session import Session
from specmon.sources.metrics import MetricsScraper
from specmon.ui.counters import LiveCounters, fixed_url
from specmon.ui.views import DashboardSnapshot, EventView, HeaderView, MetricView, PositionsView
from tests.support.metricspage import MetricsPage

WINDOW = 4
LOG_VALUE = 9.0  # what the log says: never a counters figure here

EVENTS = st.lists(st.one_of(st.tuples(st.just("step"), st.integers(0, 3)),  # accepted per draft (x of 3)
                            st.just(("restart", 0)), st.tuples(st.just("gone"), st.integers(1, 6)),
                            st.tuples(st.just("bounce"), st.integers(1, 6)),
                            st.just(("run", 0))),
                  min_size=1, max_size=14)


def _metric(key: str) -> MetricView:
    return MetricView(key, key, "", 2, LOG_VALUE, LOG_VALUE, 1, (LOG_VALUE,))


def _snapshot() -> DashboardSnapshot:
    header = HeaderView("s", "vllm", "", "", None, 0, "serving", "", "ok", "", "", "ok", "", False, 0, 0)
    return DashboardSnapshot(header, _metric("throughput"), _metric("accept_len"), _metric("accept_rate"),
                             PositionsView(None, "", ""), (EventView("", "info", ""),))


class _Run:
    def __init__(self, id: int) -> None:
        self.id = id


class _Session(Session):
    """A session whose current run the test sets (the log's runs are not what is tested here)."""

    run_id = 1

    @property
    def current(self):  # type: ignore[override]
        return _Run(self.run_id)


async def _check(events: list[tuple[str, int]]) -> None:
    page = MetricsPage(None)
    ticks = itertools.count()
    now = -1  # the scraper's clock: one tick a scrape (read once by each scrape)
    counters = LiveCounters(fixed_url(page.url), window=WINDOW,
                            scraper_factory=lambda u: MetricsScraper(u, clock=lambda: float(next(ticks))))
    counters.scraper = scraper = MetricsScraper(page.url, clock=lambda: float(next(ticks)))
    session = _Session()
    gen = drafts = acc = 0
    expected: list[tuple[int, float]] = []  # (time, accept length) of the current segment's steps
    try:
        page.page = "vllm:generation_tokens_total 0\nvllm:spec_decode_num_drafts_total 0\n" \
                    "vllm:spec_decode_num_accepted_tokens_total 0\n"
        await scraper.scrape_once()
        now += 1
        counters.apply(_snapshot(), session)
        for kind, per in events:
            if kind == "step":
                gen, drafts, acc = gen + 100, drafts + 10, acc + 10 * per
                expected.append((now + 1, 1 + per))  # sampled by this step's scrape, below
            elif kind == "restart":
                gen = drafts = acc = 0
                expected = []
            elif kind in ("gone", "bounce"):
                page.page = None
                for _ in range(per):  # unreadable for this many scrapes
                    await scraper.scrape_once()
                    now += 1
                    view = counters.apply(_snapshot(), session).accept_len
                    assert view.source == "log" and view.current == LOG_VALUE, (events, view)
                if kind == "bounce":  # back restarted: every counter from zero
                    gen = drafts = acc = 0
                    expected = []
            else:
                session.run_id += 1
                counters.apply(_snapshot(), session)  # the dashboard sees the new run at its next tick
                expected = []
            page.page = (f"vllm:generation_tokens_total {gen}\nvllm:spec_decode_num_drafts_total {drafts}\n"
                         f"vllm:spec_decode_num_accepted_tokens_total {acc}\n")
            await scraper.scrape_once()
            now += 1
            if kind in ("restart", "run"):
                expected = []  # this scrape is the new segment's base: no sample yet
            view = counters.apply(_snapshot(), session).accept_len
            if expected:
                recent = [a for t, a in expected if t > expected[-1][0] - WINDOW]
                assert view.source == "counters", (events, view)
                assert view.current == expected[-1][1]
                assert abs((view.mean or 0) - sum(recent) / len(recent)) < 1e-9, (events, view, expected)
            else:
                assert view.source == "log" and view.current == LOG_VALUE, (events, view)
    finally:
        await scraper.stop()
        page.close()


@settings(max_examples=25, deadline=None)
@given(EVENTS)
def test_the_figures_are_the_current_segments(events: list[tuple[str, int]]) -> None:
    asyncio.run(_check(events))
