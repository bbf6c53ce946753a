"""The restart progress panel: one restart's phases, bar, elapsed time and ETA.

:class:`RestartProgressPanel` shows one :class:`~specmon.control.restart_progress.RestartProgress`:
the phases done and their times, the current phase with its shard or graph
counter and a bar, the elapsed time and the ETA; after a crash or a timeout,
the reason and the last log lines, with ``g`` to go back to the previous
configuration. The flow that drives it is :mod:`specmon.ui.flows.restart`.
"""

from __future__ import annotations

import math

from textual.content import Content
from textual.reactive import reactive
from textual.widget import Widget

from specmon.control.restart_progress import RUNNING_PHASES, Phase, RestartProgress, plan_label
from specmon.ui.literal import plain
from specmon.ui.views import duration_text

__all__ = ["RestartProgressPanel", "eta_text", "phase_counter", "progress_bar"]


def progress_bar(fraction: float | None, width: int) -> str:
    """A text bar ``━━━━━━╸───`` of ``width`` cells; all thin when the fraction is unknown."""
    width = max(4, width)
    if fraction is None or math.isnan(fraction):
        return "─" * width
    fraction = max(0.0, min(1.0, fraction))
    full = int(fraction * width)
    if full >= width:
        return "━" * width
    half = fraction * width - full >= 0.5
    return "━" * full + ("╸" if half else "") + "─" * (width - full - (1 if half else 0))


def eta_text(view: RestartProgress) -> str:
    """``ETA ~4m 10s (3 earlier restarts on gpu-box)``, or why there is no estimate yet."""
    eta = view.eta
    if eta is None:
        return ""
    if eta.remaining_s is None:
        return plain(eta.basis)
    if eta.remaining_s < 1:
        return f"any moment now ({plain(eta.basis)})"
    return f"ETA ~{duration_text(eta.remaining_s)} ({plain(eta.basis)})"


def phase_counter(view: RestartProgress, phase: Phase) -> str:
    """`` 29/64`` while loading shards or capturing graphs, else nothing."""
    prog = view.load_progress if phase is Phase.LOADING else view.graph_progress if phase is Phase.CAPTURING else None
    return f" {prog[0]}/{prog[1]}" if prog else ""


class RestartProgressPanel(Widget):
    """The lifecycle of one restart; ``g`` goes back after a failure, ``d`` dismisses.

    Not focusable, and without bindings of its own: ``g``, ``d`` and escape are the app's
    (:mod:`specmon.ui.keys`), so they work whatever has the focus, at the first press; the
    panel only says when they apply (:meth:`check_action`), and the restart flow acts.
    """

    DEFAULT_CSS = """
    RestartProgressPanel {
        height: auto;
        max-height: 16;
        border: round $warning;
        border-title-color: $warning;
        padding: 0 1;
        background: $surface;
        text-wrap: nowrap;
        text-overflow: ellipsis;
    }
    RestartProgressPanel.-failed {
        border: round $error;
        border-title-color: $error;
    }
    RestartProgressPanel.-ready {
        border: round $success;
        border-title-color: $success;
    }
    RestartProgressPanel.-hidden {
        display: none;
    }
    """

    view: reactive[RestartProgress | None] = reactive(None, layout=True)

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.border_title = "restart"
        #: The session's first start: called "start", and its stop phase (nothing ran) is not shown.
        self.first_start = False

    def watch_view(self, view: RestartProgress | None) -> None:
        self.set_class(view is None, "-hidden")
        self.set_class(view is not None and view.failed, "-failed")
        self.set_class(view is not None and view.phase is Phase.READY, "-ready")
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``g`` only after a failure with somewhere to go back to; ``d`` once it ended."""
        v = self.view
        if action == "go_back":
            return True if v is not None and v.failed and v.previous_steps is not None else None
        if action == "dismiss":
            return True if v is not None and not v.running else None
        return True

    def render(self) -> Content:
        """Title, phases, bar and ETA; after a failure the reason and the last log lines."""
        v = self.view
        if v is None:
            return Content("")
        width = max(20, self.content_size.width or 80)
        lines: list[Content] = []
        self.border_title = "start" if self.first_start else "restart"
        title = Content.assemble(("start → " if self.first_start else "restart → ", "bold"), (plain(v.label), "bold $accent"),
                                 (f" on {plain(v.host)}", ""),
                                 ("   elapsed ", "$text-muted"), (duration_text(v.elapsed_s) or "0s", "bold"))
        lines.append(title)
        if v.phase is Phase.READY:
            # Done: two lines, so the plot and the events come back under it at 80x24 (the phase
            # times are in the event log). The panel hides itself a few seconds later.
            lines.append(Content.assemble(("✓ ", "$success"), (plain(v.message), "$success"),
                                          ("  · d: dismiss", "$text-muted")))
            return Content("\n").join(lines)
        lines.append(self._phases(v))
        if v.running:
            fraction = v.fraction
            label = f" {fraction * 100:3.0f}%" if fraction is not None else ""
            bar_width = max(10, min(40, width // 3))
            style = "$warning" if fraction is not None else "$text-muted"
            lines.append(Content.assemble((progress_bar(fraction, bar_width), style), (label, "bold"), "  ",
                                          (eta_text(v), "$text-muted")))
            if v.message:
                lines.append(Content.styled(plain(v.message), "$text-muted"))
        else:
            lines.append(Content.assemble(("✖ ", "$error bold"), (f"{v.phase.text}: ", "$error bold"),
                                          (plain(v.message), "$error")))
            # The key line always shows: the log's last lines get what the panel's height leaves.
            room = self._inner_rows() - len(lines) - 2
            if v.last_lines and room > 0:
                lines.append(Content.styled(f"last lines of {plain(v.log or 'the log')}:", "$text-muted"))
                for raw in v.last_lines[-room:]:
                    # The server's own words (an NCCL error, a traceback): literal, never markup.
                    lines.append(Content("  " + plain(raw)).stylize("$text-muted"))
            keys = []
            if v.previous_steps is not None:
                keys.append(f"g: go back to {plan_label(v.previous_steps)} (the commands are shown first)")
            keys.append("d: dismiss")
            lines.append(Content.styled(" · ".join(keys), "bold"))
        return Content("\n").join(lines)

    def _inner_rows(self) -> int:
        """Rows inside the border at the panel's largest height (its stylesheet's max-height)."""
        limit = self.styles.max_height
        rows = int(limit.value) if limit is not None and limit.is_cells else 16
        return rows - self.styles.gutter.height

    def _phases(self, v: RestartProgress) -> Content:
        parts: list[tuple[str, str] | str] = []
        times: dict[Phase, float] = {}
        for phase, seconds in v.done:
            times[phase] = times.get(phase, 0.0) + seconds
        # A failed restart ended in the last phase it entered.
        failed_at = v.done[-1][0] if v.failed and v.done else None
        for phase in (*RUNNING_PHASES, Phase.READY):
            if phase is Phase.STOPPING and self.first_start and phase is not failed_at:
                continue  # nothing ran before the first start: no stop to show
            if parts:
                parts.append("  ")
            if phase is failed_at:
                parts.append((f"✖ {phase.text}{phase_counter(v, phase)} {duration_text(times[phase]) or '0s'}",
                              "bold $error"))
            elif phase in times:
                parts.append((f"✓ {phase.text} {duration_text(times[phase]) or '0s'}", "$success"))
            elif phase is v.phase and v.running:
                parts.append((f"▸ {phase.text}{phase_counter(v, phase)} {duration_text(v.phase_elapsed_s) or '0s'}",
                              "bold $warning"))
            elif phase is Phase.READY and v.phase is Phase.READY:
                parts.append(("✓ ready", "bold $success"))
            else:
                parts.append((f"· {phase.text}", "$text-muted"))
        return Content.assemble(*parts)
