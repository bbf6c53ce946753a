"""The engine's counters live in the dashboard: ``/metrics`` scraped beside the log tail.

A :class:`LiveCounters` owns a :class:`~specmon.sources.metrics.MetricsScraper`
(about one scrape a second) and, on every live tick, replaces the log's figures
in the snapshot with the counters' where it has them: tok/s, accept length,
acceptance rate (current = the newest sample, mean = the samples of the ``window``
seconds up to it on the scraper's clock, sparkline = the segment) and per-position acceptance (pooled over the
segment's last hour, weighted by drafts). Each figure is tagged with its source
(``counters`` or ``log``): the tag is the panel's border subtitle. The
comparison with the baseline stays the run table's, which is built from the log:
a panel whose numbers come from the counters and whose delta comes from the log
says ``counters · Δ log``.

*Segments*: counters are cumulative over a server's life, and the dashboard
shows the current run. A new segment (the figures start afresh) begins when the
session's current run changes (the log shows a restart or a new
configuration), when a counter goes down (the server restarted under us, also
while the counters were unreadable: the first good scrape is compared with the
last one before the gap), and when the forward is opened again after
``REOPEN_AFTER`` failed scrapes. A failed scrape alone (a timeout on a busy host)
does not start one: the figures of the same server and run go on.

*No metrics*: when ``/metrics`` cannot be read (no port forward, HTTP 404/501, no
known series, a server without speculation for the acceptance figures) the
panels keep the log's figures, tagged ``log``, and the event log says why.

The URL may only exist once something is open (an SSH local port forward opened
inside the running app): :class:`~specmon.sources.metrics_feed.MetricsFeed` keeps
it scraped, entered by :meth:`LiveCounters.run` (the app's worker) and left when
the app closes. Nothing here imports Textual.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import TYPE_CHECKING

from specmon.model.latency import quantile, window_counts
from specmon.model.run import SessionEvent
from specmon.sources.metrics import CounterSample, MetricsScraper
from specmon.sources.metrics_feed import MetricsFeed, fixed_url

if TYPE_CHECKING:
    from specmon.model.session import Session
    from specmon.ui.views import DashboardSnapshot, MetricView, PositionsView

__all__ = ["LiveCounters", "fixed_url"]

#: Sparkline points.
SPARK_POINTS = 120
#: Most recent samples of a segment the figures use (an hour at one a second): a tick stays cheap.
MAX_SEGMENT = 3600
#: Seconds the latency percentiles cover (up to the newest scrape).
LATENCY_WINDOW_S = 60.0
#: Tags.
COUNTERS, LOG = "counters", "log"


def _seconds(x: float) -> str:
    return f"{x * 1000:.0f} ms" if x < 1.0 else f"{x:.2f} s"


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


class LiveCounters(MetricsFeed):
    """Scrapes the engine's ``/metrics`` for the dashboard and puts the counters' figures in its snapshots.

    Args:
        opener: Yields the URL to scrape while it is entered (see the module docstring).
        where: What the URL reaches, for the event log (``127.0.0.1:8000 on gpu-box, through SSH``).
        interval_s: Seconds between scrapes.
        window: Seconds behind the rolling means, on the scraper's clock: a window of seconds, not of
            samples, so that after a stretch of failed scrapes the mean is not made of figures
            from before it (a server unreadable for minutes, then back with other figures).
        scraper_factory: Builds the scraper for a URL (tests inject a clock).
    """

    def __init__(self, opener: Callable[[], AbstractAsyncContextManager[str]], *, where: str = "",
                 interval_s: float = 1.0, window: int = 20,
                 scraper_factory: Callable[[str], MetricsScraper] | None = None) -> None:
        super().__init__(opener, where=where, interval_s=interval_s, scraper_factory=scraper_factory)
        self.window = max(1, window)
        self._start = 0  # first sample of the current segment
        self._run_id: int | None = None
        self._resets = 0
        self._said: str | None = None  # the last state the event log was told
        self._flipping = False  # the event log was told the controller flip-flops

    def _opened(self, scraper: MetricsScraper) -> None:
        self._start = len(scraper.samples)

    def segment(self, run_id: int | None) -> list[CounterSample]:
        """The samples of the current segment (see the module docstring), starting a new one when due."""
        scraper = self.scraper
        if scraper is None:
            return []
        samples = scraper.samples
        if run_id != self._run_id or scraper.resets != self._resets:
            self._run_id, self._resets = run_id, scraper.resets
            self._start = len(samples)
        self._start = min(self._start, len(samples))  # the scraper trims its oldest samples
        return samples[max(self._start, len(samples) - MAX_SEGMENT):]

    # -- the snapshot ----------------------------------------------------------------------------

    def apply(self, snap: DashboardSnapshot, session: Session) -> DashboardSnapshot:
        """The snapshot with the counters' figures where they exist, every figure tagged with its source."""
        run = session.current
        samples = self.segment(run.id if run is not None else None)
        self._tell(session)
        header = snap.header
        controller = self.scraper.controller.view() if self.scraper is not None and self.available else None
        if controller is not None:
            header = dataclasses.replace(header, controller=controller.short(),
                                         controller_level="warning" if controller.flip_flop else "info")
            if controller.flip_flop != self._flipping:
                self._flipping = controller.flip_flop
                session.events.append(SessionEvent(0, None, "warning" if controller.flip_flop else "info", (
                    f"the engine's controller is flip-flopping: {controller.text()}; a tier switch costs "
                    "each time and no tier stays warm (a fixed setting may serve better)"
                    if controller.flip_flop else f"the engine's controller settled: {controller.text()}")))
        latency = self._latency()
        if latency:
            header = dataclasses.replace(header, latency=latency)
        return dataclasses.replace(
            snap,
            header=header,
            throughput=self._metric(snap.throughput, [(s.t, s.throughput) for s in samples]),
            accept_len=self._metric(snap.accept_len, [(s.t, s.accept_len) for s in samples]),
            accept_rate=self._metric(snap.accept_rate, [(s.t, s.accept_rate) for s in samples]),
            positions=self._positions(snap.positions, samples),
        )

    def _latency(self) -> str:
        """``TTFT p50 210 ms · p99 800 ms (42) · ITL p50 31 ms · p99 44 ms (4,210) · last 60 s``, or ""."""
        scraper = self.scraper
        if scraper is None or not self.available or not scraper.latency:
            return ""
        t_new, newest = scraper.latency[-1]
        # The scrape a window before the newest (or the first one kept, while younger than that).
        older = next((h for t, h in reversed(scraper.latency) if t <= t_new - LATENCY_WINDOW_S),
                     scraper.latency[0][1])
        span = t_new - next((t for t, h in scraper.latency if h is older), t_new)
        parts = []
        for name in sorted(newest, key=lambda n: "inter_token" in n):  # time to first token first
            what = "ITL" if "inter_token" in name else "TTFT"
            window = window_counts(older.get(name), newest[name])
            if window is None:  # a restart inside the window: what the new server did since it began
                window = newest[name]
            n = window[-1][1] if window else 0
            p50, p99 = quantile(0.5, window), quantile(0.99, window)
            if p50 is None or p99 is None or n < 1:
                continue
            parts.append(f"{what} p50 {_seconds(p50)} · p99 {_seconds(p99)} ({n:,.0f})")
        if not parts:
            return ""
        return " · ".join(parts) + f" · last {span:.0f} s" if span >= 1 else " · ".join(parts)

    def _metric(self, view: MetricView, timed: list[tuple[float, float | None]]) -> MetricView:
        """``timed``: (time, value) of each sample of the segment; the mean takes the values of the
        ``window`` seconds up to the newest one."""
        values = [v for _, v in timed if v is not None]
        if not values or not self.available:
            return dataclasses.replace(view, source=LOG)
        since = next(t for t, v in reversed(timed) if v is not None) - self.window
        recent = [v for t, v in timed if v is not None and t > since]
        has_delta = view.baseline is not None or view.delta is not None
        return dataclasses.replace(view, current=values[-1], mean=_mean(recent), window=len(recent),
                                   series=tuple(values[-SPARK_POINTS:]), note="",
                                   source=f"{COUNTERS} · Δ {LOG}" if has_delta else COUNTERS)

    def _positions(self, view: PositionsView, samples: list[CounterSample]) -> PositionsView:
        rows = [(s.per_position, s.drafts) for s in samples if s.per_position and s.drafts > 0]
        if not rows or not self.available:
            return dataclasses.replace(view, source=LOG)
        n = len(rows[-1][0])
        rows = [(p, d) for p, d in rows if len(p) == n]
        drafts = sum(d for _, d in rows)
        pooled = tuple(round(sum(p[i] * d for p, d in rows) / drafts, 4) for i in range(n))
        return dataclasses.replace(view, values=pooled, note="", source=COUNTERS)

    def _tell(self, session: Session) -> None:
        """One event-log line each time the counters come, go, or reset."""
        scraper = self.scraper
        if self.available and scraper is not None:
            state = f"ok {scraper.resets}"
            if state != self._said:
                reset = self._said is not None and self._said.startswith("ok")
                text = ("counters: the engine's counters went down (the server restarted): counting again"
                        if reset else
                        f"counters: reading {scraper.engine} /metrics every {self.interval_s:g} s"
                        f"{self._where()}; tok/s, accept length, accept rate and per-position acceptance "
                        "come from them (tagged 'counters'), the comparison with the baseline from the log")
                session.events.append(SessionEvent(0, None, "info", text))
        else:
            why = self.reason()
            # One line per kind of failure: "cannot read URL (ConnectError...)" and "(ReadError...)"
            # alternate while a server restarts, and are the same news.
            state = "no " + why.split(" (", 1)[0]
            if why == "not read yet" or state == self._said:
                return
            session.events.append(SessionEvent(0, None, "warning",
                                               f"counters unavailable: {why}; the figures come from the log"))
        self._said = state
