"""Prometheus exposition of the live figures: format, values, and the HTTP endpoint."""

from __future__ import annotations

import asyncio
import re
import threading
import urllib.request
from array import array
from pathlib import Path

import pytest

from specmon.ingest.summarize import ingest_files
from specmon.model.session import Session
from specmon.output.prometheus import CONTENT_TYPE, PrometheusExporter, render_metrics
from specmon.records import Config, Decode, Engine

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "sample_logs" / "sim_eagle3_2step.log")

# name{labels} value — the text format's sample line.
SAMPLE_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\.)*",?)*\})? '
                         r'(-?[0-9.eE+-]+|NaN|[+-]Inf)$')


def parse(text: str) -> dict[str, list[tuple[str, float]]]:
    """Validate the exposition text and return name -> [(labels, value)]."""
    assert text.endswith("\n")
    out: dict[str, list[tuple[str, float]]] = {}
    typed: set[str] = set()
    helped: set[str] = set()
    for line in text.splitlines():
        if line.startswith("# HELP "):
            helped.add(line.split()[2])
        elif line.startswith("# TYPE "):
            name, kind = line.split()[2:4]
            assert kind in ("gauge", "counter")
            assert name not in typed, f"{name} typed twice"
            typed.add(name)
        else:
            m = SAMPLE_LINE.match(line)
            assert m, f"not a sample line: {line!r}"
            name = m.group(1)
            assert name in typed and name in helped, f"{name} has no TYPE/HELP"
            out.setdefault(name, []).append((m.group(2) or "", float(m.group(3))))
    return out


def test_metrics_from_a_session() -> None:
    session = ingest_files([SAMPLE])
    run = session.runs[-1]
    metrics = parse(render_metrics(session, instance_labels={"host": "gpu-box"}))
    assert metrics["specmon_speculative_steps"] == [('{host="gpu-box"}', 2.0)]
    assert metrics["specmon_run_id"][0][1] == run.id
    assert metrics["specmon_lines_total"][0][1] == session.lines
    assert metrics["specmon_accept_length"][0][1] == pytest.approx(run.live_accept_len[-1])
    assert metrics["specmon_throughput_tokens_per_second"][0][1] == pytest.approx(run.live_throughput[-1])
    assert metrics["specmon_throughput_tokens_per_second_mean"][0][1] == pytest.approx(
        sum(run.throughput) / len(run.throughput), rel=1e-6)
    assert metrics["specmon_run_samples"][0][1] == len(run.throughput)
    info = metrics["specmon_run_info"][0][0]
    assert 'config="EAGLE3 2 steps"' in info and 'engine="sglang"' in info and 'algorithm="EAGLE3"' in info
    states = dict(metrics["specmon_server_state"])
    assert sum(states.values()) == 1 and states['{host="gpu-box",state="stopped"}'] == 1


def test_empty_session_and_unknown_steps() -> None:
    metrics = parse(render_metrics(Session()))
    assert set(metrics) == {"specmon_lines_total", "specmon_server_state"}
    s = Session(warmup=0)
    s.ingest(Decode(1, None, None, running_req=1, gen_throughput=50.0))
    metrics = parse(render_metrics(s))
    assert "specmon_speculative_steps" not in metrics  # no configuration line seen: no guess
    assert metrics["specmon_throughput_tokens_per_second"][0][1] == 50.0


def test_label_values_are_escaped() -> None:
    s = Session(warmup=0)
    s.begin_source('/logs/we"ird\\name\n.log')
    s.ingest(Config(1, None, None, engine=Engine.SGLANG, algorithm='EA"GLE', steps=3, topk=1, draft_tokens=4))
    text = render_metrics(s)
    parse(text)  # still valid
    assert 'source="/logs/we\\"ird\\\\name\\n.log"' in text


async def _http(port: int, request: bytes) -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    data = await reader.read()
    writer.close()
    return data


async def test_exporter_serves_metrics_over_http() -> None:
    session = ingest_files([SAMPLE])
    async with PrometheusExporter(session, 0) as exporter:
        assert exporter.host == "127.0.0.1" and exporter.port > 0
        raw = await _http(exporter.port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        head, _, body = raw.partition(b"\r\n\r\n")
        assert re.match(rb"HTTP/1\.[01] 200", head)
        assert f"Content-Type: {CONTENT_TYPE}".encode() in head
        metrics = parse(body.decode())
        assert metrics["specmon_speculative_steps"][0][1] == 2
        # The figures are read at scrape time: new lines show up in the next scrape.
        session.lines += 5
        body2 = (await _http(exporter.port, b"GET /metrics HTTP/1.0\r\n\r\n")).partition(b"\r\n\r\n")[2]
        assert parse(body2.decode())["specmon_lines_total"][0][1] == session.lines
        assert re.match(rb"HTTP/1\.[01] 405", await _http(exporter.port, b"POST /metrics HTTP/1.1\r\n\r\n"))
        assert exporter.scrapes == 2
    # Closed: the port no longer answers.
    with pytest.raises(OSError):
        await _http(exporter.port, b"GET /metrics HTTP/1.0\r\n\r\n")


def _scrape(port: int) -> dict[str, list[tuple[str, float]]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return parse(response.read().decode())


async def test_scrapes_while_the_loop_ingests_see_consistent_growing_figures() -> None:
    """The HTTP thread reads the session while the loop thread appends to it: no error on either
    side (no buffer view of a live array), and every scrape sees a count no smaller than the last."""
    session = Session(warmup=0)
    session.ingest(Config(1, None, None, engine=Engine.SGLANG, algorithm="EAGLE3", steps=2, topk=1, draft_tokens=3))
    session.ingest(Decode(0, None, None, running_req=4, gen_throughput=90.0, accept_len=2.0))
    # A long run already behind: averaging it takes long enough for the two threads to overlap.
    held = 300_000
    for column in (session.runs[-1].throughput, session.runs[-1].accept_len):
        column.extend(array("f", [90.0]) * held)
    seen: list[float] = []
    errors: list[BaseException] = []
    async with PrometheusExporter(session, 0) as exporter:

        def scraper() -> None:
            try:
                for _ in range(150):
                    seen.append(_scrape(exporter.port)["specmon_run_samples"][0][1])
            except BaseException as exc:  # reported by the assertion below
                errors.append(exc)

        thread = threading.Thread(target=scraper)
        thread.start()
        i = 0
        while thread.is_alive():
            for _ in range(200):
                i += 1
                session.ingest(Decode(i, None, None, running_req=4, gen_throughput=90.0 + i % 7,
                                      accept_len=2.0 + (i % 5) / 10))
                session.lines += 1
            # A real loop waits for its sources between batches; a loop that never waits would hold
            # the GIL so long that one scrape needs seconds of hand-offs on a busy machine.
            await asyncio.sleep(0.002)
        thread.join()
    assert not errors, errors
    assert len(seen) == 150 and seen == sorted(seen) and seen[-1] > seen[0]
    final = parse(render_metrics(session))
    assert final["specmon_run_samples"][0][1] == len(session.runs[-1].throughput) == 1 + held + i


async def test_port_in_use_is_a_clear_error() -> None:
    async with PrometheusExporter(Session(), 0) as first:
        second = PrometheusExporter(Session(), first.port)
        with pytest.raises(OSError, match=f"cannot serve Prometheus metrics on 127.0.0.1:{first.port}"):
            await second.start()
