"""TensorRT-LLM's counters, read from what its engine module declares.

No TensorRT-LLM runs without a GPU: its series are exported here by prometheus_client (the
library TensorRT-LLM's own ``MetricsCollector`` uses) under the names, types and labels that
collector creates (``tensorrt_llm/metrics/collector.py``), and served over HTTP on 127.0.0.1
at the path its server uses, ``/prometheus/metrics``. The figures are checked against
TensorRT-LLM's own definitions: accept length ``(accepted + requests with drafts) / requests
with drafts`` per draft, acceptance rate accepted over drafted.
"""

from __future__ import annotations

import asyncio
import socket
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

from specmon.engines import adapter
from specmon.records import Engine
from specmon.sources.metrics import MetricsScraper, difference, metrics_url_for, parse_snapshot
from specmon.sources.promql import fleet_queries, parse_selector

LABELS = {"model_name": "llama", "engine_type": "pytorch"}


@dataclass
class Request:
    """One finished request: its tokens, decode seconds, and drafted/accepted tokens by position."""

    tokens: int
    decode_s: float
    drafted: tuple[int, ...]
    accepted: tuple[int, ...]


class TrtllmExporter:
    """TensorRT-LLM's series, made as its MetricsCollector makes them."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        names = list(LABELS)
        self.gen = Counter("trtllm_generation_tokens", "Generation tokens.", names, registry=self.registry)
        self.decode = Histogram("trtllm_request_decode_time_seconds", "Decode time.", names,
                                buckets=[0.3, 0.5, 1.0, 5.0, 60.0], registry=self.registry)
        self.iter_draft = Counter("trtllm_spec_decode_num_draft_tokens", "Draft tokens.", names,
                                  registry=self.registry)
        self.iter_acc = Counter("trtllm_spec_decode_num_accepted_tokens", "Accepted tokens.", names,
                                registry=self.registry)
        pos_names = [*names, "token_position"]
        self.drafted = Counter("trtllm_spec_decode_drafted_tokens", "Drafted per position.", pos_names,
                               registry=self.registry)
        self.accepted = Counter("trtllm_spec_decode_accepted_tokens", "Accepted per position.", pos_names,
                                registry=self.registry)

    def iteration(self, drafted: int, accepted: int) -> None:
        if drafted > 0:
            self.iter_draft.labels(**LABELS).inc(drafted)
        if accepted > 0:
            self.iter_acc.labels(**LABELS).inc(accepted)

    def finish(self, r: Request) -> None:
        self.gen.labels(**LABELS).inc(r.tokens)
        self.decode.labels(**LABELS).observe(r.decode_s)
        last = max((i for i, d in enumerate(r.drafted) if d > 0), default=-1)
        for pos in range(last + 1):  # (its series begin at the last drafted position, as the collector's)
            if r.drafted[pos] > 0:
                self.drafted.labels(**LABELS, token_position=pos).inc(r.drafted[pos])
            if r.accepted[pos] > 0:
                self.accepted.labels(**LABELS, token_position=pos).inc(r.accepted[pos])

    def text(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()


def _expected(requests: list[Request]) -> tuple[float, float]:
    """TensorRT-LLM's accept length and the per-stream tok/s over these finished requests."""
    drafts = sum(r.drafted[0] for r in requests)
    accepted = sum(sum(r.accepted) for r in requests)
    tokens = sum(r.tokens for r in requests)
    return 1 + accepted / drafts, (tokens - len(requests)) / sum(r.decode_s for r in requests)


@st.composite
def finished(draw: st.DrawFn) -> Request:
    k = draw(st.integers(1, 6))
    drafts = draw(st.integers(1, 50))
    # Each position is drafted at most as often as the one before it (a draft may stop early).
    drafted = [drafts]
    for _ in range(k - 1):
        drafted.append(draw(st.integers(0, drafted[-1])))
    accepted = [draw(st.integers(0, d)) for d in drafted]
    for i in range(1, k):  # a position is accepted only after the one before it
        accepted[i] = min(accepted[i], accepted[i - 1])
    tokens = drafts + sum(accepted) + 1
    return Request(tokens, draw(st.floats(0.05, 30.0)), tuple(drafted), tuple(accepted))


def test_the_engine_module_declares_where_and_what() -> None:
    ad = adapter(Engine.TRTLLM)
    assert ad.counters is not None and ad.counters.drafts is None  # drafts counted by position
    assert metrics_url_for(8000, engine="trtllm") == "http://127.0.0.1:8000/prometheus/metrics"
    assert metrics_url_for(8000, engine="vllm") == "http://127.0.0.1:8000/metrics"


@settings(max_examples=120, deadline=None)
@given(before=st.lists(finished(), max_size=4), between=st.lists(finished(), min_size=1, max_size=6),
       iterations=st.lists(st.tuples(st.integers(1, 64), st.integers(0, 64)), min_size=1, max_size=8))
def test_samples_follow_tensorrt_llms_definitions(before: list[Request], between: list[Request],
                                                   iterations: list[tuple[int, int]]) -> None:
    ex = TrtllmExporter()
    for r in before:
        ex.finish(r)
    ex.iteration(5, 2)
    a = parse_snapshot(ex.text(), 0.0)
    for r in between:
        ex.finish(r)
    its = [(d, min(acc, d)) for d, acc in iterations]
    for d, acc in its:
        ex.iteration(d, acc)
    b = parse_snapshot(ex.text(), 2.0)
    assert a.engine == b.engine == "trtllm"
    s = difference(a, b)
    assert s is not None
    accept_len, tps = _expected(between)
    assert s.tokens == sum(r.tokens for r in between)
    assert s.accept_len == pytest.approx(accept_len)
    assert s.throughput == pytest.approx(tps)
    assert s.accept_rate == pytest.approx(sum(acc for _, acc in its) / sum(d for d, _ in its))
    assert s.drafts == sum(r.drafted[0] for r in between)
    assert s.per_position is not None and s.per_position[0] == pytest.approx(
        sum(r.accepted[0] for r in between) / s.drafts)
    # A restart: every counter starts again, lower than before: no sample across it.
    fresh = TrtllmExporter()
    fresh.finish(between[0])
    assert difference(b, parse_snapshot(fresh.text(), 3.0)) is None


def test_the_prometheus_fleet_asks_for_the_first_position() -> None:
    queries = {q.figure: q.expr for q in fleet_queries(parse_selector('{job="trt"}'), 60, Engine.TRTLLM)}
    assert 'trtllm_spec_decode_drafted_tokens_total{job="trt",token_position="0"}' in queries["accept_len"]
    assert "trtllm_spec_decode_accepted_tokens_total" in queries["accept_len"]
    assert "trtllm_spec_decode_num_draft_tokens_total" in queries["accept_rate"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_scraper_reads_a_server_at_its_own_path() -> None:
    ex = TrtllmExporter()
    port = _free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=ex.registry)
    scraper = MetricsScraper(metrics_url_for(port, engine=Engine.TRTLLM))
    try:
        first = [Request(41, 2.0, (10, 8, 5), (8, 5, 2)), Request(21, 1.0, (6, 3, 0), (3, 1, 0))]
        ex.finish(first[0])
        assert await scraper.scrape_once() is None  # the first scrape is the base
        assert scraper.available and scraper.engine == "trtllm"
        for r in first[1:]:
            ex.finish(r)
        ex.iteration(30, 12)
        await asyncio.sleep(0.01)
        sample = await scraper.scrape_once()
        assert sample is not None
        assert sample.accept_len == pytest.approx(1 + 4 / 6)  # request 2 alone finished in between
        assert sample.throughput == pytest.approx(20 / 1.0)
        assert sample.accept_rate == pytest.approx(12 / 30)
    finally:
        await scraper.stop()
        server.shutdown()
        thread.join(timeout=5)
