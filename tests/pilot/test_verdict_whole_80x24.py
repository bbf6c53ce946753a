"""The six-run sample campaign's verdict at 80×24, whole, and alike: in ``summarize`` (an 80-column
terminal), in the replayed dashboard and in the sweep panel; no ★ beside "no winner declared".

The campaign's leader (2 steps) is not separated from 3 steps: every surface gives it ☆ and the
words "leads, undecided", and the sentence is on screen to its last word.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from rich.cells import cell_len
from textual.widgets import Static

from specmon.ingest.summarize import ingest_files
from specmon.model.analysis import analyze
from specmon.output.tables import sweep_outcome
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from specmon.ui.widgets.run_table import RunTable
from tests.support.app_factory import settle, sweep_app, wait_for
from tests.support.onscreen import settled_verdict, shown_lines, words
from tests.support.verdict_doc import sweep_doc

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = sorted(str(p) for p in (ROOT / "sample_logs").glob("sim_eagle3_*.log"))
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def test_summarize_in_an_80_column_terminal_prints_the_whole_verdict() -> None:
    assert len(CAMPAIGN) == 6
    env = {**os.environ, "COLUMNS": "80", "LINES": "24", "FORCE_COLOR": "1", "TERM": "xterm-256color"}
    env.pop("NO_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "specmon", "summarize", *CAMPAIGN], capture_output=True,
                          text=True, env=env, timeout=120, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    out = ANSI.sub("", proc.stdout)
    lines = out.splitlines()
    assert all(cell_len(line) <= 80 for line in lines), [line for line in lines if cell_len(line) > 80]
    sentence = analyze(ingest_files(CAMPAIGN).runs).verdict.sentence
    assert " ".join(words(sentence)) in " ".join(words(out))  # whole, in order, wrapped at spaces only
    assert "Verdict (☆ leads, undecided):" in out and "☆ EAGLE3 2 steps" in out and "★" not in out
    assert "no winner declared" in out
    # A column that did not fit is named, never cut at the edge.
    assert "Not shown at 80 columns: accept rate" in out


@pytest.mark.parametrize("size", [(80, 24), (100, 30), (120, 40), (200, 60)])
async def test_the_replayed_dashboard_shows_the_whole_verdict_with_its_mark(isolated_home: Path,
                                                                           size: tuple[int, int]) -> None:
    app = sweep_app()
    async with app.run_test(size=size) as pilot:
        verdict, text = await settled_verdict(app, pilot)
        lines = shown_lines(verdict)
        assert words(" ".join(lines)) == words(text), (lines, text)  # every word on screen, in order
        # ... and inside its box: the box's height cut the third line ("no winner" was the last shown).
        shown = [line for line in lines if line.strip()]
        box = app.query_one("#table-box")
        assert verdict.region.y + len(shown) <= box.content_region.bottom, (verdict.region, box.content_region)
        assert text.startswith("☆ leads, undecided: EAGLE3 2 steps") and "no winner declared." in text
        table = app.query_one(RunTable)
        marks = [table.get_row_at(i)[0].plain for i in range(table.row_count)]
        assert sum("☆" in m for m in marks) == 1 and not any("★" in m for m in marks)


@pytest.mark.parametrize("size", [(80, 24), (60, 15), (200, 50)])
async def test_the_sweep_panel_shows_the_whole_verdict_at_every_size(isolated_home: Path,
                                                                     size: tuple[int, int]) -> None:
    analysis = analyze(ingest_files(CAMPAIGN).runs)
    outcome = sweep_outcome(sweep_doc(analysis, pending_below=600))  # a setting still pending, as mid-sweep
    assert outcome is not None and outcome.answer is not None and outcome.answer.mark == "☆"
    app = sweep_app()
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        app.push_screen(SweepVerdictScreen(outcome, report=None, finished=False))
        await wait_for(pilot, lambda: isinstance(app.screen, SweepVerdictScreen), "the sweep panel")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, SweepVerdictScreen)
        box = screen.query_one("#verdict-box")
        assert box.region.right <= size[0]
        head_id = "#verdict-head-scrolled" if screen.has_class("-short") else "#verdict-head"
        head = screen.query_one(head_id, Static)
        table = screen.query_one("#verdict-table", Static)
        for widget in (head, table):
            text = str(widget.render())
            assert words(" ".join(shown_lines(widget))) == words(text), (size, shown_lines(widget))
        shown = "\n".join(shown_lines(table))
        # Every setting's name whole, its status whole ("(pending)", never "(pendin"), one mark: ☆.
        for row in outcome.rows:
            assert row.label in shown
        assert "(pendin" not in shown.replace("(pending)", "")
        assert "☆ EAGLE3 2 steps" in shown and "★" not in shown
        head_text = str(head.render())
        assert "☆ leads, undecided: EAGLE3 2 steps" in head_text and "★" not in head_text
        if size[0] >= 120:  # a wide screen: the box is as wide as its table, every column shown
            assert "(pending)" in shown and "vs baseline" in shown and "not shown" not in shown
        else:  # a column that does not fit is named
            assert "(pending)" in shown or "not shown at this width:" in " ".join(words(shown))

