"""The run table: one row per configuration seen, the best marked, sortable by any column."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.widgets import DataTable

from specmon.output.tables import tps_header
from specmon.ui.literal import plain
from specmon.ui.views import RowView, TableView

__all__ = ["COLUMNS", "DROP_ORDER", "RunTable", "mark_text"]


def mark_text(mark: str, baseline: bool, current: bool) -> str:
    """``★B▸``: the verdict's mark (★ winner, ☆ leads, undecided), baseline, current run, each in its
    own slot (a space when not)."""
    return (mark or " ") + ("B" if baseline else " ") + ("▸" if current else " ")


#: Columns a narrow table drops, first to last; the configuration, the step count, tok/s and the
#: comparison always stay (their headers carry the units).
DROP_ORDER = ("draft", "acc_rate", "n", "acc_len")
#: The headers a narrow table uses before it drops a column: ``±launch`` still says what the interval
#: covers (launches: `?` explains it beside the fleet's ``±sample`` and ``±replica``).
SHORT_HEADERS = {"tps": "tok/s ±launch", "vs": "vs base"}


def _none_last(value: Any) -> tuple[int, Any]:
    return (1, 0) if value is None else (0, value)


#: (key, header, cell getter, sort key, right-aligned)
COLUMNS: tuple[tuple[str, str, Callable[[RowView, bool], str], Callable[[RowView], Any], bool], ...] = (
    # One slot per mark: the leading row may also be the baseline, or the current run.
    ("mark", "   ", lambda r, _: mark_text(r.mark, r.is_baseline, r.current),
     lambda r: (not r.mark, not r.is_baseline), False),
    # The algorithm's name comes from the log: literal (a cell is a rich Text, never markup).
    ("config", "config", lambda r, _: plain(r.algorithm), lambda r: r.algorithm, False),
    ("steps", "steps", lambda r, _: "—" if r.steps is None else str(r.steps), lambda r: _none_last(r.steps), True),
    ("draft", "draft", lambda r, _: "—" if r.draft_tokens is None else str(r.draft_tokens),
     lambda r: _none_last(r.draft_tokens), True),
    ("n", "n", lambda r, _: f"{r.samples:,}", lambda r: r.samples, True),
    ("tps", tps_header("launch"), lambda r, _: r.tps, lambda r: _none_last(r.tps_mean), True),
    ("vs", "vs baseline", lambda r, wide: r.vs if wide else r.vs_short, lambda r: _none_last(r.vs_pct), True),
    ("acc_len", "accept len", lambda r, _: r.accept_len, lambda r: _none_last(r.accept_len_mean), True),
    ("acc_rate", "accept rate", lambda r, _: r.accept_rate, lambda r: _none_last(r.accept_rate_mean), True),
)


class RunTable(DataTable[Text]):
    """A DataTable fed with :class:`~specmon.ui.views.TableView` objects.

    Click a column header to sort by it (again to reverse). Colours come from
    the component classes below, which the stylesheet maps to theme variables.
    """

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "run-table--best", "run-table--baseline", "run-table--better", "run-table--worse",
        "run-table--same", "run-table--current",
    }

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self._view: TableView | None = None
        self.sort_column: str | None = None  # None: in order of appearance
        self.sort_reverse = False
        self._size = Size(-1, -1)
        self._columns_shown: tuple[tuple[str, str], ...] = ()
        #: The user moved the cursor onto a row (keys or a click) since the table got the focus:
        #: only then does ``r`` restart on the highlighted row (the table has the focus from the start).
        self.chosen = False

    def on_blur(self) -> None:
        self.chosen = False

    def action_cursor_up(self) -> None:
        self.chosen = True
        super().action_cursor_up()

    def action_cursor_down(self) -> None:
        self.chosen = True
        super().action_cursor_down()

    def action_page_up(self) -> None:
        self.chosen = True
        super().action_page_up()

    def action_page_down(self) -> None:
        self.chosen = True
        super().action_page_down()

    def action_scroll_top(self) -> None:
        self.chosen = True
        super().action_scroll_top()

    def action_scroll_bottom(self) -> None:
        self.chosen = True
        super().action_scroll_bottom()

    def on_click(self) -> None:
        self.chosen = True  # DataTable's own _on_click moves the cursor

    def on_mount(self) -> None:
        self._set_columns(COLUMNS)
        # Cell styles are resolved from the theme: rebuild once the new theme's styles apply.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.call_after_refresh(self._rebuild))

    def _set_columns(self, columns: tuple[tuple[str, str, Any, Any, bool], ...]) -> None:
        self.clear(columns=True)
        for key, header, _, _, right in columns:
            self.add_column(Text(header, justify="right" if right else "left"), key=key)
        self._columns_shown = tuple((c[0], c[1]) for c in columns)

    def _columns_for(self, rows: list[RowView]) -> tuple[tuple[tuple[str, str, Any, Any, bool], ...], bool]:
        """The columns that fit the width, and whether the comparison has its interval.

        Every column with the comparison's interval when they fit, else the short
        comparison with columns dropped in :data:`DROP_ORDER`; never the configuration.
        """
        width = self.size.width
        if width == 0:
            return COLUMNS, True
        # The vertical scrollbar, when the rows (and the header line) exceed the table's largest
        # height: read from the stylesheet, not from the current layout, which lags a row behind
        # while rows arrive (the columns would flip between two layouts).
        limit = self.styles.max_height
        most = int(limit.value) if limit is not None and limit.is_cells else self.size.height
        overflow = most > 0 and len(rows) + 1 > most
        room = width - (self.styles.scrollbar_size_vertical if overflow else 0)

        def needed(columns: tuple[tuple[str, str, Any, Any, bool], ...], wide: bool) -> int:
            return sum(max([len(header)] + [len(get(r, wide)) for r in rows]) + 2 * self.cell_padding
                       for _, header, get, _, _ in columns)

        # The interval of the comparison only when nothing has to go for it.
        if needed(COLUMNS, True) <= room:
            return COLUMNS, True
        # Then the comparison without its interval; then the short headers, before any column goes.
        if needed(COLUMNS, False) <= room:
            return COLUMNS, False
        columns = tuple((k, SHORT_HEADERS.get(k, h), g, s, r) for k, h, g, s, r in COLUMNS)
        for drop in DROP_ORDER:
            if needed(columns, False) <= room:
                break
            columns = tuple(c for c in columns if c[0] != drop)
        return columns, False

    def on_resize(self) -> None:
        # Height too: whether a scrollbar takes columns depends on it.
        if self.size != self._size:
            self._size = self.size
            self._rebuild()

    def show(self, view: TableView) -> None:
        """Display a table view (rebuilt only when it changed)."""
        if view != self._view:
            self._view = view
            self._rebuild()

    def sort_by(self, column: str | None, reverse: bool = False) -> None:
        """Sort rows by a column key (None: order of appearance)."""
        self.sort_column, self.sort_reverse = column, reverse
        self._rebuild()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if key == self.sort_column:
            self.sort_by(key, not self.sort_reverse)
        else:
            # Numbers read best high-to-low first (fastest on top); names A-Z.
            self.sort_by(key, key not in ("config", "steps", "draft", "mark"))

    def _style(self, row: RowView) -> str:
        if row.mark:
            return "run-table--best"
        if row.is_baseline:
            return "run-table--baseline"
        return ""

    def _rebuild(self) -> None:
        view = self._view
        if view is None or not self._columns_shown:
            return
        cursor_key = None
        if self.row_count and 0 <= self.cursor_row < self.row_count:
            cursor_key = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        rows = list(view.rows)
        if self.sort_column is not None:
            getter = next(c[3] for c in COLUMNS if c[0] == self.sort_column)
            rows.sort(key=getter, reverse=self.sort_reverse)
        columns, wide = self._columns_for(rows)
        if tuple((c[0], c[1]) for c in columns) != self._columns_shown:
            self._set_columns(columns)
        # Plain for the moment Textual lacks the component styles (its issues 5646, 6528): every
        # update rebuilds the rows, so the next one styles them; never a crash of the dashboard.
        styles = {name: self.get_component_rich_style(name, partial=True, default=Style())
                  for name in self.COMPONENT_CLASSES}
        self.clear()
        for row in rows:
            base = styles[self._style(row)] if self._style(row) else Style()
            cells = []
            for key, _, get, _, right in columns:
                style = base
                if key == "vs" and row.vs_level:
                    style = base + styles[f"run-table--{row.vs_level}"]
                if key == "mark" and row.current and not (row.mark or row.is_baseline):
                    style = styles["run-table--current"]
                cells.append(Text(get(row, wide), style=style, justify="right" if right else "left"))
            self.add_row(*cells, key=row.key)
        if cursor_key is not None:
            try:
                self.move_cursor(row=self.get_row_index(cursor_key), animate=False)
            except Exception:
                pass
