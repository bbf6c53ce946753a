"""The Prometheus-backed fleet view against Debian's real ``prometheus`` scraping real exporters.

Three exporters in this process (``prometheus_client``'s registry and text format, one HTTP server each)
serve vLLM's counter names with values that grow at known rates, computed from the clock at
each scrape, so the rates are exact whatever the scheduling. A fourth serves under another
job, which the selector leaves out. ``/usr/bin/prometheus`` scrapes them every second (its own
free port, its data in tmp); the fleet app asks it through :class:`PrometheusFleetSource`
and its tables are read. Then one exporter stops (its row goes down, the others stay live and
current) and Prometheus itself stops (every row says so; the view keeps refreshing). Every
process started here is stopped here. ``.ci/run`` installs the package; a missing binary
fails the test (it is not skipped).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector

from specmon.ingest.prom_fleet import PromFleet
from specmon.model.fleet import ReplicaRow, ReplicaState
from specmon.sources.prometheus_fleet import PrometheusFleetSource
from specmon.sources.promql import parse_selector
from specmon.ui.fleet_app import FleetApp, FleetOptions, prometheus_fleet_app
from tests.support.app_factory import wait_for
from tests.support.promserver import Prometheus

pytestmark = pytest.mark.prometheus

#: The rate window (4 scrapes at 1 s).
WINDOW_S = 4
#: Relative tolerance on a rate: a sample's timestamp is the scrape's start, its value is taken a few
#: milliseconds later (more on a loaded machine), out of a 4-second window.
REL = 0.05
#: Pilot pauses of 0.02 s: about 120 s at most for any wait (a loaded 2-core machine).
ROUNDS = 6000


@dataclass(frozen=True)
class Rates:
    """What an exporter's counters grow by per second."""

    tps: float
    drafts: float
    accepted: float
    spec_tokens: int

    @property
    def accept_len(self) -> float:
        return 1 + self.accepted / self.drafts

    @property
    def accept_rate(self) -> float:
        return self.accepted / (self.drafts * self.spec_tokens)


class VllmCounters(Collector):
    """vLLM's counters, each ``rate × seconds since start`` at the moment of the scrape."""

    def __init__(self, rates: Rates) -> None:
        self.rates = rates
        self.t0 = time.time()

    def collect(self) -> Iterator[CounterMetricFamily]:
        dt = time.time() - self.t0
        r = self.rates
        # The family names without _total: prometheus_client adds it, giving vLLM's exact names.
        for name, per_s in (("vllm:generation_tokens", r.tps), ("vllm:spec_decode_num_drafts", r.drafts),
                            ("vllm:spec_decode_num_draft_tokens", r.drafts * r.spec_tokens),
                            ("vllm:spec_decode_num_accepted_tokens", r.accepted)):
            family = CounterMetricFamily(name, name, labels=["model_name"])
            family.add_metric(["tiny"], per_s * dt)
            yield family
        per_pos = CounterMetricFamily("vllm:spec_decode_num_accepted_tokens_per_pos", "per position",
                                      labels=["model_name", "position"])
        for pos in range(r.spec_tokens):
            per_pos.add_metric(["tiny", str(pos)], r.accepted / r.spec_tokens * dt)
        yield per_pos


class Exporter:
    """A real /metrics endpoint on 127.0.0.1, in a thread: the classic text format of ``generate_latest``.

    Not ``start_http_server``: prometheus_client 0.26 answers Prometheus's OpenMetrics ``Accept``
    with the samples' colons escaped (``vllm_generation_tokens_total`` under a ``vllm:`` family),
    and Prometheus 2.42 kept none of them (seen: only the scrape's own series). The text format
    keeps vLLM's names as vLLM's own /metrics page shows them.
    """

    def __init__(self, rates: Rates) -> None:
        registry = CollectorRegistry()
        registry.register(VllmCounters(rates))
        self.rates = rates

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                body = generate_latest(registry)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # a scrape a second: nothing to say on stderr

        class Server(ThreadingHTTPServer):
            def handle_error(self, request: object, client_address: object) -> None:
                pass  # Prometheus hanging up mid-scrape as it stops (a broken pipe): not the test's business

        self.server = Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, name="exporter", daemon=True)
        self.thread.start()
        self.port = int(self.server.server_address[1])
        self.instance = f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
            self.server.server_close()
            self.thread.join(timeout=10)


def rows(app: FleetApp) -> dict[str, ReplicaRow]:
    return {r.name: r for r in app.fleet_screen.snapshot.replicas}


def close(value: float | None, want: float) -> bool:
    return value is not None and abs(value - want) <= REL * want


def shows(row: ReplicaRow | None, rates: Rates) -> bool:
    return (row is not None and row.state is ReplicaState.LIVE and close(row.tps_recent, rates.tps)
            and close(row.accept_len, rates.accept_len) and close(row.accept_rate, rates.accept_rate))


def drawn(app: FleetApp) -> str:
    table = app.fleet_screen.replica_table
    return "\n".join(table.render_line(y).text for y in range(table.size.height))


async def test_the_fleet_view_shows_each_instances_rates_from_a_real_prometheus(tmp_path: Path) -> None:
    fast, slow, two = Rates(400.0, 100.0, 150.0, 3), Rates(300.0, 100.0, 100.0, 3), Rates(350.0, 100.0, 80.0, 2)
    exporters = [Exporter(fast), Exporter(slow), Exporter(two)]
    other = Exporter(Rates(999.0, 10.0, 5.0, 1))
    prom: Prometheus | None = None
    try:
        prom = Prometheus(tmp_path, {"vllm": [e.instance for e in exporters], "other": [other.instance]})
        source = PrometheusFleetSource(prom.url, parse_selector('{job="vllm"}'), window_s=WINDOW_S, timeout_s=3.0)
        fleet = PromFleet(source, interval_s=1.0)
        app = prometheus_fleet_app(fleet, options=FleetOptions(animations=False), user_themes=None)
        async with app.run_test(size=(160, 40)) as pilot:
            def every_rate_shown() -> bool:
                if prom is not None and prom.proc.poll() is not None:
                    pytest.fail(f"prometheus exited with {prom.proc.returncode}:\n{prom.tail()}")
                shown = rows(app)
                return all(shows(shown.get(e.instance), e.rates) for e in exporters)

            try:
                await wait_for(pilot, every_rate_shown, "every instance's rates in the table", rounds=ROUNDS)
            except AssertionError:
                raise AssertionError(f"rows: {rows(app)}\nheader: {fleet.status_text()}\n{prom.tail()}") from None
            shown = rows(app)
            # Only the selector's job: the other job's exporter is not a replica of this fleet.
            assert set(shown) == {e.instance for e in exporters}
            for e in exporters:
                row = shown[e.instance]
                assert (row.engine, row.source) == ("vllm", "prom")
                # The draft tokens come from the per-position series; the method is not known, and said so.
                assert row.config == f"{e.rates.spec_tokens} spec tokens (method unknown)"
            # The figures are on screen, literally, and the header says where they come from.
            await wait_for(pilot, lambda: all(e.instance in drawn(app) for e in exporters), "the rows drawn",
                           rounds=ROUNDS)
            text = drawn(app)
            for e in exporters:
                line = next(x for x in text.splitlines() if e.instance in x)
                assert "3 spec tokens" in line or "2 spec tokens" in line, line
                assert "live" in line and "prom" in line, line
            header = app.fleet_screen.query_one("#fleet-header").render()
            assert f"Prometheus {prom.url} {{job=\"vllm\"}}, rates over {WINDOW_S}s: answered" in str(header)
            # One configuration row per draft-token count: the 3-token one pools two replicas.
            pools = {p.label: p for p in app.fleet_screen.snapshot.configs}
            assert set(pools) == {"3 spec tokens (method unknown)", "2 spec tokens (method unknown)"}
            assert pools["3 spec tokens (method unknown)"].replicas == 2
            assert close(pools["3 spec tokens (method unknown)"].accept_len, (fast.accept_len + slow.accept_len) / 2)

            # One exporter stops: its row goes down; the others stay live and keep being answered for.
            stopped, kept = exporters[1], [exporters[0], exporters[2]]
            stopped.stop()
            stopped_at = time.time()

            def down_and_others_current() -> bool:
                shown = rows(app)
                return (shown[stopped.instance].state is ReplicaState.DOWN
                        and all(shows(shown[e.instance], e.rates) for e in kept)
                        and fleet.last_answer_at is not None and fleet.last_answer_at > stopped_at + 1)

            await wait_for(pilot, down_and_others_current, "the stopped exporter down, the others live",
                           rounds=ROUNDS)
            row = rows(app)[stopped.instance]
            assert row.state_text == "down" and "up = 0" in row.detail
            assert "1 down" in str(app.fleet_screen.query_one("#fleet-header").render())

            # Prometheus stops: every row says it has no answer, and the view keeps refreshing meanwhile.
            prom.stop()
            refreshes = app.refreshes
            await wait_for(pilot, lambda: all(r.state is ReplicaState.UNREADABLE for r in rows(app).values()),
                           "every row without an answer", rounds=ROUNDS)
            assert app.refreshes > refreshes
            row = rows(app)[kept[0].instance]
            assert row.state_text == "no answer" and f"cannot reach Prometheus at {prom.url}" in row.detail
            assert close(row.tps_recent, kept[0].rates.tps)  # its last figures are kept, and dated
            assert "figures as of" in row.detail
            await pilot.press("q")
    finally:
        for e in [*exporters, other]:
            e.stop()
        if prom is not None:
            prom.stop()
    assert prom.proc.returncode is not None
    assert not any(e.thread.is_alive() for e in [*exporters, other])

