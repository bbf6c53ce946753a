"""The Markdown report whole at 80 columns: paragraphs and list items wrapped, code blocks wrapped,
tables narrowed by whole columns with a note saying which.

A Markdown file is read raw as often as rendered (``less``, a terminal, a diff), so no line of
it is wider than :data:`WIDTH` where it can be helped: a paragraph's soft line breaks render as
spaces, a code block's continuation lines are indented under their line, and a table that would
be wider loses its right-hand columns one at a time, named in a note (a table row cannot wrap).
A word is never cut, except one longer than a whole line.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

WIDTH = 80

#: A word that would start a Markdown block (a list item, a heading, a quote, a setext underline, a
#: fence) if a wrapped paragraph put it first on a line: it stays with the word before it.
_BLOCK_START = re.compile(r"[-+*]|#{1,6}|\d{1,9}[.)]|=+|-+|>.*|`{3,}.*|~{3,}.*|\|.*")

#: The table columns a report may leave out to stay within the width, in the order they go.
OPTIONAL_COLUMNS = ("accept rate", "accept len")


def _words(text: str) -> list[str]:
    """The text's words, each word that would start a block glued to the one before it."""
    out: list[str] = []
    for w in text.split(" "):
        if out and _BLOCK_START.fullmatch(w):
            out[-1] += " " + w
        else:
            out.append(w)
    return out


def wrap(text: str, width: int = WIDTH, *, first: str = "", rest: str = "") -> list[str]:
    """``text`` filled into lines of at most ``width``: ``first`` before the first line, ``rest``
    before the others. A word longer than a line is cut (nothing else can make it fit)."""
    lines: list[str] = []
    line = first
    fresh = True  # nothing of the text on the line yet
    for word in _words(text):
        room = width - len(line) - (0 if fresh else 1)
        if len(word) <= room:
            line += word if fresh else " " + word
            fresh = False
            continue
        if not fresh:
            lines.append(line)
            line, fresh = rest, True
        while len(line) + len(word) > width and width - len(line) > 0:  # longer than a whole line
            cut = width - len(line)
            lines.append(line + word[:cut])
            word, line = word[cut:], rest
        line += word
        fresh = not word
    lines.append(line)
    return [ln.rstrip() for ln in lines]


def wrap_block(lines: Sequence[str], width: int = WIDTH) -> list[str]:
    """Preformatted lines (a code block), each longer one wrapped under itself: its continuation
    lines indented two more than it, so they read as one."""
    out: list[str] = []
    for line in lines:
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")))
        out += wrap(line.strip(" "), width, first=indent, rest=indent + "  ")
    return out


def table_row(cells: Sequence[str]) -> str:
    """One row of a Markdown table."""
    return "| " + " | ".join(cells) + " |"


def fit_table(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int = WIDTH,
              optional: Sequence[str] = OPTIONAL_COLUMNS) -> tuple[list[str], list[list[str]], list[str]]:
    """The table with the ``optional`` columns left out, one at a time, while a row is wider than ``width``.

    Returns:
        The headers and rows kept, and the names of the columns left out (in the order they went).
    """
    keep = list(range(len(headers)))
    dropped: list[str] = []

    def widest() -> int:
        return max(len(table_row([r[i] for i in keep])) for r in [headers, *rows])

    for name in optional:
        if widest() <= width:
            break
        if name in headers:
            keep.remove(list(headers).index(name))
            dropped.append(name)
    return [headers[i] for i in keep], [[r[i] for i in keep] for r in rows], dropped


def dropped_note(dropped: Sequence[str]) -> str:
    """The note under a narrowed table (Markdown emphasis), or empty."""
    if not dropped:
        return ""
    names = " and ".join(dropped)
    return (f"_{names[0].upper()}{names[1:]} left out to keep the table within {WIDTH} columns: "
            "see the HTML or JSON report._")
