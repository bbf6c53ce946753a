"""A file's text in a scrollable full screen (the sweep report from the verdict panel)."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import ScrollableContainer
from textual.screen import Screen
from textual.widgets import Static

from specmon.ui.literal import literal
from specmon.ui.screens.closing import while_attached
from specmon.ui.widgets.key_footer import KeyFooter

__all__ = ["TextViewScreen"]


class TextViewScreen(Screen[None]):
    """``title`` over ``text``, scrollable both ways (arrows, PgUp/PgDn, Home/End); escape closes.

    Args:
        title: What is shown (a path).
        text: The text, shown as is (no markup).
    """

    BINDINGS = [Binding("escape,q", "close", "Back", key_display="esc/q"), Binding("c", "copy_title", "Copy path")]

    DEFAULT_CSS = """
    TextViewScreen #text-view-title { height: 1; background: $panel; color: $text; text-style: bold; padding: 0 1; }
    TextViewScreen #text-view-scroll { height: 1fr; padding: 0 1; overflow: auto auto; }
    TextViewScreen #text-view-body { width: auto; }
    """

    def __init__(self, title: str, text: str) -> None:
        super().__init__()
        self.title_text = title
        self.body = text

    def compose(self) -> ComposeResult:
        yield Static(literal(self.title_text), id="text-view-title", markup=False)
        # Both ways: a report's tables are wider than 80 columns, and cutting them would lose data.
        with ScrollableContainer(id="text-view-scroll"):
            yield Static(literal(self.body, newlines=True), id="text-view-body", markup=False)
        yield KeyFooter(compact=True)  # keys are dropped from Textual's Footer at 80 columns

    @while_attached
    def on_mount(self) -> None:
        self.query_one("#text-view-scroll").focus()

    def action_close(self) -> None:
        """Back to where it was opened from."""
        self.dismiss(None)

    def action_copy_title(self) -> None:
        """Copy the path to the clipboard."""
        self.app.copy_to_clipboard(self.title_text)
        self.notify(f"copied: {self.title_text}", timeout=4)
