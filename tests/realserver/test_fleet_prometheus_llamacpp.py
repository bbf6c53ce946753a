"""The same four real ``llama-server`` replicas read from their logs and through a real Prometheus (issue 31).

The four servers of :func:`tests.realserver.test_fleet_llamacpp.llama_fleet` (two with the kit's draft
model at depth 3, two without speculation, each under the kit's load) are read twice at once:
their logs by the log fleet (:class:`specmon.ingest.fleet.Fleet`), and their ``/metrics`` through
Debian's real ``prometheus`` (scraping every second) by the Prometheus fleet
(:class:`specmon.ingest.prom_fleet.PromFleet`). Both must show the same four replicas live, and
the same figures within what the two sources are known to differ by:

* **exactly**, the quantity both hold: once the loads stop, Prometheus's
  ``llamacpp:tokens_predicted_total`` and ``…_seconds_total`` are the sums of the replica's log's
  ``eval time`` lines: the same tokens, and seconds within 0.5% (the log prints 0.01 ms);
* **the fleet rows**: the log's row shows the mean of its requests' speeds, Prometheus's the pooled
  rate (docs/fleet.md): both are positive, and the speculative replicas are slower than the plain
  ones in both views (the kit's tiny draft model does not pay on this CPU); the accept rate of a
  speculative replica agrees within 0.15 (a mean over requests against a pooled ratio).

Marked ``realserver``; every wait bounded; servers, loads and Prometheus stopped by PID.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from specmon.ingest.fleet import Fleet
from specmon.ingest.prom_fleet import PromFleet
from specmon.model.fleet import FleetModel, ReplicaRow, ReplicaState
from specmon.records import Engine
from specmon.sources.prometheus_fleet import PrometheusFleetSource
from specmon.sources.promql import parse_selector
from tests.realserver.test_fleet_llamacpp import PLAN, llama_fleet
from tests.support.promserver import Prometheus

pytestmark = pytest.mark.realserver

WAIT_S = 180.0
#: Prometheus's rate window here (10 scrapes at 1 s).
WINDOW_S = 10


#: A request's line in llama-server's log: its generation time and tokens (not ``prompt eval time``).
_EVAL_TIME = re.compile(r"(?<!prompt )eval time =\s*(?P<ms>[\d.]+) ms /\s*(?P<n>\d+) (?:tokens|runs)")


def log_sums(log: Path) -> tuple[int, float]:
    """Tokens and seconds of every request in ``log``, from its ``eval time`` lines.

    The seconds are the lines' own ``eval time``: the speed printed beside it is llama.cpp's
    ``(n − 1) / t`` (its first token belongs to the prompt's evaluation), 2% below ``n / t`` at
    48 tokens, while the counters add ``n`` tokens and ``t`` seconds.
    """
    tokens, ms = 0, 0.0
    for line in log.read_text(errors="replace").splitlines():
        m = _EVAL_TIME.search(line)
        if m is not None:
            tokens += int(m.group("n"))
            ms += float(m.group("ms"))
    return tokens, ms / 1000.0


async def counters(url: str, port: int) -> tuple[float, float] | None:
    """``(tokens, seconds)`` of one instance at Prometheus's latest scrape."""
    out = []
    async with httpx.AsyncClient(timeout=5.0) as client:
        for name in ("llamacpp:tokens_predicted_total", "llamacpp:tokens_predicted_seconds_total"):
            resp = await client.get(f"{url}/api/v1/query", params={"query": f'{name}{{instance="127.0.0.1:{port}"}}'})
            result = resp.json()["data"]["result"]
            if not result:
                return None
            out.append(float(result[0]["value"][1]))
    return out[0], out[1]


def rows(model: FleetModel, fleet: Fleet | PromFleet) -> list[ReplicaRow]:
    return list(model.snapshot(fleet.inputs(), time.time(), "").replicas)


async def test_four_real_llama_replicas_through_a_real_prometheus_agree_with_their_logs(tmp_path: Path) -> None:
    loads: list[Any] = []
    with llama_fleet(tmp_path, loads) as servers:
        ports = {name: port for name, (_, port, _) in servers.items()}
        prom = Prometheus(tmp_path, {"llama": [f"127.0.0.1:{port}" for port in ports.values()]})
        logs = Fleet.local([str(log) for _, _, log in servers.values()])
        pfleet = PromFleet(PrometheusFleetSource(prom.url, parse_selector('{job="llama"}'), window_s=WINDOW_S,
                                                 engine=Engine.LLAMACPP), interval_s=1.0)
        tasks = [asyncio.create_task(logs.run()), asyncio.create_task(pfleet.run())]
        log_model, prom_model = FleetModel(), FleetModel()
        try:
            by_port: dict[str, ReplicaRow] = {}
            by_name: dict[str, ReplicaRow] = {}
            deadline = time.monotonic() + WAIT_S
            while time.monotonic() < deadline:
                await asyncio.sleep(1.0)
                by_name = {r.name.removesuffix(".log"): r for r in rows(log_model, logs)}
                by_port = {r.name.rsplit(":", 1)[-1]: r for r in rows(prom_model, pfleet)}
                ready = (len(by_port) == 4 and all(r.state is ReplicaState.LIVE and r.samples >= 2 for r in by_port.values())
                         and all(r.state is ReplicaState.LIVE and r.samples >= 10 for r in by_name.values()))
                if ready:
                    break
            shown = {n: (r.state.value, r.samples, r.tps_mean, r.accept_rate) for n, r in by_name.items()}
            shown_p = {n: (r.state.value, r.samples, r.tps_recent, r.accept_rate) for n, r in by_port.items()}
            assert len(by_port) == 4 and len(by_name) == 4, (shown, shown_p, prom.tail())
            print("\nlog rows:", shown, "\nprometheus rows:", shown_p)
            for name, port in ports.items():
                log_row, prom_row = by_name[name], by_port[str(port)]
                assert log_row.state is ReplicaState.LIVE and prom_row.state is ReplicaState.LIVE, (name, shown, shown_p)
                assert log_row.tps_mean and prom_row.tps_recent and log_row.tps_mean > 0 and prom_row.tps_recent > 0
                if PLAN[name] is not None:
                    assert log_row.accept_rate is not None and prom_row.accept_rate is not None
                    assert abs(log_row.accept_rate - prom_row.accept_rate) <= 0.15, (name, log_row.accept_rate,
                                                                                    prom_row.accept_rate)
            for view, table in (("log", {n: r.tps_mean for n, r in by_name.items()}),
                                ("prometheus", {n: by_port[str(p)].tps_recent for n, p in ports.items()})):
                spec = [v for n, v in table.items() if PLAN[n] is not None]
                plain = [v for n, v in table.items() if PLAN[n] is None]
                assert max(spec) < min(plain), (view, table)  # type: ignore[type-var]
            # Exactly: with the loads stopped, each replica's counters in Prometheus are its log's sums.
            for load in loads:
                load.__exit__(None, None, None)
            for name, port in ports.items():
                log = servers[name][2]
                settled = None
                for _ in range(60):  # until two scrapes and the log agree on the requests finished
                    await asyncio.sleep(1.0)
                    before = await counters(prom.url, port)
                    await asyncio.sleep(1.5)
                    after = await counters(prom.url, port)
                    if before is not None and before == after:
                        sums = log_sums(log)
                        if sums[0] == after[0]:
                            settled = (after, sums)
                            break
                assert settled is not None, (name, await counters(prom.url, port), log_sums(log))
                (tokens, seconds), (log_tokens, log_seconds) = settled
                print(f"{name}: Prometheus {tokens:.0f} tokens in {seconds:.3f} s ({tokens / seconds:.2f} tok/s pooled); "
                      f"its log {log_tokens} tokens in {log_seconds:.3f} s ({log_tokens / log_seconds:.2f})")
                assert abs(seconds - log_seconds) <= 0.005 * seconds, (name, settled)
        finally:
            await logs.close()
            await pfleet.close()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            prom.stop()

