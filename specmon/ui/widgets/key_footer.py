"""The footer: every key that applies now, with labels shortened before anything is cut off.

Textual's :class:`~textual.widgets.Footer` cuts the line at the right edge when the
keys do not fit (``… ? Help r R▏^p palettee`` at 60 columns). This one drops the
labels of the least important keys first (:attr:`specmon.ui.keys.KeyAction.rank`),
then every label, and shortens the palette key to ``^p``, so every key stays visible.

The dashboard's keys are bound where they act (the dashboard screen's, the app's): Textual lists
them owner by owner, this footer in the one order of :data:`specmon.ui.keys.ACTIONS`, after a
screen's own keys (escape: back, ``/``: filter), whoever binds them.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.widgets import Footer
from textual.widgets._footer import FooterKey

from specmon.ui.keys import ACTIONS

__all__ = ["KeyFooter", "fit_labels"]

_RANK = {a.action: a.rank for a in ACTIONS}
#: A key of the dashboard's list goes where the list puts it; any other key first, in Textual's order.
_ORDER = {a.action: i for i, a in enumerate(ACTIONS)}
#: ``▏^p palette``: the border, the key, a space and the label.
PALETTE_CELLS = 11


def fit_labels(items: list[tuple[str, str, str]], width: int) -> tuple[dict[str, str], bool]:
    """Which labels fit: ``(action, key, label)`` items in a line of ``width`` cells.

    Returns:
        The label to show per action ("" for the key alone) and whether the palette
        key keeps its label.
    """
    labels = {action: label for action, _, label in items}

    def cells(palette_label: bool) -> int:
        keys = sum(len(key) + (1 + len(labels[action]) if labels[action] else 0) + 1 for action, key, _ in items)
        return keys + (PALETTE_CELLS if palette_label else 3)

    order = sorted(items, key=lambda it: _RANK.get(it[0], 5))
    dropped = []
    for action, _, _ in order:
        if cells(True) <= width:
            break
        labels[action] = ""
        dropped.append(action)
    # Give back the labels that fit again, most important first (a long one dropped late may have
    # made room), and stop at the first that does not: a less important key never keeps its label
    # while a more important one lost it.
    full = {action: label for action, _, label in items}
    for action in reversed(dropped):
        labels[action] = full[action]
        if cells(True) > width:
            labels[action] = ""
            break
    return labels, cells(True) <= width


class KeyFooter(Footer):
    """The dashboard's footer (compact), fitted to its width; recomposed on resize."""

    def compose(self) -> ComposeResult:
        # Textual's footer yields FooterKey widgets; re-label them to fit before they mount.
        keys = [k for k in super().compose() if isinstance(k, FooterKey)]
        palette = [k for k in keys if k.has_class("-command-palette")]
        actions = sorted(
            (k for k in keys if not k.has_class("-command-palette")), key=lambda k: _ORDER.get(k.action, -1)
        )
        width = self.size.width or self.app.size.width
        labels, palette_label = fit_labels([(k.action, k.key_display, k.description) for k in actions], width)
        for key in actions:
            key.description = labels[key.action]
            yield key
        for key in palette:
            if not palette_label:
                key.description = ""
            yield key

    _fitted_width = 0

    def on_resize(self) -> None:
        if self.size.width != self._fitted_width:
            self._fitted_width = self.size.width
            self.call_after_refresh(self.recompose)
