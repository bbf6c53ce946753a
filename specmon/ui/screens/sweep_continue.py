"""``s`` after a stopped sweep: continue it from its saved state, or start a new one.

A sweep that stopped (the server exited, a restart failed, ``s`` stopped it) kept what it had
measured in its state file; this dialog says why it stopped and what is left, and offers to
go on from there. Continuing shows the exact commands again before anything runs.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from specmon.ui.literal import literal

__all__ = ["SweepContinueScreen"]


class SweepContinueScreen(ModalScreen["str | None"]):
    """Returns ``"continue"`` (go on from the saved state), ``"new"`` (the step list, afresh) or None.

    Args:
        reason: Why the sweep stopped (the server's exit, the restart that failed, a stop asked for).
        progress: What it measured and what is left (``2 of 5 settings measured; left: 3 steps, 5 steps``).
    """

    BINDINGS = [
        Binding("c,enter", "go_on", "Continue it"),
        Binding("n", "new", "New sweep"),
        Binding("escape", "cancel", "Cancel"),
    ]

    DEFAULT_CSS = """
    SweepContinueScreen { align: center middle; }
    SweepContinueScreen > #sweep-continue-box {
        width: 80; max-width: 100%; height: auto; max-height: 100%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    SweepContinueScreen #sweep-continue-title { text-style: bold; color: $warning; }
    SweepContinueScreen #sweep-continue-keys { color: $text-muted; margin-top: 1; }
    """

    def __init__(self, reason: str, progress: str) -> None:
        super().__init__()
        self.reason = reason
        self.progress = progress

    @property
    def text(self) -> str:
        """Everything the dialog says, as plain text."""
        return "\n".join((self.TITLE_TEXT, f"Why: {self.reason}", self.progress, self.KEYS))

    TITLE_TEXT = "The last sweep stopped before its verdict"
    KEYS = "c: continue it from where it stopped (its commands are shown first) · n: a new sweep · escape: cancel"

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-continue-box"):
            yield Static(literal(self.TITLE_TEXT), id="sweep-continue-title", markup=False)
            yield Static(literal(f"Why: {self.reason}"), id="sweep-continue-reason", markup=False)
            yield Static(literal(self.progress), id="sweep-continue-progress", markup=False)
            yield Static(literal(self.KEYS), id="sweep-continue-keys", markup=False)

    def action_go_on(self) -> None:
        """Continue the stopped sweep from its saved state."""
        self.dismiss("continue")

    def action_new(self) -> None:
        """Start a new sweep (the step list)."""
        self.dismiss("new")

    def action_cancel(self) -> None:
        """Close; nothing runs."""
        self.dismiss(None)
