"""The dashboard's refresh: the timers' snapshots pushed to the widgets, and the table's analysis.

Every 0.25 s the cheap *live* snapshot (header, the three numbers, per-position bars,
events) goes to the widgets inside one ``batch_update()``; every second the plot and
the table. The table's statistics are recomputed by an *analysis* worker on frozen
copies of the runs, in a thread, no more often than :data:`ANALYSIS_DUTY` times its
own last duration. :class:`~specmon.ui.app.SpecmonApp` mixes this in.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import TYPE_CHECKING, Any

from specmon.control.restart_progress import Phase
from specmon.sources.replay import speed_text
from specmon.ui.base import SpecmonAppBase
from specmon.ui.literal import literal
from specmon.ui.views import AnalysisJob

if TYPE_CHECKING:
    from textual.widget import Widget
    from textual.widgets import Static
    from textual.worker import Worker

    from specmon.ingest.live import Feeder
    from specmon.output.recording import Recorder
    from specmon.ui.counters import LiveCounters
    from specmon.ui.flows.restart import RestartFlow
    from specmon.ui.views import SnapshotBuilder
    from specmon.ui.widgets.event_log import EventLog
    from specmon.ui.widgets.metric_panel import MetricPanel
    from specmon.ui.widgets.position_bars import PositionBars
    from specmon.ui.widgets.restart_progress import RestartProgressPanel
    from specmon.ui.widgets.run_table import RunTable
    from specmon.ui.widgets.status_header import StatusHeader
    from specmon.ui.widgets.throughput_plot import ThroughputPlot

__all__ = ["ANALYSIS_DUTY", "FAST_TICK_S", "SLOW_TICK_S", "AppRefresh"]

#: Seconds between two live refreshes (numbers); sparklines move every second one.
FAST_TICK_S = 0.25
#: Seconds between two plot refreshes / analysis checks.
SLOW_TICK_S = 1.0
#: An analysis waits at least this factor times its own last duration before the next.
ANALYSIS_DUTY = 4.0


def _give_back_freed_memory() -> None:
    """Return freed heap pages to the system (glibc only; elsewhere nothing to do).

    An analysis allocates tens of megabytes of temporary arrays and frees them;
    glibc keeps those pages in the process, so over a long replay RSS would
    ratchet up to the largest analysis ever made instead of tracking the data.
    """
    global _MALLOC_TRIM
    if _MALLOC_TRIM is None:
        try:
            import ctypes

            _MALLOC_TRIM = ctypes.CDLL("libc.so.6").malloc_trim
        except (OSError, AttributeError):
            _MALLOC_TRIM = False
    if _MALLOC_TRIM:
        _MALLOC_TRIM(0)


_MALLOC_TRIM: Any = None


class AppRefresh(SpecmonAppBase):
    """The live, plot and table refreshes of :class:`~specmon.ui.app.SpecmonApp` (a mixin)."""

    if TYPE_CHECKING:
        # Set by SpecmonApp (its constructor and _mount_dashboard), or defined by its other parts.
        feeder: Feeder
        builder: SnapshotBuilder
        clock: Callable[[], float]
        counters: LiveCounters | None
        recorder: Recorder | None
        restart_flow: RestartFlow | None
        display_paused: bool
        write_failures: list[str]
        _ticks: int
        _generation: int
        _runs_sig: tuple[object, ...]
        _analysis_sig: tuple[object, ...] | None
        _analysis_running: bool
        _analysis_again: bool
        _analysis_next: float
        _seq: int
        _applied_seq: int
        _sources_closed: bool
        _recording_error_seen: bool
        _header: StatusHeader
        _panels: tuple[MetricPanel, MetricPanel, MetricPanel]
        _bars: PositionBars
        _events: EventLog
        _plot: ThroughputPlot
        _table: RunTable
        _verdict: Static
        _table_box: Widget

        def _add_event(self, level: str, text: str, at: float | None = None) -> None: ...
        def _start_worker(self, work: Callable[[], Coroutine[Any, Any, None]], *, name: str, group: str,
                          description: str) -> Worker[None]: ...
        def _restart_panel(self) -> RestartProgressPanel | None: ...
        def _refresh_availability(self) -> None: ...


    def _mode(self) -> str:
        rc = self.feeder.replay_clock
        if rc is None:
            # A live source says "live" in its connection state already.
            text = self.restart_flow.header_text() if self.restart_flow is not None else ""
            return "paused: view frozen" if self.display_paused else text
        if self.feeder.done:
            return "replay finished"
        if rc.paused:
            return "paused"
        text = f"replay {speed_text(rc.speed)}"
        if self.feeder.loops:
            text += f" · loop {self.feeder.loops + 1}"
        return text

    @property
    def paused(self) -> bool:
        """Whether the replay or the live view is paused."""
        rc = self.feeder.replay_clock
        return rc.paused if rc is not None else self.display_paused

    def _tick(self, *, sparklines: bool | None = None) -> None:
        """Push the live snapshot to the widgets (a few times a second)."""
        self._ticks += 1
        feeder = self.feeder
        if feeder.generation != self._generation:
            self._generation = feeder.generation
            self.builder.reset()
        feeder.drain_events()
        run = feeder.session.current
        runs_sig = (feeder.generation, len(feeder.session.runs), run.id if run else None, bool(run and run.used))
        if runs_sig != self._runs_sig:
            # A new run or its first sample: the table follows the header now, not a second later.
            self._runs_sig = runs_sig
            self._maybe_analyze(force=True)
        snap = self.builder.live(
            feeder.session, source=feeder.source.name, status=feeder.source.status, now=self.clock(),
            log_now=feeder.log_now(), mode=self._mode(), paused=self.paused, lines=feeder.lines,
            state_since=feeder.state_since(),
            restart=self.restart_flow.header_state() if self.restart_flow is not None else None,
            replay=feeder.replay_clock is not None, ended=feeder.replay_clock is not None and feeder.done,
        )
        if self.counters is not None:
            snap = self.counters.apply(snap, feeder.session)
        self._check_recording()
        if self.write_failures:
            alert = self.write_failures[0] if len(self.write_failures) == 1 else \
                f"{len(self.write_failures)} writes failed (l: the event log)"
            snap = dataclasses.replace(snap, header=dataclasses.replace(snap.header, alert=alert))
        spark = self._ticks % 2 == 0 if sparklines is None else sparklines
        with self.batch_update():
            self._header.view = snap.header
            if not self.display_paused:
                tp, al, ar = self._panels
                tp.show(snap.throughput, sparkline=spark)
                al.show(snap.accept_len, sparkline=spark)
                ar.show(snap.accept_rate, sparkline=spark)
                self._bars.view = snap.positions
                self._events.events = snap.events
        panel = self._restart_panel()
        if not self.screen_stack:
            return  # shutting down: no screen to style
        base = self.screen_stack[0]
        # A finished (ready) restart's panel is two lines: the plot and events keep their rows.
        base.set_class(panel is not None and panel.view is not None and panel.view.phase is not Phase.READY,
                       "-panel-open")
        base.set_class(panel is not None and panel.view is not None and panel.view.failed, "-panel-failed")
        self._refresh_availability()

    def _check_recording(self) -> None:
        """A recording that stopped being written is said once, loudly: event log, notification, header."""
        recorder = self.recorder
        error = recorder.error if recorder is not None else None
        if error is None or self._recording_error_seen:
            return
        self._recording_error_seen = True
        self._write_failed(f"{error}: the recording is incomplete from here on")

    def _write_failed(self, sentence: str) -> None:
        self.write_failures.append(sentence)
        self._add_event("error", sentence)
        self.notify(sentence, title="write failed", severity="error", timeout=15)

    @property
    def write_failed(self) -> bool:
        """Whether a recording or an export could not be written (the exit status says so)."""
        return bool(self.write_failures) or (self.recorder is not None and self.recorder.error is not None)

    def _tick_slow(self) -> None:
        """Plot and table (once a second), and start an analysis when one is due."""
        if not self.display_paused:
            self._push_slow()
        self._maybe_analyze()

    def _push_slow(self, *, force: bool = False) -> None:
        with self.batch_update():
            self._plot.show(self.builder.plot(self.feeder.session), force=force)
            self._push_table()

    def _push_table(self) -> None:
        table = self.builder.table(self.feeder.session)
        with self.batch_update():
            self._table.show(table)
            self._verdict.update(literal(table.verdict, newlines=True))
            self._table_box.border_title = "runs · the sweep's numbers" if self.builder.pinned else "runs"

    def refresh_now(self) -> None:
        """Analyse synchronously and push every view at once (tests, before a snapshot)."""
        session = self.feeder.session
        self._seq += 1
        self._applied_seq = self._seq
        self._analysis_sig = self._signature()
        self.builder.apply(self.builder.analyze(session.runs), session.runs)
        self._tick(sparklines=True)
        self._push_slow(force=True)

    def _signature(self) -> tuple[object, ...]:
        s = self.feeder.session
        return (self.feeder.generation, id(s), s.lines, len(s.runs), self.builder.baseline_key)

    def _maybe_analyze(self, *, force: bool = False) -> None:
        if self._sources_closed:
            return
        if self._analysis_running:
            self._analysis_again = self._analysis_again or force
            return
        sig = self._signature()
        if sig == self._analysis_sig and not force:
            return
        if not force and time.perf_counter() < self._analysis_next:
            return
        self._analysis_sig = sig
        self._seq += 1
        self._analysis_running = True
        # Rows whose runs did not change are reused; only the others' runs are copied.
        job = self.builder.prepare(self.feeder.session.runs)
        # A callable, not a coroutine object: a worker that never starts (shutdown) leaves nothing
        # behind; an explicit description, as the default is repr(work) (every sample).
        self._start_worker(partial(self._analyze, job, self._seq, self.feeder.generation), name="analysis",
                           group="analysis", description="run table statistics")

    async def _analyze(self, job: AnalysisJob, seq: int, generation: int) -> None:
        started = time.perf_counter()
        try:
            if job.todo:
                # The statistics sort every sample: off the event loop, on frozen copies.
                await asyncio.to_thread(job.compute)
        except BaseException:
            job.release()
            raise
        finally:
            self._analysis_running = False
        elapsed = time.perf_counter() - started
        self._analysis_next = time.perf_counter() + max(SLOW_TICK_S, ANALYSIS_DUTY * elapsed)
        # Only the newest result, for the baseline still chosen, of the session still shown.
        if (seq > self._applied_seq and job.baseline_key == self.builder.baseline_key
                and generation == self.feeder.generation):
            self._applied_seq = seq
            self.builder.apply(self.builder.finish(job), self.feeder.session.runs)
            if not self.display_paused:
                self._push_table()
            self._refresh_availability()
        job.release()
        _give_back_freed_memory()
        if self._analysis_again:
            self._analysis_again = False
            self._maybe_analyze(force=True)
