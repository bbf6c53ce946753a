"""The event log: lifecycle events, run changes, crashes and warnings, newest at the bottom."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from specmon.ui.literal import plain
from specmon.ui.views import EventView
from specmon.ui.widgets.levels import EVENT_STYLE

__all__ = ["EventLog"]

#: From this width on, an event whose log stamp differs from the time shown carries the stamp too.
LOG_TIME_FROM_WIDTH = 60


class EventLog(Widget):
    """Shows the newest events that fit; crashes and OOMs stand out in the error colour."""

    events: reactive[tuple[EventView, ...]] = reactive(())

    def render(self) -> Content:
        """The last ``height`` events, one line each (cut with an ellipsis by the stylesheet)."""
        height = max(1, self.content_size.height)
        shown = self.events[-height:]
        if not shown:
            return Content.styled("no events yet", "$text-muted")
        lines = []
        for e in shown:
            style = EVENT_STYLE.get(e.level, "")
            text = plain(e.text)  # a log line, a host's answer, a path: literal, one line
            if e.level == "error":
                text = "✖ " + text
            elif e.level == "warning":
                text = "▲ " + text
            if e.count > 1:
                kind, _, rest = text.partition(":")
                text = f"{kind} ×{e.count}:{rest}"
            stamp = f" (log {plain(e.log_time)})" if e.log_time and self.content_size.width >= LOG_TIME_FROM_WIDTH else ""
            lines.append(Content.assemble((e.time + stamp, "$text-muted"), " ", (text, style)))
        return Content("\n").join(lines)
