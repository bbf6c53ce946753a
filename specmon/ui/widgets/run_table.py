"""The run table: one row per configuration seen, the best marked, sortable by any column."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.widgets import DataTable

from specmon.ui.views import RowView, TableView

__all__ = ["COLUMNS", "RunTable"]


def _none_last(value: Any) -> tuple[int, Any]:
    return (1, 0) if value is None else (0, value)


#: (key, header, cell getter, sort key, right-aligned)
COLUMNS: tuple[tuple[str, str, Callable[[RowView, bool], str], Callable[[RowView], Any], bool], ...] = (
    ("mark", "  ", lambda r, _: ("★" if r.best else "B" if r.is_baseline else " ") + ("▸" if r.current else " "),
     lambda r: (not r.best, not r.is_baseline), False),
    ("config", "config", lambda r, _: r.algorithm, lambda r: r.algorithm, False),
    ("steps", "steps", lambda r, _: "—" if r.steps is None else str(r.steps), lambda r: _none_last(r.steps), True),
    ("draft", "draft", lambda r, _: "—" if r.draft_tokens is None else str(r.draft_tokens),
     lambda r: _none_last(r.draft_tokens), True),
    ("n", "n", lambda r, _: f"{r.samples:,}", lambda r: r.samples, True),
    ("tps", "tok/s ± CI", lambda r, _: r.tps, lambda r: _none_last(r.tps_mean), True),
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
        self._wide: bool | None = None
        self._columns_shown: tuple[str, ...] = ()
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
        self._wide = self._is_wide()
        self._set_columns(COLUMNS)
        # Cell styles are resolved from the theme: rebuild once the new theme's styles apply.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.call_after_refresh(self._rebuild))

    def _set_columns(self, columns: tuple[tuple[str, str, Any, Any, bool], ...]) -> None:
        self.clear(columns=True)
        for key, header, _, _, right in columns:
            self.add_column(Text(header, justify="right" if right else "left"), key=key)
        self._columns_shown = tuple(c[0] for c in columns)

    def _columns_for(self, rows: list[RowView]) -> tuple[tuple[str, str, Any, Any, bool], ...]:
        """Every column when wide; on narrow screens the algorithm only when rows differ in it."""
        algorithms = {r.algorithm for r in rows if r.algorithm != "no spec"}
        if self._wide or len(algorithms) > 1:
            return COLUMNS
        return tuple(c for c in COLUMNS if c[0] != "config")

    def _is_wide(self) -> bool:
        return self.size.width >= 100 or self.size.width == 0

    def on_resize(self) -> None:
        if self._is_wide() != self._wide:
            self._wide = self._is_wide()
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
        if row.best:
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
        wide = bool(self._wide)
        columns = self._columns_for(rows)
        if tuple(c[0] for c in columns) != self._columns_shown:
            self._set_columns(columns)
        styles = {name: self.get_component_rich_style(name, partial=True) for name in self.COMPONENT_CLASSES}
        self.clear()
        for row in rows:
            base = styles[self._style(row)] if self._style(row) else Style()
            cells = []
            for key, _, get, _, right in columns:
                style = base
                if key == "vs" and row.vs_level:
                    style = base + styles[f"run-table--{row.vs_level}"]
                if key == "mark" and row.current and not (row.best or row.is_baseline):
                    style = styles["run-table--current"]
                cells.append(Text(get(row, wide), style=style, justify="right" if right else "left"))
            self.add_row(*cells, key=row.key)
        if cursor_key is not None:
            try:
                self.move_cursor(row=self.get_row_index(cursor_key), animate=False)
            except Exception:
                pass
