"""Per-position acceptance as horizontal bars, when the engine logs it (vLLM, llama.cpp)."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from specmon.ui.literal import literal, plain
from specmon.ui.views import PositionsView

__all__ = ["PositionBars", "bar"]

_EIGHTHS = " ▏▎▍▌▋▊▉"


def bar(fraction: float, width: int) -> str:
    """A bar of ``fraction`` (0..1) of ``width`` cells, in eighths of a cell."""
    fraction = min(1.0, max(0.0, fraction))
    eighths = round(fraction * width * 8)
    full, part = divmod(eighths, 8)
    text = "█" * full + (_EIGHTHS[part] if part else "")
    return text.ljust(width)


class PositionBars(Widget):
    """Acceptance rate of draft position 1, 2, ... of the current configuration."""

    view: reactive[PositionsView | None] = reactive(None)

    def watch_view(self, view: PositionsView | None) -> None:
        self.set_class(view is None or view.values is None, "-empty")
        self.border_subtitle = literal(view.source if view is not None else "")  # counters or log (empty: one source)

    def render(self) -> Content:
        """One line per position: ``1 ██████▌    0.65``; a note when the engine does not log it."""
        v = self.view
        if v is None or v.values is None:
            return Content.styled(plain(v.note) if v else "no data yet", "$text-muted")
        width = max(4, self.content_size.width - 9)
        lines = []
        for i, value in enumerate(v.values, 1):
            lines.append(Content.assemble((f"{i:>2} ", "$text-muted"), (bar(value, width), "$primary"),
                                          f" {value:4.2f}"))
        return Content("\n").join(lines)
