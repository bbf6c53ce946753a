"""The question ``q`` or Ctrl+C asks while a restart or a sweep is running."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from specmon.ui.literal import literal
from specmon.ui.screens.closing import while_attached

__all__ = ["QuitConfirmScreen"]


class QuitConfirmScreen(ModalScreen[bool]):
    """Quit anyway? ``y`` (or Ctrl+C again) quits, ``n``/escape stays.

    Args:
        busy: What is running (``a restart is in progress``).
    """

    BINDINGS = [Binding("y", "quit_now", "Quit"), Binding("escape,n", "stay", "Stay")]

    DEFAULT_CSS = """
    QuitConfirmScreen {
        align: center middle;
    }
    QuitConfirmScreen > #quit-box {
        width: 64;
        max-width: 100%;
        height: auto;
        border: round $warning;
        background: $surface;
        padding: 0 1;
    }
    QuitConfirmScreen #quit-title {
        text-style: bold;
        color: $warning;
    }
    QuitConfirmScreen .hint {
        color: $text-muted;
    }
    QuitConfirmScreen #quit-buttons {
        height: auto;
        align-horizontal: right;
    }
    QuitConfirmScreen Button {
        margin-left: 2;
    }
    """

    def __init__(self, busy: str) -> None:
        super().__init__()
        self.busy = busy

    def compose(self) -> ComposeResult:
        with Vertical(id="quit-box"):
            yield Static(literal(f"Quit? {self.busy[0].upper()}{self.busy[1:]}."), id="quit-title", markup=False)
            yield Static("Quitting stops watching it; a server specmon started on a real host keeps "
                         "running and is adopted next time (the demo's server is stopped).",
                         classes="hint", markup=False)
            yield Static("y or ctrl+c: quit · n or escape: stay", classes="hint", markup=False)
            with Horizontal(id="quit-buttons"):
                yield Button("Quit (y)", id="quit-yes", variant="warning")
                yield Button("Stay (esc)", id="quit-no", variant="default")

    @while_attached
    def on_mount(self) -> None:
        self.query_one("#quit-no", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "quit-yes")

    def action_quit_now(self) -> None:
        """Quit."""
        self.dismiss(True)

    def action_stay(self) -> None:
        """Keep running."""
        self.dismiss(False)
