"""A sweep's one verdict: the verdict panel, the run table after a sweep and the sweep report show
the same numbers, because all three render :func:`specmon.output.tables.sweep_outcome` of the one
document the sweep recorded. Also: the report's list of restarts has every start, plural right."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specmon.model.session import Session
from specmon.model.stopping import StoppingRule
from specmon.output.recording import RecordedIngest, Recorder
from specmon.output.report import load_report, render_report, restart_lines, steps_text
from specmon.output.tables import pct_interval_text, sweep_outcome
from specmon.ui.screens.sweep_verdict import verdict_lines
from specmon.ui.views import outcome_table
from tests.support.sweepsim import run_sweep

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = [ROOT / "sample_logs" / f"sim_eagle3_{n}.log" for n in ("nospec", "1step", "2step", "3step")]
#: "+6.6% (+5.9…+7.4%)" or "+6.6% (+5.9…+7.4)": the three numbers.
TRIPLE = re.compile(r"([+-]\d+\.\d)% \(([+-]\d+\.\d)…([+-]\d+\.\d)%?\)")


def numbers(text: str) -> tuple[str, str, str]:
    m = TRIPLE.search(text)
    assert m is not None, text
    return m.group(1), m.group(2), m.group(3)


def record(path: Path, doc: dict[str, object], restarts: list[dict[str, object]] = ()) -> None:  # type: ignore[assignment]
    """A recording of the bundled campaign (the whole session) with the sweep's document."""
    session = Session()
    with Recorder(path, meta={"command": "demo"}) as rec:
        ingest = RecordedIngest(session, rec)
        for p in CAMPAIGN:
            ingest.begin_source(str(p))
            ingest.feed(p.read_text().splitlines())
        for r in restarts:
            rec.restart(**r)
        rec.verdict(doc)
        ingest.close()


@pytest.mark.parametrize("seed", [1, 4, 7])
def test_panel_table_and_report_show_one_verdict(seed: int, tmp_path: Path) -> None:
    result = run_sweep(seed, steps=(0, 1, 2, 3), rule=StoppingRule(looks=2, min_samples=20, max_samples=120))
    assert result.verdict is not None and result.verdict.speedup is not None
    doc = result.to_json()
    path = tmp_path / "rec.jsonl"
    record(path, doc)

    live = sweep_outcome(json.loads(json.dumps(doc)))  # what the dashboard builds, through JSON as recorded
    assert live is not None and live.best is not None and live.speedup_text is not None
    data = load_report(path)
    reported = data.outcome
    assert reported == live  # the report reads back the very same verdict

    want = numbers(live.speedup_text)
    # The numbers are the sweep's own speed-up (rounded once, to what the JSON keeps).
    sp = result.verdict.speedup
    assert abs(float(want[0]) - sp.pct) <= 0.051

    # The panel.
    panel = verdict_lines(live, report=path)
    assert numbers(panel["head"][0]) == want
    mark = live.answer.mark if live.answer else ""
    assert mark == ("★" if live.separated else "☆")  # ★ only for a declared winner
    best_line = next(line for line in panel["table"] if line.startswith(mark))
    assert numbers(best_line) == want

    # The run table after the sweep: the best row's cell, and the line under the table.
    table = outcome_table(live)
    best_row = next(r for r in table.rows if r.best)
    assert numbers(best_row.vs) == want and numbers(table.verdict) == want

    # The report: its verdict and its sweep table; the whole-recording table gives no other speed-up.
    md = render_report(data, "markdown")
    verdict_part = md.split("## Verdict", 1)[1].split("##", 1)[0]
    assert numbers(verdict_part) == want
    sweep_part = md.split("## Configurations measured by the sweep", 1)[1].split("##", 1)[0]
    assert numbers(next(line for line in sweep_part.splitlines() if line.startswith(f"| **{mark}"))) == want
    whole = md.split("## All counted samples", 1)[1].split("##", 1)[0]
    assert "vs baseline" not in whole and not TRIPLE.search(whole)
    assert data.sentence == live.sentence
    html = render_report(data, "html")
    assert live.speedup_text in html


def test_the_interval_text_is_one_format() -> None:
    assert pct_interval_text(6.6, 5.9, 7.4) == "+6.6% (+5.9…+7.4%)"
    assert pct_interval_text(6.6, 5.9, 7.4, closing_pct=False) == "+6.6% (+5.9…+7.4)"
    assert pct_interval_text(-1.25, None, None) == "-1.2%"


def test_not_a_sweep_document() -> None:
    assert sweep_outcome(None) is None
    assert sweep_outcome({"verdict": {"sentence": "x"}}) is None  # a summarize verdict: no sweep table


def test_restarts_list_every_start_in_order_with_plurals(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    doc = run_sweep(2, steps=(0, 2), rule=StoppingRule(looks=1, min_samples=20, max_samples=20)).to_json()
    restarts = [
        {"t": 100.0, "steps": 1, "phase": "started", "kind": "first start"},
        {"t": 110.0, "steps": 1, "phase": "finished", "kind": "first start", "ok": True},
        {"t": 200.0, "steps": 3, "phase": "finished", "kind": "restart", "ok": False, "detail": "crashed"},
        {"t": 300.0, "steps": 0, "phase": "finished", "ok": True},  # the sweep's own entries carry no kind
        {"t": 150.0, "steps": 2, "phase": "finished", "kind": "restart", "ok": True},
    ]
    record(path, doc, restarts)
    lines = restart_lines(load_report(path))
    assert [line.split(": ", 1)[1] for line in lines] == [
        "first start → 1 step — ready", "restart → 2 steps — ready", "restart → 3 steps — failed: crashed",
        "sweep restart → no speculation — ready"]
    md = render_report(load_report(path), "markdown")
    # ("0→1 steps" in the cost model is a range of step counts, not a count.)
    assert not re.search(r"(?<![→\d])1 steps", md) and "first start → 1 step" in md
    assert steps_text(None) == "? steps"


@pytest.mark.parametrize("raw", [6.749, 6.75, 6.7501, 6.65, 6.649999, -0.05, -0.049, 12.345])
def test_the_sweeps_sentence_prints_the_digits_of_its_stored_numbers(raw: float) -> None:
    """The headless sweep's sentence (from the live figures) and a report read back from its
    recording (the JSON's 2 decimals) give the same digits: 6.749 is stored 6.75, both say 6.8."""
    from specmon.model.stats import Ratio
    from specmon.model.stopping import _pct_text

    stored = pct_interval_text(round(raw, 2), round(raw - 1, 2), round(raw + 1, 2))
    assert _pct_text(Ratio(raw, raw - 1, raw + 1)) == stored
