"""The engine's own controller, watched (issue 32, item 2): the setting now, switches, flip-flop.

The tracker on generated histories (each checked against a count made here), and the
whole path on a real HTTP page: a real :class:`~specmon.sources.metrics.MetricsScraper`
reads SGLang's gauges from 127.0.0.1 (``tests/support/metricspage.py``) while the page
moves between tiers, and the dashboard's header and event log say what it sees.
"""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.model.adaptive import FLIP_MIN_REVERSALS, FLIP_MIN_SWITCHES, WINDOW_S, SettingTracker
from specmon.model.session import Session
from specmon.sources.metrics import MetricsScraper
from specmon.ui.counters import LiveCounters, fixed_url
from specmon.ui.views import DashboardSnapshot, EventView, HeaderView, MetricView, PositionsView
from tests.support.metricspage import MetricsPage

TIERS = st.sampled_from([(1, 2), (3, 4), (5, 6), (7, 8)])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0.2, 30.0), TIERS), min_size=1, max_size=80))
def test_switches_shares_and_flip_flop_match_a_count_made_here(history: list[tuple[float, tuple[int, int]]]) -> None:
    tracker = SettingTracker()
    t = 0.0
    seen: list[tuple[float, tuple[int, int]]] = []
    for gap, tier in history:
        t += gap
        tracker.observe(t, tier)
        seen.append((t, tier))
    # Switches in the last window, counted here from the raw history.
    moves = [(b[0], a[1], b[1]) for a, b in itertools.pairwise(seen) if a[1] != b[1]]
    recent = [m for m in moves if m[0] > t - WINDOW_S]
    view = tracker.view()
    if len({tier for _, tier in seen}) < 2:
        assert view is None  # a fixed setting says nothing
        return
    assert view is not None and view.now == seen[-1][1]
    first = seen[0][0]
    assert abs(view.switches_per_min - len(recent) * 60 / min(WINDOW_S, max(t - first, 1.0))) < 1e-9
    reversals = sum(1 for a, b in itertools.pairwise(recent) if b[2] == a[1])
    assert view.flip_flop == (len(recent) >= FLIP_MIN_SWITCHES and reversals >= FLIP_MIN_REVERSALS)
    if view.shares:
        assert abs(sum(p for _, p in view.shares) - 1.0) < 1e-9
        assert view.shares == tuple(sorted(view.shares, key=lambda x: -x[1]))


@given(st.integers(2, 6), st.floats(0.5, 5.0))
def test_alternating_tiers_flip_flop_and_a_staircase_does_not(period: int, step: float) -> None:
    flip = SettingTracker()
    for i in range(int(WINDOW_S / step)):
        flip.observe(i * step, (3, 4) if (i // period) % 2 == 0 else (5, 6))
    view = flip.view()
    assert view is not None
    assert view.flip_flop == (len(flip.switches) >= FLIP_MIN_SWITCHES)
    stairs = SettingTracker()
    for i in range(8):  # load rising: the controller moves up once per tier, never back
        stairs.observe(i * 10.0, (i + 1, i + 2))
    stairs_view = stairs.view()
    assert stairs_view is not None and not stairs_view.flip_flop


def _snapshot() -> DashboardSnapshot:
    header = HeaderView("s", "sglang", "", "", None, 0, "serving", "", "ok", "", "", "ok", "", False, 0, 0)
    metric = MetricView("k", "k", "", 2, 1.0, 1.0, 1, (1.0,))
    return DashboardSnapshot(header, metric, metric, metric, PositionsView(None, "", ""), (EventView("", "info", ""),))


def _page(steps: int, tps: float) -> str:
    return (f"sglang:gen_throughput {tps}\nsglang:spec_accept_length 2.5\nsglang:spec_accept_rate 0.5\n"
            f"sglang:spec_num_steps {steps}\nsglang:spec_num_draft_tokens {steps + 1}\n")


async def test_the_dashboard_says_what_the_controller_does() -> None:
    page = MetricsPage(_page(3, 100.0))
    ticks = itertools.count()
    scraper = MetricsScraper(page.url, clock=lambda: float(next(ticks)))
    counters = LiveCounters(fixed_url(page.url), window=5)
    counters.scraper = scraper
    session = Session()
    try:
        await scraper.scrape_once()
        assert counters.apply(_snapshot(), session).header.controller == ""  # one setting: a fixed one
        # A steady move up: said, not a flip-flop.
        page.page = _page(5, 101.0)
        await scraper.scrape_once()
        header = counters.apply(_snapshot(), session).header
        assert header.controller.startswith("adaptive: 5 steps now") and "flip-flop" not in header.controller
        assert header.controller_level == "info"
        # Back and forth every scrape: flip-flop, in the header and once in the event log.
        for i in range(10):
            page.page = _page(3 if i % 2 == 0 else 5, 102.0 + i)
            await scraper.scrape_once()
            header = counters.apply(_snapshot(), session).header
        assert "⚠ flip-flop" in header.controller and header.controller_level == "warning"
        flips = [e for e in session.events if "flip-flopping" in e.text]
        assert len(flips) == 1 and flips[0].level == "warning"
        assert "3 steps" in flips[0].text and "5 steps" in flips[0].text  # where the minute went
        # Settled on one tier for a minute: said once more, and the header is calm again.
        for _ in range(70):
            page.page = _page(5, 200.0 + next(ticks) % 7)
            await scraper.scrape_once()
            header = counters.apply(_snapshot(), session).header
        assert "flip-flop" not in header.controller and header.controller.startswith("adaptive: 5 steps now")
        assert [e.level for e in session.events if "controller settled" in e.text] == ["info"]
    finally:
        await scraper.stop()
        page.close()
