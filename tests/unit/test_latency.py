"""Latency percentiles from the engines' histograms (issue 32, item 3: TTFT and ITL beside tok/s).

The quantile reads a histogram the way Prometheus's ``histogram_quantile`` does: checked on
generated observations (the estimate lies in the bucket where the rank falls, and grows
with q), on the real pages of vLLM 0.32 and SGLang 0.5.23 (``tests/data/metrics``), and
through the dashboard's path: a real scraper reading a real HTTP page whose histograms grow.
"""

from __future__ import annotations

import bisect
import itertools
import math
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from specmon.model.latency import quantile, window_counts
from specmon.model.session import Session
from specmon.sources.metrics import MetricsScraper, parse_snapshot
from specmon.ui.counters import LiveCounters, fixed_url
from specmon.ui.views import DashboardSnapshot, EventView, HeaderView, MetricView, PositionsView
from tests.support.metricspage import MetricsPage

DATA = Path(__file__).resolve().parents[1] / "data" / "metrics"
BOUNDS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)


def _buckets(obs: list[float], bounds: tuple[float, ...] = BOUNDS) -> tuple[tuple[float, float], ...]:
    s = sorted(obs)
    return tuple((b, float(bisect.bisect_right(s, b))) for b in bounds) + ((math.inf, float(len(s))),)


@given(st.lists(st.floats(0.0, 20.0), min_size=1, max_size=300), st.floats(0.0, 1.0), st.floats(0.0, 1.0))
def test_the_estimate_lies_in_the_bucket_of_the_rank_and_grows_with_q(obs: list[float], q1: float, q2: float) -> None:
    b = _buckets(obs)
    lo_q, hi_q = sorted((q1, q2))
    a, c = quantile(lo_q, b), quantile(hi_q, b)
    assert a is not None and c is not None and a <= c + 1e-12
    rank = hi_q * len(obs)
    # The first bucket whose count reaches the rank holds the estimate (the +Inf one: the top bound).
    i = next(i for i, (_, n) in enumerate(b) if n >= rank)
    upper = b[i][0] if not math.isinf(b[i][0]) else BOUNDS[-1]
    lower = b[i - 1][0] if i > 0 else 0.0
    assert lower - 1e-12 <= c <= upper + 1e-12


def test_no_observations_no_estimate_and_windows_never_span_a_reset() -> None:
    assert quantile(0.5, _buckets([])) is None
    old, new = _buckets([0.3, 0.3]), _buckets([0.3, 0.3, 0.03, 0.03, 0.03])
    window = window_counts(old, new)
    assert window is not None and window[-1][1] == 3 and quantile(0.5, window) == quantile(0.5, _buckets([0.03] * 3))
    assert window_counts(new, old) is None  # a count fell: the server restarted
    assert window_counts(_buckets([1.0], (0.5, 1.0)), new) is None  # other bounds


def test_real_pages_give_percentiles_within_their_buckets() -> None:
    for name, prefix in (("vllm_0_32_cpu_ngram.txt", "vllm"), ("sglang_0_5_23_eagle3_k3.txt", "sglang")):
        snap = parse_snapshot((DATA / name).read_text(), 0.0)
        assert set(snap.buckets) == {f"{prefix}:time_to_first_token_seconds", f"{prefix}:inter_token_latency_seconds"}
        for b in snap.buckets.values():
            p50, p99 = quantile(0.5, b), quantile(0.99, b)
            assert p50 is not None and p99 is not None and 0 < p50 <= p99 <= max(x for x, _ in b if x != math.inf)


def _snapshot() -> DashboardSnapshot:
    header = HeaderView("s", "vllm", "", "", None, 0, "serving", "", "ok", "", "", "ok", "", False, 0, 0)
    metric = MetricView("k", "k", "", 2, 1.0, 1.0, 1, (1.0,))
    return DashboardSnapshot(header, metric, metric, metric, PositionsView(None, "", ""), (EventView("", "info", ""),))


def _page(gen: int, ttft: list[float], itl: list[float]) -> str:
    out = [f"vllm:generation_tokens_total {gen}"]
    for name, obs in (("vllm:time_to_first_token_seconds", ttft), ("vllm:inter_token_latency_seconds", itl)):
        for bound, n in _buckets(obs):
            le = "+Inf" if math.isinf(bound) else repr(bound)
            out.append(f'{name}_bucket{{le="{le}",model_name="m"}} {n}')
        out.append(f"{name}_count {len(obs)}")
    return "\n".join(out) + "\n"


async def test_the_header_shows_the_last_minutes_percentiles() -> None:
    clock = itertools.count(0, 5)  # one scrape every 5 s of the scraper's clock
    page = MetricsPage(_page(0, [], []))
    scraper = MetricsScraper(page.url, clock=lambda: float(next(clock)))
    counters = LiveCounters(fixed_url(page.url), window=5)
    counters.scraper = scraper
    session = Session()
    try:
        await scraper.scrape_once()
        assert counters.apply(_snapshot(), session).header.latency == ""  # no observation yet
        # A first minute of slow first tokens, then a minute of fast ones: the figure follows.
        ttft, itl = [], []
        for i in range(30):
            fast = i >= 14
            ttft += [0.03] * 4 if fast else [0.7] * 4
            itl += [0.015] * 50
            page.page = _page(100 * (i + 1), ttft, itl)
            await scraper.scrape_once()
        latency = counters.apply(_snapshot(), session).header.latency
        # The window's TTFT is the fast requests only: all in (0.02, 0.04], p50 interpolated at 0.03.
        assert latency.startswith("TTFT p50 30 ms · p99 40 ms (")
        assert "ITL p50 15 ms" in latency and latency.endswith("last 60 s")
        all_time = quantile(0.99, _buckets(ttft))
        assert all_time is not None and all_time > 0.5  # the slow first minute, left out of the window
    finally:
        await scraper.stop()
        page.close()
