"""The Grafana dashboard in docs/ asks only for series, labels and functions that exist.

The real Prometheus test (``test_prometheus_server.py``) runs every query of the
dashboard against a Prometheus that scraped specmon; this one reads them without
a server, so a renamed series fails here at once.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specmon.ingest.summarize import ingest_files
from specmon.output.prometheus import render_metrics
from tests.support import grafana

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = str(ROOT / "sample_logs" / "sim_eagle3_2step.log")
#: Labels Prometheus itself puts on every scraped series.
TARGET_LABELS = {"job", "instance"}


def served() -> tuple[set[str], set[str]]:
    """Series names and label names the exporter serves for a session where every series is present."""
    text = render_metrics(ingest_files([SAMPLE]), instance_labels={"host": "gpu-box"})
    series: set[str] = set()
    labels: set[str] = set()
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? ", line)
        assert m, line
        series.add(m.group(1))
        labels |= set(re.findall(r'([a-zA-Z_][a-zA-Z0-9_]*)="', m.group(2) or ""))
    return series, labels


def unknown(expr: str) -> list[str]:
    """What an expression names that the exporter does not serve."""
    series, labels = served()
    used_series, used_labels, functions = grafana.names(expr)
    return (sorted(used_series - series) + sorted(used_labels - labels - TARGET_LABELS)
            + sorted(functions - grafana.FUNCTIONS))


def test_every_query_names_only_served_series_and_labels() -> None:
    dashboard = grafana.load()
    exprs = grafana.expressions(dashboard)
    assert len(exprs) >= 10
    every_series: set[str] = set()
    for where, expr in exprs:
        assert unknown(expr) == [], f"{where}: {expr}"
        every_series |= grafana.names(expr)[0]
    series, labels = served()
    assert every_series <= series
    # The panels the dashboard is for read the figures specmon exports.
    assert {"specmon_accept_length", "specmon_accept_rate", "specmon_throughput_tokens_per_second_mean",
            "specmon_run_samples", "specmon_speculative_steps"} <= every_series
    for legend in grafana.legends(dashboard):
        assert set(re.findall(r"\{\{\s*(\w+)\s*\}\}", legend)) <= labels | TARGET_LABELS, legend


def test_panels_cover_the_figures() -> None:
    titles = {p["title"].lower() for p in grafana.load()["panels"]}
    for wanted in ("accept length", "acceptance rate", "throughput vs baseline", "samples"):
        assert any(wanted in t for t in titles), wanted


@pytest.mark.parametrize(("expr", "expected"), [
    ('specmon_accept_lenght{instance=~"$instance"}', ["specmon_accept_lenght"]),
    ("rate(specmon_lines[5m])", ["specmon_lines"]),
    ('specmon_run_samples * on(job, host) group_left(conifg) specmon_run_info', ["conifg"]),
    ('specmon_server_state{sate="serving"}', ["sate"]),
    ("histogram_quantile(0.9, specmon_run_samples)", ["histogram_quantile"]),
    ('last_over_time((specmon_accept_rate_mean and on(job, instance) specmon_speculative_steps == 0)'
     '[$__range:$__interval])', []),
    ("label_values(specmon_run_id, instance)", []),
    ("label_values(specmon_run_idx, instance)", ["specmon_run_idx"]),
])
def test_the_reader_catches_a_typo(expr: str, expected: list[str]) -> None:
    assert unknown(expr) == expected
