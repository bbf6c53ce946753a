"""The dashboard's restart: ``r`` → step count → the exact commands → run, with a progress panel.

:class:`RestartFlow` is what the dashboard is given as its ``controller``. Each way into a
restart (``r``, ``r`` on a run-table row, ``g`` after a failure, the demo's first start, a
sweep's winner) is one worker (``@work``) that awaits each screen in turn — the step-count
dialog, then the confirmation with the exact commands — and then runs that confirmed plan,
keeping the panel (:class:`~specmon.ui.widgets.restart_progress.RestartProgressPanel`) up to
date. Every command it runs was on screen first — in the confirmation screen, or (the demo's
first start) in the event log just before. It tells the app what happened with messages
(``RestartFlow.Started``, ``RestartFlow.Finished``, ...).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from textual import work
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.timer import Timer
from textual.widget import Widget

from specmon.control.adopt import AdoptError
from specmon.control.adopt_controller import controller_for_running_server
from specmon.control.eta import EtaStore
from specmon.control.launch import CommandPlan, LaunchError, LaunchProfile
from specmon.control.restart_controller import RestartController, RestartError
from specmon.control.restart_progress import Phase, RestartProgress, plan_label
from specmon.control.runner import CommandRunner
from specmon.sources.base import LineSource
from specmon.sources.switching import SourceFactory, SwitchingSource
from specmon.ui.flows import Dashboard
from specmon.ui.messages import FlowChanged, FlowLogged, FlowProgressed
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.restart_dialog import MeasuredStep, RestartDialog
from specmon.ui.views import RowView, duration_text
from specmon.ui.widgets.restart_progress import RestartProgressPanel, phase_counter

__all__ = ["RestartFlow", "live_restart"]

#: Seconds the panel stays up after "ready" (the table has the new row by then).
READY_LINGER_S = 12.0
#: Seconds between two refreshes of the panel (elapsed time moves).
PANEL_TICK_S = 0.25
#: How often a dashboard that only watches (another specmon holds the server's lease) looks whether it is free.
LEASE_RELOOK_S = 10.0
#: The worker group of the flows' dialogs and runs (one restart or sweep at a time acts on the server).
GROUP = "control"


class RestartFlow(Widget):
    """The dashboard's restart: ``r`` → step count → exact commands → run, with a progress panel.

    Given to the app as its ``controller``; the app mounts it (a hidden widget: it owns the
    workers and timers) and its panel on the dashboard's screen with :meth:`attach`. Messages:
    ``Logged`` (a line for the event log), ``Changed`` (a server was adopted, or not; a dialog
    opened or closed), ``Started`` (a confirmed plan runs) and ``Finished`` (it ended: ready or failed).

    Args:
        controller: Builds, shows and runs the plans; None while ``adopt`` looks
            for the server.
        initial_steps: Start the server with this step count as soon as the
            dashboard is up (``specmon demo``); the commands go to the event log first.
        note: Said in the event log and a notification once the dashboard is up.
        adopt: No profile: once the dashboard is up, find the running server —
            ``adopt(show)`` returns the controller and a note saying which
            process ``r`` restarts (:func:`live_restart` builds it).
    """

    DEFAULT_CSS = "RestartFlow { display: none; }"

    class Logged(FlowLogged):
        """A line for the event log."""

    class Changed(FlowChanged):
        """The adoption ended (a controller, or the reason there is none), or a dialog opened or closed."""

    class Started(FlowChanged):
        """A confirmed plan started running."""

        def __init__(self, plan: CommandPlan) -> None:
            super().__init__()
            self.plan = plan

    class Progressed(FlowProgressed):
        """The panel shows a newer moment of the running restart."""

    class Finished(FlowChanged):
        """A restart ended: ``progress.phase`` is READY, or where it failed."""

        def __init__(self, progress: RestartProgress | None) -> None:
            super().__init__()
            #: None when the controller refused to start (another restart ran).
            self.progress = progress

    def __init__(self, controller: RestartController | None, *, initial_steps: int | None = None,
                 note: str | None = None,
                 adopt: Callable[[Callable[[str], None]], Awaitable[tuple[RestartController, str]]] | None = None,
                 ) -> None:
        if controller is None and adopt is None:
            raise ValueError("RestartFlow needs a controller or a way to adopt the running server")
        super().__init__(id="restart-flow")
        self.controller = controller
        self.adopt = adopt
        self.adopt_problem: str | None = None
        #: Who else controls the server (another specmon holds its lease), while it does: r is greyed.
        self.held_by: str | None = None
        self.initial_steps = initial_steps
        self.note = note
        self.dashboard: Dashboard | None = None
        self.panel = RestartProgressPanel(id="restart-progress")
        self._visible = False
        self._hide_timer: Timer | None = None
        self._driven = False
        #: Dialogs of this flow on screen now: a second ``r`` meanwhile would stack a second dialog.
        self._asking = 0
        self.runs = 0
        #: The commands last run for each step count, as shown (a row's details show them).
        self.commands: dict[int, str] = {}

    # -- the app's side of the interface --------------------------------------------------

    async def close(self) -> None:
        """The app is closing: give the server's lease back and stop following its log.

        Without it the lease's holder (a shell on the host, or here) outlived the dashboard
        for as long as the process did: the exit's checks, a test run, an embedding program.
        """
        if self.controller is not None:
            await self.controller.close()

    def attach(self, dashboard: Dashboard, screen: Screen[Any]) -> None:
        """Mount on the running dashboard's ``screen`` (the panel under ``#header``), follow log switches.

        Called once, when the app is mounted; later calls do nothing. The rest (adoption, the
        first start) begins when this widget is mounted (:meth:`on_mount`).
        """
        if self.dashboard is not None:
            return
        self.dashboard = dashboard
        feeder = dashboard.feeder
        source = feeder.source
        if isinstance(source, SwitchingSource) and source.on_begin is None:
            # The dashboard starts a new input in its session where the new log begins.
            source.on_begin = lambda name: feeder.session.begin_source(name)
        anchor = screen.query("#header")
        if anchor:
            screen.mount(self.panel, after=anchor.first())
        else:
            screen.mount(self.panel)
        screen.mount(self)

    def on_mount(self) -> None:
        self.set_interval(PANEL_TICK_S, self._refresh, name="restart progress")
        if self.note:
            self._event("info", self.note)
            self._notify(self.note, "information")
        if self.controller is None and self.adopt is not None:
            self._adopt()
        elif self.controller is not None and self.controller.record_servers:
            self._adopt_recorded()
        if self.initial_steps is not None:
            steps, self.initial_steps = self.initial_steps, None
            self.start_now(steps)

    @work(name="adopt", group=GROUP, description="find the running server", exit_on_error=False)
    async def _adopt(self) -> None:
        assert self.adopt is not None
        try:
            controller, note = await self.adopt(lambda text: self._event("info", text))
        except (AdoptError, LaunchError, OSError) as exc:
            self.adopt_problem = f"no launch profile, and the running server cannot be adopted: {exc}"
            self._event("warning", f"restart unavailable: {self.adopt_problem}")
        except Exception as exc:
            self.adopt_problem = f"no launch profile, and finding the running server failed: {exc}"
            self._event("warning", f"restart unavailable: {self.adopt_problem}")
        else:
            self.controller = controller
            self._event("info", note)
            self._notify(note, "information")
            await self._say_lease_holder()
        self.post_message(self.Changed())

    @work(name="adopt recorded", group=GROUP, description="the server an earlier session left running",
          exit_on_error=False)
    async def _adopt_recorded(self) -> None:
        assert self.controller is not None
        try:
            note = await self.controller.adopt_recorded()
        except Exception as exc:  # a failed look is a note, never a crash
            note = f"could not check the server an earlier session left running: {exc}"
        if note:
            self._event("info", note)
            self._notify(note, "information")
        await self._say_lease_holder()
        self.post_message(self.Changed())

    async def _say_lease_holder(self) -> None:
        """When another specmon controls this server, say who at once, grey ``r`` (it would be refused)
        and look again now and then: once the other gives the server back, ``r`` works again."""
        held = await self._lease_holder()
        if not held:
            return
        self.held_by = held
        self._event("warning", f"{held}: this dashboard watches only until it gives the server back")
        self._notify(held, "warning")
        self.post_message(self.Changed())
        self._watch_lease()

    @work(name="lease", group="lease", exclusive=True, description="whether the other specmon gave the server back",
          exit_on_error=False)
    async def _watch_lease(self) -> None:
        while self.held_by is not None:
            await asyncio.sleep(LEASE_RELOOK_S)
            if self.controller is not None and self.controller.lease is not None and self.controller.lease.held:
                self.held_by = None  # taken here meanwhile (a restart that found it free)
                break
            self.held_by = await self._lease_holder()
        self._event("info", "the other specmon gave the server back: r restarts it again")
        self.post_message(self.Changed())

    async def _lease_holder(self) -> str | None:
        assert self.controller is not None
        try:
            return await self.controller.lease_note()
        except Exception:  # a look, never a crash
            return None

    def unavailable_reason(self, action: str) -> str | None:
        """Why ``r`` (or ``s``) cannot run now, or None."""
        if action == "sweep":
            return "sweeps run headless for now: `specmon sweep PROFILE` or `specmon sweep --demo`"
        if self.controller is None:
            return self.adopt_problem or "looking for the server process on the host…"
        if self.controller.busy:
            return "a restart is in progress"
        if self.held_by is not None:
            return f"{self.held_by} (watching only until it gives the server back)"
        if self._asking:
            return "a restart dialog is open"
        return None

    def _shown_progress(self) -> RestartProgress | None:
        """The running restart as the panel shows it now (the header reads the same view)."""
        c = self.controller
        if c is None or not c.busy:
            return None
        view = self.panel.view if self._visible and self.panel.view is not None else c.progress
        return view if view is not None and view.running else None

    def header_state(self) -> tuple[str, str] | None:
        """The header's state while a restart runs: its phase and the time in it, as the panel says.

        The app calls this on its refresh tick; the panel is refreshed here, in the same tick,
        from the same view (its own timer stands down), so the two never show different moments.
        """
        self._driven = True
        c = self.controller
        if self._visible and c is not None and c.busy:
            self.panel.view = c.progress
        view = self._shown_progress()
        if view is None:
            return None
        verb = "start" if self.panel.first_start else "restart"
        return (f"{verb} → {plan_label(view.steps)}: {view.phase.text}{phase_counter(view, view.phase)}",
                duration_text(view.phase_elapsed_s) or "0s")

    def header_text(self) -> str:
        """What the header's mode slot says while a restart runs: its ETA (the phase is in the state)."""
        view = self._shown_progress()
        if view is None or view.eta is None or view.eta.remaining_s is None:
            return ""
        return f"ETA ~{duration_text(view.eta.remaining_s) or '0s'}"

    def command_for(self, steps: int) -> str | None:
        """The server's start command for ``steps``, saying whether specmon ran it (None: unknown)."""
        text = self.commands.get(steps)
        head = "the start command specmon ran for it:"
        if text is None and self.controller is not None:
            try:
                text = self.controller.describe(self.controller.plan_for(steps))
            except (LaunchError, RestartError):
                return None
            head = f"the start command r runs for {plan_label(steps)} (this run may have been started another way):"
        if text is None:
            return None
        lines = [line.strip() for line in text.splitlines() if line.strip().startswith("start:")]
        return "\n".join([head, *(lines or [text])])

    # -- the flows: one worker each, a screen awaited per step --------------------------------

    @work(name="restart flow", group=GROUP, description="restart: step count, commands, run", exit_on_error=False)
    async def restart(self, steps: int | None = None) -> None:
        """``r``: ask for the step count (unless given: a run-table row, a sweep's winner), show the
        exact commands, and run them once confirmed; escape on either screen runs nothing."""
        c = self.controller
        if c is None:
            return
        if steps is None:
            self._note_current()
            lo, hi = c.steps_range
            dialog = RestartDialog(host=c.host, lo=lo, hi=hi, current_steps=c.current_steps, rule=c.draft_rule(),
                                   measured=[MeasuredStep.from_row(r) for r in self._measured_rows()])
            steps = await self._ask(dialog)
            if steps is None:
                return  # escape: nothing chosen, nothing to say
        try:
            plan = c.plan_for(steps)
        except (LaunchError, RestartError) as exc:
            self._notify(f"cannot restart with {steps} steps: {exc}", "error")
            return
        await self._confirm_and_run(plan, "Restart")

    @work(name="go back flow", group=GROUP, description="go back: commands, run", exit_on_error=False)
    async def go_back(self) -> None:
        """``g`` after a failed restart: back to the configuration before it (confirmed like any restart)."""
        if self.controller is None:
            return
        try:
            plan = self.controller.go_back_plan()
        except (LaunchError, RestartError) as exc:
            self._notify(f"cannot go back: {exc}", "error")
            return
        await self._confirm_and_run(plan, "Go back", kind="go back")

    @work(name="restart", group=GROUP, description="restart the server", exit_on_error=False)
    async def start_now(self, steps: int) -> None:
        """Start ``steps`` without a dialog (the demo's first start): the commands go to the event log first."""
        if self.controller is None:
            return
        try:
            plan = self.controller.plan_for(steps)
        except (LaunchError, RestartError) as exc:
            self._notify(f"cannot start with {steps} steps: {exc}", "error")
            return
        # Nothing known to run yet and nothing started in this session: a start, not a restart.
        first = self.controller.current_steps is None and self.runs == 0
        await self._execute(plan, self.controller.describe(plan), first=first,
                            kind="first start" if first else "restart")

    async def _ask(self, screen: Screen[Any]) -> Any:
        """One dialog of the flow, awaited; ``r`` is greyed meanwhile (a second one would stack on it)."""
        self._asking += 1
        self.post_message(self.Changed())
        try:
            return await self.app.push_screen_wait(screen)
        finally:
            self._asking -= 1
            self.post_message(self.Changed())

    async def _confirm_and_run(self, plan: CommandPlan, title: str, *, kind: str = "restart") -> None:
        c = self.controller
        assert c is not None
        screen = ConfirmCommandsScreen(c, plan, now_steps=c.current_steps, eta_text=self._usual_time(), title=title)
        if not await self._ask(screen):
            self._event("info", "restart cancelled: nothing was run")
            return
        await self._execute(plan, screen.text, kind=kind)

    async def _execute(self, plan: CommandPlan, shown: str, *, first: bool = False, kind: str = "restart") -> None:
        """Run a confirmed plan; ``shown`` is what the user saw, logged first.

        ``first``: the session's first start (nothing specmon started runs yet): called a start, not a restart.
        ``kind`` (``first start``, ``restart``, ``go back``) names it in the recording, so a
        report's list of restarts has every start, not only a sweep's.
        """
        c = self.controller
        assert c is not None
        self.panel.first_start = first
        verb = "start" if first else "restart to"
        self._event("info", f"{verb} {plan_label(plan.steps, plan.draft_tokens)} on {plan.host}: running")
        for line in shown.splitlines():
            if line.strip() and not line.startswith("host:"):
                self._event("info", "  " + line)
        self._show()
        self.runs += 1
        self.commands[plan.steps] = shown
        self.post_message(self.Started(plan))
        self._record(steps=plan.steps, phase="started", kind=kind)
        try:
            final = await c.run(plan, on_progress=self._progress)
        except RestartError as exc:
            self._notify(f"restart refused: {exc}", "error")
            self.post_message(self.Finished(None))
            return
        for note in c.warnings.take():  # (signal dispositions the host could not reset: once a session)
            self._event("warning", note)
            self._notify(note, "warning")
        self._record(steps=plan.steps, phase="finished", kind=kind, ok=final.phase is Phase.READY,
                     detail=final.message)
        self._progress(final)
        took = duration_text(final.elapsed_s) or "0s"
        if final.phase is Phase.READY:
            verb = "start" if self.panel.first_start else "restart"
            self._event("info", f"{verb} {final.message} after {took}")
            self._notify(f"{final.message} — a new run begins", "information")
            self._hide_timer = self.set_timer(READY_LINGER_S, self._auto_hide, name="hide restart panel")
        else:
            self._event("error", f"restart {final.phase.text} after {took}: {final.message}")
            self._notify(f"restart {final.phase.text}: {final.message}", "error")
            self.panel.focus()
        self.post_message(self.Finished(final))

    def dismiss(self) -> None:
        """Hide the panel."""
        self._visible = False
        self.panel.view = None
        if self.panel.has_focus:
            self.panel.screen.set_focus(None)

    # -- helpers ----------------------------------------------------------------------------

    def _auto_hide(self) -> None:
        view = self.panel.view
        c = self.controller
        if view is not None and view.phase is Phase.READY and c is not None and not c.busy:
            self.dismiss()

    def _show(self) -> None:
        self._visible = True
        if self._hide_timer is not None:
            self._hide_timer.stop()
            self._hide_timer = None

    def show_progress(self, view: RestartProgress) -> None:
        """Show a restart the flow did not start itself (a sweep's) in the panel, as its own."""
        self._show()
        self._progress(view)

    def _progress(self, view: RestartProgress) -> None:
        if self._visible:
            self.panel.view = view
            if self._driven and view.running:
                self.post_message(self.Progressed())  # the header follows before the next paint

    def _refresh(self) -> None:
        c = self.controller
        if self._driven:
            return  # the app's tick refreshes the panel with the header (header_state)
        if self._visible and c is not None and c.busy:
            self.panel.view = c.progress

    def _note_current(self) -> None:
        run = self.dashboard.feeder.session.current if self.dashboard is not None else None
        if run is not None and run.config is not None and self.controller is not None:
            self.controller.note_running_steps(run.config.steps)

    def _measured_rows(self) -> list[RowView]:
        if self.dashboard is None:
            return []
        try:
            return self.dashboard.table_rows()
        except Exception:  # the dialog opens without them rather than not at all
            return []

    def _usual_time(self) -> str | None:
        if self.controller is None:
            return None
        store = self.controller.eta_store
        host = self.controller.host
        if store is None or not store.count(host):
            return None
        total = sum(store.medians(host).values())
        n = store.count(host)
        return f"usually {duration_text(total) or '0s'} on {host}, from {n} earlier restart{'' if n == 1 else 's'}"

    def _record(self, **fields: Any) -> None:
        recorder = self.dashboard.recorder if self.dashboard is not None else None
        if recorder is not None and not recorder.closed:
            recorder.restart(**fields)

    def _event(self, level: str, text: str) -> None:
        # Specmon's own events are on the wall clock, never on the log's: the log's clock may run
        # at another pace (the demo's simulated server) or be set wrong (a remote host).
        if self.dashboard is not None:
            self.post_message(self.Logged(level, text, self.dashboard.clock()))

    def _notify(self, text: str, severity: SeverityLevel) -> None:
        if self.dashboard is not None:
            self.notify(text, severity=severity, timeout=8)


def live_restart(
    source: LineSource,
    make_source: SourceFactory,
    runner: CommandRunner,
    *,
    host: str,
    launch: LaunchProfile | None,
    log: str | None = None,
    eta_store: EtaStore | None = None,
    pidfile: str | None = None,
) -> tuple[SwitchingSource, RestartFlow]:
    """Restart for a dashboard on a live server (``specmon connect``, ``specmon watch``).

    With a launch profile, ``r`` restarts through it. Without one, the running
    server is adopted once the dashboard is up: the fixed read-only probe finds
    the process writing ``log``, and ``r`` restarts it with its own command line,
    the step flag rewritten (stopped by PID and start time the first time).

    Args:
        source: The tail the dashboard reads now.
        make_source: ``(path, from_start) -> LineSource``: tails of the new log after a restart.
        runner: Where commands run (``ConnectingRunner`` for SSH, ``LocalRunner`` here).
        host: The host label.
        launch: The profile's launch table, if any.
        log: The log followed (picks the server to adopt).
        eta_store: Restart times (default: the user data dir's).
        pidfile: Where an adopted server's successors record their PID
            (default ``~/.cache/specmon/run/specmon-{port}.pid`` on the host).

    Returns:
        The source to give the app (it follows the new log after each restart)
        and the controller to give it.
    """
    switching = SwitchingSource(source, make_source)
    common: dict[str, Any] = {"host": host, "eta_store": eta_store if eta_store is not None else EtaStore(),
                              "make_source": make_source, "on_log_switch": switching.switch}
    if launch is not None:
        # A real server: recorded when started, adopted by the next session if it still runs.
        return switching, RestartFlow(RestartController(launch, runner, record_servers=True, **common))

    async def adopt(show: Callable[[str], None]) -> tuple[RestartController, str]:
        controller, server = await controller_for_running_server(runner, log=log, show=show, pidfile=pidfile,
                                                                 **common)
        steps = server.spec.steps
        now = "steps chosen by the engine" if steps is None else plan_label(steps)
        note = (f"found the {server.engine} server on {host}: PID {server.pid} ({now}); r restarts it with another "
                "step count, from its own command line (the commands are shown first)")
        return controller, note

    return switching, RestartFlow(None, adopt=adopt)
