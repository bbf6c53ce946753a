"""The restart progress panel, and the flow that ``r`` starts on the dashboard.

:class:`RestartProgressPanel` shows one :class:`~specmon.control.restart.RestartProgress`:
the phases done and their times, the current phase with its shard or graph
counter and a bar, the elapsed time and the ETA; after a crash or a timeout,
the reason and the last log lines, with ``g`` to go back to the previous
configuration.

:class:`RestartFlow` is what the dashboard is given as its ``controller``: it
opens the step-count dialog, then the confirmation screen with the exact
commands, then runs that confirmed plan in a worker and keeps the panel up to
date. Every command it runs was on screen first — in the confirmation screen,
or (the demo's first start) in the event log just before.
"""

from __future__ import annotations

import calendar
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from textual.binding import Binding
from textual.content import Content
from textual.reactive import reactive
from textual.screen import Screen
from textual.widget import Widget

from specmon.control.adopt import AdoptError
from specmon.control.eta import EtaStore
from specmon.control.launch import CommandPlan, LaunchError, LaunchProfile
from specmon.control.restart import (
    RUNNING_PHASES,
    Phase,
    RestartController,
    RestartError,
    RestartProgress,
    SourceFactory,
    SwitchingSource,
    controller_for_running_server,
    plan_label,
)
from specmon.control.runner import CommandRunner
from specmon.model.session import SessionEvent
from specmon.sources.base import LineSource
from specmon.ui.views import duration_text

if TYPE_CHECKING:
    from textual.app import App

__all__ = ["RestartFlow", "RestartProgressPanel", "eta_text", "live_restart", "progress_bar"]

#: Seconds the panel stays up after "ready" (the table has the new row by then).
READY_LINGER_S = 12.0
#: Seconds between two refreshes of the panel (elapsed time moves).
PANEL_TICK_S = 0.25


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
        return eta.basis
    if eta.remaining_s < 1:
        return f"any moment now ({eta.basis})"
    return f"ETA ~{duration_text(eta.remaining_s)} ({eta.basis})"


def _counter(view: RestartProgress, phase: Phase) -> str:
    prog = view.load_progress if phase is Phase.LOADING else view.graph_progress if phase is Phase.CAPTURING else None
    return f" {prog[0]}/{prog[1]}" if prog else ""


class RestartProgressPanel(Widget, can_focus=True):
    """The lifecycle of one restart; ``g`` goes back after a failure, ``d`` dismisses.

    Args:
        on_go_back: Called for ``g`` (the flow shows the go-back commands first).
        on_dismiss: Called for ``d`` / escape.
    """

    BINDINGS = [
        Binding("g", "go_back", "Go back"),
        Binding("d,escape", "dismiss", "Dismiss"),
    ]

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

    def __init__(self, *, on_go_back: Any = None, on_dismiss: Any = None, id: str | None = None) -> None:
        super().__init__(id=id)
        self.on_go_back = on_go_back
        self.on_dismiss = on_dismiss
        self.border_title = "restart"

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

    def action_go_back(self) -> None:
        """Go back to the previous configuration (its commands are shown first)."""
        if self.on_go_back is not None and self.check_action("go_back", ()):
            self.on_go_back()

    def action_dismiss(self) -> None:
        """Hide the panel (once the restart ended)."""
        if self.on_dismiss is not None and self.check_action("dismiss", ()):
            self.on_dismiss()

    def render(self) -> Content:
        """Title, phases, bar and ETA; after a failure the reason and the last log lines."""
        v = self.view
        if v is None:
            return Content("")
        width = max(20, self.content_size.width or 80)
        lines: list[Content] = []
        title = Content.assemble(("restart → ", "bold"), (v.label, "bold $accent"), (f" on {v.host}", ""),
                                 ("   elapsed ", "$text-muted"), (duration_text(v.elapsed_s) or "0s", "bold"))
        lines.append(title)
        lines.append(self._phases(v))
        if v.running:
            fraction = v.fraction
            label = f" {fraction * 100:3.0f}%" if fraction is not None else ""
            bar_width = max(10, min(40, width // 3))
            style = "$warning" if fraction is not None else "$text-muted"
            lines.append(Content.assemble((progress_bar(fraction, bar_width), style), (label, "bold"), "  ",
                                          (eta_text(v), "$text-muted")))
            if v.message:
                lines.append(Content.styled(v.message, "$text-muted"))
        elif v.phase is Phase.READY:
            lines.append(Content.assemble(("✓ ", "$success"), (v.message, "$success"),
                                          ("  · the run table gains the new run (warm-up excluded)", "$text-muted")))
            lines.append(Content.styled("d: dismiss", "$text-muted"))
        else:
            lines.append(Content.assemble(("✖ ", "$error bold"), (f"{v.phase.text}: ", "$error bold"),
                                          (v.message, "$error")))
            if v.last_lines:
                lines.append(Content.styled(f"last lines of {v.log or 'the log'}:", "$text-muted"))
                room = max(3, 16 - 2 - len(lines) - 1)
                for raw in v.last_lines[-room:]:
                    lines.append(Content("  " + raw).stylize("$text-muted"))
            keys = []
            if v.previous_steps is not None:
                keys.append(f"g: go back to {plan_label(v.previous_steps)} (the commands are shown first)")
            keys.append("d: dismiss")
            lines.append(Content.styled(" · ".join(keys), "bold"))
        return Content("\n").join(lines)

    def _phases(self, v: RestartProgress) -> Content:
        parts: list[tuple[str, str] | str] = []
        times: dict[Phase, float] = {}
        for phase, seconds in v.done:
            times[phase] = times.get(phase, 0.0) + seconds
        # A failed restart ended in the last phase it entered.
        failed_at = v.done[-1][0] if v.failed and v.done else None
        for phase in (*RUNNING_PHASES, Phase.READY):
            if parts:
                parts.append("  ")
            if phase is failed_at:
                parts.append((f"✖ {phase.text}{_counter(v, phase)} {duration_text(times[phase]) or '0s'}",
                              "bold $error"))
            elif phase in times:
                parts.append((f"✓ {phase.text} {duration_text(times[phase]) or '0s'}", "$success"))
            elif phase is v.phase and v.running:
                parts.append((f"▸ {phase.text}{_counter(v, phase)} {duration_text(v.phase_elapsed_s) or '0s'}",
                              "bold $warning"))
            elif phase is Phase.READY and v.phase is Phase.READY:
                parts.append(("✓ ready", "bold $success"))
            else:
                parts.append((f"· {phase.text}", "$text-muted"))
        return Content.assemble(*parts)


class RestartFlow:
    """The dashboard's restart: ``r`` → step count → exact commands → run, with a progress panel.

    Given to the app as its ``controller``; :meth:`attach` connects it once the
    app runs (the app calls it on mount).

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

    def __init__(self, controller: RestartController | None, *, initial_steps: int | None = None,
                 note: str | None = None,
                 adopt: Callable[[Callable[[str], None]], Awaitable[tuple[RestartController, str]]] | None = None,
                 ) -> None:
        if controller is None and adopt is None:
            raise ValueError("RestartFlow needs a controller or a way to adopt the running server")
        self.controller = controller
        self.adopt = adopt
        self.adopt_problem: str | None = None
        self.initial_steps = initial_steps
        self.note = note
        self.app: App[Any] | None = None
        self.panel = RestartProgressPanel(on_go_back=self.go_back, on_dismiss=self.dismiss, id="restart-progress")
        self._visible = False
        self._hide_timer: Any = None
        self.runs = 0

    # -- the app's side of the interface --------------------------------------------------

    def attach(self, app: App[Any]) -> None:
        """Connect to the running app: follow log switches, mount the panel, start the first server.

        Called once, when the app is mounted; later calls do nothing.
        """
        if self.app is not None:
            return
        self.app = app
        feeder = getattr(app, "feeder", None)
        source = getattr(feeder, "source", None)
        if isinstance(source, SwitchingSource) and source.on_begin is None:
            # The dashboard starts a new input in its session where the new log begins.
            source.on_begin = lambda name: feeder.session.begin_source(name)  # type: ignore[union-attr]
        base = app.screen_stack[0]
        anchor = base.query("#header")
        if anchor:
            base.mount(self.panel, after=anchor.first())
        else:
            base.mount(self.panel)
        app.set_interval(PANEL_TICK_S, self._refresh, name="restart progress")
        if self.note:
            self._event("info", self.note)
            self._notify(self.note, "information")
        if self.controller is None and self.adopt is not None:
            app.run_worker(self._adopt(), name="adopt", group="control",
                           description="find the running server", exit_on_error=False)
        elif getattr(self.controller, "record_servers", False):
            app.run_worker(self._adopt_recorded(), name="adopt recorded", group="control",
                           description="the server an earlier session left running", exit_on_error=False)
        if self.initial_steps is not None:
            steps, self.initial_steps = self.initial_steps, None
            self.start_now(steps)

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
        self._changed()

    async def _adopt_recorded(self) -> None:
        assert self.controller is not None
        try:
            note = await self.controller.adopt_recorded()
        except Exception as exc:  # a failed look is a note, never a crash
            note = f"could not check the server an earlier session left running: {exc}"
        if note:
            self._event("info", note)
            self._notify(note, "information")
        self._changed()

    def unavailable_reason(self, action: str) -> str | None:
        """Why ``r`` (or ``s``) cannot run now, or None."""
        if action == "sweep":
            return "sweeps run headless for now: `specmon sweep PROFILE` or `specmon sweep --demo`"
        if self.controller is None:
            return self.adopt_problem or "looking for the server process on the host…"
        if self.controller.busy:
            return "a restart is in progress"
        return None

    def header_text(self) -> str:
        """What the header's mode slot says while a restart runs: ``restart: loading weights 29/64``."""
        c = self.controller
        view = c.progress if c is not None and c.busy else None
        if view is None:
            return ""
        text = f"restart → {plan_label(view.steps)}: {view.phase.text}{_counter(view, view.phase)}"
        if view.eta is not None and view.eta.remaining_s is not None:
            text += f" · ETA ~{duration_text(view.eta.remaining_s) or '0s'}"
        return text

    def restart_screen(self) -> Screen[Any]:
        """The step-count dialog; choosing leads to the confirmation screen."""
        from specmon.ui.screens.restart_dialog import MeasuredStep, RestartDialog

        c = self.controller
        if c is None:
            raise RuntimeError(self.unavailable_reason("restart"))
        self._note_current()
        lo, hi = c.steps_range
        rows = self._measured_rows()
        return RestartDialog(host=c.host, lo=lo, hi=hi, current_steps=c.current_steps, rule=c.draft_rule(),
                             measured=[MeasuredStep.from_row(r) for r in rows], on_choose=self.choose)

    def sweep_screen(self) -> Screen[Any]:
        """Sweeps are not driven from the dashboard yet (``unavailable_reason`` says so)."""
        raise RuntimeError(self.unavailable_reason("sweep"))

    # -- steps of the flow ------------------------------------------------------------------

    def choose(self, steps: int) -> None:
        """The dialog chose ``steps``: build the plan and show it for confirmation."""
        if self.controller is None:
            return
        try:
            plan = self.controller.plan_for(steps)
        except (LaunchError, RestartError) as exc:
            self._notify(f"cannot restart with {steps} steps: {exc}", "error")
            return
        self._confirm(plan, "Restart")

    def go_back(self) -> None:
        """Back to the configuration before the last restart (confirmed like any restart)."""
        if self.controller is None:
            return
        try:
            plan = self.controller.go_back_plan()
        except (LaunchError, RestartError) as exc:
            self._notify(f"cannot go back: {exc}", "error")
            return
        self._confirm(plan, "Go back")

    def _confirm(self, plan: CommandPlan, title: str) -> None:
        from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen

        assert self.app is not None and self.controller is not None
        screen = ConfirmCommandsScreen(self.controller, plan, now_steps=self.controller.current_steps,
                                       eta_text=self._usual_time(), title=title)

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.run(plan, screen.text)
            else:
                self._event("info", "restart cancelled: nothing was run")

        self.app.push_screen(screen, callback=done)

    def start_now(self, steps: int) -> None:
        """Start ``steps`` without a dialog (the demo's first start): the commands go to the event log first."""
        if self.controller is None:
            return
        try:
            plan = self.controller.plan_for(steps)
        except (LaunchError, RestartError) as exc:
            self._notify(f"cannot start with {steps} steps: {exc}", "error")
            return
        self.run(plan, self.controller.describe(plan))

    def run(self, plan: CommandPlan, shown: str) -> None:
        """Run a confirmed plan in a worker; ``shown`` is what the user saw, logged first."""
        assert self.app is not None
        self._event("info", f"restart to {plan_label(plan.steps, plan.draft_tokens)} on {plan.host}: running")
        for line in shown.splitlines():
            if line.strip() and not line.startswith("host:"):
                self._event("info", "  " + line)
        self._show()
        self.runs += 1
        self.app.run_worker(self._run(plan), name="restart", group="control", description="restart the server",
                            exit_on_error=False)
        self._changed()

    async def _run(self, plan: CommandPlan) -> None:
        assert self.controller is not None
        try:
            final = await self.controller.run(plan, on_progress=self._progress)
        except RestartError as exc:
            self._notify(f"restart refused: {exc}", "error")
            return
        self._progress(final)
        took = duration_text(final.elapsed_s) or "0s"
        if final.phase is Phase.READY:
            self._event("info", f"restart {final.message} after {took}")
            self._notify(f"{final.message} — a new run begins", "information")
            if self.app is not None:
                self._hide_timer = self.app.set_timer(READY_LINGER_S, self._auto_hide, name="hide restart panel")
        else:
            self._event("error", f"restart {final.phase.text} after {took}: {final.message}")
            self._notify(f"restart {final.phase.text}: {final.message}", "error")
            self.panel.focus()
        self._changed()

    def dismiss(self) -> None:
        """Hide the panel."""
        self._visible = False
        self.panel.view = None
        if self.app is not None and self.panel.has_focus:
            self.app.screen_stack[0].set_focus(None)

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

    def _progress(self, view: RestartProgress) -> None:
        if self._visible:
            self.panel.view = view

    def _refresh(self) -> None:
        c = self.controller
        if self._visible and c is not None and c.busy:
            self.panel.view = c.progress

    def _changed(self) -> None:
        refresh = getattr(self.app, "refresh_bindings", None)
        if refresh is not None:
            refresh()

    def _note_current(self) -> None:
        feeder = getattr(self.app, "feeder", None)
        run = feeder.session.current if feeder is not None else None
        if run is not None and run.config is not None and self.controller is not None:
            self.controller.note_running_steps(run.config.steps)

    def _measured_rows(self) -> list[Any]:
        app = self.app
        builder = getattr(app, "builder", None)
        feeder = getattr(app, "feeder", None)
        if builder is None or feeder is None:
            return []
        try:
            return list(builder.table(feeder.session).rows)
        except Exception:
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

    def _event(self, level: str, text: str) -> None:
        feeder = getattr(self.app, "feeder", None)
        if feeder is None:
            return
        ts = None
        log_now = getattr(feeder, "log_now", None)
        if log_now is not None:
            ts = log_now()
        if ts is None:
            clock = getattr(self.app, "clock", time.time)
            # Log times are naive local time read as UTC: put ours on the same scale.
            now = clock()
            ts = calendar.timegm(time.localtime(now)) + now % 1.0
        feeder.session.events.append(SessionEvent(0, ts, level, text))

    def _notify(self, text: str, severity: str) -> None:
        if self.app is not None:
            self.app.notify(text, severity=severity, timeout=8)  # type: ignore[arg-type]


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
            (default ``/tmp/specmon-{port}.pid`` on the host).

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
