"""Reports per load (issue 42, item 5): a report of a sweep over concurrency 1 and 4 pools nothing.

The recording is a real one: ``specmon sweep --demo --concurrency 1,4`` restarts the simulated
SGLang server for every setting, drives its load and records the session, as a user's sweep
does. Its report must have no figure over both loads, a cost model at concurrency 1 equal to the
one the sweep printed, every run of the time charts on its own span with every legend entry
drawn, the Markdown whole at 80 columns, and an HTML page nothing of which is wider than a
1280 px browser window (Debian's chromium, headless). The helpers behind them are tested over
the class of their inputs (hypothesis), and a recording whose log holds a crash shows it in
every format.
"""

from __future__ import annotations

import csv
import html as htmllib
import io
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.output.recording import write_lines_recording
from specmon.output.report import ReportData, load_report, render_report, text_chart
from specmon.output.report_series import CHART_WIDTH, lay_runs_apart
from specmon.output.report_text import WIDTH, fit_table, table_row, wrap, wrap_block
from tests.unit.test_report_browser import require_chromium

ROOT = Path(__file__).resolve().parents[2]
CRASH_LOG = ROOT / "tests" / "data" / "crash_logs" / "vllm_v1_worker_died_art_201.log"


@pytest.fixture(scope="module")
def sweep(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], ReportData]:
    """A demo sweep over no speculation, 2 and 5 steps at concurrency 1 and 4, and its report: one launch per
    setting (``--order given``: about 20 s), each launch measured at both loads in turn."""
    home = tmp_path_factory.mktemp("sweep")
    env = {**os.environ, "XDG_DATA_HOME": str(home / "data"), "XDG_CONFIG_HOME": str(home / "config"),
           "HOME": str(home)}
    proc = subprocess.run([sys.executable, "-m", "specmon", "sweep", "--demo", "--steps", "0,2,5", "--concurrency",
                           "1,4", "--max-samples", "200", "--order", "given", "--format", "json", "--seed", "4"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    return doc, load_report(doc["recording"])


def numbers(text: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d+", text)]


def test_no_figure_pools_the_two_loads(sweep: tuple[dict[str, Any], ReportData]) -> None:
    doc, data = sweep
    assert [g.concurrency for g in data.outcomes] == [1, 4]
    # Each launch ran both loads: the session's rows pool 1 and 4 in flight (what the report printed).
    pooled = {r.label: r.throughput.mean for r in data.analysis.rows if r.throughput is not None}
    per_load = {(r["label"], r["concurrency"]): r["throughput"]["mean"] for r in doc["runs"]}
    for label, mean in pooled.items():
        assert per_load[(label, 1)] < mean < per_load[(label, 4)]

    md = render_report(data, "markdown")
    page = htmllib.unescape(render_report(data, "html"))
    for text in (md, page):
        flat = " ".join(text.split())
        assert "Not pooled: the sweep measured 2 loads (concurrency 1, 4)" in flat
        for mean in pooled.values():
            assert f"{mean:.1f} ±" not in text  # no pooled figure anywhere
        for mean in per_load.values():
            assert f"{mean:.1f} ±" in text  # every load's own
    # Every table row of the Markdown belongs to one load's table.
    tables = md.split("## Configurations measured by the sweep")[1:]
    assert len(tables) == 2 and all("| no speculation |" in t for t in tables)
    assert md.count("| no speculation |") == 2

    rep = json.loads(render_report(data, "json"))
    assert all(r["throughput"] is None and r["vs_baseline_pct"] is None for r in rep["runs"])
    assert rep["pooled"]["pooled"] is False and rep["verdict"]["sentence"] == data.sentence
    assert [(g["concurrency"], len(g["rows"])) for g in rep["groups"]] == [(1, 3), (4, 3)]
    assert [c["concurrency"] for c in rep["report"]["cost_models"]] == [1, 4]

    rows = list(csv.DictReader(io.StringIO(render_report(data, "csv"))))
    assert {(r["label"], int(r["concurrency"])): float(r["tps_mean"]) for r in rows} == pytest.approx(per_load, abs=1e-3)


def test_the_cost_model_at_1_is_the_sweeps(sweep: tuple[dict[str, Any], ReportData]) -> None:
    doc, data = sweep
    printed = doc["cost_model"]  # what the sweep printed: its concurrency-1 settings
    assert printed["concurrency"] == 1
    costs = data.costs
    assert [(c.concurrency, c.view.concurrency) for c in costs] == [(1, 1), (4, 4)]
    at1 = costs[0].view.to_json()
    assert at1["fit"]["plain_ms"] == pytest.approx(printed["fit"]["plain_ms"], abs=0.002)
    assert at1["fit"]["per_step_ms"] == pytest.approx(printed["fit"]["per_step_ms"], abs=0.002)
    for mine, theirs in zip(at1["points"], printed["points"], strict=True):
        assert mine["steps"] == theirs["steps"]
        assert mine["tps"] == pytest.approx(theirs["tps"], abs=0.002)
        assert mine["cycle_ms"] == pytest.approx(theirs["cycle_ms"], abs=0.002)
    # The concurrency-1 numbers of the sweep's own table: no speculation's step is 1000 / its tok/s.
    base = next(r for r in doc["runs"] if r["steps"] == 0 and r["concurrency"] == 1)
    assert at1["fit"]["plain_ms"] == pytest.approx(1000 / base["throughput"]["mean"], abs=0.002)
    # Drawn as printed, each load its own panel and heading.
    md = render_report(data, "markdown")
    assert "## Cost model at concurrency 1\n" in md and "## Cost model at concurrency 4\n" in md
    assert f"(plain decode step {printed['fit']['plain_ms']:.1f} ms)" in md.split("## Cost model at concurrency 1")[1]
    svg = render_report(data, "html").split('id="chart-cost"', 1)[1].split("</figure>", 1)[0]
    assert "cost-model-0" in svg and "cost-model-1" in svg and "cost-model-2" not in svg


def test_runs_keep_their_own_spans_and_every_legend_entry_is_drawn(sweep: tuple[dict[str, Any], ReportData]) -> None:
    _, data = sweep
    t = np.asarray(data.series.t)  # type: ignore[attr-defined]
    run = np.asarray(data.series.run)  # type: ignore[attr-defined]
    ids = sorted(set(run.tolist()))
    assert len(ids) == 3
    spans = [(t[run == r].min(), t[run == r].max()) for r in ids]
    assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:], strict=False)), spans  # one after another

    chart = text_chart(data)
    grid = "\n".join(line.split("│", 1)[1] for line in chart if "│" in line)
    legend = " ".join(" ".join(chart).split())
    for i, r in enumerate(ids):
        letter = "ABC"[i]
        assert letter in grid and f"{letter} = run {r}: {data.run_labels[r]}" in legend
    assert all(len(line) <= WIDTH for line in chart if "│" in line or "└" in line)  # the plot; its legend wraps

    page = render_report(data, "html")
    svg = page.split('id="chart-time"', 1)[1].split("</figure>", 1)[0]
    for r in ids:
        assert f'id="time-run-{r}"' in svg
    for label in {data.run_labels[r] for r in ids}:
        assert htmllib.escape(label) in svg


def test_the_markdown_is_whole_at_80_columns(sweep: tuple[dict[str, Any], ReportData]) -> None:
    _, data = sweep
    md = render_report(data, "markdown")
    wide = [line for line in md.splitlines() if len(line) > WIDTH]
    assert not wide, wide
    # The narrowed tables say what they left out.
    assert "left out to keep the table within 80 columns" in " ".join(md.split())
    # No ★ beside an undecided verdict; the leader's mark is explained where it is shown.
    for g in data.outcomes:
        table = md.split(f"## Configurations measured by the sweep{g.group_text}\n", 1)[1].split("\n## ", 1)[0]
        if not g.separated:
            assert "★" not in table and "☆ leads, undecided" in table


PROBE = """<script>
window.addEventListener('load', () => {
  const bad = [];
  const root = document.documentElement, body = document.body;
  if (root.scrollWidth > root.clientWidth) bad.push('page ' + root.scrollWidth + ' > ' + root.clientWidth);
  if (body.scrollWidth > body.clientWidth) bad.push('body ' + body.scrollWidth + ' > ' + body.clientWidth);
  const right = body.getBoundingClientRect().right;
  for (const el of body.querySelectorAll('*')) {
    if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') continue;
    const what = el.tagName + ' ' + (el.textContent || '').slice(0, 50);
    if (el.clientWidth > 0 && el.scrollWidth > el.clientWidth) bad.push('box ' + what);
    if (el.getBoundingClientRect().right > right + 0.5) bad.push('edge ' + what);
  }
  const out = document.createElement('pre');
  out.id = 'overflow';
  out.textContent = JSON.stringify(bad);
  body.appendChild(out);
});
</script>"""


def overflow(browser: str, page: Path, profile: Path) -> list[str]:
    """What of ``page`` is wider than its box or the page, in chromium at 1280 px (a probe script added)."""
    probe = page.with_suffix(".probe.html")
    probe.write_text(page.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1280,1000", "--hide-scrollbars",
           f"--user-data-dir={profile}", "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        dom, _ = proc.communicate(timeout=60)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # its own session: whatever it left, by id
        except ProcessLookupError:
            pass
        proc.wait()
    found = re.search(r'<pre id="overflow">(.*?)</pre>', dom.decode(errors="replace"), re.S)
    assert found, dom[-2000:]
    return list(json.loads(htmllib.unescape(found.group(1))))


@pytest.mark.chromium
def test_nothing_overflows_the_page_at_1280_px(sweep: tuple[dict[str, Any], ReportData], tmp_path: Path) -> None:
    browser = require_chromium()
    page = tmp_path / "report.html"
    page.write_text(render_report(sweep[1], "html"), encoding="utf-8")
    assert overflow(browser, page, tmp_path / "profile") == []
    # The probe sees an overflow where there is one: the page without its wrapping rules.
    unwrapped = tmp_path / "unwrapped.html"
    unwrapped.write_text(page.read_text(encoding="utf-8").replace("white-space: pre-wrap;", ""), encoding="utf-8")
    assert any("Schedule" in b for b in overflow(browser, unwrapped, tmp_path / "profile2"))


def test_a_crash_is_in_every_format(tmp_path: Path) -> None:
    path = tmp_path / "crash.jsonl"
    write_lines_recording(path, [(str(CRASH_LOG), CRASH_LOG.read_text().splitlines())])
    data = load_report(path)
    assert data.analysis.crashes
    error = data.analysis.crashes[0].error
    md = re.sub(r"\\(.)", r"\1", " ".join(render_report(data, "markdown").split()))
    assert "## Crashes" in md and error in md
    assert error in htmllib.unescape(render_report(data, "html"))
    assert [c["error"] for c in json.loads(render_report(data, "json"))["crashes"]] == [error]
    rows = list(csv.DictReader(io.StringIO(render_report(data, "csv"))))
    assert error in [r["crash_error"] for r in rows]


# --------------------------------------------------------------------------- the helpers, over their inputs

words = st.text(st.sampled_from("abcXYZ019-+*#>=.|`~()…±→é"), min_size=1, max_size=14)
texts = st.lists(words, min_size=1, max_size=40).map(" ".join)


@given(text=texts, width=st.integers(20, 100))
def test_wrap_keeps_every_word_and_starts_no_block(text: str, width: int) -> None:
    lines = wrap(text, width)
    assert all(len(line) <= width for line in lines)
    if all(len(w) <= width // 2 for w in text.split()):  # no word (with a glued marker) longer than a line
        assert " ".join(" ".join(lines).split()) == " ".join(text.split())  # no word cut, none lost
        for line in lines[1:]:
            first = line.split(" ", 1)[0]
            assert not re.fullmatch(r"[-+*]|#{1,6}|\d{1,9}[.)]|=+|-+", first), lines
            assert not first.startswith((">", "```", "~~~", "|"))


@given(lines=st.lists(st.tuples(st.integers(0, 6), texts), min_size=1, max_size=8))
def test_wrap_block_indents_continuations_under_their_line(lines: list[tuple[int, str]]) -> None:
    block = [" " * indent + text for indent, text in lines]
    out = wrap_block(block)
    assert all(len(line) <= WIDTH for line in out)
    assert " ".join(" ".join(out).split()) == " ".join(" ".join(block).split())


cells = st.text(st.sampled_from("abc 019.±%…"), min_size=1, max_size=22).map(str.strip).filter(bool)


@given(rows=st.lists(st.tuples(cells, cells, cells, cells, cells, cells), min_size=1, max_size=5))
def test_fit_table_leaves_out_accept_columns_only_while_too_wide(rows: list[tuple[str, ...]]) -> None:
    headers = ["configuration", "n", "tok/s", "vs baseline", "accept len", "accept rate"]
    kept, body, dropped = fit_table(headers, [list(r) for r in rows])
    assert dropped == ["accept rate", "accept len"][: len(dropped)]
    assert kept == [h for h in headers if h not in dropped]
    def widest(names: list[str]) -> int:
        return max(len(table_row([r[headers.index(h)] for h in names])) for r in [headers, *rows])

    if dropped:  # it was too wide with the last column it left out
        assert widest([h for h in headers if h not in dropped[:-1]]) > WIDTH
    else:
        assert widest(headers) <= WIDTH
    assert all(len(b) == len(kept) for b in body)


spans = st.lists(st.tuples(st.floats(0, 500), st.floats(0.5, 300), st.integers(1, 60)), min_size=1, max_size=12)


@settings(max_examples=60)
@given(runs=spans, beside=st.booleans())
def test_runs_received_one_after_another_are_laid_apart(runs: list[tuple[float, float, int]], beside: bool) -> None:
    t = np.concatenate([start + np.linspace(0, length, n) for start, length, n in runs])
    run = np.concatenate([np.full(n, i + 1, dtype=np.uint32) for i, (_, _, n) in enumerate(runs)])
    received = {i + 1: (0.0, 10.0) if beside else (10.0 * i, 10.0 * i + 5) for i in range(len(runs))}
    laid, spans_ = lay_runs_apart(t.copy(), run, received)
    for i, (start, length, n) in enumerate(runs):
        own = laid[run == i + 1]
        assert np.allclose(np.diff(own), np.diff(start + np.linspace(0, length, n)))  # its own pace kept
    if beside:  # side by side (a fleet): as they ran
        assert np.array_equal(laid, t)
    else:
        assert all(a.end <= b.start + 1e-9 for a, b in zip(spans_, spans_[1:], strict=False))
        assert all(sp.shift >= 0 for sp in spans_)

    data = SimpleNamespace(series=_Series(laid - laid.min(), np.linspace(50, 90, len(t)), run),
                           time_basis="log time", run_labels={i + 1: f"setting {i}" for i in range(len(runs))})
    chart = text_chart(data)
    assert all(len(line) <= 9 + CHART_WIDTH == WIDTH for line in chart if "│" in line or "└" in line)
    grid = "".join(line.split("│", 1)[1] for line in chart if "│" in line)
    legend = " ".join(chart[-2:] if chart[-1].startswith("(") else chart[-1:])
    letters = re.findall(r"\b([A-Z]) = run", legend)
    assert letters and all(letter in grid for letter in letters)
    if not beside:  # runs apart: every run drawn, none left out of the legend
        assert len(letters) == len(runs)


class _Series:
    """A series as the report keeps it: three arrays."""

    def __init__(self, t: np.ndarray, tps: np.ndarray, run: np.ndarray) -> None:
        self.t, self.tps, self.run = t, tps, run

    def __len__(self) -> int:
        return len(self.t)
