"""The HTML report's charts (specmon/output/charts.py): tok/s ± 95% interval per setting (one panel per
group of a sweep), acceptance per draft position, the cost model against the measurements, and
throughput over time, drawn by matplotlib as inline SVG (issue 30, item 7).

The SVG is read back as XML: with ``svg.fonttype`` none every label is a ``<text>`` element, and
the ids the chart module gives its artists (``settings-ci-<panel>-<setting>``, ``time-run-<run>``)
find the error bars and lines in it.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.literal import plain
from specmon.model.stopping import StoppingRule
from specmon.output.charts import Panel, Setting, colour_map, label_text, report_charts, settings_chart
from specmon.output.recording import write_lines_recording
from specmon.output.report import ReportData, load_report, render_report
from specmon.sim.sweepworld import SweepWorld
from tests.unit.test_sweep_outcome import CAMPAIGN, record

ROOT = Path(__file__).resolve().parents[2]
SVG = "{http://www.w3.org/2000/svg}"
FIGURE = re.compile(r'<figure id="chart-(\w+)">\n(<svg.*?</svg>)', re.S)
#: "M 67.77797 118.614018 \nL 67.77797 102.04491": one straight segment of a path.
SEGMENT = re.compile(r"M ([-\d.]+) ([-\d.]+)\s+L ([-\d.]+) ([-\d.]+)\s*$")


@pytest.fixture(scope="module")
def sweep_data(tmp_path_factory: pytest.TempPathFactory) -> ReportData:
    """A sweep over two workloads at two concurrencies (four groups), as test_report_groups records one."""
    seed, workloads = 5, {"code": 1.3, "chat": 0.6}
    world = SweepWorld(seed, workloads=workloads)
    plan = SweepPlan((0, 1, 2, 3), seed=seed, rule=StoppingRule(), max_minutes=None, workloads=tuple(workloads),
                     concurrency=(1, 16), launch_cv=0.0)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, clock=world.clock,
                               sleep=world.sleep, load=world).run())
    path = tmp_path_factory.mktemp("sweep") / "sweep.jsonl"
    record(path, result.to_json())
    return load_report(path)


@pytest.fixture(scope="module")
def plain_data(tmp_path_factory: pytest.TempPathFactory) -> ReportData:
    """The bundled campaign, no sweep: the whole recording's table is the chart's."""
    path = tmp_path_factory.mktemp("plain") / "campaign.jsonl"
    write_lines_recording(path, [(str(p), p.read_text().splitlines()) for p in CAMPAIGN])
    return load_report(path)


def figures(page: str) -> dict[str, ET.Element]:
    """Each chart of the page, parsed, by its key."""
    return {key: ET.fromstring(svg) for key, svg in FIGURE.findall(page)}


def by_id(svg: ET.Element) -> dict[str, ET.Element]:
    return {e.get("id", ""): e for e in svg.iter() if e.get("id")}


def texts(svg: ET.Element) -> list[str]:
    """Every <text> of a chart, entities decoded: what a reader sees."""
    return ["".join(e.itertext()) for e in svg.iter(f"{SVG}text")]


def segment(group: ET.Element) -> tuple[float, float, float, float]:
    paths = list(group.iter(f"{SVG}path"))
    assert len(paths) == 1, [p.get("d") for p in paths]
    m = SEGMENT.match(paths[0].get("d", "").strip())
    assert m, paths[0].get("d")
    x1, y1, x2, y2 = map(float, m.groups())
    return x1, y1, x2, y2


def colour(group: ET.Element, prop: str) -> str:
    """The first ``fill``/``stroke`` colour in a group's styles."""
    for e in group.iter():
        m = re.search(rf"\b{prop}: (#[0-9a-f]{{6}})", e.get("style", ""))
        if m:
            return m.group(1)
    raise AssertionError(f"no {prop} in {ET.tostring(group)[:300]!r}")


def test_a_sweeps_report_has_one_error_bar_per_setting_per_group(sweep_data: ReportData) -> None:
    page = render_report(sweep_data, "html")
    assert "<h2>Charts</h2>" in page
    charts = figures(page)
    assert list(charts) == ["settings", "cost", "time"]  # no per-position acceptance in these logs
    groups = sweep_data.outcomes
    assert len(groups) == 4
    svg = charts["settings"]
    ids = by_id(svg)
    words = texts(svg)
    for p, group in enumerate(groups):
        rows = sorted(group.rows, key=lambda r: r.steps)
        assert all(r.tps_half for r in rows)
        assert f"concurrency {group.concurrency}, {group.workload} prompts" in words  # the panel's title
        bars = [segment(ids[f"settings-ci-{p}-{i}"]) for i in range(len(rows))]
        assert f"settings-ci-{p}-{len(rows)}" not in ids
        # Vertical, left to right in step order, and as long as the interval: one scale per panel.
        assert all(x1 == x2 for x1, _, x2, _ in bars)
        assert [b[0] for b in bars] == sorted(b[0] for b in bars)
        scale = [abs(y2 - y1) / (2 * r.tps_half) for (_, y1, _, y2), r in zip(bars, rows, strict=True)]  # type: ignore[operator]
        assert max(scale) == pytest.approx(min(scale), rel=2e-3), scale
        # Higher tok/s is higher up (smaller y): the bars' midpoints rank as the means do.
        mids = [(y1 + y2) / 2 for _, y1, _, y2 in bars]
        assert sorted(range(len(rows)), key=lambda i: -mids[i]) == sorted(range(len(rows)),
                                                                          key=lambda i: rows[i].tps_mean)  # type: ignore[arg-type, return-value]
    assert "throughput: mean tok/s ± 95% CI (launch)" in words  # what the interval covers
    assert "setting (configuration, by speculative steps)" in words
    assert {r.label for g in groups for r in g.rows} <= set(words)  # the tick labels
    # Every axis with its unit, on every chart.
    assert {"throughput (tok/s)", "speculative steps (0 = no speculation)"} <= set(texts(charts["cost"]))
    assert {"throughput (tok/s)", "time (s since start, log time)"} <= set(texts(charts["time"]))
    # The time chart: every run its own line, and far more than three ticks on either axis.
    runs = sorted(sweep_data.run_labels)
    assert sorted(int(i.removeprefix("time-run-")) for i in by_id(charts["time"]) if i.startswith("time-run-")) == runs
    ticks = [t for t in texts(charts["time"]) if re.fullmatch(r"[−-]?\d+", t)]
    assert len(ticks) >= 10, ticks


def test_a_plain_recording_charts_its_table(plain_data: ReportData) -> None:
    page = render_report(plain_data, "html")
    charts = figures(page)
    assert list(charts) == ["settings", "cost", "time"]
    ids = by_id(charts["settings"])
    rows = plain_data.analysis.rows
    assert len(rows) == 4 and all(r.throughput and r.throughput.ci_half_width for r in rows)
    bars = [segment(ids[f"settings-ci-0-{i}"]) for i in range(len(rows))]
    assert "settings-ci-1-0" not in ids and "settings-ci-0-4" not in ids
    scale = {round(abs(y2 - y1) / (2 * r.throughput.ci_half_width), 3)  # type: ignore[union-attr, operator]
             for (_, y1, _, y2), r in zip(bars, rows, strict=True)}
    assert len(scale) == 1, scale
    assert [r.label for r in rows] == [t for t in texts(charts["settings"]) if t in {r.label for r in rows}]
    # One panel, no group titles; the cost chart's prediction is drawn next to the measurements.
    assert not any(t.startswith("concurrency ") for t in texts(charts["settings"]))
    assert "cost-model-0" in by_id(charts["cost"]) and "the model's prediction" in texts(charts["cost"])


def test_acceptance_per_position_when_the_engine_logs_it(tmp_path: Path) -> None:
    log = ROOT / "sample_logs" / "real" / "ngram_k3.log"
    path = tmp_path / "ngram.jsonl"
    write_lines_recording(path, [(str(log), log.read_text().splitlines())])
    data = load_report(path)
    row = next(r for r in data.analysis.rows if r.per_position)
    svg = figures(render_report(data, "html"))["acceptance"]
    words = texts(svg)
    assert {"acceptance rate (%)", "draft position (token k of the draft)", row.label} <= set(words)
    line = by_id(svg)["acceptance-row-0"]
    d = next(line.iter(f"{SVG}path")).get("d", "")
    ys = [float(y) for y in re.findall(r"[ML] [-\d.]+ ([-\d.]+)", d)]
    assert row.per_position is not None and len(ys) == len(row.per_position) == 3
    # Each point at its rate on the y axis (read from the axis' own ticks, 0 to 100 %).
    ticks = {}
    for g in svg.iter(f"{SVG}g"):
        if g.get("id", "").startswith("acceptance-ytick_"):
            use = next(g.iter(f"{SVG}use"))
            ticks["".join(texts(g))] = float(use.get("y", "nan"))
    assert {"0", "20", "40", "60", "80", "100"} <= set(ticks)
    per_pct = (ticks["0"] - ticks["100"]) / 100
    for y, rate in zip(ys, row.per_position, strict=True):
        assert y == pytest.approx(ticks["0"] - 100 * rate * per_pct, abs=0.05)


def test_one_colour_per_configuration_across_charts(sweep_data: ReportData) -> None:
    charts = figures(render_report(sweep_data, "html"))
    seen: dict[str, set[str]] = {}
    for p, group in enumerate(sweep_data.outcomes):
        ids = by_id(charts["settings"])
        for i, r in enumerate(sorted(group.rows, key=lambda r: r.steps)):
            hollow = (r.best or r is group.best) and not group.separated  # ☆: undecided, drawn in outline
            seen.setdefault(r.label, set()).add(colour(ids[f"settings-pt-{p}-{i}"], "stroke" if hollow else "fill"))
            seen[r.label].add(colour(ids[f"settings-ci-{p}-{i}"], "stroke"))
    ids = by_id(charts["cost"])
    assert len(sweep_data.costs) == len(sweep_data.outcomes)  # a cost model per load, one panel each
    for p, cost in enumerate(sweep_data.costs):
        for i, point in enumerate(sorted(cost.view.points, key=lambda q: q.steps)):
            seen.setdefault(point.label, set()).add(colour(ids[f"cost-pt-{p}-{i}"], "fill"))
    ids = by_id(charts["time"])
    for run, label in sweep_data.run_labels.items():
        seen.setdefault(label, set()).add(colour(ids[f"time-run-{run}"], "stroke"))
        seen[label].add(colour(ids[f"time-mean-{run}"], "stroke"))
    assert len(seen) == 4
    assert all(len(c) == 1 for c in seen.values()), seen  # one colour per configuration, in every chart
    assert len({next(iter(c)) for c in seen.values()}) == 4  # and configurations apart


def test_hostile_labels_are_shown_literally(tmp_path: Path) -> None:
    # Without their configuration line the runs are named after their sources, which the log side controls.
    names = ["<script>alert(1)</script>", "$x^2$ & \\$y"]
    sources = []
    for name, log in zip(names, CAMPAIGN[1:3], strict=True):
        sources.append((name, [ln for ln in log.read_text().splitlines() if "server_args" not in ln]))
    path = tmp_path / "evil.jsonl"
    write_lines_recording(path, sources)
    data = load_report(path)
    page = render_report(data, "html")
    assert "<script" not in page.lower()
    charts = figures(page)
    for key in ("settings", "time"):
        words = texts(charts[key])
        for name in names:
            assert f"unknown config ({name})" in words, (key, words)  # literal: no mathtext, no markup


def test_the_page_is_self_contained_and_deterministic(sweep_data: ReportData) -> None:
    page = render_report(sweep_data, "html")
    assert render_report(sweep_data, "html") == page
    assert "<script" not in page and "<img" not in page and "<image" not in page
    # The only URLs are the SVG namespaces (names, never fetched); every reference is to an id on the page.
    assert set(re.findall(r"https?://[^\s\"'<>)]+", page)) <= {"http://www.w3.org/2000/svg",
                                                               "http://www.w3.org/1999/xlink"}
    ids = re.findall(r'\bid="([^"]+)"', page)
    assert len(ids) == len(set(ids))  # four charts on one page: no id twice
    refs = set(re.findall(r'url\(#([^)]+)\)', page)) | set(re.findall(r'href="#([^"]+)"', page))
    assert refs and refs <= set(ids)


labels = st.text(st.sampled_from("abcXYZ019 <>&\"'$\\^_{}%#;/é→★"), min_size=1, max_size=30).filter(str.strip)


@settings(max_examples=15)  # ~0.35 s each (a matplotlib layout): the file stays under ~20 s
@given(rows=st.lists(st.tuples(labels, st.floats(1, 1e5), st.one_of(st.none(), st.floats(0.01, 1.0))),
                     min_size=1, max_size=6))
def test_generated_labels_and_values(rows: list[tuple[str, float, float | None]]) -> None:
    settings_ = tuple(Setting(label, i, mean, None if half is None else half * mean, i == 0, False)
                      for i, (label, mean, half) in enumerate(rows))
    colours = colour_map(s.label for s in settings_)
    svg_text = settings_chart([Panel(None, None, settings_)], colours)
    assert svg_text is not None and "<script" not in svg_text
    svg = ET.fromstring(svg_text)
    words = texts(svg)
    for s in settings_:
        assert label_text(s.label) in words  # every tick label as written
    ids = by_id(svg)
    for i, s in enumerate(settings_):
        assert (f"settings-ci-0-{i}" in ids) == (s.half is not None)
        assert colour(ids[f"settings-pt-0-{i}"], "fill") == colours[s.label]
    assert settings_chart([Panel(None, None, settings_)], colours) == svg_text


def test_label_text_keeps_labels_inert() -> None:
    assert label_text("$x^2$") == "$x^2$"
    assert label_text("a\nb\x1b[2J") == plain("a\nb\x1b[2J") and "\n" not in label_text("a\nb")
    long = "x" * 100
    assert len(label_text(long)) == 48 and label_text(long).endswith("…")
    assert settings_chart([], {}) is None


def test_matplotlib_is_imported_only_to_draw_and_changes_nothing_global(plain_data: ReportData) -> None:
    code = ("import sys\n"
            "import specmon.output.report, specmon.ui.app\n"
            "assert 'matplotlib' not in sys.modules, 'imported by the dashboard'\n"
            "from specmon.output.report import load_report, render_report\n"
            "import matplotlib\n"
            # (copies: reading the global rcParams' backend would pick one, importing pyplot)
            "before = dict(matplotlib.rcParams.copy())\n"
            f"render_report(load_report({plain_data.path!r}), 'html')\n"
            "assert dict(matplotlib.rcParams.copy()) == before, 'settings changed'\n"
            "assert 'matplotlib.pyplot' not in sys.modules, 'pyplot imported'\n")
    started = time.monotonic()
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert run.returncode == 0, run.stderr[-2000:]
    assert time.monotonic() - started < 60


def test_no_chart_without_samples(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    write_lines_recording(path, [("x.log", ["nothing to see"])])
    data = load_report(path)
    assert report_charts(data) == []
    page = render_report(data, "html")
    assert "(no throughput samples)" in page and "<svg" not in page
