"""The sweep's screens: the step list, the one confirmation of every plan, the offer to stop.

:class:`SweepScreen` asks for the step counts (``0,1,2,3,5`` by default),
:class:`SweepConfirmScreen` shows the commands of *every* restart the sweep
may run, on which host, for one confirmation (nothing runs before it), and
:class:`SweepStopScreen` offers to stop a running sweep. The flow that opens
them and runs the sweep is :mod:`specmon.ui.flows.sweep`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Button, Input, Static

from specmon.control.counts import parse_step_list
from specmon.ui.screens.fit import SHORT_BELOW, fit_scroll

__all__ = ["DEFAULT_STEPS", "SweepConfirmScreen", "SweepScreen", "SweepStopScreen",
           "StepListValidator", "parse_step_list", "sweep_progress_text"]

#: What the step list starts with (the real campaign's counts, 0 = the baseline).
DEFAULT_STEPS = "0,1,2,3,5"


class StepListValidator(Validator):
    """Validates the step list with :func:`parse_step_list`."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi

    def validate(self, value: str) -> ValidationResult:
        """Success for a usable list, else a failure with the reason."""
        try:
            parse_step_list(value, self.lo, self.hi)
        except ValueError as exc:
            return self.failure(str(exc))
        return self.success()


def sweep_progress_text(snapshot: dict[str, Any]) -> str:
    """One line from :meth:`Sweep.snapshot`: ``sweep 2/5 · now 1 step@1: 34 samples (next look 80) · done: …``."""
    cells = snapshot.get("cells") or []
    finished = sum(1 for c in cells if c["status"] in ("done", "failed"))
    parts = [f"sweep {finished}/{len(cells)} settings"]
    current = next((c for c in cells if c["key"] == snapshot.get("current")), None)
    if current is not None:
        look = f", next look at {current['next_look']}" if current.get("next_look") else ""
        parts.append(f"measuring {current['label'] or current['key']}: {current['samples']} samples{look}")
    elif finished < len(cells):
        parts.append("restarting")
    done = [f"{c['label'] or c['key']} {c['mean']:.1f} tok/s" if c["status"] == "done" and c["mean"] is not None
            else f"{c['label'] or c['key']} failed" for c in cells if c["status"] in ("done", "failed")]
    if done:
        parts.append("done: " + ", ".join(done))
    return " · ".join(parts) + " · s: stop"


class SweepScreen(ModalScreen["tuple[int, ...] | None"]):
    """Ask for the step counts to sweep; enter leads to the commands, escape cancels.

    Args:
        host: Where the server runs.
        lo: Smallest allowed count.
        hi: Largest allowed count.
        budget: How long each setting may take, for the hint.
        on_choose: Called with the chosen counts after the screen closed.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SweepScreen { align: center middle; }
    SweepScreen > #sweep-box {
        width: 84; max-width: 100%; height: auto;
        border: round $primary; background: $surface; padding: 0 1;
    }
    SweepScreen #sweep-title { text-style: bold; color: $primary; }
    SweepScreen #sweep-error { color: $error; height: auto; }
    SweepScreen .hint { color: $text-muted; }
    """

    def __init__(self, *, host: str, lo: int, hi: int, budget: str = "",
                 on_choose: Callable[[tuple[int, ...]], None] | None = None) -> None:
        super().__init__()
        self.host = host
        self.lo, self.hi = lo, hi
        self.budget = budget
        self._on_choose = on_choose
        default = [s for s in (0, 1, 2, 3, 5) if lo <= s <= hi]
        self.default = ",".join(map(str, default)) if default else str(lo)

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-box"):
            yield Static(f"Sweep step counts on {self.host}", id="sweep-title", markup=False)
            yield Static(f"the server is restarted once per step count ({self.lo} to {self.hi}; 0 = no speculation, "
                         f"the baseline); each is measured until the numbers are clear{self.budget}",
                         classes="hint", markup=False)
            yield Input(self.default, placeholder="step counts, e.g. 0,1,2,3,5", id="sweep-steps",
                        validators=[StepListValidator(self.lo, self.hi)], validate_on=["changed", "submitted"],
                        max_length=80)
            yield Static("", id="sweep-error", markup=False)
            yield Static("enter: next (every restart's commands are shown first) · escape: cancel",
                         classes="hint", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        result = event.validation_result
        text = "; ".join(result.failure_descriptions) if result is not None and not result.is_valid else ""
        self.query_one("#sweep-error", Static).update(text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            steps = parse_step_list(event.value, self.lo, self.hi)
        except ValueError as exc:
            self.query_one("#sweep-error", Static).update(str(exc))
            return
        self.dismiss(steps)
        if self._on_choose is not None:
            self.app.call_later(self._on_choose, steps)

    def action_cancel(self) -> None:
        """Close; nothing runs."""
        self.dismiss(None)


class SweepConfirmScreen(ModalScreen[bool]):
    """Every restart's commands, for one confirmation: ``y`` runs the sweep, escape cancels.

    The focus starts on *Cancel*, so an ``enter`` carried over from the step list
    cannot start anything.
    """

    BINDINGS = [Binding("y", "confirm", "Run the sweep"), Binding("escape,n", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SweepConfirmScreen { align: center middle; }
    SweepConfirmScreen > #sweep-confirm-box {
        width: 96%; max-width: 140; height: auto; max-height: 90%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    SweepConfirmScreen #sweep-confirm-title { text-style: bold; color: $warning; }
    SweepConfirmScreen #sweep-confirm-scroll { height: auto; max-height: 24; margin: 1 0; background: $background; }
    SweepConfirmScreen .hint { color: $text-muted; }
    SweepConfirmScreen #sweep-confirm-buttons { height: auto; align-horizontal: right; }
    SweepConfirmScreen Button { margin-left: 2; }
    SweepConfirmScreen.-short #sweep-confirm-box { max-height: 100%; }
    SweepConfirmScreen.-short #sweep-confirm-scroll { margin: 0; }
    SweepConfirmScreen.-short #sweep-confirm-buttons > Button {
        height: 1; min-width: 12; border: none; border-top: none; border-bottom: none;
    }
    """

    def __init__(self, host: str, steps: Sequence[int], text: str, load: str) -> None:
        super().__init__()
        self.host = host
        self.steps = tuple(steps)
        self.text = text
        self.load = load

    def compose(self) -> ComposeResult:
        n = len(self.steps)
        with Vertical(id="sweep-confirm-box"):
            yield Static(f"Sweep on {self.host}: {', '.join(map(str, self.steps))} steps — up to {n} restart"
                         f"{'' if n == 1 else 's'}", id="sweep-confirm-title", markup=False)
            yield Static(f"These commands run on {self.host}, one restart per step count, in this order; the server "
                         f"is down during each restart. {self.load}", classes="hint", markup=False)
            with VerticalScroll(id="sweep-confirm-scroll"):
                yield Static(self.text, id="sweep-confirm-commands", markup=False)
            yield Static("y: run the sweep · escape: cancel (nothing runs) · s later: stop it",
                         classes="hint", markup=False)
            with Horizontal(id="sweep-confirm-buttons"):
                yield Button("Run (y)", id="sweep-run", variant="warning")
                yield Button("Cancel (esc)", id="sweep-cancel", variant="default")

    def on_mount(self) -> None:
        self.query_one("#sweep-cancel", Button).focus()
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """The commands scroll; ``y: run the sweep`` and the buttons stay on screen at 80×24."""
        self.set_class(self.size.height < SHORT_BELOW, "-short")
        self.call_after_refresh(lambda: fit_scroll(self, self.query_one("#sweep-confirm-box"),
                                                   self.query_one("#sweep-confirm-scroll")))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "sweep-run")

    def action_confirm(self) -> None:
        """Run the sweep."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """Close; nothing runs."""
        self.dismiss(False)


class SweepStopScreen(ModalScreen[bool]):
    """``s`` during a sweep: ``y`` stops it after the current poll (progress is kept), escape goes on."""

    BINDINGS = [Binding("y", "confirm", "Stop the sweep"), Binding("escape,n", "cancel", "Keep going")]

    DEFAULT_CSS = """
    SweepStopScreen { align: center middle; }
    SweepStopScreen > #sweep-stop-box {
        width: 72; max-width: 100%; height: auto; border: round $warning; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, progress: str) -> None:
        super().__init__()
        self.progress = progress

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-stop-box"):
            yield Static("Stop the sweep?", markup=False)
            yield Static(self.progress, markup=False)
            yield Static("y: stop (the verdict covers what was measured) · escape: keep going", markup=False)

    def action_confirm(self) -> None:
        """Stop."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """Keep going."""
        self.dismiss(False)
