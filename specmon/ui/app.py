"""The live dashboard: a Textual app that reads snapshots of the session model on timers.

Data flow: an async *ingest* worker drives the sources through the parser
into the session (:class:`~specmon.ingest.live.Feeder`); nothing renders per line.
Three timers read the model:

* every 0.25 s the cheap *live* snapshot (header, the three numbers, per-position
  bars, events) is pushed to the widgets inside one ``batch_update()``;
  sparklines move every other tick (2 Hz);
* every second the plot gets a new view (plotext redraws cost tens of ms), and an
  *analysis* worker recomputes the table's statistics on frozen copies of the
  runs in a thread, no more often than three times its own duration, so a
  multi-million-sample replay never starves keys or ingest.

Everything non-deterministic is injected through the constructor (the sources,
the clocks, theme folders, the export directory, the restart/sweep controller),
and :func:`make_app` is the one factory the command line and the tests use.

Extension points for the commands built on this app:

* any :class:`~specmon.sources.base.LineSource` runs the dashboard:
  ``make_app(SSHTailSource(...))``, or a list of :class:`~specmon.ingest.live.FeedInput`
  (baseline files first); the header shows ``source.status`` on every tick
  (``reconnecting in 4 s (attempt 2)``, latency, failures);
* ``controller``: a restart flow (:class:`~specmon.ui.flows.restart.RestartFlow`), whose
  ``r`` is one worker awaiting each dialog in turn, with a ``sweeper``
  (:class:`~specmon.ui.flows.sweep.SweepFlow`) for ``s``; or any :class:`DashboardController`,
  whose screens ``r`` and ``s`` push. Both are greyed out without a controller or with
  ``DashboardOptions(read_only=True)``. The flows are mounted on the dashboard's screen,
  read it as a :class:`~specmon.ui.flows.Dashboard` (this app) and tell the app what
  happened with messages (:mod:`specmon.ui.messages`): lines for the event log, and
  changes that refresh the keys;
* ``recorder``: a :class:`~specmon.output.recording.Recorder` the feeder records every
  line into (closed when the app ends); ``DashboardOptions.prometheus_port``
  serves ``/metrics`` from the app's own loop while it runs;
* subclasses: Textual calls ``on_mount`` of every class in the MRO by itself, so a
  subclass's ``on_mount`` must not call ``super().on_mount()`` (it would start a
  second ingest worker and a second set of timers).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from textual import events, on
from textual.app import ComposeResult, SystemCommand
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.screen import Screen
from textual.widgets import DataTable, Static
from textual.worker import Worker, WorkerState

from specmon import paths
from specmon.control.guard import ReadOnlyError, read_only_reason, refuse
from specmon.control.restart_progress import Phase
from specmon.ingest.live import Feeder, FeedInput, recording_inputs
from specmon.model.session import SessionEvent
from specmon.output.files import write_files_atomically
from specmon.output.tables import to_csv, to_json, to_markdown
from specmon.sources.base import LineSource
from specmon.sources.replay import ReplayClock, ReplaySource, first_time, speed_text, time_ordered
from specmon.ui.base import SpecmonAppBase, dashboard_layout
from specmon.ui.flows import navigation
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.keys import ACTIONS, app_bindings, by_action
from specmon.ui.literal import literal, markup_escaped
from specmon.ui.messages import FlowChanged, FlowLogged, FlowProgressed
from specmon.ui.theming import theme_folders
from specmon.ui.views import DEFAULT_WINDOW, AnalysisJob, RowView, SnapshotBuilder, TableView
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from specmon.ui.widgets.restart_progress import RestartProgressPanel
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from specmon.ui.widgets.throughput_plot import ThroughputPlot

if TYPE_CHECKING:
    from specmon.output.recording import Recorder
    from specmon.ui.counters import LiveCounters

__all__ = ["DashboardController", "DashboardOptions", "SpecmonApp", "make_app", "replay_app", "watch_app"]

#: Seconds between two live refreshes (numbers); sparklines move every second one.
FAST_TICK_S = 0.25
#: The longest the exit waits for the restart controller to give the server's lease back.
CONTROLLER_CLOSE_S = 8.0
#: Seconds between two plot refreshes / analysis checks.
SLOW_TICK_S = 1.0
#: An analysis waits at least this factor times its own last duration before the next.
ANALYSIS_DUTY = 4.0
#: Use the user's theme folder (the default) unless told otherwise.
USER_THEMES = object()


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


class DashboardController(Protocol):
    """Restart and sweep as screens of someone else's (an embedding program, a test's stand-in).

    ``r`` and ``s`` push the screens it builds; the dashboard's own restart is a
    :class:`~specmon.ui.flows.restart.RestartFlow`, which the app drives directly.
    """

    def unavailable_reason(self, action: str) -> str | None:
        """Why ``restart`` or ``sweep`` cannot run now (greys its key out), or None."""
        ...

    def restart_screen(self) -> Screen[Any]:
        """The screen that restarts the server with another configuration."""
        ...

    def sweep_screen(self) -> Screen[Any]:
        """The screen that sweeps step counts."""
        ...


@dataclass
class DashboardOptions:
    """Settings from the command line.

    Attributes:
        theme: Theme name (None: the default, specmon-dark).
        baseline_tps: A given baseline throughput.
        warmup: Samples excluded at the start of each run, per rank (None: engine default).
        window: Batches in the rolling means.
        loop: Replay the inputs again and again.
        read_only: Never offer restart or sweep, even with a controller.
        animations: Textual animations (tests and snapshots turn them off).
        prometheus_port: Serve Prometheus metrics on 127.0.0.1:PORT while the app runs (0: any free port).
    """

    theme: str | None = None
    baseline_tps: float | None = None
    warmup: int | None = None
    window: int = DEFAULT_WINDOW
    loop: bool = False
    read_only: bool = False
    animations: bool = True
    prometheus_port: int | None = None


#: (action, palette title, palette help) for the command palette: the same source as the keys and help.
_COMMANDS = tuple((a.action, a.title, a.help) for a in ACTIONS if a.title is not None)
#: Textual's own palette entries that specmon has its own command for ("Theme" would be a second theme command).
_REPLACED_SYSTEM_COMMANDS = frozenset({"Theme", "Quit"})


#: Actions that say why when their key is pressed but they cannot run (escape/d with nothing to
#: dismiss stays silent: there is nothing to explain).
_SAY_WHY = frozenset(a.action for a in ACTIONS) - {"dismiss"}


class SpecmonApp(SpecmonAppBase):
    """The specmon dashboard.

    Args:
        inputs: The sources to read, in order (``--baseline`` files first).
        replay_clock: The clock pacing a replay; None for live sources.
        options: Command-line settings.
        clock: Wall clock (``time.time`` scale): countdowns, export names.
        theme_dirs: Folders of theme files, later ones overriding earlier names.
        export_dir: Where ``e`` writes (default: the exports folder of the data directory, :func:`specmon.paths.export_dir`).
        controller: Restart/sweep provider; None disables ``r`` and ``s``.
        recorder: Records every line read (None: no recording).
        sweeper: Runs sweeps for ``s`` (default: one built on the controller's restart flow).
        counters: The engine's ``/metrics`` scraped beside the log (None: the log only).
    """

    # Absolute: a relative path would be resolved next to a subclass's module.
    CSS_PATH = str(Path(__file__).with_name("specmon.tcss"))
    TITLE = "specmon"

    # One source for the footer, the help and the palette (specmon/ui/keys.py).
    BINDINGS = app_bindings()

    def __init__(
        self,
        inputs: Sequence[FeedInput],
        *,
        replay_clock: ReplayClock | None = None,
        options: DashboardOptions | None = None,
        clock: Callable[[], float] = time.time,
        theme_dirs: Sequence[Traversable | Path] = (),
        export_dir: Path | None = None,
        controller: RestartFlow | DashboardController | None = None,
        recorder: Recorder | None = None,
        sweeper: SweepFlow | None = None,
        counters: LiveCounters | None = None,
    ) -> None:
        super().__init__()
        self.counters = counters
        self.options = options or DashboardOptions()
        self.clock = clock
        self.controller = controller
        self.export_dir = export_dir
        self.feeder = Feeder(inputs, warmup=self.options.warmup, loop=self.options.loop,
                             replay_clock=replay_clock, clock=clock, recorder=recorder)
        self.recorder = recorder
        #: The controller when it is the dashboard's own restart flow (the app drives it directly).
        self.restart_flow = controller if isinstance(controller, RestartFlow) else None
        if sweeper is None and self.restart_flow is not None and self.restart_flow.controller is not None:
            sweeper = SweepFlow(self.restart_flow)  # sweeps restart through the restart flow's controller
        self.sweeper = sweeper
        self.exporter: Any = None
        self.builder = SnapshotBuilder(window=self.options.window, baseline_tps=self.options.baseline_tps)
        self.display_paused = False
        self.last_export: list[Path] = []
        self.theme_problems: list[str] = []
        self.specmon_themes: list[str] = []
        self._theme_dirs = list(theme_dirs)
        self._ticks = 0
        self._generation = 0
        self._analysis_sig: tuple[object, ...] | None = None
        self._analysis_running = False
        self._analysis_again = False
        self._analysis_next = 0.0
        self._seq = 0
        self._applied_seq = 0
        self._availability: tuple[object, ...] = ()
        self._runs_sig: tuple[object, ...] = ()
        self._sources_closed = False  # not `_closed`: that name is Textual's MessagePump state
        #: Writes that failed (the recording, exports), as sentences: the header says so and
        #: :attr:`write_failed` makes the command's exit status non-zero.
        self.write_failures: list[str] = []
        self._recording_error_seen = False
        if not self.options.animations:
            self.animation_level = "none"

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        yield from dashboard_layout()

    def on_mount(self) -> None:
        try:
            self._mount_dashboard()
        except NoMatches:
            # The app was told to exit while it was being built (the terminal closed at once,
            # SIGHUP): its widgets are already gone, and there is nothing to start.
            if not self._exit_requested():
                raise

    def _exit_requested(self) -> bool:
        return self._exit or self._closing or self._closed  # Textual's own shutdown state

    def _print_error_renderables(self) -> None:
        """Textual prints a crash's traceback at exit: not to a terminal that is gone (it raised EIO)."""
        try:
            super()._print_error_renderables()
        except (OSError, ValueError):
            pass

    def _mount_dashboard(self) -> None:
        # References, not queries: a modal screen (help) on top must not hide them from the timers.
        self._header = self.query_one(StatusHeader)
        self._panels = (self.query_one("#m-throughput", MetricPanel), self.query_one("#m-accept-len", MetricPanel),
                        self.query_one("#m-accept-rate", MetricPanel))
        self._bars = self.query_one(PositionBars)
        self._events = self.query_one(EventLog)
        self._plot = self.query_one(ThroughputPlot)
        self._table = self.query_one(RunTable)
        self._verdict = self.query_one("#verdict", Static)
        self._table_box = self.query_one("#table-box")
        self._load_themes()
        self._size_classes()
        self.set_interval(FAST_TICK_S, self._tick, name="live refresh")
        self.set_interval(SLOW_TICK_S, self._tick_slow, name="plot and table refresh")
        self._start_worker(self._ingest, name="ingest", group="source", description="read the log source")
        base = self.screen_stack[0]
        if self.restart_flow is not None:
            self.restart_flow.attach(self, base)
        if self.sweeper is not None:
            self.sweeper.attach(self, base)
        if self.recorder is not None:
            self._add_event("info", f"recording to {self.recorder.path}")
        if self.counters is not None:
            self._start_worker(self.counters.run, name="counters", group="counters",
                               description="scrape the engine's /metrics")
        if self.options.prometheus_port is not None:
            self._start_worker(self._serve_metrics, name="prometheus", group="export",
                               description="serve Prometheus metrics")
        self._tick()

    def table_rows(self) -> list[RowView]:
        """The run table's rows now (the restart dialog lists what was measured)."""
        return list(self.builder.table(self.feeder.session).rows)

    def pin_table(self, view: TableView | None) -> None:
        """Show a sweep's verdict table until the next run begins (None: the live table)."""
        run = self.feeder.session.current
        self.builder.pinned = None if view is None else (view, run.id if run is not None else None)
        self._push_table()

    def baseline_to_nospec(self) -> str:
        """The sweep measured the run without speculation: make it the baseline, and say so."""
        a = self.builder.analysis
        row = next((r for r in a.rows if r.config is not None and r.config.is_nospec), None) if a else None
        if row is None or (a is not None and a.baseline is not None and row.is_baseline):
            return ""
        automatic = self.builder.baseline_tps is None and not any(r.key == "baseline file" for r in a.rows) \
            if a is not None else False
        self.builder.baseline_key = None if automatic else row.key
        self._maybe_analyze(force=True)
        return f"baseline: now {row.label}, which the sweep measured (b marks another)"

    @on(FlowLogged)
    def _flow_logged(self, message: FlowLogged) -> None:
        """A flow's line for the event log (the restart and sweep flows post them)."""
        self._add_event(message.level, message.text, message.ts)

    def _add_event(self, level: str, text: str, at: float | None = None) -> None:
        """One of specmon's own events, on the wall clock (the log's events read so far get theirs first)."""
        self.feeder.stamp_events()
        # A replay tells the log's story on the log's clock; its few own events go where they fall.
        wall = None if self.feeder.replay_clock is not None else (self.clock() if at is None else at)
        self.feeder.session.events.append(SessionEvent(0, None, level, text, received=wall))

    @on(FlowProgressed)
    def _flow_progressed(self, message: FlowProgressed) -> None:
        """A restart's panel moved on: refresh the header from the same view now, not at the next tick."""
        if self.screen_stack and not self._sources_closed:  # not while the app shuts down
            self._tick()

    @on(FlowChanged)
    def _flow_changed(self, message: FlowChanged) -> None:
        """A flow started, ended or adopted a server: ``r`` and ``s`` may have changed."""
        # A flow's last message can arrive while the app shuts down, its screens gone.
        if self.screen_stack:
            self.refresh_bindings()

    def _start_worker(self, work: Callable[[], Coroutine[Any, Any, None]], *, name: str, group: str,
                      description: str) -> Worker[None]:
        """Start a non-fatal async worker from a callable.

        A callable, not a coroutine object: a worker that never starts (shutdown) leaves
        nothing behind. The annotated result tells mypy the worker's type, which Textual's
        ``run_worker`` cannot infer from a callable that returns a coroutine.
        """
        worker: Worker[None] = self.run_worker(work, name=name, group=group, description=description,
                                               exit_on_error=False)
        return worker

    async def _serve_metrics(self) -> None:
        from specmon.output.prometheus import PrometheusExporter

        assert self.options.prometheus_port is not None
        # The feeder's session, looked up at each scrape: a looped replay replaces it.
        exporter = PrometheusExporter(lambda: self.feeder.session, self.options.prometheus_port)
        try:
            await exporter.start()
        except OSError as exc:
            self._add_event("error", str(exc))
            self.notify(str(exc), title="prometheus", severity="error", timeout=10)
            return
        self.exporter = exporter
        text = f"Prometheus metrics at http://{exporter.host}:{exporter.port}/metrics"
        self._add_event("info", text)

    def on_resize(self, event: events.Resize) -> None:
        # The event's size: the app's own is still the old one while its Resize is handled, and the
        # classes stayed those of the size before (a resized 80x24 lost its compact layout).
        self._size_classes(event.size)

    def _size_classes(self, size: Size | None = None) -> None:
        """Size classes on the dashboard's own screen (not on a dialog that happens to be on top)."""
        w, h = size if size is not None else self.size
        if not self.screen_stack:
            return
        base = self.screen_stack[0]
        base.set_class(w < 90 or h < 28, "-compact")
        base.set_class(w < 70 or h < 20, "-tiny")
        base.set_class(w >= 160 and h >= 50, "-large")

    # -- themes ------------------------------------------------------------------------------

    def _load_themes(self) -> None:
        self.specmon_themes, self.theme_problems = self.use_themes(self._theme_dirs, self.options.theme)

    def action_next_theme(self) -> None:
        """Switch to the next specmon theme."""
        names = self.specmon_themes or sorted(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    # -- ingest ------------------------------------------------------------------------------

    async def _ingest(self) -> None:
        await self.feeder.run()
        # The input ended (replay done, source gone): make the final numbers exact at once.
        self._maybe_analyze(force=True)
        self._tick()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        worker = event.worker
        if event.state is not WorkerState.ERROR:
            return
        error = worker.error
        if worker.name == "ingest":
            text = f"reading stopped: {type(error).__name__}: {error}"
            self._add_event("error", text)
            self.notify(text, title="ingest", severity="error", timeout=10)
        elif worker.name == "analysis":
            self._analysis_running = False
            self.notify(f"statistics failed: {type(error).__name__}: {error}", severity="error", timeout=10)

    async def _close_sources(self) -> None:
        if not self._sources_closed:
            self._sources_closed = True
            await self.feeder.close()
            if self.counters is not None:
                await self.counters.close()
            if self.exporter is not None:
                exporter, self.exporter = self.exporter, None
                await exporter.close()
            if self.recorder is not None:
                self.recorder.close()
            if self.restart_flow is not None:
                # Giving the lease back talks to the host: a dead connection must not hold the exit.
                try:
                    await asyncio.wait_for(self.restart_flow.close(), CONTROLLER_CLOSE_S)
                except Exception:  # TimeoutError, a lost connection: the exit goes on (the host ends the lease)
                    pass

    async def on_unmount(self) -> None:
        await self._close_sources()

    # -- refresh -------------------------------------------------------------------------------

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

    # -- actions -------------------------------------------------------------------------------

    def _refresh_availability(self) -> None:
        state = tuple(self.check_action(a, ()) for a, _, _ in _COMMANDS)
        if state != self._availability:
            self._availability = state
            self.refresh_bindings()

    def _unavailable_reason(self, action: str) -> str | None:
        """Why an action cannot run now, or None when it can."""
        rc = self.feeder.replay_clock
        if action == "mark_baseline":
            row = self.builder.row_for(self.feeder.session.current)
            if row is None or row.throughput is None:
                return "the current run has no counted throughput samples yet"
        elif action == "export":
            if self._read_only():
                return f"read-only mode ({self._read_only()}): nothing is written"
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
            panel = self._restart_panel()
            if panel is None:
                return "no restart ran in this session"
            if not panel.check_action(action, ()):
                return ("only after a failed restart with a previous configuration" if action == "go_back"
                        else "nothing to dismiss")
        elif action in ("restart", "sweep"):
            if self._read_only():
                return f"read-only mode ({self._read_only()}): the server is not restarted"
            if self.controller is None:
                if rc is not None:
                    return "a replay shows saved logs: there is no server to restart"
                return "no launch profile configured for this server"
            if self.sweeper is not None:
                if action == "sweep":
                    return self.sweeper.unavailable_reason()
                if self.sweeper.running:
                    return "a sweep is running (s offers to stop it)"
            return self.controller.unavailable_reason(action)
        return None

    def _read_only(self) -> str | None:
        """Why actions are off: the process-wide switch (``--read-only``) or these options."""
        return read_only_reason() or ("--read-only" if self.options.read_only else None)

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """Run an action; a key that cannot run now says why instead of doing nothing."""
        handled = await super().run_action(action, default_namespace, namespaces)
        if not handled and action in _SAY_WHY and (default_namespace in (None, self)):
            reason = self._unavailable_reason(action)
            if reason is not None:
                title = by_action(action).title or action
                self.notify(reason, title=f"{title}: unavailable", severity="warning", timeout=6)
        return handled

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out (None) actions that cannot run now; hide keys that do not apply here (False).

        Hidden: the speed keys when not replaying (or the replay ended), ``g`` without a failed restart to go back
        from, ``d``/escape with nothing to dismiss (the footer has room for what applies).
        """
        if action in ("faster", "slower") and (self.feeder.replay_clock is None or self.feeder.done):
            return False  # no speed to change: not in the footer (the palette says why)
        if action in ("go_back", "dismiss"):
            return self._unavailable_reason(action) is None
        return None if self._unavailable_reason(action) else True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette lists every dashboard action; those that cannot run now say why."""
        for command in super().get_system_commands(screen):
            if command.title not in _REPLACED_SYSTEM_COMMANDS:
                yield command
        for action, title, help_text in _COMMANDS:
            reason = self._unavailable_reason(action)
            if reason is None:
                yield SystemCommand(title, help_text, partial(self.run_action, action))
            else:
                # The palette reads its entries as markup: the reason may quote a host or a log.
                yield SystemCommand(f"{title} (unavailable)", markup_escaped(f"{help_text} — {reason}"),
                                    partial(self.notify, reason, title=f"{title}: unavailable",
                                            severity="warning"))

    def _restart_panel(self) -> RestartProgressPanel | None:
        """The restart flow's progress panel, when the controller is a restart flow."""
        return self.restart_flow.panel if self.restart_flow is not None else None

    def _in_flight(self) -> str | None:
        """What quitting now would interrupt: a sweep or a restart, or None."""
        if self.sweeper is not None and self.sweeper.running:
            return "a sweep is running"
        restart = self.restart_flow.controller if self.restart_flow is not None else None
        if restart is not None and restart.busy:
            return "a restart is in progress"
        return None

    async def action_quit(self) -> None:
        """Close the source (an SSH channel, a file) and leave; asks first while a restart or sweep runs."""
        from specmon.ui.screens.quit_confirm import QuitConfirmScreen

        busy = self._in_flight()
        if busy is None or isinstance(self.screen, QuitConfirmScreen):
            # Pressed again on the question: the user means it.
            await self._close_sources()
            self.exit(0)
            return

        async def answered(quit_now: bool | None) -> None:
            if quit_now:
                await self._close_sources()
                self.exit(0)

        self.push_screen(QuitConfirmScreen(busy), callback=answered)

    def action_go_back(self) -> None:
        """After a failed restart: back to the previous configuration (the commands are shown first)."""
        if self.restart_flow is not None and not self._unavailable_reason("go_back"):
            self.restart_flow.go_back()

    def action_dismiss(self) -> None:
        """Hide the restart panel once its restart ended (``d`` or escape, whatever has the focus)."""
        if self.restart_flow is not None and not self._unavailable_reason("dismiss"):
            self.restart_flow.dismiss()

    def action_toggle_pause(self) -> None:
        """Pause or resume the replay; for a live source, freeze or unfreeze the view."""
        rc = self.feeder.replay_clock
        if rc is not None:
            rc.toggle()
        else:
            self.display_paused = not self.display_paused
        self._tick()

    def action_faster(self) -> None:
        """Replay faster."""
        rc = self.feeder.replay_clock
        if rc is not None and not self._unavailable_reason("faster"):
            self.notify(f"replay speed {speed_text(rc.faster())}", timeout=2)
            self._tick()

    def action_slower(self) -> None:
        """Replay slower."""
        rc = self.feeder.replay_clock
        if rc is not None and not self._unavailable_reason("slower"):
            self.notify(f"replay speed {speed_text(rc.slower())}", timeout=2)
            self._tick()

    def action_mark_baseline(self) -> None:
        """Make the current configuration the baseline; pressed again, back to automatic."""
        reason = self._unavailable_reason("mark_baseline")
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
        session = self.feeder.session
        analysis = self.builder.analyze(session.runs)  # exactly the data seen so far
        if not analysis.rows:
            self.notify("nothing to export yet: the run table is empty", severity="warning")
            return
        folder = self.export_dir if self.export_dir is not None else paths.export_dir()
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
            self._write_failed(f"export failed: cannot write to {folder}: {exc.strerror or exc}; no file was written")
            return
        self.last_export = written
        # The folder is specmon's data directory unless --out says otherwise: say where, in full,
        # and put the path on the clipboard (OSC 52) so it can be pasted into a shell.
        self.copy_to_clipboard(str(written[-1]))
        self._add_event("info", f"run table written to {base}.csv, .json and .md")
        self.notify(f"run table written to {base}.csv, .json and .md\n(the .md path is on the clipboard)",
                    title="export", timeout=10)

    def action_help(self) -> None:
        """Open the help screen."""
        from specmon.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_restart(self) -> None:
        """Open the controller's restart screen; on a highlighted run-table row, restart on that row's
        configuration (its commands shown first)."""
        if self.controller is None or self._unavailable_reason("restart"):
            return
        if self.restart_flow is not None:
            self.restart_flow.restart(navigation.row_steps(self))
        elif not isinstance(self.controller, RestartFlow):
            self.push_screen(self.controller.restart_screen())

    def action_events(self) -> None:
        """The whole event log: full lines, filter, levels."""
        navigation.open_events(self)

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a run-table row: what its numbers rest on."""
        if event.row_key.value is not None:
            navigation.open_details(self, str(event.row_key.value))

    def action_sweep(self) -> None:
        """Open the sweep screen (or, during a sweep, offer to stop it)."""
        if self.controller is None or self._unavailable_reason("sweep"):
            return
        if self.sweeper is not None:
            self.sweeper.open()
        elif not isinstance(self.controller, RestartFlow):
            self.push_screen(self.controller.sweep_screen())


# -- factories -------------------------------------------------------------------------------------

def make_app(
    source: LineSource | Sequence[FeedInput],
    *,
    replay_clock: ReplayClock | None = None,
    options: DashboardOptions | None = None,
    clock: Callable[[], float] = time.time,
    user_themes: Path | None | object = USER_THEMES,
    extra_theme_dirs: Sequence[Traversable | Path] = (),
    export_dir: Path | None = None,
    controller: RestartFlow | DashboardController | None = None,
    recorder: Recorder | None = None,
    sweeper: SweepFlow | None = None,
    counters: LiveCounters | None = None,
) -> SpecmonApp:
    """Build the dashboard for a source (or several inputs): the one factory.

    Args:
        source: An already-constructed :class:`LineSource` (a local tail, an SSH
            tail, a simulator), or a list of :class:`FeedInput` for several files.
        replay_clock: The replay's clock, when replaying.
        options: Command-line settings.
        clock: Wall clock.
        user_themes: The user's theme folder; default: the platform config folder; None: none.
        extra_theme_dirs: More theme folders, read after the shipped ones.
        export_dir: Where exports go (default: :func:`specmon.paths.export_dir`; ``--out DIR``).
        controller: Restart/sweep provider (None: ``r`` and ``s`` greyed out).
        recorder: Records the session (a :class:`~specmon.output.recording.Recorder`; None: not recorded).
        sweeper: Runs sweeps for ``s`` (default: built on the controller's restart flow).
        counters: The engine's ``/metrics`` scraped beside the log (:class:`~specmon.ui.counters.LiveCounters`).
    """
    inputs = [FeedInput(source)] if isinstance(source, LineSource) else list(source)
    user_dir = paths.themes_dir() if user_themes is USER_THEMES else user_themes
    return SpecmonApp(
        inputs, replay_clock=replay_clock, options=options, clock=clock,
        theme_dirs=theme_folders(user_dir if isinstance(user_dir, Path) else None, extra_theme_dirs),
        export_dir=export_dir, controller=controller, recorder=recorder, sweeper=sweeper, counters=counters,
    )


def replay_app(
    files: Sequence[str | Path],
    *,
    speed: float | None = 1.0,
    baseline_files: Sequence[str | Path] = (),
    monotonic: Callable[[], float] = time.monotonic,
    **kwargs: Any,
) -> SpecmonApp:
    """The dashboard replaying log files (baseline files first, read at max speed).

    A specmon recording (:func:`specmon.output.recording.is_recording`) replays its
    recorded lines, input by input, so the table is the one the live session showed.

    Args:
        files: Logs to replay (played in the order of their first timestamps).
        speed: Log seconds per wall second (None: max).
        baseline_files: Logs of the server without speculation.
        monotonic: Clock pacing the replay.
        **kwargs: Passed to :func:`make_app`.
    """
    clock = ReplayClock(speed, monotonic=monotonic)
    wall = kwargs.get("clock", time.time)
    inputs = []
    from specmon.output.recording import is_recording

    for path in baseline_files:
        # The baseline is reference data, not part of the show: read it at once.
        if is_recording(path):
            inputs.extend(recording_inputs(path, ReplayClock(None), wall_clock=wall, baseline=True))
            continue
        src = ReplaySource(path, ReplayClock(None), wall_clock=wall)
        inputs.append(FeedInput(src, baseline=True, year=src.year))
    # Logs play in the order their servers wrote them, whatever order they were named in.
    plain = {str(p) for p in files if not is_recording(p)}
    for path in time_ordered(files, lambda p: first_time(p) if str(p) in plain else None):
        if is_recording(path):
            inputs.extend(recording_inputs(path, clock, wall_clock=wall))
            continue
        src = ReplaySource(path, clock, wall_clock=wall)
        inputs.append(FeedInput(src, year=src.year))
    return make_app(inputs, replay_clock=clock, **kwargs)


def watch_app(path: str | Path, *, lines: int | None = None, max_line: int | None = None,
              **kwargs: Any) -> SpecmonApp:
    """The dashboard following a local log like ``tail -F``.

    Args:
        path: The log (need not exist yet).
        lines: Start with the last ``lines`` lines (None: the whole file).
        max_line: ``--line-cap``: longest line kept, in bytes (None: 1 MiB).
        **kwargs: Passed to :func:`make_app`.
    """
    from specmon.sources.lines import DEFAULT_MAX_LINE
    from specmon.sources.local import LocalTailSource

    source = LocalTailSource(path, lines=lines, clock=kwargs.get("clock", time.time),
                             max_line=max_line or DEFAULT_MAX_LINE)
    return make_app(source, **kwargs)
