"""What a Prometheus answer may do to specmon (issue 43, item 7): bounded memory, numbers in range.

A 200 MB answer from a Prometheus server lifted memory to 349 MB, and absurd counter values were
shown as they came (accept rate 123.50). Each answer is now read as it streams in, up to a cap
said in the error, and a value out of its series' range is refused where the text becomes
numbers: left out, counted, never shown. The servers here are real HTTP servers on 127.0.0.1
(``prometheus_client``'s own exporter where the value fits its API; a plain one streaming a
200 MB body otherwise).
"""

from __future__ import annotations

import asyncio
import json
import math
import socket
import threading
import tracemalloc
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, start_http_server

from specmon.records import Engine
from specmon.sources import metrics, prometheus_fleet
from specmon.sources.metrics import MetricsScraper, Snapshot, difference, parse_snapshot
from specmon.sources.prometheus_fleet import PrometheusFleetSource
from specmon.sources.promql import parse_selector

HUGE = 200 << 20
#: One line of valid Prometheus text, repeated with its label changed until HUGE bytes are sent.
LINE = 'vllm:generation_tokens_total{engine="%09d",model_name="m"} 1000.0\n'


class _Huge(ThreadingHTTPServer):
    daemon_threads = True
    #: Bytes written so far (the server stops when the client stops reading).
    sent = 0


def _serve(body: Callable[[], Iterator[bytes]], *, declared: int | None, content_type: str) -> tuple[_Huge, str]:
    """A real HTTP server on 127.0.0.1 answering every request with a ``body()`` (made as it is sent)."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", content_type)
            if declared is not None:
                self.send_header("Content-Length", str(declared))
            self.end_headers()
            try:
                for chunk in body():
                    self.wfile.write(chunk)
                    server.sent += len(chunk)
            except OSError:  # the client stopped reading: what the cap does
                pass

        do_GET = do_POST = _answer

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = _Huge(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, name="huge", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _metrics_text(total: int) -> Iterator[bytes]:
    sent = i = 0
    while sent < total:
        chunk = "".join(LINE % (i + k) for k in range(1000)).encode()
        i += 1000
        sent += len(chunk)
        yield chunk


@pytest.mark.parametrize("declared", [None, HUGE], ids=["chunked", "content-length"])
def test_a_200_mb_metrics_answer_is_refused_with_memory_bounded(declared: int | None) -> None:
    server, url = _serve(lambda: _metrics_text(HUGE), declared=declared, content_type="text/plain; version=0.0.4")
    try:
        scraper = MetricsScraper(url + "/metrics", timeout_s=30)

        async def scrape() -> object:
            try:
                return await scraper.scrape_once()
            finally:
                await scraper.stop()

        tracemalloc.start()
        try:
            sample = asyncio.run(scrape())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert sample is None and not scraper.available
        cap = f"{metrics.MAX_SCRAPE_BYTES >> 20} MB"
        assert scraper.problem is not None and cap in scraper.problem and "more than" in scraper.problem
        assert peak < 3 * metrics.MAX_SCRAPE_BYTES, f"{peak / 2**20:.0f} MB allocated at the peak"
        assert server.sent < HUGE // 4  # (it stopped reading; the server noticed)
    finally:
        server.shutdown()
        server.server_close()


def _prom_answer(total: int) -> Iterator[bytes]:
    """A Prometheus API vector answer of ``total`` bytes, streamed."""
    yield b'{"status":"success","data":{"resultType":"vector","result":['
    sent, i = 0, 0
    while sent < total:
        chunk = ",".join(json.dumps({"metric": {"instance": f"h{i + k}:8000"}, "value": [1.0, "5"]})
                         for k in range(1000)).encode()
        yield (b"," if i else b"") + chunk
        sent += len(chunk)
        i += 1000
    yield b"]}}"


@pytest.mark.parametrize("declared", [None, HUGE], ids=["chunked", "content-length"])
def test_a_200_mb_prometheus_answer_is_refused_with_memory_bounded(declared: int | None,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    # (a smaller cap: every query of a poll reads up to it at once, and tracemalloc makes each
    # allocation slow; the bound is on the cap, whatever it is)
    monkeypatch.setattr(prometheus_fleet, "MAX_ANSWER_BYTES", 1 << 20)
    server, url = _serve(lambda: _prom_answer(HUGE), declared=declared, content_type="application/json")
    try:
        source = PrometheusFleetSource(url, parse_selector('{job="x"}'), engine=Engine.VLLM, timeout_s=30)

        async def poll() -> prometheus_fleet.Poll:
            try:
                return await source.poll()
            finally:
                await source.close()

        tracemalloc.start()
        try:
            result = asyncio.run(poll())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        cap = f"{prometheus_fleet.MAX_ANSWER_BYTES >> 20} MB"
        assert result.problem is not None and cap in result.problem and not result.instances
        # (every query of the poll reads up to the cap at once)
        assert peak < (len(source.queries) + 2) * prometheus_fleet.MAX_ANSWER_BYTES, f"{peak / 2**20:.0f} MB"
    finally:
        server.shutdown()
        server.server_close()


# --------------------------------------------------------------------------- values in range

SGLANG = """\
# TYPE sglang:gen_throughput gauge
sglang:gen_throughput{{tp_rank="0"}} {tps}
# TYPE sglang:spec_accept_length gauge
sglang:spec_accept_length{{tp_rank="0"}} {alen}
# TYPE sglang:spec_accept_rate gauge
sglang:spec_accept_rate{{tp_rank="0"}} {rate}
"""

values = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([123.5, -1.0, 0.0, 1.0, 0.5]))


@settings(max_examples=200, deadline=None)
@given(tps=values, alen=values, rate=values)
def test_a_gauge_out_of_its_range_is_refused_and_counted(tps: float, alen: float, rate: float) -> None:
    snap = parse_snapshot(SGLANG.format(tps=repr(tps), alen=repr(alen), rate=repr(rate)), 1.0)
    refused = 0
    for name, value in (("sglang:gen_throughput", tps), ("sglang:spec_accept_length", alen),
                        ("sglang:spec_accept_rate", rate)):
        lo, hi = metrics.RANGES[name]
        if lo <= value <= hi:
            assert snap.get(name) == value
        else:
            assert snap.get(name) is None  # never shown
            refused += not math.isnan(value)  # (a NaN gauge is "no value yet", as before)
    assert snap.refused_count == refused and len(snap.refused) == min(refused, 3)


def _vllm(gen: float, drafts: float, dtok: float, acc: float) -> str:
    return "".join(f"# TYPE vllm:{n} counter\nvllm:{n}_total{{engine=\"0\"}} {v!r}\n" for n, v in (
        ("generation_tokens", gen), ("spec_decode_num_drafts", drafts), ("spec_decode_num_draft_tokens", dtok),
        ("spec_decode_num_accepted_tokens", acc)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 10**6).map(float),
                min_size=4, max_size=4))
def test_counters_out_of_range_are_refused_and_derived_figures_stay_in_theirs(later: list[float]) -> None:
    before = parse_snapshot(_vllm(1000.0, 100.0, 300.0, 210.0), 0.0)
    after = parse_snapshot(_vllm(*later), 1.0)
    for name, value in zip(("vllm:generation_tokens_total", "vllm:spec_decode_num_drafts_total",
                            "vllm:spec_decode_num_draft_tokens_total", "vllm:spec_decode_num_accepted_tokens_total"),
                           later, strict=True):
        ok = 0 <= value <= metrics.MAX_COUNTER
        assert (after.get(name) == value) if ok else after.get(name) is None
    sample = difference(before, after)
    if sample is not None:
        assert sample.accept_rate is None or 0 <= sample.accept_rate <= 1
        assert sample.accept_len is None or 1 <= sample.accept_len <= 65
        assert sample.throughput is None or 0 <= sample.throughput <= 1e7


def test_more_accepted_than_drafted_is_not_a_rate() -> None:
    """The issue's 123.50: counters that cannot be (accepted far past drafted) give no rate."""
    before = parse_snapshot(_vllm(1000.0, 100.0, 300.0, 210.0), 0.0)
    after = parse_snapshot(_vllm(2000.0, 110.0, 301.0, 333.5), 1.0)  # 123.5 accepted of 1 drafted
    sample = difference(before, after)
    assert sample is not None and sample.throughput == 1000.0
    assert sample.accept_rate is None and sample.accept_len is None


@pytest.fixture
def sglang_exporter() -> Iterator[tuple[str, Gauge]]:
    reg = CollectorRegistry()
    tps = Gauge("sglang:gen_throughput", "tok/s", registry=reg)
    alen = Gauge("sglang:spec_accept_length", "accept length", registry=reg)
    rate = Gauge("sglang:spec_accept_rate", "accept rate", registry=reg)
    Counter("sglang:generation_tokens", "tokens", registry=reg).inc(10)
    tps.set(90.0)
    alen.set(2.5)
    rate.set(123.5)  # the issue's
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server, thread = start_http_server(port, addr="127.0.0.1", registry=reg)
    try:
        yield f"http://127.0.0.1:{port}/metrics", rate
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


async def test_a_real_exporters_absurd_accept_rate_is_refused_and_said(sglang_exporter: tuple[str, Gauge]) -> None:
    url, rate = sglang_exporter
    scraper = MetricsScraper(url)
    try:
        sample = await scraper.scrape_once()
        assert sample is not None and sample.throughput == 90.0 and sample.accept_len == 2.5
        assert sample.accept_rate is None  # not shown
        assert scraper.refused_values == 1 and "sglang:spec_accept_rate = 123.5" in scraper.label
        rate.set(0.75)
        sample = await scraper.scrape_once()
        assert sample is not None and sample.accept_rate == 0.75
    finally:
        await scraper.stop()


class _Vector(ThreadingHTTPServer):
    daemon_threads = True


def test_a_prometheus_figure_out_of_range_is_left_out_and_counted() -> None:
    """Every query answers the same vector: a figure's value in its range is kept, else refused."""
    answers = {"h1:8000": "0.5", "h2:8000": "123.5", "h3:8000": "-3", "h4:8000": "NaN"}

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length", "0")))
            body = json.dumps({"status": "success", "data": {"resultType": "vector", "result": [
                {"metric": {"instance": k}, "value": [1.0, v]} for k, v in answers.items()]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = _Vector(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        source = PrometheusFleetSource(f"http://127.0.0.1:{server.server_address[1]}", parse_selector('{job="x"}'),
                                       engine=Engine.VLLM)

        async def poll() -> prometheus_fleet.Poll:
            try:
                return await source.poll()
            finally:
                await source.close()

        result = asyncio.run(poll())
        assert result.ok, result.problem
        by: dict[str, Any] = result.instances
        assert by["h1:8000"].accept_rate == 0.5 and by["h1:8000"].tps == 0.5
        assert by["h2:8000"].accept_rate is None and by["h2:8000"].tps == 123.5  # (123.5 tok/s is a speed)
        assert by["h3:8000"].tps is None and by["h3:8000"].accept_rate is None
        refused_per_query = {q.figure: 0 for q in source.queries}
        for q in source.queries:
            lo, hi = prometheus_fleet.FIGURE_RANGES.get(q.figure, (-math.inf, math.inf))
            refused_per_query[q.figure] += sum(not lo <= float(v) <= hi for v in answers.values() if v != "NaN")
        assert result.refused == sum(refused_per_query.values()) > 0
    finally:
        server.shutdown()
        server.server_close()


def test_snapshots_say_nothing_was_refused_when_all_is_in_range() -> None:
    snap: Snapshot = parse_snapshot(_vllm(1000.0, 100.0, 300.0, 210.0), 0.0)
    assert snap.refused_count == 0 and snap.refused == ()
