"""Debian's real ``prometheus`` server scrapes specmon on 127.0.0.1, and its HTTP API answers with specmon's figures.

The exporter serves a session fed from a sample log; ``/usr/bin/prometheus``
runs with a generated configuration scraping it every second (its own free
port, its data in tmp) and is stopped by PID at the end. Every query of the
shipped Grafana dashboard is then run against it. ``.ci/run`` installs the
package; a missing binary fails the test (it is not skipped).
"""

from __future__ import annotations

import asyncio
import json
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specmon.ingest.summarize import ingest_files
from specmon.model.session import Session
from specmon.output.prometheus import PrometheusExporter
from tests.support import grafana, promserver

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
NOSPEC = str(ROOT / "sample_logs" / "sim_eagle3_nospec.log")
TWO_STEPS = str(ROOT / "sample_logs" / "sim_eagle3_2step.log")
#: Bound on every wait for the server (a loaded 2-core machine); the test fails, with the log, past it.
WAIT_S = 120.0

# No proxy from the environment: every request here goes to 127.0.0.1.
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _get(url: str) -> Any:
    with _OPENER.open(url, timeout=10) as response:
        return json.loads(response.read().decode())


def _query(port: int, expr: str) -> Any:
    return _get(f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))


class Prometheus(promserver.Prometheus):
    """The real ``prometheus`` (tests/support/promserver.py), asked until it answers."""

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            pytest.fail(f"prometheus exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}")

    async def wait_for(self, expr: str, ok: Callable[[list[Any]], bool], what: str) -> list[Any]:
        """Query until ``ok(result)`` holds (bounded by :data:`WAIT_S`)."""
        deadline = time.monotonic() + WAIT_S
        last: Any = None
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                last = await asyncio.to_thread(_query, self.port, expr)
            except OSError as exc:  # not listening yet
                last = exc
            else:
                if last.get("status") == "success" and ok(last["data"]["result"]):
                    return list(last["data"]["result"])
            await asyncio.sleep(0.5)
        pytest.fail(f"prometheus never answered {what} to {expr!r}; last answer {last!r}\n"
                    f"{self.log.read_text()[-3000:]}")


def _value(result: list[Any]) -> float:
    assert len(result) == 1, result
    return float(result[0]["value"][1])


async def test_real_prometheus_scrapes_specmon_and_runs_the_dashboards_queries(tmp_path: Path) -> None:
    nospec, two_steps = ingest_files([NOSPEC]), ingest_files([TWO_STEPS])
    showing: dict[str, Session] = {"session": nospec}
    async with PrometheusExporter(lambda: showing["session"], 0, instance_labels={"host": "gpu-box"}) as exporter:
        server = Prometheus(tmp_path, {"specmon": [f"127.0.0.1:{exporter.port}"]})
        try:
            up = await server.wait_for('up{job="specmon"}', lambda r: len(r) == 1 and r[0]["value"][1] == "1",
                                       "a successful scrape")
            assert up[0]["metric"]["instance"] == f"127.0.0.1:{exporter.port}"
            # First the server runs without speculation (the baseline) ...
            await server.wait_for("specmon_speculative_steps", lambda r: len(r) == 1 and _value(r) == 0,
                                  "the no-speculation run")
            # ... then it is restarted with 2 steps: the next scrapes say so.
            showing["session"] = two_steps
            result = await server.wait_for("specmon_speculative_steps", lambda r: len(r) == 1 and _value(r) == 2,
                                           "the 2-step run")
            assert result[0]["metric"] == {"__name__": "specmon_speculative_steps", "host": "gpu-box",
                                           "instance": f"127.0.0.1:{exporter.port}", "job": "specmon"}
            run = two_steps.runs[-1]
            mean = _value((await asyncio.to_thread(_query, server.port,
                                                   "specmon_throughput_tokens_per_second_mean"))["data"]["result"])
            assert mean == pytest.approx(sum(run.throughput) / len(run.throughput), rel=1e-9)
            lines = _value((await asyncio.to_thread(_query, server.port, "specmon_lines_total"))["data"]["result"])
            assert lines == two_steps.lines
            info = (await asyncio.to_thread(_query, server.port, "specmon_run_info"))["data"]["result"]
            assert [i["metric"]["config"] for i in info] == ["EAGLE3 2 steps"]

            # Every query of the shipped Grafana dashboard runs and finds data.
            baseline = sum(nospec.runs[-1].throughput) / len(nospec.runs[-1].throughput)
            for where, expr in grafana.expressions(grafana.load()):
                if where.startswith("variable"):
                    values = await asyncio.to_thread(
                        _get, f"http://127.0.0.1:{server.port}/api/v1/label/instance/values?"
                        + urllib.parse.urlencode({"match[]": "specmon_run_id"}))
                    assert values["data"] == [f"127.0.0.1:{exporter.port}"], where
                    continue
                answer = await asyncio.to_thread(_query, server.port, grafana.substitute(expr))
                assert answer["status"] == "success", (where, answer)
                assert answer["data"]["result"], f"{where}: no data for {grafana.substitute(expr)}"
            # The speed-up panel compares with the no-speculation run Prometheus saw first.
            speedup_expr = next(e for w, e in grafana.expressions(grafana.load()) if "Speed-up" in w)
            speedup = (await asyncio.to_thread(_query, server.port, grafana.substitute(speedup_expr)))
            assert _value(speedup["data"]["result"]) == pytest.approx(100 * (mean / baseline - 1), rel=1e-6)
        finally:
            server.stop()
    assert server.proc.returncode is not None
