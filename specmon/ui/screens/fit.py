"""Dialogs that fit the terminal: the long part scrolls, the keys and buttons stay on screen."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widget import Widget

__all__ = ["SHORT_BELOW", "fit_scroll"]

#: Below this many rows a dialog goes ``-short``: one-line buttons, no gaps around the long part.
SHORT_BELOW = 32


def fit_scroll(screen: Screen[Any], box: Widget, scroll: Widget, *, most: int = 24) -> None:
    """Limit ``scroll`` to what ``box`` has left once its other children are drawn.

    Called after a layout (their heights are known then); ``most`` caps it on tall terminals.
    """
    others = sum(w.outer_size.height for w in box.children if w is not scroll)
    limit = box.styles.max_height
    box_max = screen.size.height if limit is None else int(limit.resolve(screen.size, screen.size))
    room = box_max - box.styles.gutter.height - others - scroll.styles.margin.height
    scroll.styles.max_height = max(3, min(most, room))
