"""What a widget shows on screen, as text: the checks that an answer is whole at a terminal's size."""

from __future__ import annotations

from typing import Any

from textual.widget import Widget
from textual.widgets import Static

from tests.support.app_factory import settle


def shown_lines(widget: Widget) -> list[str]:
    """The lines a widget draws, as text (its content region, borders included)."""
    return [widget.render_line(y).text for y in range(widget.size.height)]


def words(text: str) -> list[str]:
    return text.split()


async def settled_verdict(app: Any, pilot: Any) -> tuple[Static, str]:
    """The replayed dashboard's verdict once the app has settled and drawn: the widget and its text."""
    await settle(app, pilot)
    await pilot.pause()
    verdict = app.query_one("#verdict", Static)
    return verdict, str(verdict.render())
