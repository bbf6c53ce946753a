"""The engine's counters live in the dashboard: figures from a fake ``/metrics`` on 127.0.0.1, tagged by source.

The dashboard replays a real vLLM log (the project's CPU kit, 3 n-gram tokens:
accept length about 3.7 in the log) while :class:`~specmon.ui.counters.LiveCounters`
scrapes a real HTTP endpoint (tests/support/metricspage.py) whose counters
advance at every scrape, with figures the log never had (accept length 2.5):
so a panel showing 2.5 shows the counters, and one showing ~3.7 the log. Also:
a counter reset (a restart under the dashboard), a page without speculation
series, a server without metrics (HTTP 501), and a port nobody listens on.
"""

from __future__ import annotations

import statistics
from typing import Any

import pytest

from specmon.sources.metrics import MetricsScraper
from specmon.ui.counters import LiveCounters, fixed_url
from specmon.ui.factories import replay_app
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from tests.support.app_factory import FIXED_NOW, VLLM_KIT, FakeMonotonic, options
from tests.support.metricspage import MetricsPage
from tests.support.net import free_port

LIMIT_S = 30.0


class Engine:
    """vLLM-named counters that advance by one fixed step per scrape (each scrape = 1 s on the fake clock)."""

    def __init__(self, page: MetricsPage, *, per_draft: float = 1.5, spec: bool = True) -> None:
        self.page, self.per_draft, self.spec = page, per_draft, spec
        self.gen = self.drafts = self.dtok = self.acc = 0.0
        self.pos = [0.0, 0.0, 0.0]
        page.on_get = self.step

    def restart(self, per_draft: float) -> None:
        """A new server process: every counter from zero."""
        self.gen = self.drafts = self.dtok = self.acc = 0.0
        self.pos = [0.0, 0.0, 0.0]
        self.per_draft = per_draft

    def step(self) -> None:
        if self.page.page is None:
            return
        self.gen += 100
        self.drafts += 40
        self.dtok += 120
        self.acc += 40 * self.per_draft
        shares = (0.75, 0.5, 0.25) if self.per_draft == 1.5 else (0.5, 0.25, 0.0)
        self.pos = [p + 40 * s for p, s in zip(self.pos, shares, strict=True)]
        lines = ["# TYPE vllm:generation_tokens_total counter",
                 f'vllm:generation_tokens_total{{engine="0",model_name="m"}} {self.gen}']
        if self.spec:
            lines += [f'vllm:spec_decode_num_drafts_total{{engine="0"}} {self.drafts}',
                      f'vllm:spec_decode_num_draft_tokens_total{{engine="0"}} {self.dtok}',
                      f'vllm:spec_decode_num_accepted_tokens_total{{engine="0"}} {self.acc}']
            lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{engine="0",position="{i}"}} {v}'
                      for i, v in enumerate(self.pos)]
        self.page.page = "\n".join(lines) + "\n"


def counters_for(url: str) -> LiveCounters:
    ticks = iter(range(10_000))
    return LiveCounters(fixed_url(url), where="test page", interval_s=0.05, window=5,
                        scraper_factory=lambda u: MetricsScraper(u, clock=lambda: float(next(ticks))))


def app_with(counters: LiveCounters) -> Any:
    return replay_app([VLLM_KIT[1]], speed=None, options=options(warmup=0), clock=lambda: FIXED_NOW,
                      user_themes=None, monotonic=FakeMonotonic(), counters=counters)


def panel(app: Any, name: str) -> MetricPanel:
    return app.query_one(f"#m-{name}", MetricPanel)


def events(app: Any) -> str:
    return "\n".join(e.text for e in app.feeder.session.events)


async def until(pilot: Any, condition: Any, what: str) -> None:
    import time

    deadline = time.monotonic() + LIMIT_S
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"
        await pilot.pause(0.05)


@pytest.mark.usefixtures("isolated_home")
async def test_counters_replace_the_logs_figures_and_say_so() -> None:
    with MetricsPage("") as page:
        Engine(page)
        counters = counters_for(page.url)
        app = app_with(counters)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.feeder.done, "the log replayed")
            await until(pilot, lambda: len(counters.segment(app.feeder.session.current.id)) >= 3
                        and panel(app, "accept-len")._view is not None
                        and panel(app, "accept-len")._view.source.startswith("counters"), "counters shown")
            al, ar, tp = panel(app, "accept-len"), panel(app, "accept-rate"), panel(app, "throughput")
            assert al._view is not None and ar._view is not None and tp._view is not None
            assert al._view.current == pytest.approx(2.5)  # the counters' 1 + 60/40, not the log's ~3.7
            assert al._view.mean == pytest.approx(2.5)
            assert ar._view.current == pytest.approx(0.5)  # 60 accepted of 120 drafted
            assert tp._view.current == pytest.approx(100.0)  # 100 tokens a (fake) second
            for p in (al, ar, tp):
                assert p.border_subtitle.startswith("counters"), p.border_subtitle
            bars = app.query_one(PositionBars)
            assert bars.view is not None and bars.view.values == pytest.approx((0.75, 0.5, 0.25))
            assert bars.border_subtitle == "counters"
            run = app.feeder.session.current
            assert statistics.fmean(run.accept_len) > 3.0  # the log itself said otherwise
            assert "counters: reading vllm /metrics" in events(app)


@pytest.mark.usefixtures("isolated_home")
async def test_a_counter_reset_starts_the_figures_afresh() -> None:
    with MetricsPage("") as page:
        engine = Engine(page)
        counters = counters_for(page.url)
        app = app_with(counters)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.feeder.done and panel(app, "accept-len")._view is not None
                        and panel(app, "accept-len")._view.current == pytest.approx(2.5), "the first server")
            engine.restart(per_draft=0.75)  # the server restarted: counters from zero, other acceptance
            await until(pilot, lambda: counters.scraper is not None and counters.scraper.resets >= 1, "a reset")
            await until(pilot, lambda: len(counters.segment(app.feeder.session.current.id)) >= 2, "new samples")
            await pilot.pause(0.3)
            al = panel(app, "accept-len")._view
            assert al is not None
            # Only the new server's samples: the mean is not a blend of the two servers.
            assert al.current == pytest.approx(1.75) and al.mean == pytest.approx(1.75)
            bars = app.query_one(PositionBars)
            assert bars.view is not None and bars.view.values == pytest.approx((0.5, 0.25, 0.0))
            assert "went down (the server restarted)" in events(app)


@pytest.mark.usefixtures("isolated_home")
async def test_missing_spec_series_leave_acceptance_to_the_log() -> None:
    with MetricsPage("") as page:
        Engine(page, spec=False)
        counters = counters_for(page.url)
        app = app_with(counters)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.feeder.done and panel(app, "throughput")._view is not None
                        and panel(app, "throughput")._view.source.startswith("counters"), "tok/s from counters")
            await pilot.pause(0.2)
            al = panel(app, "accept-len")
            assert al.border_subtitle == "log"
            assert al._view is not None and al._view.current is not None and al._view.current > 3.0  # the log's
            assert app.query_one(PositionBars).border_subtitle == "log"


@pytest.mark.parametrize("case", ["no metrics", "nobody listening"])
@pytest.mark.usefixtures("isolated_home")
async def test_without_metrics_the_log_is_used_and_the_event_log_says_why(case: str) -> None:
    page = MetricsPage(None)  # HTTP 501, like llama-server without --metrics
    url = page.url
    if case == "nobody listening":
        page.close()
        url = f"http://127.0.0.1:{free_port()}/metrics"
    try:
        app = app_with(counters_for(url))
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.feeder.done and "counters unavailable" in events(app), "the reason")
            await pilot.pause(0.2)
            for name in ("throughput", "accept-len", "accept-rate"):
                assert panel(app, name).border_subtitle == "log"
            text = events(app)
            assert "the figures come from the log" in text
            assert ("HTTP 501" in text) if case == "no metrics" else ("cannot read" in text)
            assert text.count("counters unavailable") == 1  # said once, not once a scrape
    finally:
        if case == "no metrics":
            page.close()


def test_the_tags_are_absent_without_a_counters_source() -> None:
    """One source (the log, replay): nothing to tell apart, so no tag (the snapshots stay as they were)."""
    from specmon.ui.views import MetricView, PositionsView

    assert MetricView("throughput", "t", "tok/s", 1, None, None, 0, ()).source == ""
    assert PositionsView(None, "", "").source == ""


@pytest.mark.usefixtures("isolated_home")
async def test_counters_that_come_back_start_a_new_segment() -> None:
    """A server down for a while (no metrics), then back with other figures: no blend of the two."""
    with MetricsPage("") as page:
        engine = Engine(page)
        counters = counters_for(page.url)
        app = app_with(counters)
        async with app.run_test(size=(120, 36)) as pilot:
            await until(pilot, lambda: app.feeder.done and panel(app, "accept-len")._view is not None
                        and panel(app, "accept-len")._view.current == pytest.approx(2.5), "the first server")
            page.page = None
            await until(pilot, lambda: "counters unavailable" in events(app), "the server gone")
            assert panel(app, "accept-len").border_subtitle == "log"
            scraper = counters.scraper
            assert scraper is not None
            gone_at = scraper.scrapes
            # Down for longer than the 5 s window (one scrape is a second on the fake clock).
            await until(pilot, lambda: scraper.scrapes >= gone_at + 6, "a long gap")
            engine.per_draft = 0.75  # back, still counting up from where it was (no reset to see)
            page.page = ""  # the next scrape's step writes the page again
            await until(pilot, lambda: events(app).count("counters: reading") == 2, "the counters back")
            # The first view with a figure of the server back: the window holds nothing older than the gap.
            await until(pilot, lambda: panel(app, "accept-len")._view is not None
                        and panel(app, "accept-len")._view.current == pytest.approx(1.75), "new samples")
            al = panel(app, "accept-len")._view
            assert al is not None and al.mean == pytest.approx(1.75)
            assert len(counters.segment(app.feeder.session.current.id)) > al.window  # the old ones: not in it
            assert panel(app, "accept-len").border_subtitle.startswith("counters")
