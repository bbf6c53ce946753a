"""The dashboard's screen: its widgets, the timers that refresh them, and what acts on the view.

Every 0.25 s the cheap *live* snapshot (header, the three numbers, per-position bars,
events) goes to the widgets inside one ``batch_update()``; sparklines move every other
tick (2 Hz). Every second the plot and the table: the table's statistics are recomputed
by an *analysis* worker on frozen copies of the runs, in a thread, no more often than
:data:`ANALYSIS_DUTY` times its own last duration, so a multi-million-sample replay
never starves keys or ingest.

The screen owns the keys that act on the view it shows (:func:`specmon.ui.keys.dashboard_bindings`):
pause, replay speed, the baseline and the export of its table, the event log, the restart
panel's ``g`` and ``d``/escape, and Enter on a run-table row (its details); it greys them out
itself (:meth:`DashboardScreen.check_action`). A modal screen on top stops them, as it stopped
them when they were the app's; a full screen pushed over it (the event log, a row's details, a
report) shows only its own keys and the app's.

The app (:mod:`specmon.ui.app`) keeps what is app-wide: the session's sources and their
workers, the flows and their keys (``r``, ``s``), the theme, help, the palette and the exit. It
gives this screen what it reads (the feeder, the snapshot builder, the clock, the restart flow's
view, where exports go) when it builds it; the screen never imports the app, nor the flows (they
are above it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual import on
from textual.geometry import Size
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from specmon import paths
from specmon.control.guard import ReadOnlyError, refuse
from specmon.control.restart_progress import Phase
from specmon.model.session import SessionEvent
from specmon.output.files import write_files_atomically
from specmon.output.tables import to_csv, to_json, to_markdown
from specmon.sources.replay import speed_text
from specmon.ui.keys import dashboard_bindings
from specmon.ui.literal import literal
from specmon.ui.screens.events_screen import EventsScreen
from specmon.ui.screens.run_details import RunDetailsScreen
from specmon.ui.views import AnalysisJob, SnapshotBuilder
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from specmon.ui.widgets.throughput_plot import ThroughputPlot

if TYPE_CHECKING:
    from specmon.ingest.live import Feeder
    from specmon.model.analysis import ConfigRow
    from specmon.ui.counters import LiveCounters
    from specmon.ui.widgets.restart_progress import RestartProgressPanel

__all__ = ["ANALYSIS_DUTY", "FAST_TICK_S", "SLOW_TICK_S", "DashboardScreen", "RestartView"]

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


class RestartView(Protocol):
    """What the screen reads of the restart flow (:class:`~specmon.ui.flows.restart.RestartFlow`),
    which it may not import: flows are above screens."""

    @property
    def panel(self) -> RestartProgressPanel | None:
        """The restart's progress panel (None before the first restart)."""
        ...

    def header_text(self) -> str:
        """The header's mode text for a live source."""
        ...

    def header_state(self) -> Any:
        """The restart's state as the header shows it."""
        ...

    def command_for(self, steps: int) -> str | None:
        """The start command for ``steps``, as a row's details show it (None: unknown)."""
        ...

    def go_back(self) -> object:
        """``g``: back to the configuration before a failed restart (the commands are shown first)."""
        ...

    def dismiss(self) -> None:
        """``d``: hide the panel of a restart that ended."""
        ...


class DashboardScreen(Screen[None]):
    """One server's dashboard, refreshed on timers from the session model.

    Args:
        feeder: The sources' feeder: the session, the source's status, the replay clock.
        builder: Turns the session into views (the app's: the flows pin and rebase its table).
        clock: Wall clock (``time.time`` scale).
        counters: The engine's ``/metrics`` beside the log (None: the log only).
        restart: The restart flow's view (None: no restart flow).
        write_failures: The app's list of failed writes (the header says the first).
        export_dir: Where ``e`` writes (None: the exports folder, :func:`specmon.paths.export_dir`).
        read_only: Why nothing may be written now (None: it may; ``--read-only``).
    """

    # One source for the footer, the help and the palette (specmon/ui/keys.py): the keys that act on
    # this view. The app-wide ones (t, r, s, ?, q) stay the app's: they act from every full screen.
    BINDINGS = dashboard_bindings()

    def __init__(self, feeder: Feeder, builder: SnapshotBuilder, *, clock: Callable[[], float],
                 counters: LiveCounters | None, restart: RestartView | None,
                 write_failures: list[str], export_dir: Path | None = None,
                 read_only: Callable[[], str | None] = lambda: None) -> None:
        super().__init__()
        self.feeder = feeder
        self.builder = builder
        self.clock = clock
        self.counters = counters
        self.restart = restart
        self.write_failures = write_failures
        self.export_dir = export_dir
        self.read_only = read_only
        #: The files the last export wrote.
        self.last_export: list[Path] = []
        self.display_paused = False
        #: Set by the app when its sources close: no analysis starts after that.
        self.halted = False
        self._ticks = 0
        self._generation = 0
        self._analysis_sig: tuple[object, ...] | None = None
        self._analysis_running = False
        self._analysis_again = False
        self._analysis_next = 0.0
        self._seq = 0
        self._applied_seq = 0
        self._runs_sig: tuple[object, ...] = ()
        #: Called before each live refresh (the app checks its recording: a failure shows in this refresh).
        self.before_refresh: Callable[[], None] = lambda: None
        #: Called whenever what can run may have changed (the app greys its keys out).
        self.on_availability: Callable[[], None] = lambda: None

    # -- layout ------------------------------------------------------------------------------

    def start(self) -> None:
        """Find the widgets and start the refresh timers (the app calls it from its own mount).

        The app composes the widgets into this screen (``App.compose`` fills the default screen
        before the app's mount, as it always did): a screen's own ``compose`` runs after the app's
        mount, too late for the first refresh a test or a key expects.
        """
        # References, not queries at each refresh; and this screen's, not the app's top screen
        # (a modal screen, help, on top must not hide them from the timers).
        self._header = self.query_one(StatusHeader)
        self._panels = (self.query_one("#m-throughput", MetricPanel), self.query_one("#m-accept-len", MetricPanel),
                        self.query_one("#m-accept-rate", MetricPanel))
        self._bars = self.query_one(PositionBars)
        self._events = self.query_one(EventLog)
        self._plot = self.query_one(ThroughputPlot)
        self._table = self.query_one(RunTable)
        self._verdict = self.query_one("#verdict", Static)
        self._table_box = self.query_one("#table-box")
        self.size_classes()
        self.set_interval(FAST_TICK_S, self._tick, name="live refresh")
        self.set_interval(SLOW_TICK_S, self._tick_slow, name="plot and table refresh")

    def size_classes(self, size: Size | None = None) -> None:
        """Size classes on this screen (not on a dialog that happens to be on top)."""
        w, h = size if size is not None else self.app.size
        self.set_class(w < 90 or h < 28, "-compact")
        self.set_class(w < 70 or h < 20, "-tiny")
        self.set_class(w >= 160 and h >= 50, "-large")

    # -- what acts on the view ----------------------------------------------------------------

    @property
    def paused(self) -> bool:
        """Whether the replay or the live view is paused."""
        rc = self.feeder.replay_clock
        return rc.paused if rc is not None else self.display_paused

    def toggle_pause(self) -> None:
        """Pause or resume the replay; for a live source, freeze or unfreeze the view."""
        rc = self.feeder.replay_clock
        if rc is not None:
            rc.toggle()
        else:
            self.display_paused = not self.display_paused
        self._tick()

    def change_speed(self, faster: bool) -> None:
        """Replay faster or slower, and say the new speed."""
        rc = self.feeder.replay_clock
        if rc is not None:
            self.notify(f"replay speed {speed_text(rc.faster() if faster else rc.slower())}", timeout=2)
            self._tick()

    def add_event(self, level: str, text: str, at: float | None = None) -> None:
        """One of specmon's own events, on the wall clock (the log's events read so far get theirs first)."""
        self.feeder.stamp_events()
        # A replay tells the log's story on the log's clock; its few own events go where they fall.
        wall = None if self.feeder.replay_clock is not None else (self.clock() if at is None else at)
        self.feeder.session.events.append(SessionEvent(0, None, level, text, received=wall))

    def write_failed(self, sentence: str) -> None:
        """A write failed (the recording, an export): header, event log and a notification say so."""
        self.write_failures.append(sentence)
        self.add_event("error", sentence)
        self.notify(sentence, title="write failed", severity="error", timeout=15)

    def export(self, folder: Path) -> list[Path]:
        """Write the run table as CSV, JSON and Markdown into ``folder``; the notification gives the
        paths. Returns the files written ([]: none, and why was said)."""
        session = self.feeder.session
        analysis = self.builder.analyze(session.runs)  # exactly the data seen so far
        if not analysis.rows:
            self.notify("nothing to export yet: the run table is empty", severity="warning")
            return []
        stamp = datetime.fromtimestamp(self.clock(), tz=UTC).strftime("%Y%m%d-%H%M%S")
        base = folder / f"specmon-runs-{stamp}"
        n = 2
        while any(base.with_name(base.name + ext).exists() for ext in (".csv", ".json", ".md")):
            base = folder / f"specmon-runs-{stamp}-{n}"
            n += 1
        outputs = {
            ".csv": to_csv(analysis),
            ".json": json.dumps(to_json(session, analysis), indent=2) + "\n",
            ".md": to_markdown(analysis),
        }
        try:
            # 0600 files in a 0700 folder (specmon's own), all of them or none (each written aside,
            # then renamed): a full disk leaves no partial export.
            paths.private_dir(folder)
            written = write_files_atomically({base.with_name(base.name + ext): text for ext, text in outputs.items()})
        except OSError as exc:
            # Nothing is left behind (each file is written aside, then renamed): say so, loudly.
            self.write_failed(f"export failed: cannot write to {folder}: {exc.strerror or exc}; no file was written")
            return []
        # The folder is specmon's data directory unless --out says otherwise: say where, in full,
        # and put the path on the clipboard (OSC 52) so it can be pasted into a shell.
        self.app.copy_to_clipboard(str(written[-1]))
        self.add_event("info", f"run table written to {base}.csv, .json and .md")
        self.notify(f"run table written to {base}.csv, .json and .md\n(the .md path is on the clipboard)",
                    title="export", timeout=10)
        return written

    # -- its keys: what each does, and why it cannot run now -----------------------------------

    def unavailable_reason(self, action: str) -> str | None:
        """Why one of this screen's actions cannot run now, or None when it can."""
        rc = self.feeder.replay_clock
        if action == "mark_baseline":
            row = self.builder.row_for(self.feeder.session.current)
            if row is None or row.throughput is None:
                return "the current run has no counted throughput samples yet"
        elif action == "export":
            read_only = self.read_only()
            if read_only:
                return f"read-only mode ({read_only}): nothing is written"
            if self.builder.analysis is None or not self.builder.analysis.rows:
                return "the run table is empty"
        elif action in ("faster", "slower"):
            if rc is None:
                return "only a replay has a speed"
            if self.feeder.done:
                return "the replay has finished"
            if action == "faster" and rc.speed is None:
                return "already at max speed"
            if action == "slower" and rc.speed is not None and rc.speed <= 0.25:
                return "already at the slowest speed"
        elif action in ("go_back", "dismiss"):
            panel = self.restart.panel if self.restart is not None else None
            if panel is None:
                return "no restart ran in this session"
            if not panel.check_action(action, ()):
                return ("only after a failed restart with a previous configuration" if action == "go_back"
                        else "nothing to dismiss")
        return None

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out (None) actions that cannot run now; hide keys that do not apply here (False).

        Hidden: the speed keys when not replaying (or the replay ended), ``g`` without a failed restart to go back
        from, ``d``/escape with nothing to dismiss (the footer has room for what applies).
        """
        if action in ("faster", "slower") and (self.feeder.replay_clock is None or self.feeder.done):
            return False  # no speed to change: not in the footer (the palette says why)
        if action in ("go_back", "dismiss"):
            return self.unavailable_reason(action) is None
        return None if self.unavailable_reason(action) else True

    def action_toggle_pause(self) -> None:
        """Pause or resume the replay; for a live source, freeze or unfreeze the view."""
        self.toggle_pause()

    def action_faster(self) -> None:
        """Replay faster."""
        if not self.unavailable_reason("faster"):
            self.change_speed(faster=True)

    def action_slower(self) -> None:
        """Replay slower."""
        if not self.unavailable_reason("slower"):
            self.change_speed(faster=False)

    def action_mark_baseline(self) -> None:
        """Make the current configuration the baseline; pressed again, back to automatic."""
        reason = self.unavailable_reason("mark_baseline")
        if reason:
            self.notify(f"cannot mark a baseline: {reason}", severity="warning")
            return
        row = self.builder.row_for(self.feeder.session.current)
        assert row is not None
        self.builder.pinned = None  # a sweep's table has its own baseline: back to the live one
        if self.builder.baseline_key == row.key:
            self.builder.baseline_key = None
            self.notify("baseline: automatic (the run without speculation, or as given)", timeout=3)
        else:
            self.builder.baseline_key = row.key
            self.notify(f"baseline: {row.label}", timeout=3)
        self._maybe_analyze(force=True)

    def action_export(self) -> None:
        """Write the run table as CSV, JSON and Markdown; the notification gives the paths."""
        try:
            refuse("write the export")  # the action layer refuses even when the key was not greyed
        except ReadOnlyError as exc:
            self.notify(str(exc), severity="warning")
            return
        written = self.export(self.export_dir if self.export_dir is not None else paths.export_dir())
        if written:
            self.last_export = written

    def action_events(self) -> None:
        """``l``: every event kept, full lines, to filter and search."""
        self.feeder.stamp_events()
        feeder = self.feeder  # its session, looked up at each refresh: a looped replay replaces it
        self.app.push_screen(EventsScreen(lambda: list(feeder.session.events)))

    def action_go_back(self) -> None:
        """After a failed restart: back to the previous configuration (the commands are shown first)."""
        if self.restart is not None and not self.unavailable_reason("go_back"):
            self.restart.go_back()

    async def action_dismiss(self, result: None = None) -> None:
        """Hide the restart panel once its restart ended (``d`` or escape, whatever has the focus).

        Textual's own ``dismiss`` action dismisses a screen; this one is the default screen, never
        dismissed, so its ``dismiss`` is the panel's (the key's name in :mod:`specmon.ui.keys`).
        """
        if self.restart is not None and not self.unavailable_reason("dismiss"):
            self.restart.dismiss()

    def config_row(self, key: str) -> ConfigRow | None:
        """The live analysis row a run-table row key (its label) stands for."""
        analysis = self.builder.analysis
        if analysis is None:
            return None
        return next((r for r in analysis.rows if r.label == key), None)

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a run-table row: what its numbers rest on (samples, histogram, exclusions, server
        arguments)."""
        if event.row_key.value is None:
            return
        key = str(event.row_key.value)
        row = self.config_row(key)
        if row is None:
            self.notify(f"no details for {key} yet: its statistics are being computed", severity="warning")
            return
        restart = self.restart
        command = restart.command_for(row.steps) if restart is not None and row.steps is not None else None
        self.app.push_screen(RunDetailsScreen(row, command=command))

    # -- the live refresh ---------------------------------------------------------------------

    def _mode(self) -> str:
        rc = self.feeder.replay_clock
        if rc is None:
            # A live source says "live" in its connection state already.
            text = self.restart.header_text() if self.restart is not None else ""
            return "paused: view frozen" if self.display_paused else text
        if self.feeder.done:
            return "replay finished"
        if rc.paused:
            return "paused"
        text = f"replay {speed_text(rc.speed)}"
        if self.feeder.loops:
            text += f" · loop {self.feeder.loops + 1}"
        return text

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
            restart=self.restart.header_state() if self.restart is not None else None,
            replay=feeder.replay_clock is not None, ended=feeder.replay_clock is not None and feeder.done,
        )
        if self.counters is not None:
            snap = self.counters.apply(snap, feeder.session)
        self.before_refresh()
        if self.write_failures:
            alert = self.write_failures[0] if len(self.write_failures) == 1 else \
                f"{len(self.write_failures)} writes failed (l: the event log)"
            snap = dataclasses.replace(snap, header=dataclasses.replace(snap.header, alert=alert))
        spark = self._ticks % 2 == 0 if sparklines is None else sparklines
        with self.app.batch_update():
            self._header.view = snap.header
            if not self.display_paused:
                tp, al, ar = self._panels
                tp.show(snap.throughput, sparkline=spark)
                al.show(snap.accept_len, sparkline=spark)
                ar.show(snap.accept_rate, sparkline=spark)
                self._bars.view = snap.positions
                self._events.events = snap.events
        panel = self.restart.panel if self.restart is not None else None
        if not self.app.screen_stack:
            return  # shutting down: no screen to style
        # A finished (ready) restart's panel is two lines: the plot and events keep their rows.
        self.set_class(panel is not None and panel.view is not None and panel.view.phase is not Phase.READY,
                       "-panel-open")
        self.set_class(panel is not None and panel.view is not None and panel.view.failed, "-panel-failed")
        self.on_availability()

    # -- the plot and the table ---------------------------------------------------------------

    def _tick_slow(self) -> None:
        """Plot and table (once a second), and start an analysis when one is due."""
        if not self.display_paused:
            self._push_slow()
        self._maybe_analyze()

    def _push_slow(self, *, force: bool = False) -> None:
        with self.app.batch_update():
            self._plot.show(self.builder.plot(self.feeder.session), force=force)
            self._push_table()

    def _push_table(self) -> None:
        table = self.builder.table(self.feeder.session)
        with self.app.batch_update():
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
        if self.halted:
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
        work: Callable[[], Coroutine[Any, Any, None]] = partial(self._analyze, job, self._seq, self.feeder.generation)
        # The annotation tells mypy the worker's type, which Textual cannot infer from such a callable.
        worker: Worker[None] = self.run_worker(work, name="analysis", group="analysis",
                                               description="run table statistics", exit_on_error=False)
        del worker

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
            self.on_availability()
        job.release()
        _give_back_freed_memory()
        if self._analysis_again:
            self._analysis_again = False
            self._maybe_analyze(force=True)

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # The analysis worker is this screen's (a worker's state messages do not bubble to the app).
        if event.state is WorkerState.ERROR and event.worker.name == "analysis":
            self._analysis_running = False
            error = event.worker.error
            self.notify(f"statistics failed: {type(error).__name__}: {error}", severity="error", timeout=10)
