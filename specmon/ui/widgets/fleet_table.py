"""The fleet view's tables: rows updated in place, sorted by any column, columns fitted to the width.

A table is given frozen rows (:mod:`specmon.model.fleet`) a few times a second. When the same
rows come in the same order with the same columns, only the cells whose text changed are
written (``update_cell``); otherwise the rows are laid out again and the cursor stays on the
row it was on. Columns that do not fit the width are dropped in the table's ``DROP_ORDER``,
the way the run table drops them (:mod:`specmon.ui.widgets.run_table`), so every cell shown
is whole: nothing is cut with an ellipsis. Every cell is a ``Text`` made literal
(:func:`specmon.ui.literal.plain`): a path or a log's words are never read as markup.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.geometry import Size
from textual.widgets import DataTable

from specmon.ui.literal import plain

__all__ = ["Column", "FittedTable", "interval_text", "number_text"]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a fleet table.

    Attributes:
        key: Its key (and sort name).
        header: Its header (units in it: the header stays when values change).
        cell: The cell's text for a row.
        sort: The sort key for a row (None sorts last, whatever the direction).
        right: Right-aligned (numbers).
        title: How the sort is named in the title (``tok/s``).
        descending: Sorted high to low first (numbers), else A to Z.
    """

    key: str
    header: str
    cell: Callable[[Any], str]
    sort: Callable[[Any], Any]
    right: bool = False
    title: str = ""
    descending: bool = False


def number_text(value: float | None, decimals: int = 1) -> str:
    """``94.0``, or ``—`` for no value."""
    return "—" if value is None else f"{value:.{decimals}f}"


def interval_text(mean: float | None, half: float | None, decimals: int = 1) -> str:
    """``94.0 ± 1.2``, ``94.0`` without an interval, ``—`` without a value."""
    if mean is None:
        return "—"
    if half is None:
        return f"{mean:.{decimals}f}"
    return f"{mean:.{decimals}f} ± {half:.{decimals}f}"


class FittedTable(DataTable[Text]):
    """A row-cursor DataTable of frozen rows with a ``key`` attribute (see the module docstring).

    Subclasses set :attr:`COLUMNS`, :attr:`DROP_ORDER` and may style rows (:meth:`row_style`).
    """

    COLUMNS: ClassVar[tuple[Column, ...]] = ()
    #: Columns dropped when the table is too narrow, first to last; the others always stay.
    DROP_ORDER: ClassVar[tuple[str, ...]] = ()

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.sort_column: str | None = None  # None: the command line's order
        self.sort_reverse = False
        self._rows: list[Any] = []
        self._shown: tuple[str, ...] = ()
        self._order: list[str] = []
        self._cells: dict[str, tuple[str, ...]] = {}
        self._styles: dict[str, str] = {}
        #: A cell was drawn plain because the table's component styles were not there (see :meth:`_text`).
        self._styles_missing = False
        self._size = Size(-1, -1)
        #: Cells written in place (not laid out again) since mount: what "in place" saves.
        self.cells_updated = 0
        self.rebuilds = 0

    # -- what the rows are ----------------------------------------------------------------------

    @property
    def rows_shown(self) -> list[Any]:
        """The rows in the order shown."""
        return self._sorted(self._rows)

    @property
    def columns_shown(self) -> tuple[str, ...]:
        """The keys of the columns shown."""
        return self._shown

    def row_style(self, row: Any) -> str:
        """A component class for a row ("" for none)."""
        return ""

    def cursor_key(self) -> str | None:
        """The key of the row under the cursor."""
        if not self.row_count or not 0 <= self.cursor_row < self.row_count:
            return None
        value = self.coordinate_to_cell_key(self.cursor_coordinate).row_key.value
        return None if value is None else str(value)

    # -- sorting ----------------------------------------------------------------------------------

    def sort_title(self) -> str:
        """``tok/s ▼`` or ``""`` (the command line's order)."""
        if self.sort_column is None:
            return ""
        column = next(c for c in self.COLUMNS if c.key == self.sort_column)
        high_first = column.descending != self.sort_reverse
        return f"{column.title or column.header} {'▼' if high_first else '▲'}"

    def sort_by(self, key: str | None, reverse: bool | None = None) -> None:
        """Sort by a column (None: the command line's order); ``reverse`` flips its usual direction."""
        self.sort_column = key
        self.sort_reverse = bool(reverse)
        self._show_rows()

    def cycle_sort(self) -> None:
        """The next column among those shown (after the last: the command line's order)."""
        keys = [c.key for c in self.COLUMNS if c.key in self._shown]
        if self.sort_column is None:
            self.sort_by(keys[0] if keys else None)
            return
        i = keys.index(self.sort_column) if self.sort_column in keys else -1
        self.sort_by(keys[i + 1] if i + 1 < len(keys) else None)

    def reverse_sort(self) -> None:
        """Flip the direction of the current sort."""
        if self.sort_column is not None:
            self.sort_by(self.sort_column, not self.sort_reverse)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        key = str(event.column_key.value)
        if key == self.sort_column:
            self.reverse_sort()
        else:
            self.sort_by(key)

    def _sorted(self, rows: Sequence[Any]) -> list[Any]:
        if self.sort_column is None:
            return list(rows)
        column = next(c for c in self.COLUMNS if c.key == self.sort_column)
        keyed = [(column.sort(r), r) for r in rows]
        have = [(k, r) for k, r in keyed if k is not None]
        # Stable: equal values keep the command line's order, whichever the direction.
        have.sort(key=lambda kr: kr[0], reverse=column.descending != self.sort_reverse)
        return [r for _, r in have] + [r for k, r in keyed if k is None]

    # -- showing ------------------------------------------------------------------------------------

    def show(self, rows: Sequence[Any]) -> None:
        """Display rows (cells that did not change are left alone)."""
        self._rows = list(rows)
        self._show_rows()

    def on_mount(self) -> None:
        # Cell styles are resolved from the theme: lay out again once a new theme's styles apply.
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self.call_after_refresh(self._relayout))

    def on_resize(self) -> None:
        if self.size != self._size:
            self._size = self.size
            self._show_rows()

    def _relayout(self) -> None:
        self._order = []
        self._show_rows()

    def _fit(self, rows: int, widths: Sequence[int]) -> tuple[Column, ...]:
        """The columns that fit the width, dropping :attr:`DROP_ORDER` first to last.

        Args:
            rows: How many rows there are (the scrollbar takes columns when they overflow).
            widths: Each of :attr:`COLUMNS`' widest cell or header.
        """
        width = self.size.width
        if width == 0:
            return self.COLUMNS
        limit = self.styles.max_height
        most = int(limit.value) if limit is not None and limit.is_cells else self.size.height
        # The vertical scrollbar takes its columns when the rows and the header do not fit.
        overflow = most > 0 and rows + 1 > most
        room = width - (self.styles.scrollbar_size_vertical if overflow else 0)
        need = {c.key: w + 2 * self.cell_padding for c, w in zip(self.COLUMNS, widths, strict=True)}
        columns = self.COLUMNS
        for drop in self.DROP_ORDER:
            if sum(need[c.key] for c in columns) <= room:
                break
            columns = tuple(c for c in columns if c.key != drop)
        return columns

    def _show_rows(self) -> None:
        if not self.is_mounted:
            return
        rows = self._sorted(self._rows)
        # Every column's text once: the fit reads their widths, the table the shown ones.
        every = [tuple(plain(c.cell(r)) for c in self.COLUMNS) for r in rows]
        widths = [max([len(c.header)] + [len(texts[i]) for texts in every]) for i, c in enumerate(self.COLUMNS)]
        columns = self._fit(len(rows), widths)
        keys = tuple(c.key for c in columns)
        index = [i for i, c in enumerate(self.COLUMNS) if c.key in keys]
        order = [str(r.key) for r in rows]
        cells = {key: tuple(texts[i] for i in index) for key, texts in zip(order, every, strict=True)}
        styles = {str(r.key): self.row_style(r) for r in rows}
        if keys == self._shown and order == self._order:
            self._update_in_place(columns, cells, styles)
            return
        cursor = self.cursor_key()
        if keys != self._shown:
            self.clear(columns=True)
            for c in columns:
                self.add_column(Text(c.header, justify="right" if c.right else "left"), key=c.key)
            self._shown = keys
        else:
            self.clear()
        for key in order:
            self.add_row(*(self._text(c, t, styles[key]) for c, t in zip(columns, cells[key], strict=True)), key=key)
        self._order, self._cells, self._styles = order, cells, self._styled(styles)
        self.rebuilds += 1
        if cursor is not None and cursor in cells:
            try:
                self.move_cursor(row=self.get_row_index(cursor), animate=False)
            except Exception:
                pass

    def _update_in_place(self, columns: Sequence[Column], cells: dict[str, tuple[str, ...]],
                         styles: dict[str, str]) -> None:
        for key, texts in cells.items():
            old = self._cells.get(key)
            restyled = self._styles.get(key) != styles[key]
            if old == texts and not restyled:
                continue
            for i, c in enumerate(columns):
                if old is None or old[i] != texts[i] or restyled:
                    self.update_cell(key, c.key, self._text(c, texts[i], styles[key]), update_width=True)
                    self.cells_updated += 1
        self._cells, self._styles = cells, self._styled(styles)

    def _styled(self, styles: dict[str, str]) -> dict[str, str]:
        """The row styles now shown: none known when a cell had to be drawn plain (all redone next time)."""
        if self._styles_missing:
            self._styles_missing = False
            return {}
        return styles

    def _text(self, column: Column, text: str, style_name: str) -> Text:
        style = Style()
        if style_name:
            try:
                style = self.get_component_rich_style(style_name, partial=True)
            except KeyError:
                # Textual can lack a widget's component styles for a moment (its issues 5646 and
                # 6528; seen here once, in CI, as a replica first turned "stopped"): drawn plain now,
                # styled at the next refresh, never a crash of the view.
                self._styles_missing = True
        return Text(text, style=style, justify="right" if column.right else "left")
