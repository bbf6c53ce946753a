"""The confirmation screen: the exact stop and start commands and the host, before anything runs.

The text comes from :meth:`RestartController.describe`, which also marks the
plan as shown: the controller runs no plan that did not pass through here (or,
for the demo's first start, through the event log). Confirming needs a
deliberate ``y`` or a click on *Run*; the focus starts on *Cancel*, so an
``enter`` carried over from the step-count dialog cannot start anything.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Static

from specmon.control.launch import CommandPlan
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import plan_label
from specmon.ui.literal import literal
from specmon.ui.screens.closing import while_attached
from specmon.ui.screens.fit import SHORT_BELOW, fit_scroll

__all__ = ["ConfirmCommandsScreen"]


class ConfirmCommandsScreen(ModalScreen[bool]):
    """Show what will run, where; ``y`` runs it, escape cancels, ``x`` shows the exact strings.

    Args:
        controller: The controller that built ``plan`` (it marks the plan shown).
        plan: The plan to confirm.
        now_steps: What runs now, when known (for the title).
        eta_text: How long a restart usually takes on this host, when known.
        title: ``Restart`` or ``Go back``.
    """

    BINDINGS = [
        Binding("y", "confirm", "Run these commands"),
        Binding("escape,n", "cancel", "Cancel"),
        Binding("x", "toggle_exact", "Exact strings"),
    ]

    DEFAULT_CSS = """
    ConfirmCommandsScreen {
        align: center middle;
    }
    ConfirmCommandsScreen > #confirm-box {
        width: 96%;
        max-width: 140;
        height: auto;
        max-height: 90%;
        border: round $warning;
        background: $surface;
        padding: 0 1;
    }
    ConfirmCommandsScreen #confirm-title {
        text-style: bold;
        color: $warning;
    }
    ConfirmCommandsScreen #confirm-scroll {
        height: auto;
        max-height: 24;
        margin: 1 0;
        background: $background;
    }
    ConfirmCommandsScreen #confirm-commands, ConfirmCommandsScreen #confirm-exact {
        padding: 0 1;
    }
    ConfirmCommandsScreen #confirm-exact {
        display: none;
        margin-top: 1;
    }
    ConfirmCommandsScreen #confirm-same {
        color: $warning;
        text-style: bold;
    }
    ConfirmCommandsScreen .hint {
        color: $text-muted;
    }
    ConfirmCommandsScreen #confirm-buttons {
        height: auto;
        align-horizontal: right;
    }
    ConfirmCommandsScreen Button {
        margin-left: 2;
    }
    /* Short terminals (80×24): one-line buttons, no gaps; the commands scroll, the keys stay. */
    ConfirmCommandsScreen.-short #confirm-box {
        max-height: 100%;
    }
    ConfirmCommandsScreen.-short #confirm-scroll {
        margin: 0;
    }
    ConfirmCommandsScreen.-short #confirm-buttons > Button {
        height: 1;
        min-width: 12;
        border: none;
        border-top: none;
        border-bottom: none;
    }
    """

    def __init__(
        self,
        controller: RestartController,
        plan: CommandPlan,
        *,
        now_steps: int | None = None,
        eta_text: str | None = None,
        title: str = "Restart",
    ) -> None:
        super().__init__()
        self.controller = controller
        self.plan = plan
        self.now_steps = now_steps
        self.eta_text = eta_text
        self.title_text = title
        self.exact = False
        # Built (and the plan marked shown) now: what is on screen is what will run.
        self.text = controller.describe(plan)

    def compose(self) -> ComposeResult:
        plan = self.plan
        target = plan_label(plan.steps, plan.draft_tokens)
        change = f"{plan_label(self.now_steps)} → {target}" if self.now_steps is not None else target
        down = "The server is down from the stop until it is ready again"
        down += f" ({self.eta_text})." if self.eta_text else "."
        with Vertical(id="confirm-box"):
            yield Static(literal(f"{self.title_text} on {plan.host}: {change}"), id="confirm-title", markup=False)
            if self.now_steps is not None and self.now_steps == plan.steps:
                yield Static(literal(f"{plan_label(plan.steps)} is what runs now: this restarts the same setting "
                             "(a repeat run, pooled with the earlier one)"), id="confirm-same", markup=False)
            yield Static(literal(f"These commands run on {plan.host}, in this order. {down}"), classes="hint",
                         markup=False)
            with VerticalScroll(id="confirm-scroll"):
                yield Static(literal(self.text, newlines=True), id="confirm-commands", markup=False)
                yield Static("", id="confirm-exact", markup=False)
            yield Static("y: run · escape: cancel (nothing runs) · x: exact strings sent",
                         classes="hint", markup=False)
            with Horizontal(id="confirm-buttons"):
                yield Button("Run (y)", id="confirm-run", variant="warning")
                yield Button("Cancel (esc)", id="confirm-cancel", variant="default")

    @while_attached
    def on_mount(self) -> None:
        self.query_one("#confirm-cancel", Button).focus()
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """Give the commands what the terminal has left, so ``y: run`` and the buttons stay on screen."""
        self.set_class(self.size.height < SHORT_BELOW, "-short")
        self.call_after_refresh(self._fit_after)

    @while_attached
    def _fit_after(self) -> None:
        fit_scroll(self, self.query_one("#confirm-box"), self.query_one("#confirm-scroll"))

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        if event.button.id == "confirm-run":
            self.action_confirm()
        else:
            self.action_cancel()

    def action_confirm(self) -> None:
        """Run the commands shown."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """Close; nothing runs."""
        self.controller.withdraw(self.plan)
        self.dismiss(False)

    def action_toggle_exact(self) -> None:
        """Switch between the readable commands and the exact strings sent to the host."""
        self.exact = not self.exact
        readable = self.controller.describe(self.plan)
        self.text = self.controller.describe(self.plan, exact=self.exact)
        exact = self.query_one("#confirm-exact", Static)
        exact.update(literal(self.text[len(readable):].lstrip("\n"), newlines=True))
        exact.display = self.exact
        scroll = self.query_one("#confirm-scroll", VerticalScroll)
        if self.exact:
            # They come below the readable commands, past the fold at 80x24: bring them into
            # view rather than leave them where nothing shows they are there.
            self.call_after_refresh(lambda: scroll.scroll_to_widget(exact, top=True, animate=False))
        else:
            self.call_after_refresh(lambda: scroll.scroll_home(animate=False))
