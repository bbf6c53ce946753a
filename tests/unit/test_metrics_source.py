"""The counters source: Prometheus text → snapshots → samples; resets, missing series, no metrics.

The scraper is tested against prometheus_client's own exporter on 127.0.0.1
serving real counters named like vLLM's, and against a port with nothing on it.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from specmon.engines import ADAPTERS
from specmon.sources import metrics
from specmon.sources.metrics import (
    MetricsScraper,
    Snapshot,
    difference,
    gauge_sample,
    parse_snapshot,
)

VLLM_TEXT = """\
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1000.0
vllm:generation_tokens_total{engine="1",model_name="m"} 500.0
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 100.0
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 300.0
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 210.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 90.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 70.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 50.0
vllm:spec_decode_num_accepted_tokens_per_pos_created{engine="0",model_name="m",position="2"} 1.7e9
"""


def test_vllm_text_is_read_and_summed_over_label_sets() -> None:
    snap = parse_snapshot(VLLM_TEXT, 10.0)
    assert snap.engine == "vllm"
    assert snap.get("vllm:generation_tokens_total") == 1500.0  # two engines add up
    assert snap.per_pos == (90.0, 70.0, 50.0)


def _snap(t: float, gen: float, drafts: float, dtok: float, acc: float, pos: tuple[float, ...]) -> Snapshot:
    return Snapshot(t, {"vllm:generation_tokens_total": gen, "vllm:spec_decode_num_drafts_total": drafts,
                        "vllm:spec_decode_num_draft_tokens_total": dtok,
                        "vllm:spec_decode_num_accepted_tokens_total": acc}, pos)


def test_difference_uses_vllms_own_definitions() -> None:
    a = _snap(0.0, 1000, 100, 300, 210, (90, 70, 50))
    b = _snap(2.0, 1400, 200, 600, 400, (180, 130, 90))
    s = difference(a, b)
    assert s is not None
    assert s.throughput == pytest.approx(200.0)  # 400 tokens in 2 s
    assert s.accept_len == pytest.approx(1 + 190 / 100)  # 1 + accepted/drafts, as vLLM logs it
    assert s.accept_rate == pytest.approx(190 / 300)
    assert s.per_position == pytest.approx((0.9, 0.6, 0.4))


def test_idle_interval_and_restart_give_no_sample() -> None:
    a = _snap(0.0, 1000, 100, 300, 210, (90, 70, 50))
    assert difference(a, _snap(1.0, 1000, 100, 300, 210, (90, 70, 50))) is None  # nothing generated
    assert difference(a, _snap(1.0, 40, 5, 15, 9, (4, 3, 2))) is None  # counters went down: a restart


def test_a_server_without_speculation_gives_speed_only() -> None:
    a = Snapshot(0.0, {"vllm:generation_tokens_total": 10.0})
    b = Snapshot(1.0, {"vllm:generation_tokens_total": 110.0})
    s = difference(a, b)
    assert s is not None and s.throughput == 100.0 and s.accept_len is None and s.per_position is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 500), st.integers(0, 50), st.booleans()), min_size=2, max_size=40))
def test_samples_never_span_a_reset_and_count_every_token_otherwise(steps: list[tuple[int, int, bool]]) -> None:
    """Generated series of increments with restarts: the samples add up to exactly the tokens of
    intervals that did not contain a restart, and every acceptance figure stays in range."""
    gen = drafts = acc = 0.0
    snaps = [_snap(0.0, 0, 0, 0, 0, (0.0,))]
    expected = 0.0
    for i, (tokens, d, restart) in enumerate(steps, 1):
        if restart:
            gen = drafts = acc = 0.0  # the new process starts from zero...
            tokens = 0  # ...and has generated nothing yet
        d = min(d, tokens)
        gen += tokens
        drafts += d
        acc += d // 2
        snaps.append(_snap(float(i), gen, drafts, drafts, acc, (acc,)))
        if not restart:
            expected += tokens
    got = 0.0
    for a, b in zip(snaps, snaps[1:], strict=False):
        s = difference(a, b)
        if s is not None:
            assert s.tokens is not None and s.tokens > 0
            got += s.tokens
            if s.accept_len is not None:
                assert 1.0 <= s.accept_len <= 2.0 and s.accept_rate is not None and 0 <= s.accept_rate <= 1
    # A restart interval where the old total was 0 is indistinguishable from growth: only count drops.
    assert got <= expected + sum(t for t, _, r in steps if r)
    assert got >= 0


def test_sglang_gauges_give_one_sample_per_change() -> None:
    text = 'sglang:gen_throughput{model_name="m"} 88.5\nsglang:spec_accept_length{model_name="m"} 2.4\n'
    a = parse_snapshot(text, 1.0)
    assert a.engine == "sglang"
    s = gauge_sample(None, a)
    assert s is not None and s.throughput == 88.5 and s.accept_len == 2.4
    assert gauge_sample(a, parse_snapshot(text, 2.0)) is None  # read twice: still one measurement
    b = parse_snapshot(text.replace("88.5", "90.0"), 3.0)
    assert gauge_sample(a, b) is not None


@pytest.fixture
def exporter() -> Iterator[tuple[str, CollectorRegistry, Counter, Counter]]:
    """prometheus_client's own HTTP exporter on 127.0.0.1 with counters named like vLLM's."""
    reg = CollectorRegistry()
    gen = Counter("vllm:generation_tokens", "tokens", ["engine"], registry=reg)
    drafts = Counter("vllm:spec_decode_num_drafts", "drafts", ["engine"], registry=reg)
    Gauge("vllm:num_requests_running", "running", registry=reg)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
    try:
        yield f"http://127.0.0.1:{port}/metrics", reg, gen, drafts
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_scraper_turns_real_counters_into_samples(exporter: tuple[str, CollectorRegistry, Counter, Counter]
                                                        ) -> None:
    url, _, gen, _ = exporter
    ticks = iter([0.0, 1.0, 2.0, 3.0])
    scraper = MetricsScraper(url, clock=lambda: next(ticks))
    try:
        gen.labels("0").inc(100)
        assert await scraper.scrape_once() is None  # the first scrape is only a base
        assert scraper.available and scraper.engine == "vllm"
        gen.labels("0").inc(250)
        s = await scraper.scrape_once()
        assert s is not None and s.throughput == 250.0 and s.accept_len is None
        assert await scraper.scrape_once() is None  # idle second
        assert len(scraper.samples) == 1
    finally:
        await scraper.stop()


async def test_background_scraping_and_a_missing_server() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    scraper = MetricsScraper(f"http://127.0.0.1:{port}/metrics", interval_s=0.05)
    scraper.start()
    try:
        # (False after three failed scrapes; the bound only stops a hang: a loaded machine's first
        # connection attempt took longer than 0.3 s, and the look came before any scrape had failed)
        assert not await scraper.wait_available(30.0)
        assert scraper.problem is not None and "cannot read" in scraper.problem
        assert scraper.label.startswith("no counters:")
    finally:
        await scraper.stop()


async def test_a_page_without_engine_series_is_no_counters(exporter: tuple[str, CollectorRegistry, Counter, Counter]
                                                           ) -> None:
    url, _, _, _ = exporter  # no labelled counter used yet: only a gauge specmon does not read
    scraper = MetricsScraper(url)
    try:
        assert await scraper.scrape_once() is None
        problem = scraper.problem or ""
        assert not scraper.available and " has no " in problem and " series " in problem
        assert all(a.label in problem for a in ADAPTERS if a.metric_prefix)  # every engine it reads, named
    finally:
        await scraper.stop()


def test_vllms_own_per_request_decode_speed_from_its_histograms() -> None:
    from specmon.sources.metrics import decode_speed

    def page(tokens: float, requests: float, seconds: float) -> str:
        return ("# TYPE vllm:request_generation_tokens histogram\n"
                f'vllm:request_generation_tokens_bucket{{engine="0",le="+Inf"}} {requests}\n'
                f'vllm:request_generation_tokens_count{{engine="0"}} {requests}\n'
                f'vllm:request_generation_tokens_sum{{engine="0"}} {tokens}\n'
                "# TYPE vllm:request_decode_time_seconds histogram\n"
                f'vllm:request_decode_time_seconds_bucket{{engine="0",le="+Inf"}} {requests}\n'
                f'vllm:request_decode_time_seconds_count{{engine="0"}} {requests}\n'
                f'vllm:request_decode_time_seconds_sum{{engine="0"}} {seconds}\n'
                f'vllm:generation_tokens_total{{engine="0"}} {tokens}\n')

    a, b = parse_snapshot(page(1000, 2, 4.0), 0.0), parse_snapshot(page(2026, 4, 8.0), 9.0)
    # Two requests of 513 tokens in 4 s of decode: the first token of each is the prefill's.
    assert decode_speed(a, b) == pytest.approx((1026 - 2) / 4.0)
    assert decode_speed(a, a) is None  # no request finished
    assert decode_speed(Snapshot(0.0, {"vllm:generation_tokens_total": 1.0}),
                        Snapshot(1.0, {"vllm:generation_tokens_total": 9.0})) is None  # no histograms


# -- SGLang 0.5.23, real page (tests/data/metrics/sglang_0_5_23_eagle3_k3.txt) ------------------

_SGL_PAGE = Path(__file__).resolve().parents[1] / "data" / "metrics" / "sglang_0_5_23_eagle3_k3.txt"
_SGL_LOG = Path(__file__).resolve().parents[1] / "data" / "real_logs" / "sglang_cpu_kit" / "eagle3_k3.log"


def test_real_sglang_page_gauges_are_the_last_decode_line() -> None:
    """The gauges hold the figures of the log's last decode line (the same run: 60 requests)."""
    from specmon.parsing import parse_lines
    from specmon.records import Decode

    snap = parse_snapshot(_SGL_PAGE.read_text(), 1.0)
    assert snap.engine == "sglang"
    last = [r for r in parse_lines(_SGL_LOG.read_text().split("\n"), year=2026) if isinstance(r, Decode)][-1]
    assert round(snap.get(metrics.SGL_ACCEPT_LEN) or 0, 2) == last.accept_len == 2.0
    assert round(snap.get(metrics.SGL_ACCEPT_RATE) or 0, 2) == last.accept_rate == 0.33
    assert snap.sglang_setting == (3, 4)
    assert snap.get(metrics.SGL_REQUESTS) == 60


def test_real_sglang_counters_give_the_pooled_accept_length() -> None:
    """From a server's start (zero counters) to the page: 4824 tokens over 2613 verify passes."""
    cur = parse_snapshot(_SGL_PAGE.read_text(), 10.0)
    zero = Snapshot(0.0, {metrics.SGL_GEN: 0.0, metrics.SGL_VERIFY: 0.0, metrics.SGL_REQUESTS: 0.0})
    got = metrics.sglang_accept_length(zero, cur)
    assert got is not None
    al, tokens, verifies = got
    assert (tokens, verifies) == (4824.0, 2613.0)
    assert abs(al - 4824 / 2613) < 1e-12
    # The log's decode lines over the same run: mean accept len 1.84; the counters' figure counts the
    # prefill's token of each request too (60 of 4824), within 1/verifies-per-request of it.
    assert abs(al - 1.84) < 0.03
    # A restart (counters down) gives nothing, and a page without spec counters gives nothing.
    assert metrics.sglang_accept_length(cur, zero) is None
    assert metrics.sglang_accept_length(zero, Snapshot(1.0, {metrics.SGL_GEN: 5.0})) is None


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 500), st.integers(1, 200)), min_size=1, max_size=20),
       st.integers(0, 10**6), st.integers(0, 10**6))
def test_sglang_counter_differences_pool_finished_requests(reqs: list[tuple[int, int]], t0: int, v0: int) -> None:
    """Requests finishing between two scrapes: Δtokens/Δverify is their verify-weighted mean accept length."""
    tokens = sum(t for t, _ in reqs)
    verifies = sum(v for _, v in reqs)
    a = Snapshot(0.0, {metrics.SGL_GEN: float(t0), metrics.SGL_VERIFY: float(v0)})
    b = Snapshot(1.0, {metrics.SGL_GEN: float(t0 + tokens), metrics.SGL_VERIFY: float(v0 + verifies)})
    got = metrics.sglang_accept_length(a, b)
    assert got is not None
    weighted = sum((t / v) * v for t, v in reqs) / verifies  # each request's own figure, weighted by passes
    assert abs(got[0] - weighted) < 1e-9
