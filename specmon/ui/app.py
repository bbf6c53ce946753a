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

The app is the composition root: the refresh (:mod:`specmon.ui.app_refresh`) and the
key actions (:mod:`specmon.ui.app_actions`) are its mixins, what it is given
(:mod:`specmon.ui.app_options`) is beside it; those names are importable from here too.

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
import time
from collections.abc import Callable, Coroutine, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import ComposeResult
from textual.css.query import NoMatches
from textual.geometry import Size
from textual.widgets import Static
from textual.worker import Worker, WorkerState

from specmon import paths
from specmon.ingest.live import Feeder, FeedInput, recording_inputs
from specmon.model.session import SessionEvent
from specmon.sources.base import LineSource
from specmon.sources.replay import ReplayClock, ReplaySource, first_time, time_ordered
from specmon.ui.app_actions import AppActions
from specmon.ui.app_options import DashboardController as DashboardController
from specmon.ui.app_options import DashboardOptions as DashboardOptions
from specmon.ui.app_refresh import FAST_TICK_S, SLOW_TICK_S, AppRefresh
from specmon.ui.base import dashboard_layout
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.keys import app_bindings
from specmon.ui.messages import FlowChanged, FlowLogged, FlowProgressed
from specmon.ui.theming import theme_folders
from specmon.ui.views import RowView, SnapshotBuilder, TableView
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.position_bars import PositionBars
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from specmon.ui.widgets.throughput_plot import ThroughputPlot

if TYPE_CHECKING:
    from specmon.output.recording import Recorder
    from specmon.ui.counters import LiveCounters

__all__ = ["DashboardController", "DashboardOptions", "SpecmonApp", "make_app", "replay_app", "watch_app"]

#: The longest the exit waits for the restart controller to give the server's lease back.
CONTROLLER_CLOSE_S = 8.0
#: Use the user's theme folder (the default) unless told otherwise.
USER_THEMES = object()


class SpecmonApp(AppActions, AppRefresh):
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
