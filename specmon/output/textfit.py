"""Tables and verdicts whole in the terminal's width: columns dropped with a note, text wrapped at words.

``summarize`` and ``sweep`` print a rich table and the verdict under it. In an 80-column terminal
rich cut the caption's verdict mid-word at the table's right edge and lost the last column. Here
the columns that do not fit are dropped in a stated order and a printed note names them, the
label column may wrap only between words, numbers never wrap, and the verdict is printed as its
own paragraph, which rich wraps at spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from specmon.literal import plain
from specmon.model.verdict import Answer

if TYPE_CHECKING:
    from rich.table import Table
    from rich.text import Text

__all__ = ["fit_columns", "fitted_table", "verdict_text"]

#: rich's default table: one border between columns and at each edge, one space of padding each side.
_PAD = 2


def _longest_word(texts: Sequence[str]) -> int:
    return max((len(w) for t in texts for w in t.split()), default=1)


def _header_lines(header: str) -> str:
    """A header on two lines at its parenthesis (``vs baseline`` over ``(95% CI)``): narrower columns."""
    return header.replace(" (", "\n(", 1)


def _column_need(i: int, headers: Sequence[str], rows: Sequence[Sequence[str]]) -> int:
    cells = [*_header_lines(headers[i]).split("\n"), *(r[i] for r in rows)]
    # The first column (the setting's name) may wrap between words; the others never wrap.
    return _longest_word(cells) if i == 0 else max(len(c) for c in cells)


def fit_columns(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int,
                drop_order: Sequence[str]) -> tuple[list[int], list[str]]:
    """Which columns fit ``width``, dropping ``drop_order``'s headers first to last while they do not.

    Returns:
        The indices of the columns kept, and the headers dropped (empty when all fit).
    """
    keep = list(range(len(headers)))
    dropped: list[str] = []

    def need() -> int:
        return len(keep) + 1 + sum(_column_need(i, headers, rows) + _PAD for i in keep)

    for name in drop_order:
        if need() <= width or name not in headers:
            continue
        keep.remove(headers.index(name))
        dropped.append(name)
    return keep, dropped


def fitted_table(headers: Sequence[str], rows: Sequence[Sequence[str]], *, width: int,
                 drop_order: Sequence[str], title: str | None = None,
                 styles: Sequence[str | None] = ()) -> tuple[Table, str | None]:
    """A rich table of plain cells that fits ``width``, and the note naming the columns left out (or None).

    Every cell, the title and the note are literal text (a setting's name comes from a log).
    """
    from rich.table import Table
    from rich.text import Text

    keep, dropped = fit_columns(headers, rows, width, drop_order)
    table = Table(title=None if title is None else Text(plain(title)))
    for i in keep:
        table.add_column(_header_lines(headers[i]), justify="left" if i == 0 else "right", no_wrap=i != 0,
                         min_width=_column_need(i, headers, rows) if i == 0 else None,
                         overflow="fold" if i == 0 else "ellipsis")
    for n, row in enumerate(rows):
        style = styles[n] if n < len(styles) else None
        table.add_row(*(Text(plain(row[i])) for i in keep), style=style)
    note = None
    if dropped:
        note = (f"Not shown at {width} columns: {', '.join(dropped)} (a wider terminal shows "
                f"{'it' if len(dropped) == 1 else 'them'}; --format json has every figure).")
    return table, note


def verdict_text(answer: Answer, sentence: str | None = None, *, lead: str = "Verdict") -> Text:
    """``Verdict (☆ leads, undecided): <the sentence>`` as one paragraph that wraps at words."""
    from rich.text import Text

    tag = f"{answer.mark} {answer.words}" if answer.mark else answer.words
    return Text.assemble((f"{lead} ({tag}):", "bold"), " ", plain(answer.sentence if sentence is None else sentence))
