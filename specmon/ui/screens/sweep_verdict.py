"""The end of a sweep: its verdict, in a panel that stays until dismissed.

:class:`SweepVerdictScreen` shows the sweep's one verdict
(:class:`~specmon.output.tables.SweepOutcome`, the numbers the run table and the
sweep report show too): the speed-up and its interval, the runner-up, where the
numbers come from, each setting measured, the baseline the dashboard now uses,
and the report's path. A sweep that decided on an objective (``--objective``, or
a profile's plan) shows the objective's verdict, the tok/s comparison as context
under it. One key restarts on the winner (``w``: its commands are
shown first, through the restart flow's confirmation), one opens the report
(``o``), one copies its path (``c``). Designed at 80×24 first.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from specmon.output.tables import SweepOutcome, tps_header
from specmon.ui.literal import literal
from specmon.ui.screens.closing import while_attached
from specmon.ui.widgets.comparison_plot import ComparisonPlot

__all__ = ["SweepVerdictScreen", "verdict_lines"]

#: The panel's inner width when nothing else is known (an 80-column box less its border and padding).
TABLE_WIDTH = 76
#: The table's columns other than the setting, and the order a narrow panel drops them in.
_HEADERS = ("n", tps_header("launch"), "vs baseline", "status")
_DROP = ("n", "status", "vs baseline", tps_header("launch"))


def _table_lines(outcome: SweepOutcome, width: int = TABLE_WIDTH) -> list[str]:
    """The settings as aligned lines within ``width`` columns: the setting whole (its mark in front:
    ★ winner, ☆ leads, undecided, B baseline), the other columns dropped from :data:`_DROP` while too wide."""
    rows = []
    for row in outcome.rows:
        cells = row.cells()
        mark = row.mark or ("B" if row.is_baseline else " ")
        status = "" if row.status in ("done", "") else f"({row.status})"
        rows.append((f"{mark} {row.label}", {"n": cells[1], _HEADERS[1]: cells[2], "vs baseline": cells[3],
                                            "status": status}))
    label_w = max([len("  setting"), *(len(label) for label, _ in rows)])
    shown = [h for h in _HEADERS if h != "status" or any(c["status"] for _, c in rows)]

    def widths() -> dict[str, int]:
        return {h: max([len(h), *(len(c[h]) for _, c in rows)]) for h in shown}

    for drop in _DROP:
        if label_w + sum(w + 1 for w in widths().values()) <= width:
            break
        if drop in shown:
            shown.remove(drop)
    w = widths()
    lines = [f"{'  setting':<{label_w}}" + "".join(f" {h:>{w[h]}}" for h in shown)]
    for label, by_header in rows:
        lines.append(f"{label:<{label_w}}" + "".join(f" {by_header[h]:>{w[h]}}" for h in shown))
    gone = [h for h in _HEADERS if h not in shown and (h != "status" or any(c["status"] for _, c in rows))]
    if gone:  # said, never cut at the edge
        import textwrap

        lines += textwrap.wrap(f"(not shown at this width: {', '.join(gone)}; the report has every column)",
                               max(width, 20), break_long_words=False, break_on_hyphens=False)
    return [line.rstrip() for line in lines]


def table_width(outcome: SweepOutcome) -> int:
    """The widest line of the table with every column (what a box as wide needs)."""
    return max(len(line) for line in _table_lines(outcome, 10_000))


def _group_head(group: SweepOutcome) -> str:
    """A group's verdict over its table: its mark and words, its headline, what would decide it."""
    return "\n".join([f"{group.tag}: {group.headline}", *group.advice, *filter(None, [group.context_text])])


def verdict_lines(outcome: SweepOutcome, *, report: Path | None, baseline_note: str = "",
                  winner_note: str = "", groups: Sequence[SweepOutcome] = (),
                  finding: str | None = None, width: int = TABLE_WIDTH) -> dict[str, list[str]]:
    """The panel's text, by part (``head``, ``table``, ``foot``): what a test reads.

    Args:
        outcome: The sweep's verdict (``w`` restarts on its best setting).
        report: Where the report was written (None: not written).
        baseline_note: What happened to the dashboard's baseline.
        winner_note: Why ``w`` does not apply (the server runs it already, no restart possible).
        groups: Every group's verdict of a sweep over several concurrencies or workloads
            (:func:`~specmon.output.tables.sweep_outcomes`); each is shown with its table.
            The panel showed only the first group's.
        finding: The sweep's sentence when the winner depends on the load or the workload.
        width: The columns the tables must fit (the panel's inner width).
    """
    if len(groups) > 1:
        return _group_lines(outcome, groups, finding, report=report, baseline_note=baseline_note,
                            winner_note=winner_note, width=width)
    best = outcome.best
    context = outcome.context_text  # the sweep decided on an objective: tok/s is context, not a verdict
    # On an objective, its claim (the leader's figure and the runner-up's): the rows show tok/s only.
    head = [outcome.headline if context is None else outcome.claim]
    if best is not None:
        # The mark and its words are the verdict object's: ★ only for a declared winner.
        first = "the fastest" if outcome.answer is None or context is None else f"the best on {outcome.answer.measure}"
        if outcome.separated:
            head.append(f"{outcome.tag}: {best.label}, the difference holds up after the sweep's repeated looks.")
        elif outcome.equivalent:
            head.append(f"{outcome.tag}: {best.label}; no single winner, the runner-up is equivalent "
                        "within the sweep's margin.")
        else:
            head.append(f"{outcome.tag}: {best.label}; no winner declared, {first} is not clearly "
                        "ahead of the runner-up.")
    runner = outcome.runner_up
    if runner is not None and context is None:
        vs = "" if runner.is_baseline else f", {runner.vs_text} vs baseline"
        tps = "" if runner.tps_mean is None else f" {runner.tps_mean:.1f} tok/s"
        head.append(f"runner-up: {runner.label}{tps}{vs}")
    head.extend(outcome.advice)  # undecided: which two, how many more launches of each, how long
    if context is not None:
        head.append(context)
    head.append(outcome.source_text[0].upper() + outcome.source_text[1:] + " (the samples of each measurement window)")
    if baseline_note:
        head.append(baseline_note)
    return {"head": head, "table": _table_lines(outcome, width),
            "foot": _foot(outcome, report=report, winner_note=winner_note, several=False)}


def _group_lines(outcome: SweepOutcome, groups: Sequence[SweepOutcome], finding: str | None, *,
                 report: Path | None, baseline_note: str, winner_note: str,
                 width: int = TABLE_WIDTH) -> dict[str, list[str]]:
    """Several groups: the finding across them on top; each group's verdict (its headline names the
    group) over its own table, in the scrolling part, so that any number of groups fits 80x24."""
    head = [finding or f"{len(groups)} groups, one verdict each: the same setting is fastest in each"]
    head.append(outcome.source_text[0].upper() + outcome.source_text[1:])
    if baseline_note:
        head.append(baseline_note)
    table: list[str] = []
    for i, g in enumerate(groups):
        table += ([""] if i else []) + [_group_head(g), *_table_lines(g, width)]
    return {"head": head, "table": table, "foot": _foot(outcome, report=report, winner_note=winner_note, several=True)}


def _foot(outcome: SweepOutcome, *, report: Path | None, winner_note: str, several: bool) -> list[str]:
    best = outcome.best
    foot = [f"report: {report}" if report is not None else "report: not written (see the event log)"]
    keys = []
    if winner_note:
        foot.append(winner_note)
    elif best is not None and best.steps is not None:
        what = "winner" if outcome.separated else "leader (undecided)"
        where = outcome.group_text if several else ""
        keys.append(f"w: restart on the {what}{where} ({best.label}; commands shown first)")
    keys.append("p: chart")
    if report is not None:
        keys.append("o: open the report · c: copy its path")
    keys.append("escape: close")
    foot.append(" · ".join(keys))
    return foot


class SweepVerdictScreen(ModalScreen[str | None]):
    """The sweep's verdict, until dismissed; returns ``"winner"``, ``"report"`` or None.

    Args:
        outcome: The sweep's verdict (``w`` restarts on its best setting).
        report: The report's path (None when it was not written).
        finished: Whether the sweep measured every setting (else it was stopped).
        baseline_note: What happened to the dashboard's baseline.
        winner_note: Why restarting on the winner is not offered ("" when it is).
        groups: Every group's verdict, when the sweep had several (concurrencies, workloads).
        finding: The sweep's sentence when the winner depends on the load or the workload.
        stopped_reason: Why a stopped sweep stopped (the server's exit, the restart that failed, a stop
            asked for); shown first, with the key that continues it.
    """

    BINDINGS = [
        Binding("w", "winner", "Restart on winner"),
        Binding("p", "chart", "Chart"),
        Binding("o", "open_report", "Open report"),
        Binding("c", "copy_path", "Copy path"),
        Binding("escape,q,enter", "close", "Close", key_display="esc/q"),
    ]

    DEFAULT_CSS = """
    SweepVerdictScreen { align: center middle; }
    SweepVerdictScreen > #verdict-box {
        width: 80; max-width: 100%; height: auto; max-height: 100%;  /* set to the table's width on mount */
        border: round $success; background: $surface; padding: 0 1;
    }
    SweepVerdictScreen #verdict-title { text-style: bold; color: $success; }
    SweepVerdictScreen #verdict-head { height: auto; }
    SweepVerdictScreen #verdict-scroll { height: auto; max-height: 8; margin: 1 0 0 0; background: $background; }
    /* Several groups: the panel takes the screen and the verdicts scroll between the finding and the keys. */
    SweepVerdictScreen.-groups > #verdict-box { height: 100%; }
    SweepVerdictScreen.-groups #verdict-scroll { height: 1fr; max-height: 100%; }
    SweepVerdictScreen .group-head { width: 100%; height: auto; text-style: bold; margin-top: 1; }
    SweepVerdictScreen .group-table { width: auto; height: auto; }
    /* p: the chart takes what the verdict and the keys leave of the screen. */
    SweepVerdictScreen #verdict-chart { display: none; height: 1fr; min-height: 8; margin: 1 0 0 0; }
    SweepVerdictScreen.-chart > #verdict-box { height: 100%; }
    SweepVerdictScreen.-chart #verdict-chart { display: block; }
    SweepVerdictScreen.-chart #verdict-scroll { display: none; }
    SweepVerdictScreen #verdict-table { width: auto; }
    SweepVerdictScreen #verdict-foot { height: auto; color: $text-muted; margin-top: 1; }
    /* A short terminal (60x15): the verdict scrolls with the table between the title and the keys,
       which stay on screen (the keys were pushed off it). */
    SweepVerdictScreen #verdict-head-scrolled { display: none; height: auto; }
    SweepVerdictScreen.-short > #verdict-box { height: 100%; }
    SweepVerdictScreen.-short #verdict-head { display: none; }
    SweepVerdictScreen.-short #verdict-head-scrolled { display: block; }
    SweepVerdictScreen.-short #verdict-scroll { height: 1fr; max-height: 100%; margin: 0; }
    SweepVerdictScreen.-short #verdict-foot { margin-top: 0; }
    """

    #: Below this many rows the verdict scrolls with the table (:attr:`DEFAULT_CSS`, ``-short``).
    SHORT_ROWS = 24

    def __init__(self, outcome: SweepOutcome, *, report: Path | None, finished: bool = True,
                 baseline_note: str = "", winner_note: str = "", groups: Sequence[SweepOutcome] = (),
                 finding: str | None = None, stopped_reason: str = "") -> None:
        super().__init__()
        self.outcome = outcome
        self.report = report
        self.finished = finished
        self.winner_note = winner_note
        self._text_args = {"report": report, "baseline_note": baseline_note, "winner_note": winner_note,
                           "groups": groups, "finding": finding}
        self.lines = verdict_lines(outcome, **self._text_args)  # type: ignore[arg-type]
        self.groups = tuple(groups) if len(groups) > 1 else ()
        #: The widest table with every column: the box grows to it where the screen allows.
        self._natural = max([table_width(g) for g in (self.groups or (outcome,))] + [TABLE_WIDTH])
        if stopped_reason and not finished:
            # Why it stopped stands first, and how it goes on (the dashboard's s, once this is closed).
            self.lines["head"].insert(0, f"Why it stopped: {stopped_reason}")
            self.lines["foot"].append("s, once this is closed: continue the sweep from where it stopped")
        if self.groups:
            self.add_class("-groups")

    def compose(self) -> ComposeResult:
        title = "Sweep finished" if self.finished else "Sweep stopped: the verdict covers what was measured"
        with Vertical(id="verdict-box"):
            yield Static(literal(title), id="verdict-title", markup=False)
            yield Static(literal("\n".join(self.lines["head"]), newlines=True), id="verdict-head", markup=False)
            with VerticalScroll(id="verdict-scroll"):
                yield Static(literal("\n".join(self.lines["head"]), newlines=True), id="verdict-head-scrolled",
                             markup=False)
                if not self.groups:
                    yield Static(literal("\n".join(self.lines["table"]), newlines=True), id="verdict-table",
                                 markup=False)
                for i, group in enumerate(self.groups):
                    # The group's verdict wraps at the panel's width; its table keeps its columns.
                    yield Static(literal(_group_head(group), newlines=True), classes="group-head", markup=False)
                    yield Static(literal("\n".join(_table_lines(group)), newlines=True), classes="group-table",
                                 id=f"verdict-table-{i}", markup=False)
            yield ComparisonPlot(self.groups or (self.outcome,), id="verdict-chart")
            yield Static(literal("\n".join(self.lines["foot"]), newlines=True), id="verdict-foot", markup=False)

    def on_resize(self, event: events.Resize) -> None:
        self.set_class(event.size.height < self.SHORT_ROWS, "-short")
        self._fit(event.size.width)

    def on_mount(self) -> None:
        self.set_class(self.app.size.height < self.SHORT_ROWS, "-short")
        self._fit(self.app.size.width)

    @while_attached
    def _fit(self, screen_width: int) -> None:
        """The box as wide as its table (80 at least), within the screen; the tables fit what is left.

        It was 80 columns at every size: a status cut at "(pendin" on a wide screen, lines cut on a
        narrow one. The head wraps at the box's width; a table drops columns (n first) to fit it.
        """
        frame = 4  # the border and the padding, each side
        box = max(20, min(screen_width, max(80, self._natural + frame)))
        self.query_one("#verdict-box").styles.width = box
        # Only the tables change with the width (the head and the keys wrap in their Static).
        fitted = verdict_lines(self.outcome, width=box - frame, **self._text_args)  # type: ignore[arg-type]
        self.lines["table"] = fitted["table"]
        if self.groups:
            for i, group in enumerate(self.groups):
                self.query_one(f"#verdict-table-{i}", Static).update(
                    literal("\n".join(_table_lines(group, box - frame)), newlines=True))
        else:
            self.query_one("#verdict-table", Static).update(literal("\n".join(self.lines["table"]), newlines=True))
    @property
    def text(self) -> str:
        """Everything the panel says, as plain text."""
        return "\n".join(line for part in ("head", "table", "foot") for line in self.lines[part])

    def action_winner(self) -> None:
        """Close, then restart on the winner through the usual confirmation (nothing runs yet)."""
        best = self.outcome.best
        if self.winner_note or best is None or best.steps is None:
            self.notify(self.winner_note or "no setting to restart on", severity="warning")
            return
        self.dismiss("winner")

    def action_chart(self) -> None:
        """Show the comparison as a chart (tok/s ± 95% interval per setting) instead of the tables, or back."""
        self.toggle_class("-chart")

    def action_open_report(self) -> None:
        """Open the report in a scrollable view (the panel stays underneath)."""
        if self.report is None:
            self.notify("the report was not written", severity="warning")
            return
        from specmon.ui.screens.text_view import TextViewScreen

        try:
            text = self.report.read_text(encoding="utf-8")
        except OSError as exc:
            self.notify(f"cannot read the report: {exc}", severity="error")
            return
        self.app.push_screen(TextViewScreen(str(self.report), text))

    def action_copy_path(self) -> None:
        """Copy the report's path to the clipboard (OSC 52: works over SSH in most terminals)."""
        if self.report is None:
            self.notify("the report was not written", severity="warning")
            return
        self.app.copy_to_clipboard(str(self.report))
        self.notify(f"copied: {self.report}", timeout=4)

    def action_close(self) -> None:
        """Close the panel."""
        self.dismiss(None)
