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
and :func:`specmon.ui.factories.make_app` is the one factory the command line and the tests use.

Split by responsibility, as toolong splits its app and its log screen: the dashboard's
screen (:class:`~specmon.ui.screens.dashboard.DashboardScreen`, the app's default screen,
which the app fills with the widgets) owns the timers, the refresh, the analysis and the keys that
act on the view it shows, with their greying out (pause, speed, baseline, export, the event log, the
restart panel's ``g`` and ``d``, Enter on a run-table row); the app owns what is app-wide: the
sources and their workers, the flows, the files it writes, the themes, the notifications, the exit,
and the keys that act from every full screen (``t``, ``r``, ``s``, ``?``, ``q``; :mod:`specmon.ui.keys`
says whose each key is), the palette of every action and the reason a key cannot run.

Extension points for the commands built on this app:

* any :class:`~specmon.sources.base.LineSource` runs the dashboard:
  ``factories.make_app(SSHTailSource(...))``, or a list of :class:`~specmon.ingest.live.FeedInput`
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
from collections.abc import Callable, Coroutine, Iterable, Sequence
from functools import partial
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import events, on
from textual.app import ComposeResult, SystemCommand
from textual.css.query import NoMatches
from textual.dom import DOMNode
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from specmon.control.guard import read_only_reason
from specmon.ingest.live import Feeder, FeedInput
from specmon.sources.replay import ReplayClock
from specmon.ui.app_options import DashboardController as DashboardController
from specmon.ui.app_options import DashboardOptions as DashboardOptions
from specmon.ui.base import SpecmonAppBase, dashboard_layout
from specmon.ui.flows import navigation
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.keys import ACTIONS, DASHBOARD, app_bindings, by_action
from specmon.ui.literal import markup_escaped
from specmon.ui.messages import FlowChanged, FlowLogged, FlowProgressed
from specmon.ui.screens.dashboard import DashboardScreen
from specmon.ui.views import RowView, SnapshotBuilder, TableView

if TYPE_CHECKING:
    from specmon.output.recording import Recorder
    from specmon.ui.counters import LiveCounters
    from specmon.ui.widgets.run_table import RunTable

__all__ = ["DashboardController", "DashboardOptions", "SpecmonApp"]

#: (action, palette title, palette help) for the command palette: the same source as the keys and help.
_COMMANDS = tuple((a.action, a.title, a.help) for a in ACTIONS if a.title is not None)
#: Textual's own palette entries that specmon has its own command for ("Theme" would be a second theme command).
_REPLACED_SYSTEM_COMMANDS = frozenset({"Theme", "Quit"})


#: Actions that say why when their key is pressed but they cannot run (escape/d with nothing to
#: dismiss stays silent: there is nothing to explain).
_SAY_WHY = frozenset(a.action for a in ACTIONS) - {"dismiss"}
#: The actions the dashboard screen owns (its bindings, its greying out, its reasons).
_DASHBOARD_ACTIONS = frozenset(a.action for a in ACTIONS if a.owner == DASHBOARD)


#: The longest the exit waits for the restart controller to give the server's lease back.
CONTROLLER_CLOSE_S = 8.0
#: Use the user's theme folder (the default) unless told otherwise.
USER_THEMES = object()


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

    # One source for the footer, the help and the palette (specmon/ui/keys.py). Only the app-wide keys:
    # the theme (the app's), r and s (the restart and sweep flows are the app's, their dialogs go over
    # any screen and quitting asks about them), help and quit act from every full screen; what acts on
    # the dashboard's view is the dashboard screen's (screens/dashboard.py).
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
        self.theme_problems: list[str] = []
        self.specmon_themes: list[str] = []
        self._theme_dirs = list(theme_dirs)
        self._availability: tuple[object, ...] = ()
        self._sources_closed = False  # not `_closed`: that name is Textual's MessagePump state
        #: Writes that failed (the recording, exports), as sentences: the header says so and
        #: :attr:`write_failed` makes the command's exit status non-zero.
        self.write_failures: list[str] = []
        #: The dashboard's screen (the default screen): its widgets, timers, refresh and keys.
        self.dashboard = DashboardScreen(self.feeder, self.builder, clock=clock, counters=counters,
                                         restart=self.restart_flow,
                                         write_failures=self.write_failures, export_dir=export_dir,
                                         read_only=self._read_only)
        self.dashboard.on_availability = self._refresh_availability
        self.dashboard.before_refresh = self._check_recording
        self._recording_error_seen = False
        if not self.options.animations:
            self.animation_level = "none"

    # -- layout ------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        # Into the default screen, the dashboard's, before the app's mount starts its refresh.
        yield from dashboard_layout()

    def get_default_screen(self) -> Screen[Any]:
        """The dashboard's screen is the first on the stack (as toolong's app does with its log screen)."""
        return self.dashboard

    def on_mount(self) -> None:
        try:
            self.dashboard.start()
        except NoMatches:
            # The app was told to exit while it was being built (the terminal closed at once,
            # SIGHUP): its widgets are already gone, and there is nothing to start.
            if not self._exit_requested():
                raise
            return
        self._load_themes()
        self._start_worker(self._ingest, name="ingest", group="source", description="read the log source")
        if self.restart_flow is not None:
            self.restart_flow.attach(self, self.dashboard)
        if self.sweeper is not None:
            self.sweeper.attach(self, self.dashboard)
        if self.recorder is not None:
            self._add_event("info", f"recording to {self.recorder.path}")
        if self.counters is not None:
            self._start_worker(self.counters.run, name="counters", group="counters",
                               description="scrape the engine's /metrics")
        if self.options.prometheus_port is not None:
            self._start_worker(self._serve_metrics, name="prometheus", group="export",
                               description="serve Prometheus metrics")
        self._tick()

    def _exit_requested(self) -> bool:
        return self._exit or self._closing or self._closed  # Textual's own shutdown state

    def _print_error_renderables(self) -> None:
        """Textual prints a crash's traceback at exit: not to a terminal that is gone (it raised EIO)."""
        try:
            super()._print_error_renderables()
        except (OSError, ValueError):
            pass

    # -- the dashboard's view, as the flows, the commands and the tests read it ----------------

    def _tick(self, *, sparklines: bool | None = None) -> None:
        """Push the live snapshot to the dashboard's widgets now (the screen's timer does it 4 times a second)."""
        self.dashboard._tick(sparklines=sparklines)

    def refresh_now(self) -> None:
        """Analyse synchronously and push every view at once (tests, before a snapshot)."""
        self.dashboard.refresh_now()

    @property
    def _table(self) -> RunTable:
        """The run table (the navigation flow reads its cursor)."""
        return self.dashboard._table

    @property
    def paused(self) -> bool:
        """Whether the replay or the live view is paused."""
        return self.dashboard.paused

    @property
    def display_paused(self) -> bool:
        """Whether the live view is frozen (``p`` on a live source)."""
        return self.dashboard.display_paused

    @display_paused.setter
    def display_paused(self, value: bool) -> None:
        self.dashboard.display_paused = value

    @property
    def write_failed(self) -> bool:
        """Whether a recording or an export could not be written (the exit status says so)."""
        return bool(self.write_failures) or (self.recorder is not None and self.recorder.error is not None)

    def table_rows(self) -> list[RowView]:
        """The run table's rows now (the restart dialog lists what was measured)."""
        return list(self.builder.table(self.feeder.session).rows)

    def pin_table(self, view: TableView | None) -> None:
        """Show a sweep's verdict table until the next run begins (None: the live table)."""
        run = self.feeder.session.current
        self.builder.pinned = None if view is None else (view, run.id if run is not None else None)
        self.dashboard._push_table()

    def sweep_running(self, running: bool) -> None:
        """While a sweep runs, the run table's leader is ☆ and its line says the sweep's verdict is to come."""
        self.builder.sweeping = running
        self.dashboard._push_table()

    def baseline_to_nospec(self) -> str:
        """The sweep measured the run without speculation: make it the baseline, and say so."""
        a = self.builder.analysis
        row = next((r for r in a.rows if r.config is not None and r.config.is_nospec), None) if a else None
        if row is None or (a is not None and a.baseline is not None and row.is_baseline):
            return ""
        automatic = self.builder.baseline_tps is None and not any(r.key == "baseline file" for r in a.rows) \
            if a is not None else False
        self.builder.baseline_key = None if automatic else row.key
        self.dashboard._maybe_analyze(force=True)
        return f"baseline: now {row.label}, which the sweep measured (b marks another)"

    # -- what the flows tell the app -----------------------------------------------------------

    @on(FlowLogged)
    def _flow_logged(self, message: FlowLogged) -> None:
        """A flow's line for the event log (the restart and sweep flows post them)."""
        self._add_event(message.level, message.text, message.ts)

    def _add_event(self, level: str, text: str, at: float | None = None) -> None:
        """One of specmon's own events, on the wall clock (the log's events read so far get theirs first)."""
        self.dashboard.add_event(level, text, at)

    def _write_failed(self, sentence: str) -> None:
        self.dashboard.write_failed(sentence)

    def _check_recording(self) -> None:
        """A recording that stopped being written is said once, loudly: event log, notification, header."""
        recorder = self.recorder
        error = recorder.error if recorder is not None else None
        if error is None or self._recording_error_seen:
            return
        self._recording_error_seen = True
        self._write_failed(f"{error}: the recording is incomplete from here on")

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

    # -- workers -------------------------------------------------------------------------------

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
        if self.screen_stack:
            self.dashboard.size_classes(event.size)

    async def _ingest(self) -> None:
        await self.feeder.run()
        # The input ended (replay done, source gone): make the final numbers exact at once.
        self.dashboard._maybe_analyze(force=True)
        self._tick()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state is WorkerState.ERROR and event.worker.name == "ingest":
            error = event.worker.error
            text = f"reading stopped: {type(error).__name__}: {error}"
            self._add_event("error", text)
            self.notify(text, title="ingest", severity="error", timeout=10)

    async def _close_sources(self) -> None:
        if not self._sources_closed:
            self._sources_closed = True
            self.dashboard.halted = True
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

    # -- themes --------------------------------------------------------------------------------

    def _load_themes(self) -> None:
        self.specmon_themes, self.theme_problems = self.use_themes(self._theme_dirs, self.options.theme)

    def action_next_theme(self) -> None:
        """Switch to the next specmon theme."""
        names = self.specmon_themes or sorted(self.available_themes)
        i = names.index(self.theme) if self.theme in names else -1
        self.theme = names[(i + 1) % len(names)]
        self.notify(f"theme: {self.theme}", timeout=2)

    # -- keys: the app's, why any key cannot run now, and the palette of every action -----------

    def _owner(self, action: str) -> DOMNode:
        """Whose action it is: the dashboard screen's (the view's keys) or the app's."""
        return self.dashboard if action in _DASHBOARD_ACTIONS else self

    def _refresh_availability(self) -> None:
        state = tuple(self._owner(a).check_action(a, ()) for a, _, _ in _COMMANDS)
        if state != self._availability:
            self._availability = state
            self.refresh_bindings()

    def _unavailable_reason(self, action: str) -> str | None:
        """Why an action cannot run now, or None when it can (the dashboard screen says for its own)."""
        rc = self.feeder.replay_clock
        if action in _DASHBOARD_ACTIONS:
            return self.dashboard.unavailable_reason(action)
        if action in ("restart", "sweep"):
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
        """Run an action; a key that cannot run now says why instead of doing nothing (the app's keys
        and the dashboard screen's: Textual runs every key's action here)."""
        handled = await super().run_action(action, default_namespace, namespaces)
        if not handled and action in _SAY_WHY and default_namespace in (None, self, self.dashboard):
            reason = self._unavailable_reason(action)
            if reason is not None:
                title = by_action(action).title or action
                self.notify(reason, title=f"{title}: unavailable", severity="warning", timeout=6)
        return handled

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out (None) the app's actions that cannot run now (the dashboard screen greys out its own)."""
        if action in _DASHBOARD_ACTIONS:
            return self.dashboard.check_action(action, parameters)
        return None if self._unavailable_reason(action) else True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette lists every dashboard action, each run by its owner (the app, or the dashboard
        screen, whatever screen the palette is opened over); those that cannot run now say why."""
        for command in super().get_system_commands(screen):
            if command.title not in _REPLACED_SYSTEM_COMMANDS:
                yield command
        for action, title, help_text in _COMMANDS:
            reason = self._unavailable_reason(action)
            if reason is None:
                yield SystemCommand(title, help_text, partial(self.run_action, action, self._owner(action)))
            else:
                # The palette reads its entries as markup: the reason may quote a host or a log.
                yield SystemCommand(f"{title} (unavailable)", markup_escaped(f"{help_text} — {reason}"),
                                    partial(self.notify, reason, title=f"{title}: unavailable",
                                            severity="warning"))

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

    def action_sweep(self) -> None:
        """Open the sweep screen (or, during a sweep, offer to stop it)."""
        if self.controller is None or self._unavailable_reason("sweep"):
            return
        if self.sweeper is not None:
            self.sweeper.open()
        elif not isinstance(self.controller, RestartFlow):
            self.push_screen(self.controller.sweep_screen())
