"""One replica of a fleet, on the single-server dashboard's own widgets (``enter`` in the fleet view).

The same header, three numbers, run table with its verdict, throughput plot, per-position bars
and events as ``specmon watch PATH`` shows, built by the same :class:`~specmon.ui.views.SnapshotBuilder`
from the replica's own feeder, which the fleet keeps running underneath: nothing is read twice,
and ``escape`` goes back to the fleet with every replica still current. It watches only: the
dashboard's keys that act (restart, sweep, baseline, export) are not here. ``enter`` on a row of
its run table opens that configuration's details, as on the dashboard.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import DataTable, Static

from specmon.ingest.live import Feeder
from specmon.ui.base import dashboard_layout
from specmon.ui.literal import literal
from specmon.ui.views import DEFAULT_WINDOW, SnapshotBuilder
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from specmon.ui.widgets.throughput_plot import ThroughputPlot

__all__ = ["ReplicaScreen"]

#: Seconds between two refreshes of the numbers; the plot and the table every second.
FAST_TICK_S = 0.25
SLOW_TICK_S = 1.0


class ReplicaScreen(Screen[None]):
    """A fleet replica's dashboard, read-only.

    Args:
        name: The replica's short name (the header's mode slot says it).
        feeder: Its feeder (its session and source).
        window: Batches in the rolling means.
        baseline_tps: A given baseline throughput.
        clock: Wall clock.
    """

    BINDINGS = [Binding("escape", "close", "Back to fleet", key_display="esc")]

    def __init__(self, name: str, feeder: Feeder, *, window: int = DEFAULT_WINDOW, baseline_tps: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__()
        self.replica = name
        self.feeder = feeder
        self.clock = clock
        self.builder = SnapshotBuilder(window=window, baseline_tps=baseline_tps)
        self._ticks = 0
        self._analysis_sig: tuple[object, ...] | None = None
        self._analysing = False

    def compose(self) -> ComposeResult:
        yield from dashboard_layout()

    def on_mount(self) -> None:
        self._header = self.query_one(StatusHeader)
        self._panels = (self.query_one("#m-throughput", MetricPanel), self.query_one("#m-accept-len", MetricPanel),
                        self.query_one("#m-accept-rate", MetricPanel))
        self._table = self.query_one(RunTable)
        # References, not queries: a timer that fires while the app shuts down finds them still.
        self._bars = self.query_one(PositionBars)
        self._events = self.query_one(EventLog)
        self._plot = self.query_one(ThroughputPlot)
        self._verdict = self.query_one("#verdict", Static)
        self._size_classes()
        self.set_interval(FAST_TICK_S, self._tick, name="replica refresh")
        self.set_interval(SLOW_TICK_S, self._tick_slow, name="replica plot and table")
        self._tick(sparklines=True)
        self._tick_slow()  # the table's statistics in a thread: a long log must not freeze the opening
        self._table.focus()

    def on_resize(self) -> None:
        self._size_classes()

    def _size_classes(self) -> None:
        """The dashboard's size classes (its stylesheet drops borders and panels by them)."""
        w, h = self.app.size
        self.set_class(w < 90 or h < 28, "-compact")
        self.set_class(w < 70 or h < 20, "-tiny")
        self.set_class(w >= 160 and h >= 50, "-large")

    # -- refresh --------------------------------------------------------------------------------------

    def _tick(self, *, sparklines: bool | None = None) -> None:
        self._ticks += 1
        feeder = self.feeder
        snap = self.builder.live(
            feeder.session, source=feeder.source.name, status=feeder.source.status, now=self.clock(),
            log_now=feeder.log_now(), mode=f"fleet: {self.replica}",
            paused=False, lines=feeder.lines, state_since=feeder.state_since())
        spark = self._ticks % 2 == 0 if sparklines is None else sparklines
        with self.app.batch_update():
            self._header.view = snap.header
            tp, al, ar = self._panels
            tp.show(snap.throughput, sparkline=spark)
            al.show(snap.accept_len, sparkline=spark)
            ar.show(snap.accept_rate, sparkline=spark)
            self._bars.view = snap.positions
            self._events.events = snap.events

    def _tick_slow(self) -> None:
        self._plot.show(self.builder.plot(self.feeder.session))
        self._maybe_analyze()

    def _push_table(self) -> None:
        table = self.builder.table(self.feeder.session)
        self._table.show(table)
        self._verdict.update(literal(table.verdict, newlines=True))

    def _maybe_analyze(self) -> None:
        session = self.feeder.session
        sig = (id(session), session.lines, len(session.runs))
        if self._analysing or sig == self._analysis_sig:
            return
        self._analysis_sig = sig
        self._analysing = True
        self._analyze()

    @work(group="replica-analysis", exclusive=True, exit_on_error=False, description="replica table statistics")
    async def _analyze(self) -> None:
        try:
            runs = self.feeder.session.runs
            job = self.builder.prepare(runs)
            if job.todo:
                # The statistics sort every sample: off the event loop, on frozen copies.
                await asyncio.to_thread(job.compute)
            self.builder.apply(self.builder.finish(job), self.feeder.session.runs)
            job.release()
            if self.is_mounted:
                self._push_table()
        finally:
            self._analysing = False

    def refresh_now(self) -> None:
        """Analyse on this thread and push every view at once (on open, and in tests)."""
        session = self.feeder.session
        self.builder.apply(self.builder.analyze(session.runs), session.runs)
        self._analysis_sig = (id(session), session.lines, len(session.runs))
        self._tick(sparklines=True)
        self._plot.show(self.builder.plot(session), force=True)
        self._push_table()

    # -- keys ------------------------------------------------------------------------------------------------

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a run-table row: what its numbers rest on."""
        from specmon.ui.screens.run_details import RunDetailsScreen

        key = event.row_key.value
        analysis = self.builder.analysis
        row = next((r for r in analysis.rows if r.label == key), None) if analysis is not None else None
        if row is not None:
            self.app.push_screen(RunDetailsScreen(row))

    def action_close(self) -> None:
        """Back to the fleet."""
        self.dismiss(None)
