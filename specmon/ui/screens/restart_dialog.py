"""The step-count dialog that ``r`` opens: which step count next, next to what was measured.

It only chooses: nothing runs from here. The chosen count is the screen's result
(``dismiss``), which the restart flow awaits and takes to the confirmation screen (:mod:`specmon.ui.screens.confirm_commands`), which shows the
exact commands first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.css.query import NoMatches
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Input, Static

from specmon.control.restart_progress import plan_label
from specmon.ui.literal import literal, plain
from specmon.ui.screens.closing import while_attached
from specmon.ui.screens.fit import SHORT_BELOW, fit_scroll
from specmon.ui.views import RowView
from specmon.ui.widgets.run_table import SHORT_HEADERS, mark_text

__all__ = ["MeasuredStep", "RestartDialog", "StepCountValidator", "parse_steps"]

_DIGITS = re.compile(r"[0-9]{1,3}")


def parse_steps(text: str, lo: int, hi: int) -> int:
    """Read a step count typed by the user.

    Only plain digits are accepted (no sign, no decimal point, no expression,
    nothing after the number), within ``[lo, hi]``.

    Args:
        text: What was typed (surrounding spaces are ignored).
        lo: Smallest allowed count.
        hi: Largest allowed count.

    Returns:
        The count.

    Raises:
        ValueError: The text is not an allowed count; the message says why, for the user.
    """
    value = text.strip()
    if not value:
        raise ValueError(f"type a step count from {lo} to {hi}")
    if not _DIGITS.fullmatch(value):
        shown = value if len(value) <= 20 else value[:19] + "…"
        raise ValueError(f"{shown!r} is not a whole number: type digits only, {lo} to {hi}")
    steps = int(value)
    if not lo <= steps <= hi:
        raise ValueError(f"{steps} is out of range: this profile allows {lo} to {hi}")
    return steps


class StepCountValidator(Validator):
    """Validates the dialog's input with :func:`parse_steps`."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi

    def validate(self, value: str) -> ValidationResult:
        """Success for an allowed count, else a failure with the reason."""
        try:
            parse_steps(value, self.lo, self.hi)
        except ValueError as exc:
            return self.failure(str(exc))
        return self.success()


@dataclass(frozen=True, slots=True)
class MeasuredStep:
    """One configuration already measured, as the dialog lists it."""

    steps: int | None
    label: str
    samples: int
    tps: str
    vs: str
    accept_len: str
    current: bool = False
    best: bool = False
    is_baseline: bool = False
    #: The verdict's mark (★ winner, ☆ leads, undecided), as in the run table.
    mark: str = ""

    @classmethod
    def from_row(cls, row: RowView) -> MeasuredStep:
        """The dialog's view of a run-table row."""
        return cls(row.steps, row.label, row.samples, row.tps, row.vs_short or row.vs, row.accept_len,
                   row.current, row.best, row.is_baseline, row.mark)


def measured_text(rows: Sequence[MeasuredStep], width: int = 80) -> Content:
    """The measured configurations as aligned lines (marks as in the run table: ★ winner, ☆ leads, undecided, B baseline,
    ▸ now)."""
    if not rows:
        return Content.styled("nothing measured yet: every step count is new", "$text-muted")
    # Widths fit an 80-column terminal: ``1.65 ± 0.02`` is 11 cells and is never cut. Below 66
    # columns the sample count goes and the names shorten, so no line wraps.
    narrow = width < 66
    name = 14 if narrow else 20
    count = "" if narrow else f" {'n':>6} "
    # ``tok/s ±launch``: the run table's interval, over launches, in its words (`?`: the fleet's are
    # ``±sample`` and ``CI (replica)``).
    header = f"    {'configuration':<{name}}{count} {SHORT_HEADERS['tps']:<13} {'vs base':<9} {'acc len':<11}"
    lines = [Content.styled(header, "$text-muted")]
    for r in rows:
        mark = mark_text(r.mark, r.is_baseline, r.current)
        n = "" if narrow else f" {r.samples:>6} "
        text = f"{mark} {plain(r.label)[:name]:<{name}}{n} {r.tps[:13]:<13} {r.vs[:9]:<9} {r.accept_len[:11]:<11}"
        style = "bold $primary" if r.current else "$success" if r.mark else ""
        lines.append(Content.styled(text.rstrip(), style))
    return Content("\n").join(lines)


class RestartDialog(ModalScreen[int | None]):
    """Ask for the next step count; escape cancels (nothing runs either way).

    Args:
        host: Where the server runs.
        lo: Smallest allowed count (0 = no speculation, when the profile allows it).
        hi: Largest allowed count.
        current_steps: What runs now, when known.
        rule: How draft tokens follow (``draft tokens = steps+1``).
        measured: What was measured so far (the run table).
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]
    # The input has the focus from the first frame, not the scrollable list above it.
    AUTO_FOCUS = "#restart-steps"

    DEFAULT_CSS = """
    RestartDialog {
        align: center middle;
    }
    RestartDialog > #restart-box {
        width: 84;
        max-width: 100%;
        height: auto;
        border: round $primary;
        background: $surface;
        padding: 0 1;
    }
    RestartDialog #restart-title {
        text-style: bold;
        color: $primary;
    }
    RestartDialog > #restart-box {
        max-height: 100%;
    }
    RestartDialog #restart-measured-scroll {
        height: auto;
        margin: 1 0;
    }
    RestartDialog.-short #restart-measured-scroll {
        margin: 0;
    }
    RestartDialog #restart-error {
        color: $error;
        height: auto;
    }
    RestartDialog .hint {
        color: $text-muted;
    }
    """

    def __init__(
        self,
        *,
        host: str,
        lo: int,
        hi: int,
        current_steps: int | None = None,
        rule: str = "",
        measured: Sequence[MeasuredStep] = (),
    ) -> None:
        super().__init__()
        self.host = host
        self.lo, self.hi = lo, hi
        self.current_steps = current_steps
        self.rule = rule
        self.measured = tuple(measured)
        self.chosen: int | None = None
        self._measured_width = 0

    def compose(self) -> ComposeResult:
        now = "unknown" if self.current_steps is None else plan_label(self.current_steps)
        zero = " (0 = no speculation)" if self.lo == 0 else ""
        with Vertical(id="restart-box"):
            yield Static(literal(f"Restart the server on {self.host}"), id="restart-title", markup=False)
            yield Static(literal(f"now: {now} · next: {self.lo} to {self.hi} steps{zero}"
                         + (f" · {self.rule}" if self.rule else "")), classes="hint", markup=False)
            # Many configurations scroll; the input and the keys stay on screen.
            with VerticalScroll(id="restart-measured-scroll"):
                yield Static(measured_text(self.measured), id="restart-measured")
            yield Input(placeholder=f"step count, {self.lo}–{self.hi}", id="restart-steps",
                        validators=[StepCountValidator(self.lo, self.hi)], validate_on=["changed", "submitted"],
                        max_length=20, select_on_focus=False)
            yield Static("", id="restart-error", markup=False)
            yield Static("enter: next (the exact commands are shown first) · escape: cancel",
                         classes="hint", markup=False)

    @while_attached
    def on_mount(self) -> None:
        self.query_one(Input).focus()
        self._fit()

    def on_resize(self) -> None:
        self._fit()

    async def on_key(self, event: events.Key) -> None:
        # Keys typed right after `r`, before the input took the focus (a busy host: the dialog
        # mounts late), reach the screen: they are the input's, never lost.
        try:
            steps = self.query_one(Input)
        except NoMatches:
            return
        if self.focused is steps:
            return
        if event.is_printable and event.character:
            event.stop()
            steps.focus()
            steps.insert_text_at_cursor(event.character)
        elif event.key == "enter":
            event.stop()
            steps.focus()
            await steps.action_submit()

    def _fit(self) -> None:
        self.set_class(self.size.height < SHORT_BELOW, "-short")
        self.call_after_refresh(self._fit_now)

    @while_attached
    def _fit_now(self) -> None:
        box = self.query_one("#restart-box")
        width = box.content_size.width
        if width and width != self._measured_width:
            self._measured_width = width
            self.query_one("#restart-measured", Static).update(measured_text(self.measured, width))
            self.call_after_refresh(self._fit_now)  # the list's height may have changed
            return
        fit_scroll(self, box, self.query_one("#restart-measured-scroll"))

    def on_input_changed(self, event: Input.Changed) -> None:
        # Say what is wrong while typing, but not before anything was typed.
        result = event.validation_result
        text = ""
        if event.value.strip() and result is not None and not result.is_valid:
            text = "; ".join(result.failure_descriptions)
        elif event.value.strip() and self.current_steps is not None:
            try:
                if parse_steps(event.value, self.lo, self.hi) == self.current_steps:
                    text = "same as now: a repeat run of this configuration"
            except ValueError:
                pass
        self.query_one("#restart-error", Static).update(literal(text))
        self._fit()  # the message may take a line from the list

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            steps = parse_steps(event.value, self.lo, self.hi)
        except ValueError as exc:
            self.query_one("#restart-error", Static).update(literal(str(exc), newlines=True))
            return
        self.chosen = steps
        self.dismiss(steps)

    def action_cancel(self) -> None:
        """Close without choosing."""
        self.dismiss(None)
