"""The dashboard's sweep: ``s`` → step list → every plan's commands, confirmed once → a sweep worker.

:class:`SweepScreen` asks for the step counts (``0,1,2,3,5`` by default),
:class:`SweepConfirmScreen` shows the commands of *every* restart the sweep
may run, on which host, for one confirmation (nothing runs before it), and
:class:`SweepFlow` runs :class:`~specmon.control.sweep.Sweep` in a named async
worker on the dashboard's own session: restarts through the restart flow's
controller (each plan's commands go to the event log as it runs, the restart
panel shows its phases), a progress line under the header, and at the end the
verdict in the event log and a Markdown report (:mod:`specmon.output.report`) in the
export folder. A second ``s`` during a sweep offers to stop it.
"""

from __future__ import annotations

import asyncio
import calendar
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.validation import ValidationResult, Validator
from textual.widgets import Button, Input, Static

from specmon.commands.argtypes import parse_step_list
from specmon.control.launch import LaunchError, build_plan
from specmon.control.sweep import Sweep, SweepError, SweepEvent, SweepPlan, SweepResult, controller_restarter
from specmon.model.session import SessionEvent

__all__ = ["DEFAULT_STEPS", "SweepConfirmScreen", "SweepFlow", "SweepScreen", "SweepStopScreen",
           "StepListValidator", "parse_step_list", "sweep_progress_text"]

#: What the step list starts with (the real campaign's counts, 0 = the baseline).
DEFAULT_STEPS = "0,1,2,3,5"
#: Seconds between two refreshes of the progress line.
PROGRESS_TICK_S = 0.5


class StepListValidator(Validator):
    """Validates the step list with :func:`parse_step_list`."""

    def __init__(self, lo: int, hi: int) -> None:
        super().__init__()
        self.lo, self.hi = lo, hi

    def validate(self, value: str) -> ValidationResult:
        """Success for a usable list, else a failure with the reason."""
        try:
            parse_step_list(value, self.lo, self.hi)
        except ValueError as exc:
            return self.failure(str(exc))
        return self.success()


def sweep_progress_text(snapshot: dict[str, Any]) -> str:
    """One line from :meth:`Sweep.snapshot`: ``sweep 2/5 · now 1 step@1: 34 samples (next look 80) · done: …``."""
    cells = snapshot.get("cells") or []
    finished = sum(1 for c in cells if c["status"] in ("done", "failed"))
    parts = [f"sweep {finished}/{len(cells)} settings"]
    current = next((c for c in cells if c["key"] == snapshot.get("current")), None)
    if current is not None:
        look = f", next look at {current['next_look']}" if current.get("next_look") else ""
        parts.append(f"measuring {current['label'] or current['key']}: {current['samples']} samples{look}")
    elif finished < len(cells):
        parts.append("restarting")
    done = [f"{c['label'] or c['key']} {c['mean']:.1f} tok/s" if c["status"] == "done" and c["mean"] is not None
            else f"{c['label'] or c['key']} failed" for c in cells if c["status"] in ("done", "failed")]
    if done:
        parts.append("done: " + ", ".join(done))
    return " · ".join(parts) + " · s: stop"


class SweepScreen(ModalScreen["tuple[int, ...] | None"]):
    """Ask for the step counts to sweep; enter leads to the commands, escape cancels.

    Args:
        host: Where the server runs.
        lo: Smallest allowed count.
        hi: Largest allowed count.
        budget: How long each setting may take, for the hint.
        on_choose: Called with the chosen counts after the screen closed.
    """

    BINDINGS = [Binding("escape", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SweepScreen { align: center middle; }
    SweepScreen > #sweep-box {
        width: 84; max-width: 100%; height: auto;
        border: round $primary; background: $surface; padding: 0 1;
    }
    SweepScreen #sweep-title { text-style: bold; color: $primary; }
    SweepScreen #sweep-error { color: $error; height: auto; }
    SweepScreen .hint { color: $text-muted; }
    """

    def __init__(self, *, host: str, lo: int, hi: int, budget: str = "",
                 on_choose: Callable[[tuple[int, ...]], None] | None = None) -> None:
        super().__init__()
        self.host = host
        self.lo, self.hi = lo, hi
        self.budget = budget
        self._on_choose = on_choose
        default = [s for s in (0, 1, 2, 3, 5) if lo <= s <= hi]
        self.default = ",".join(map(str, default)) if default else str(lo)

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-box"):
            yield Static(f"Sweep step counts on {self.host}", id="sweep-title", markup=False)
            yield Static(f"the server is restarted once per step count ({self.lo} to {self.hi}; 0 = no speculation, "
                         f"the baseline); each is measured until the numbers are clear{self.budget}",
                         classes="hint", markup=False)
            yield Input(self.default, placeholder="step counts, e.g. 0,1,2,3,5", id="sweep-steps",
                        validators=[StepListValidator(self.lo, self.hi)], validate_on=["changed", "submitted"],
                        max_length=80)
            yield Static("", id="sweep-error", markup=False)
            yield Static("enter: next — every restart's commands are shown before anything runs · escape: cancel",
                         classes="hint", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_changed(self, event: Input.Changed) -> None:
        result = event.validation_result
        text = "; ".join(result.failure_descriptions) if result is not None and not result.is_valid else ""
        self.query_one("#sweep-error", Static).update(text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        try:
            steps = parse_step_list(event.value, self.lo, self.hi)
        except ValueError as exc:
            self.query_one("#sweep-error", Static).update(str(exc))
            return
        self.dismiss(steps)
        if self._on_choose is not None:
            self.app.call_later(self._on_choose, steps)

    def action_cancel(self) -> None:
        """Close; nothing runs."""
        self.dismiss(None)


class SweepConfirmScreen(ModalScreen[bool]):
    """Every restart's commands, for one confirmation: ``y`` runs the sweep, escape cancels.

    The focus starts on *Cancel*, so an ``enter`` carried over from the step list
    cannot start anything.
    """

    BINDINGS = [Binding("y", "confirm", "Run the sweep"), Binding("escape,n", "cancel", "Cancel")]

    DEFAULT_CSS = """
    SweepConfirmScreen { align: center middle; }
    SweepConfirmScreen > #sweep-confirm-box {
        width: 96%; max-width: 140; height: auto; max-height: 90%;
        border: round $warning; background: $surface; padding: 0 1;
    }
    SweepConfirmScreen #sweep-confirm-title { text-style: bold; color: $warning; }
    SweepConfirmScreen #sweep-confirm-scroll { height: auto; max-height: 24; margin: 1 0; background: $background; }
    SweepConfirmScreen .hint { color: $text-muted; }
    SweepConfirmScreen #sweep-confirm-buttons { height: auto; align-horizontal: right; }
    SweepConfirmScreen Button { margin-left: 2; }
    """

    def __init__(self, host: str, steps: Sequence[int], text: str, load: str) -> None:
        super().__init__()
        self.host = host
        self.steps = tuple(steps)
        self.text = text
        self.load = load

    def compose(self) -> ComposeResult:
        n = len(self.steps)
        with Vertical(id="sweep-confirm-box"):
            yield Static(f"Sweep on {self.host}: {', '.join(map(str, self.steps))} steps — up to {n} restart"
                         f"{'' if n == 1 else 's'}", id="sweep-confirm-title", markup=False)
            yield Static(f"These commands run on {self.host}, one restart per step count, in this order; the server "
                         f"is down during each restart. {self.load}", classes="hint", markup=False)
            with VerticalScroll(id="sweep-confirm-scroll"):
                yield Static(self.text, id="sweep-confirm-commands", markup=False)
            yield Static("y: run the sweep · escape: cancel, nothing runs · s on the dashboard stops it later",
                         classes="hint", markup=False)
            with Horizontal(id="sweep-confirm-buttons"):
                yield Button("Run (y)", id="sweep-run", variant="warning")
                yield Button("Cancel (esc)", id="sweep-cancel", variant="default")

    def on_mount(self) -> None:
        self.query_one("#sweep-cancel", Button).focus()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "sweep-run")

    def action_confirm(self) -> None:
        """Run the sweep."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """Close; nothing runs."""
        self.dismiss(False)


class SweepStopScreen(ModalScreen[bool]):
    """``s`` during a sweep: ``y`` stops it after the current poll (progress is kept), escape goes on."""

    BINDINGS = [Binding("y", "confirm", "Stop the sweep"), Binding("escape,n", "cancel", "Keep going")]

    DEFAULT_CSS = """
    SweepStopScreen { align: center middle; }
    SweepStopScreen > #sweep-stop-box {
        width: 72; max-width: 100%; height: auto; border: round $warning; background: $surface; padding: 0 1;
    }
    """

    def __init__(self, progress: str) -> None:
        super().__init__()
        self.progress = progress

    def compose(self) -> ComposeResult:
        with Vertical(id="sweep-stop-box"):
            yield Static("Stop the sweep?", markup=False)
            yield Static(self.progress, markup=False)
            yield Static("y: stop (the verdict covers what was measured) · escape: keep going", markup=False)

    def action_confirm(self) -> None:
        """Stop."""
        self.dismiss(True)

    def action_cancel(self) -> None:
        """Keep going."""
        self.dismiss(False)


class SweepFlow:
    """Runs sweeps on the dashboard through its restart flow (``app.sweeper``).

    Args:
        restart_flow: The app's controller: a restart flow holding a ``RestartController``
            in ``.controller`` (None while the running server is being adopted) and a
            progress ``.panel``.
        plan_options: More :class:`SweepPlan` fields (budgets, rule, poll interval).
        load_url: ``http://127.0.0.1:PORT`` of the server's API for the built-in load
            (default: the launch profile's ``port`` when the commands run on this
            machine; else the server's own traffic is measured).
        load_options: More :class:`~specmon.control.load.LoadConfig` fields.
    """

    def __init__(self, restart_flow: Any, *, plan_options: dict[str, Any] | None = None,
                 load_url: str | None = None, load_options: dict[str, Any] | None = None) -> None:
        self.flow = restart_flow
        self.plan_options = dict(plan_options or {})
        self.load_url = load_url
        self.load_options = dict(load_options or {})
        self.app: Any = None
        self.sweep: Sweep | None = None
        self.result: SweepResult | None = None
        self.report_path: Path | None = None
        self.line = Static("", id="sweep-progress", markup=False)
        self.line.display = False

    # -- the app's side ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a sweep is in progress."""
        return self.sweep is not None

    def attach(self, app: Any) -> None:
        """Mount the progress line under the header (called by the app on mount)."""
        if self.app is not None:
            return
        self.app = app
        base = app.screen_stack[0]
        anchor = base.query("#header")
        if anchor:
            base.mount(self.line, after=anchor.first())
        else:
            base.mount(self.line)
        app.set_interval(PROGRESS_TICK_S, self._refresh, name="sweep progress")

    def unavailable_reason(self) -> str | None:
        """Why ``s`` cannot run now, or None (during a sweep ``s`` offers to stop it)."""
        if self.running:
            return None
        c = getattr(self.flow, "controller", None)
        if c is None:
            reason = getattr(self.flow, "unavailable_reason", None)
            return (reason("restart") if reason is not None else None) or "no restart controller"
        if c.busy:
            return "a restart is in progress"
        return None

    def open(self) -> None:
        """``s``: the step list, or, during a sweep, the offer to stop it."""
        if self.app is None:
            return
        if self.sweep is not None:
            sweep = self.sweep

            def done(stop: bool | None) -> None:
                if stop and self.sweep is sweep:
                    sweep.request_stop()
                    self._event("warning", "sweep: stopping after the current poll (what was measured is kept)")

            self.app.push_screen(SweepStopScreen(sweep_progress_text(sweep.snapshot())), callback=done)
            return
        c = self.flow.controller
        lo, hi = c.steps_range
        minutes = self.plan_options.get("max_minutes", 10.0)
        budget = f", at most {minutes:g} min each" if minutes else ""
        self.app.push_screen(SweepScreen(host=c.host, lo=lo, hi=hi, budget=budget, on_choose=self.choose))

    # -- steps --------------------------------------------------------------------------------------

    def _load_url(self) -> str | None:
        if self.load_url is not None:
            return self.load_url
        c = self.flow.controller
        port = getattr(c.profile, "port", None)
        local = type(c.runner).__name__ == "LocalRunner"
        return f"http://127.0.0.1:{port}" if port and local else None

    def choose(self, steps: tuple[int, ...]) -> None:
        """The step list was chosen: build every plan and show them all for one confirmation."""
        c = self.flow.controller
        if c is None or self.app is None:
            return
        try:
            plan = SweepPlan(tuple(steps), **self.plan_options)
            # Built here only to be shown: the sweep builds (and shows again) each one as it runs.
            texts = [build_plan(c.profile, s, host=c.host, adopted=c.adopted if i == 0 else None).describe()
                     for i, s in enumerate(steps)]
        except (LaunchError, SweepError, ValueError) as exc:
            self.app.notify(f"cannot sweep: {exc}", severity="error", timeout=8)
            return
        text = "\n\n".join(texts)
        url = self._load_url()
        load = (f"Load: the built-in driver keeps requests going to {url}." if url else
                "Load: none from specmon — the server's own traffic is measured.")

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.run(plan, text)
            else:
                self._event("info", "sweep cancelled: nothing was run")

        self.app.push_screen(SweepConfirmScreen(c.host, steps, text, load), callback=done)

    def run(self, plan: SweepPlan, shown: str) -> None:
        """Start a confirmed sweep in a worker (``shown``: the commands the user confirmed)."""
        from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver, LoadError

        c = self.flow.controller
        app = self.app
        load = None
        url = self._load_url()
        if url is not None:
            try:
                load = BackgroundLoad(LoadDriver(LoadConfig(url, **self.load_options)), cap_s=6 * 3600.0)
            except LoadError as exc:
                self._event("warning", f"sweep: no load ({exc}); the server's own traffic is measured")
        restart = controller_restarter(c, show=self._show_plan)

        def on_progress(view: Any) -> None:
            self.flow.panel.view = view

        try:
            sweep = Sweep(plan, session=app.feeder.session, restart=restart, load=load,
                          recorder=getattr(app, "recorder", None), on_event=self._on_event)
        except SweepError as exc:
            app.notify(f"cannot sweep: {exc}", severity="error", timeout=8)
            return
        self.sweep = sweep
        self.result = None
        c.listeners.append(on_progress)
        self._event("info", f"sweep of {', '.join(map(str, plan.steps))} steps on {c.host}: confirmed, running")
        self.line.display = True
        self._refresh()
        app.run_worker(self._run(sweep, on_progress), name="sweep", group="control", description="sweep step counts",
                       exit_on_error=False)
        app.refresh_bindings()

    async def _run(self, sweep: Sweep, on_progress: Callable[[Any], None]) -> None:
        c = self.flow.controller
        app = self.app
        try:
            result = await sweep.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._event("error", f"sweep failed: {type(exc).__name__}: {exc}")
            app.notify(f"sweep failed: {exc}", severity="error", timeout=10)
            return
        finally:
            if on_progress in c.listeners:
                c.listeners.remove(on_progress)
            self.sweep = None
            self.line.display = False
            app.refresh_bindings()
        self.result = result
        verdict = result.verdict
        sentence = verdict.sentence if verdict is not None else "no verdict: nothing was measured"
        state = "finished" if result.finished else "stopped"
        self._event("info", f"sweep {state}: {sentence}")
        for cell in result.cells:
            if cell.status == "failed":
                self._event("warning", f"sweep: {cell.label or cell.key} failed: {cell.text}")
        path = await self._write_report(result)
        if path is not None:
            app.notify(f"{sentence}\nreport: {path}", title=f"sweep {state}", timeout=15)

    # -- the report ------------------------------------------------------------------------------

    async def _write_report(self, result: SweepResult) -> Path | None:
        from specmon.output import report as report_mod

        app = self.app
        folder = app.export_dir if app.export_dir is not None else Path.cwd()
        stamp = datetime.fromtimestamp(app.clock(), tz=UTC).strftime("%Y%m%d-%H%M%S")
        path = folder / f"specmon-sweep-{stamp}.md"
        n = 2
        while path.exists():
            path = folder / f"specmon-sweep-{stamp}-{n}.md"
            n += 1
        try:
            recorder = getattr(app, "recorder", None)
            if recorder is not None and not recorder.closed:
                # The recording holds the lines, the restarts and the verdict: the full report.
                recorder.flush()
                data = await asyncio.to_thread(report_mod.load_report, recorder.path)
            else:
                data = _report_from_session(app.feeder.session, result, path)
            text = report_mod.to_markdown(data)
            await asyncio.to_thread(path.write_text, text, encoding="utf-8")
        except Exception as exc:
            self._event("error", f"sweep report not written: {exc}")
            app.notify(f"sweep report not written: {exc}", severity="error", timeout=10)
            return None
        self.report_path = path
        self._event("info", f"sweep report written to {path}")
        return path

    # -- helpers ---------------------------------------------------------------------------------

    def _refresh(self) -> None:
        sweep = self.sweep
        if sweep is not None:
            self.line.update(sweep_progress_text(sweep.snapshot()))

    def _show_plan(self, text: str) -> None:
        for line in text.splitlines():
            if line.strip():
                self._event("info", "  " + line)

    def _on_event(self, ev: SweepEvent) -> None:
        self._event("warning" if ev.kind == "failed" else "info", f"sweep: {ev.text}")

    def _event(self, level: str, text: str) -> None:
        app = self.app
        feeder = getattr(app, "feeder", None)
        if feeder is None:
            return
        ts = feeder.log_now()
        if ts is None:
            # Log times are naive local time read as UTC: put ours on the same scale.
            now = app.clock()
            ts = calendar.timegm(time.localtime(now)) + now % 1.0
        feeder.session.events.append(SessionEvent(0, ts, level, text))


def _report_from_session(session: Any, result: SweepResult, path: Path) -> Any:
    """A report's data from the live session (no recording): the table and the sweep's verdict."""
    from specmon.model.analysis import analyze
    from specmon.model.costmodel import build_cost_model
    from specmon.output.report import ReportData

    analysis = analyze(session.runs)
    return ReportData(str(path), session, analysis, [], "log time", {r.id: r.label for r in session.runs},
                      [result.to_json()], [], {}, build_cost_model(analysis))
