"""The sweep's screens: the step list, the one confirmation of every plan, the offer to stop.

:class:`SweepScreen` asks for the step counts (``0,1,2,5,10`` by default, the real campaign's),
the other dimensions the profile's command can vary (``topk=1,4
draft_tokens=4,8``: only those it has placeholders for, validated live with
the engine's own rules) and the strategy (grid, or guided by the cost model),
:class:`SweepConfirmScreen` shows the commands of *every* restart the sweep
may run, on which host, for one confirmation (nothing runs before it), and
:class:`SweepStopScreen` offers to stop a running sweep. The flow that opens
them and runs the sweep is :mod:`specmon.ui.flows.sweep`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Button, Input, RadioButton, RadioSet, Static

from specmon.control.counts import parse_step_list
from specmon.control.dims import Grid, Point, expand_grid, parse_grid
from specmon.experiment.stats.design import Budget
from specmon.ui.literal import literal
from specmon.ui.screens.closing import while_attached
from specmon.ui.screens.fit import SHORT_BELOW, fit_scroll
from specmon.wording import counted

__all__ = ["DEFAULT_STEPS", "SweepChoice", "SweepConfirmScreen", "SweepScreen", "SweepStopScreen",
           "StepListValidator", "parse_step_list", "read_grid", "sweep_progress_text"]

#: What the step list starts with (the real campaign's counts, 0 = the baseline).
#: The real campaign's settings (as ``sweep --demo``'s): 3 steps, 1.9% behind 2 in the simulated truth,
#: would take hundreds of launches to separate, so the default leaves it out.
DEFAULT_STEPS = "0,1,2,5,10"


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


def read_grid(steps: tuple[int, ...], text: str, allowed: Sequence[str]) -> Grid | None:
    """The settings the dimensions field asks for on top of ``steps`` (None when it is blank).

    Raises:
        ValueError: a bad value, a dimension the profile's command cannot vary, or nothing left.
    """
    if not text.strip():
        return None
    grid = parse_grid(text.split())
    if "steps" in grid:
        raise ValueError("the step counts go in the first field")
    bad = [d for d in grid if d not in allowed]
    if bad:
        can = ", ".join(allowed) if allowed else "nothing but the step count"
        raise ValueError(f"this profile's command has no {{{bad[0]}}}: it can vary {can}")
    return expand_grid({"steps": steps, **grid})


def sweep_progress_text(snapshot: dict[str, Any]) -> str:
    """One line from :meth:`Sweep.snapshot`: ``sweep 2/5 · now 1 step@1: 34 samples (next look 80) · done: …``."""
    cells = snapshot.get("cells") or []
    finished = sum(1 for c in cells if c["status"] in ("done", "failed", "skipped"))
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


@dataclass(frozen=True, slots=True)
class SweepChoice:
    """What the sweep screen chose: the step counts, the grid's points, the strategy."""

    steps: tuple[int, ...]
    points: tuple[tuple[int, Point], ...] = ()
    strategy: str = "grid"


class SweepScreen(ModalScreen["SweepChoice | None"]):
    """Ask for the step counts to sweep; enter leads to the commands, escape cancels.

    Args:
        host: Where the server runs.
        lo: Smallest allowed count.
        hi: Largest allowed count.
        budget: How long each setting may take, for the hint.
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
                 dimensions: Sequence[str] = ()) -> None:
        super().__init__()
        self.host = host
        self.lo, self.hi = lo, hi
        self.budget = budget
        #: The dimensions besides the step count the profile's command has placeholders for.
        self.dimensions = tuple(dimensions)
        self.grid: Grid | None = None
        default = [s for s in map(int, DEFAULT_STEPS.split(",")) if lo <= s <= hi]
        self.default = ",".join(map(str, default)) if default else str(lo)

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-box"):
            yield Static(literal(f"Sweep step counts on {self.host}"), id="sweep-title", markup=False)
            yield Static(literal(f"the server is restarted with each step count ({self.lo} to {self.hi}; 0 = no speculation, "
                         f"the baseline); each is launched at least twice, in rounds, until the verdict is clear{self.budget}"),
                         classes="hint", markup=False)
            yield Input(self.default, placeholder="step counts, e.g. 0,1,2,3,5", id="sweep-steps",
                        validators=[StepListValidator(self.lo, self.hi)], validate_on=["changed", "submitted"],
                        max_length=80)
            example = {"topk": "topk=1,4", "draft_tokens": "draft_tokens=4,8", "prompt_lookup_max":
                       "prompt_lookup_max=2,4", "prompt_lookup_min": "prompt_lookup_min=1,2",
                       "spec_type": "spec_type=draft-simple,ngram-mod"}
            hint = " ".join(example[d] for d in self.dimensions) or "none: the profile's command varies only {steps}"
            yield Input("", placeholder=f"more dimensions, e.g. {hint}", id="sweep-dims", max_length=160,
                        disabled=not self.dimensions)
            with RadioSet(id="sweep-strategy"):
                yield RadioButton("grid: every setting", value=True, id="strategy-grid")
                yield RadioButton("guided: fit the cost model, restart only where the best can be",
                                  id="strategy-guided")
            yield Static("", id="sweep-count", classes="hint", markup=False)
            yield Static("", id="sweep-error", markup=False)
            yield Static("enter: next (every restart's commands are shown first) · escape: cancel",
                         classes="hint", markup=False)

    @while_attached
    def on_mount(self) -> None:
        self.query_one("#sweep-steps", Input).focus()
        self._check()

    @property
    def strategy(self) -> str:
        """``grid`` or ``guided``, as chosen."""
        return "guided" if self.query_one("#strategy-guided", RadioButton).value else "grid"

    def _check(self) -> tuple[int, ...] | None:
        """Validate both fields together (live): the error line, and how many settings they make."""
        error = self.query_one("#sweep-error", Static)
        count = self.query_one("#sweep-count", Static)
        try:
            steps = parse_step_list(self.query_one("#sweep-steps", Input).value, self.lo, self.hi)
            self.grid = read_grid(steps, self.query_one("#sweep-dims", Input).value, self.dimensions)
        except ValueError as exc:
            error.update(literal(str(exc), newlines=True))
            count.update("")
            self.grid = None
            return None
        error.update("")
        n = len(self.grid.settings) if self.grid else len(steps)
        text = f"{counted(n, 'setting')}: a grid restarts {counted(n, 'time')}"
        if self.grid and self.grid.skipped:
            name, why = self.grid.skipped[0]
            more = f" (and {len(self.grid.skipped) - 1} more)" if len(self.grid.skipped) > 1 else ""
            text += f"; left out {name}: {why}{more}"
        count.update(literal(text))
        return steps

    def on_input_changed(self, event: Input.Changed) -> None:
        self._check()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        steps = self._check()
        if steps is None:
            return
        points: tuple[tuple[int, Point], ...] = self.grid.settings if self.grid and self.grid.dimensions else ()
        if points:  # the grid's own step counts, in its order
            steps = tuple(dict.fromkeys(st for st, _ in points))
        self.dismiss(SweepChoice(steps, points, self.strategy))

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

    def __init__(self, host: str, steps: Sequence[int], text: str, load: str, *, settings: int | None = None,
                 strategy: str = "grid", budget: Budget | None = None) -> None:
        super().__init__()
        self.host = host
        self.steps = tuple(steps)
        self.text = text
        self.load = load
        self.settings = len(self.steps) if settings is None else settings
        self.strategy = strategy
        #: The launch design's stated budget: its restarts are the count the title promises.
        self.budget = budget

    def compose(self) -> ComposeResult:
        n = self.settings
        what = f"{', '.join(map(str, self.steps))} steps" + (f" ({n} settings)" if n != len(self.steps) else "")
        guided = ", guided: fewer when the cost model rules settings out" if self.strategy == "guided" else ""
        # A launch design restarts every setting in rounds: the title's count is its budget, not one
        # restart a setting (the two once said "up to 5" above "at most 80").
        restarts = self.budget.restarts if self.budget is not None else n
        if self.budget is None:
            how = "one restart per step count, in this order"
        elif self.budget.pairs is not None:  # the best-arm design: after the warm-up, only the two contenders
            how = "every setting restarted in the first rounds, then only the leader and its closest challenger"
        else:
            how = "each setting restarted in rounds, in this order"
        with Vertical(id="sweep-confirm-box"):
            yield Static(literal(f"Sweep on {self.host}: {what} — up to {restarts} restart"
                         f"{'' if restarts == 1 else 's'}{guided}"), id="sweep-confirm-title", markup=False)
            yield Static(literal(f"These commands run on {self.host}, {how}; the server "
                         f"is down during each restart. {self.load}"), classes="hint", markup=False)
            if self.budget is not None:
                text = self.budget.text
                yield Static(literal(f"{text[0].upper()}{text[1:]}."), id="sweep-confirm-budget", classes="hint",
                             markup=False)
            with VerticalScroll(id="sweep-confirm-scroll"):
                yield Static(literal(self.text, newlines=True), id="sweep-confirm-commands", markup=False)
            yield Static("y: run the sweep · escape: cancel (nothing runs) · s later: stop it",
                         classes="hint", markup=False)
            with Horizontal(id="sweep-confirm-buttons"):
                yield Button("Run (y)", id="sweep-run", variant="warning")
                yield Button("Cancel (esc)", id="sweep-cancel", variant="default")

    @while_attached
    def on_mount(self) -> None:
        self.query_one("#sweep-cancel", Button).focus()
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    def _fit(self) -> None:
        """The commands scroll; ``y: run the sweep`` and the buttons stay on screen at 80×24."""
        self.set_class(self.size.height < SHORT_BELOW, "-short")
        self.call_after_refresh(self._fit_after)

    @while_attached
    def _fit_after(self) -> None:
        fit_scroll(self, self.query_one("#sweep-confirm-box"), self.query_one("#sweep-confirm-scroll"))

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
            yield Static(literal(self.progress, newlines=True), markup=False)
            yield Static("y: stop (the verdict covers what was measured) · escape: keep going", markup=False)

    def action_confirm(self) -> None:
        """Stop."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """Keep going."""
        self.dismiss(False)
