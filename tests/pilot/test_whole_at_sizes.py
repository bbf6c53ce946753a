"""The answer on screen, whole, at every size: 60x15, 80x24, 120x40 and 200x60.

The verdict under the run table is the product's answer: it wraps, every word of it on
screen, never cut with an ellipsis. The metric panels' notes and the status line end in a
whole word. Every screen's footer keeps every key it offers inside the screen (Textual's own
footer dropped the event log's r, s, ? and q at 80 columns).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets._footer import FooterKey

from specmon.ui.screens.events_screen import EventsScreen
from specmon.ui.screens.help import HelpScreen
from specmon.ui.screens.run_details import RunDetailsScreen
from specmon.ui.screens.text_view import TextViewScreen
from specmon.ui.widgets.metric_panel import MetricPanel
from tests.support.app_factory import settle, sweep_app, wait_for
from tests.support.onscreen import settled_verdict, shown_lines, words

SIZES = ((60, 15), (80, 24), (120, 40), (200, 60))


@pytest.mark.parametrize("size", SIZES)
async def test_the_verdict_is_on_screen_whole_and_panels_end_in_whole_words(isolated_home: Path,
                                                                            size: tuple[int, int]) -> None:
    app = sweep_app()
    async with app.run_test(size=size) as pilot:
        verdict, text = await settled_verdict(app, pilot)
        assert len(text) > 80  # longer than an 80-column line: the case that was cut
        if verdict.display:
            lines = shown_lines(verdict)
            assert not any(line.rstrip().endswith("…") for line in lines), lines
            assert words(" ".join(lines)) == words(text), (lines, text)  # every word, in order
            assert verdict.region.bottom <= size[1] - 1  # above the footer
        for panel in app.query(MetricPanel):
            for line in shown_lines(panel):
                assert not line.rstrip(" │").endswith("…"), (size, line)


async def _open(app: Any, pilot: Any, name: str) -> None:
    if name == "events":
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, EventsScreen), "the event log")
    elif name == "details":
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailsScreen), "the details")
    elif name == "help":
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
    elif name == "report":
        app.push_screen(TextViewScreen("/tmp/some/report.md", "| a | b |\n" + "x" * 300))
        await wait_for(pilot, lambda: isinstance(app.screen, TextViewScreen), "the report viewer")
    await pilot.pause()
    await pilot.pause()


@pytest.mark.parametrize("size", [(80, 24), (60, 15)])
@pytest.mark.parametrize("name", ["main", "events", "details", "report"])  # help is a modal: no footer
async def test_every_footer_key_is_on_screen(isolated_home: Path, size: tuple[int, int], name: str) -> None:
    app = sweep_app()
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot)
        await _open(app, pilot, name)
        w, h = size
        offered = {a.binding.action for a in app.screen.active_bindings.values() if a.binding.show}
        keys = [k for k in app.screen.query(FooterKey)]
        shown = {k.action for k in keys if k.region.width > 0 and k.region.right <= w and k.region.bottom <= h}
        assert offered <= shown, (name, size, offered - shown)
        if name in ("details", "report"):
            assert any(k.key_display == "esc/q" for k in keys)  # q closes it, and says so
