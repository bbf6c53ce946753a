"""What every specmon app shares, whatever it shows (one server's dashboard, a fleet of them).

- A terminal that closes never leaves the process waiting on it (:mod:`specmon.ui.driver`).
- Notifications are shown literally: they carry server text (a restart's crash line, an
  exception, a path), Textual reads a message as markup by default, and ``[/pytorch/…]`` in an
  NCCL error ended the app.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib.resources.abc import Traversable
from pathlib import Path

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical
from textual.driver import Driver
from textual.drivers.linux_driver import LinuxDriver
from textual.notifications import Notify, SeverityLevel
from textual.widgets import Static

from specmon.ui.driver import HangupSafeDriver
from specmon.ui.literal import plain
from specmon.ui.theming import DEFAULT_THEME, load_themes
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.key_footer import KeyFooter
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from specmon.ui.widgets.throughput_plot import ThroughputPlot

__all__ = ["SpecmonAppBase", "dashboard_layout"]


#: Toasts on screen at once, on a small terminal (under 28 rows) and on a larger one: at 80x24 a pile
#: of them covered the panels (issue 30). The oldest goes first; what they say is in the event log too.
MAX_TOASTS_SMALL = 2
MAX_TOASTS = 4


class SpecmonAppBase(App[int]):
    """The terminal-safe, literal-notification base of specmon's apps."""

    def _on_notify(self, event: Notify) -> None:
        # Textual's own handler (textual is pinned), then the oldest beyond the cap are let go.
        super()._on_notify(event)
        cap = MAX_TOASTS_SMALL if self.size.height < 28 else MAX_TOASTS
        shown = list(self._notifications)
        if len(shown) > cap:
            for old in shown[:-cap]:
                self._unnotify(old, refresh=False)
            self._refresh_notifications()

    def use_themes(self, folders: Sequence[Traversable | Path], wanted: str | None) -> tuple[list[str], list[str]]:
        """Register every theme in ``folders`` and switch to ``wanted`` (else the default); each
        problem (a broken theme file, a name not found) is a notification, never a crash.

        Returns:
            The theme names read, and the problems.
        """
        themes, problems = load_themes(folders)
        for theme in themes.values():
            self.register_theme(theme)
        name = wanted or DEFAULT_THEME
        if name not in self.available_themes:
            problems.append(f"theme {name!r} not found; themes: {', '.join(sorted(themes)) or 'none'}")
            name = DEFAULT_THEME
        if name in self.available_themes:
            self.theme = name
        for message in problems:
            self.notify(message, title="theme", severity="warning", timeout=8)
        return list(themes), problems

    def get_driver_class(self) -> type[Driver]:
        """Textual's driver, made safe for a terminal that closes (:mod:`specmon.ui.driver`)."""
        driver = super().get_driver_class()
        return HangupSafeDriver if driver is LinuxDriver else driver

    def terminal_hung_up(self) -> None:
        """The terminal is gone (SIGHUP): nothing more is written to it, so nothing waits on it."""
        driver = self._driver
        if isinstance(driver, HangupSafeDriver):
            driver.hang_up()

    def notify(self, message: str, *, title: str = "", severity: SeverityLevel = "information",
               timeout: float | None = None, markup: bool = True) -> None:
        """Every notification, shown literally: never markup, whoever calls (widgets and screens too).

        ``markup`` is accepted for Textual's signature and ignored.
        """
        super().notify(plain(message, newlines=True), title=plain(title), severity=severity,
                       timeout=timeout, markup=False)


def dashboard_layout() -> ComposeResult:
    """One server's dashboard: header, the three metric panels, the run table and its verdict, the
    plot, per-position acceptance, events and the footer (the app and a fleet's replica screen)."""
    yield StatusHeader(id="header")
    with Horizontal(id="metrics"):
        # The units in the titles: they stay when the value lines are cut short.
        yield MetricPanel("throughput", "throughput tok/s", id="m-throughput")
        yield MetricPanel("accept_len", "accept len tok/step", id="m-accept-len")
        yield MetricPanel("accept_rate", "accept rate", id="m-accept-rate")
    with Vertical(id="table-box") as box:
        box.border_title = "runs"
        yield RunTable(id="runs")
        yield Static("", id="verdict", markup=False)
    with Horizontal(id="bottom"):
        plot = ThroughputPlot(id="plot")
        plot.border_title = "throughput per batch (tok/s)"
        yield plot
        with Vertical(id="side"):
            bars = PositionBars(id="positions")
            bars.border_title = "per-position acceptance"
            yield bars
            events = EventLog(id="events")
            events.border_title = "events"
            yield events
    yield KeyFooter(compact=True)
