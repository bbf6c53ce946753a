"""The two header lines: what is watched, and in what state the server and the source are."""

from __future__ import annotations

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from specmon.ui.literal import plain
from specmon.ui.views import ERROR, HeaderView
from specmon.ui.widgets.levels import LEVEL_STYLE

__all__ = ["StatusHeader"]


def _left_cut(text: str, width: int) -> str:
    """Keep the end of a path or ``host:path``: the file name says more than the root."""
    return text if len(text) <= width else "…" + text[-(width - 1):]


class StatusHeader(Widget):
    """Source, engine, configuration; server state with time in it, connection, mode.

    The state carries the class ``-crashed`` when the server crashed (the
    stylesheet paints the line's state in the theme's error colour).
    """

    view: reactive[HeaderView | None] = reactive(None, layout=False)

    def watch_view(self, view: HeaderView | None) -> None:
        self.set_class(view is not None and view.state_level == ERROR, "-crashed")
        self.set_class(view is not None and view.paused, "-paused")
        # A third line only while there are latency figures: the panels keep their rows otherwise.
        height = 3 if view is not None and view.latency else 2
        if self.styles.height is None or self.styles.height.value != height:
            self.styles.height = height

    def render(self) -> Content:
        """Two lines, each cut with an ellipsis when the terminal is narrow."""
        v = self.view
        if v is None:
            return Content.from_markup("[b]specmon[/b]  [$text-muted]starting…[/]")
        # Source names, engine and configuration come from a host, a file name or the log: literal.
        source, engine, state_text = plain(v.source), plain(v.engine), plain(v.state_text)
        run = f"run {v.run_id}" + (f" of {v.runs}" if v.runs > 1 else "") if v.run_id else "no run"
        # The configuration first: on a narrow terminal a long path must not push it off screen.
        width = self.content_size.width
        fixed = len(run) + len(engine) + 17  # the name, the run, the engine and the gaps
        # The full configuration when the source still gets a readable share of the line.
        config = plain(v.config if width - fixed - len(v.config) >= min(len(source), 24) else v.config_short)
        room = max(12, width - fixed - len(config))
        first = Content.assemble(
            ("specmon", "bold $primary"), "  ", (config, "bold $accent"), "  ", (run, "$text-muted"), "  ",
            (engine if engine != "unknown" else "engine ?", "$text-muted"), "  ",
            (_left_cut(source, room), "bold"),
        )
        state = state_text + (f" · {plain(v.since)}" if v.since else "")
        mode_style = "reverse $warning" if v.paused else "$text-muted"
        parts: list[str | tuple[str, str]] = [
            ("● ", LEVEL_STYLE[v.state_level]), (state, LEVEL_STYLE[v.state_level]), "  ",
        ]
        if v.mode:
            parts += [(f" {plain(v.mode)} ", mode_style), "  "]
        if v.controller:
            parts += [(plain(v.controller), LEVEL_STYLE[v.controller_level]), "  "]
        if v.alert:
            parts += [(f"✖ {plain(v.alert)}", "bold $error"), "  "]
        parts += [("source: ", "$text-muted"), (plain(v.connection), LEVEL_STYLE[v.connection_level]), "  ",
                  (f"{v.lines:,} lines", "$text-muted")]
        if v.unparsed:
            parts += ["  ", (f"{v.unparsed:,} unparsed", "$warning")]
        lines = [first, Content.assemble(*parts)]
        if v.latency:
            lines.append(Content.assemble(("latency ", "$text-muted"), (plain(v.latency), "bold")))
        return Content("\n").join(lines)
