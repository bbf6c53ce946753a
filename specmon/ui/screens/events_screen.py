"""The whole event log (``l``): full lines, both clocks, filtered and searched as you type.

The dashboard's event panel shows the newest events that fit, cut to its width; this
screen shows every event kept, whole: the wall time specmon saw it, the log's own stamp
when that differs, the level, the full text. ``/`` types a filter (words that must all
appear), ``!`` cycles the levels shown (all → warnings and errors → errors), ``f`` folds
or unfolds the milestones every rank prints, escape goes back. It follows new events
while it is open. :func:`event_lines` builds the text (pure, tested). Designed at 80×24 first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Input, Static

from specmon.model.run import SessionEvent
from specmon.ui.literal import literal
from specmon.ui.views import fold_events
from specmon.ui.widgets.key_footer import KeyFooter

__all__ = ["LEVELS", "EventsScreen", "event_lines"]

#: What ``!`` cycles through: the levels each setting shows.
LEVELS: tuple[tuple[str, frozenset[str]], ...] = (
    ("all", frozenset({"info", "warning", "error"})),
    ("warnings+errors", frozenset({"warning", "error"})),
    ("errors", frozenset({"error"})),
)
_MARK = {"error": "✖ ", "warning": "▲ ", "info": ""}


def event_lines(events: Sequence[SessionEvent], *, query: str = "", levels: frozenset[str] = LEVELS[0][1],
                fold: bool = True) -> tuple[list[str], int]:
    """The lines to show, and how many events there are in all (before the filter).

    Args:
        events: The session's events, in arrival order.
        query: Words that must all appear in a line (case-insensitive; empty: every line).
        levels: Which levels to show.
        fold: Fold a milestone every rank prints (``graph end ×8``) into one line.
    """
    views = fold_events(events, fold=fold)
    words = query.lower().split()
    out = []
    for v in views:
        if v.level not in levels:
            continue
        text = _MARK.get(v.level, "") + v.text
        if v.count > 1:
            kind, _, rest = text.partition(":")
            text = f"{kind} ×{v.count}:{rest}"
        stamp = f" (log {v.log_time})" if v.log_time else ""
        where = f" [line {v.line}]" if v.line else " [specmon]"
        line = f"{v.time}{stamp}{where} {text}"
        if all(w in line.lower() for w in words):
            out.append(line)
    return out, len(views)


class EventsScreen(Screen[None]):
    """Every event kept, whole; filter with ``/``, levels with ``!``, fold with ``f``.

    Args:
        source: Returns the session's events now (called again while the screen is open).
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "search", "Filter", key_display="/"),
        Binding("exclamation_mark", "levels", "Levels", key_display="!"),
        Binding("f", "fold", "Fold"),
    ]

    DEFAULT_CSS = """
    EventsScreen #events-title { height: 1; background: $panel; text-style: bold; padding: 0 1; }
    EventsScreen #events-filter { height: 3; margin: 0 1; }
    EventsScreen #events-scroll { height: 1fr; padding: 0 1; }
    EventsScreen #events-body { width: 100%; }
    """

    def __init__(self, source: Callable[[], Sequence[SessionEvent]]) -> None:
        super().__init__()
        self.source = source
        self.query_text = ""
        self.level_index = 0
        self.fold = True
        self.lines: list[str] = []
        self._shown: tuple[object, ...] | None = None
        self._shown_last: object = None

    def compose(self) -> ComposeResult:
        # References, not queries: the app quitting as this opens prunes them before the Mount is handled.
        self._title = Static("", id="events-title", markup=False)
        self._scroll = VerticalScroll(id="events-scroll")
        self._body = Static("", id="events-body", markup=False)
        yield self._title
        yield Input(placeholder="/ filter: words each line must contain",
                    id="events-filter")
        with self._scroll:
            yield self._body
        yield KeyFooter(compact=True)  # keys are dropped from Textual's Footer at 80 columns

    def on_mount(self) -> None:
        self.refresh_lines()
        self._scroll.focus()
        self.set_interval(1.0, self.refresh_lines, name="events screen refresh")

    def refresh_lines(self) -> None:
        """Rebuild the lines (new events, another filter); stay at the bottom if there."""
        events = list(self.source())
        key = (len(events), id(events[-1]) if events else None, self.query_text, self.level_index, self.fold)
        if key == self._shown:
            return
        # The last event is held: an id names one object only while that object lives.
        self._shown, self._shown_last = key, (events[-1] if events else None)
        name, levels = LEVELS[self.level_index]
        self.lines, total = event_lines(events, query=self.query_text, levels=levels, fold=self.fold)
        scroll = self._scroll
        at_end = scroll.scroll_y >= scroll.max_scroll_y - 1
        body = "\n".join(self.lines) if self.lines else "no event matches"
        self._body.update(literal(body, newlines=True))
        shown = f"{len(self.lines)} of {total}" if self.query_text or self.level_index else f"{total}"
        filt = f" · {self.query_text!r}" if self.query_text else ""
        live = any(e.received is not None for e in events)
        clock = "wall clock, (log …) its own stamp" if live else "log time"
        self._title.update(
            literal(f"events {shown} · {name}{filt} · {'folded' if self.fold else 'unfolded'} · {clock}"))
        if at_end:
            scroll.call_after_refresh(scroll.scroll_end, animate=False)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self.query_text = event.value.strip()
        self.refresh_lines()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.query_one("#events-scroll").focus()

    def action_search(self) -> None:
        """Type a filter."""
        self.query_one("#events-filter", Input).focus()

    def action_levels(self) -> None:
        """All levels → warnings and errors → errors only → all."""
        self.level_index = (self.level_index + 1) % len(LEVELS)
        self.refresh_lines()

    def action_fold(self) -> None:
        """Fold or unfold the milestones every rank prints."""
        self.fold = not self.fold
        self.refresh_lines()

    def action_back(self) -> None:
        """From the filter back to the list; from the list back to the dashboard."""
        if isinstance(self.focused, Input):
            self.query_one("#events-scroll").focus()
            return
        self.dismiss(None)
