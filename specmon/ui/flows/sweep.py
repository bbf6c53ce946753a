"""The dashboard's sweep: ``s`` → step list → every plan's commands, confirmed once → a sweep worker.

:class:`SweepFlow` opens the sweep screens (:mod:`specmon.ui.screens.sweep_screen`),
then runs :class:`~specmon.control.sweep.Sweep` in a named async worker on the
dashboard's own session: restarts through the restart flow's controller (each
plan's commands go to the event log as it runs, the restart panel shows its
phases), a progress line under the header, and at the end the verdict in the
event log and a Markdown report (:mod:`specmon.output.report`) in the export
folder. A second ``s`` during a sweep offers to stop it. It tells the app what
happened with messages (``SweepFlow.Started``, ``SweepFlow.Finished``, ...).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.widgets import Static

from specmon import paths
from specmon.control.launch import LaunchError, build_plan
from specmon.control.plan_restarter import controller_restarter
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import RestartProgress
from specmon.control.sweep_plan import RestartOutcome, SweepError, SweepEvent, SweepPlan
from specmon.control.sweep_result import SweepResult
from specmon.control.sweep_run import Sweep
from specmon.model.session import Session
from specmon.output.tables import SweepOutcome, sweep_outcome, sweep_outcomes
from specmon.ui.flows import Dashboard, event_time
from specmon.ui.literal import literal
from specmon.ui.messages import FlowChanged, FlowLogged
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen, SweepStopScreen, sweep_progress_text

if TYPE_CHECKING:
    from specmon.output.report import ReportData
    from specmon.ui.flows.restart import RestartFlow
    from specmon.ui.screens.sweep_verdict import SweepVerdictScreen

__all__ = ["SweepFlow"]

#: Seconds between two refreshes of the progress line.
PROGRESS_TICK_S = 0.5


class SweepFlow:
    """Runs sweeps on the dashboard through its restart flow (``app.sweeper``).

    Messages, posted from the progress line: ``Logged`` (a line for the event log),
    ``Started`` (a confirmed sweep runs) and ``Finished`` (it ended, stopped or failed).

    Args:
        restart_flow: The app's restart flow: its ``RestartController`` restarts the
            server (None while the running server is being adopted), its panel shows
            each restart.
        plan_options: More :class:`SweepPlan` fields (budgets, rule, poll interval).
        load_url: ``http://127.0.0.1:PORT`` of the server's API for the built-in load
            (default: the launch profile's ``port`` when the commands run on this
            machine; else the server's own traffic is measured).
        load_options: More :class:`~specmon.control.load.LoadConfig` fields.
    """

    class Logged(FlowLogged):
        """A line for the event log."""

    class Started(FlowChanged):
        """A confirmed sweep started."""

        def __init__(self, plan: SweepPlan) -> None:
            super().__init__()
            self.plan = plan

    class Finished(FlowChanged):
        """The sweep ended; ``result`` is None when it failed (the event log says why)."""

        def __init__(self, result: SweepResult | None) -> None:
            super().__init__()
            self.result = result

    def __init__(self, restart_flow: RestartFlow, *, plan_options: dict[str, Any] | None = None,
                 load_url: str | None = None, load_options: dict[str, Any] | None = None) -> None:
        self.flow = restart_flow
        self.plan_options = dict(plan_options or {})
        self.load_url = load_url
        self.load_options = dict(load_options or {})
        self.dashboard: Dashboard | None = None
        self.sweep: Sweep | None = None
        self.result: SweepResult | None = None
        self.report_path: Path | None = None
        #: The last sweep's one verdict, and its panel while it is open.
        self.outcome: SweepOutcome | None = None
        #: Every group's verdict of the last sweep (one per concurrency and workload), and its finding across them.
        self.groups: list[SweepOutcome] = []
        self.finding: str | None = None
        self.verdict_screen: SweepVerdictScreen | None = None
        self.last_verdict: SweepVerdictScreen | None = None  # kept after it is closed
        self._restarting: int | None = None
        self.line = Static("", id="sweep-progress", markup=False)
        self.line.display = False

    # -- the app's side ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a sweep is in progress."""
        return self.sweep is not None

    def attach(self, dashboard: Dashboard) -> None:
        """Mount the progress line under the header (called by the app on mount)."""
        if self.dashboard is not None:
            return
        self.dashboard = dashboard
        base = dashboard.screen
        anchor = base.query("#header")
        if anchor:
            base.mount(self.line, after=anchor.first())
        else:
            base.mount(self.line)
        self.line.set_interval(PROGRESS_TICK_S, self._refresh, name="sweep progress")

    def unavailable_reason(self) -> str | None:
        """Why ``s`` cannot run now, or None (during a sweep ``s`` offers to stop it)."""
        if self.running:
            return None
        c = self.flow.controller
        if c is None:
            return self.flow.unavailable_reason("restart") or "no restart controller"
        if c.busy:
            return "a restart is in progress"
        return None

    def open(self) -> None:
        """``s``: the step list, or, during a sweep, the offer to stop it."""
        if self.dashboard is None:
            return
        if self.sweep is not None:
            sweep = self.sweep

            def done(stop: bool | None) -> None:
                if stop and self.sweep is sweep:
                    sweep.request_stop()
                    self._event("warning", "sweep: stopping after the current poll (what was measured is kept)")

            self.line.app.push_screen(SweepStopScreen(sweep_progress_text(sweep.snapshot())), callback=done)
            return
        c = self.flow.controller
        if c is None:
            return
        lo, hi = c.steps_range
        minutes = self.plan_options.get("max_minutes", 10.0)
        budget = f", at most {minutes:g} min each" if minutes else ""
        from specmon.control.dims import EXTRA, used_placeholders

        p = c.profile
        used = used_placeholders([*(p.argv or []), *(p.start or []), *p.env.values()])
        self.line.app.push_screen(SweepScreen(host=c.host, lo=lo, hi=hi, budget=budget, on_choose=self.choose,
                                              dimensions=[d for d in EXTRA if d in used]))

    # -- steps --------------------------------------------------------------------------------------

    def _load_url(self, c: RestartController) -> str | None:
        if self.load_url is not None:
            return self.load_url
        port = getattr(c.profile, "port", None)
        local = type(c.runner).__name__ == "LocalRunner"
        return f"http://127.0.0.1:{port}" if port and local else None

    def choose(self, steps: tuple[int, ...], points: tuple[Any, ...] = (), strategy: str = "grid") -> None:
        """The settings were chosen: build every plan and show them all for one confirmation."""
        c = self.flow.controller
        if c is None or self.dashboard is None:
            return
        try:
            plan = SweepPlan(tuple(steps), **{"strategy": strategy, "points": tuple(points), **self.plan_options})
            # Built here only to be shown: the sweep builds (and shows again) each one as it runs.
            texts = [build_plan(c.profile, s, host=c.host, adopted=c.adopted if i == 0 else None,
                                dims=dict(pt) or None).describe() for i, (s, pt) in enumerate(plan.settings)]
        except (LaunchError, SweepError, ValueError) as exc:
            self.line.notify(f"cannot sweep: {exc}", severity="error", timeout=8)
            return
        text = "\n\n".join(texts)
        url = self._load_url(c)
        load = (f"Load: the built-in driver keeps requests going to {url}." if url else
                "Load: none from specmon — the server's own traffic is measured.")

        def done(confirmed: bool | None) -> None:
            if confirmed:
                self.run(plan, text)
            else:
                self._event("info", "sweep cancelled: nothing was run")

        self.line.app.push_screen(SweepConfirmScreen(c.host, steps, text, load, settings=len(plan.settings),
                                                     strategy=strategy), callback=done)

    def run(self, plan: SweepPlan, shown: str) -> None:
        """Start a confirmed sweep in a worker (``shown``: the commands the user confirmed)."""
        from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver, LoadError

        c = self.flow.controller
        dashboard = self.dashboard
        if c is None or dashboard is None:
            return
        load = None
        url = self._load_url(c)
        if url is not None:
            try:
                load = BackgroundLoad(LoadDriver(LoadConfig(url, **self.load_options)), cap_s=6 * 3600.0)
            except LoadError as exc:
                self._event("warning", f"sweep: no load ({exc}); the server's own traffic is measured")
        shown_restart = controller_restarter(c, show=self._show_plan)

        async def restart(steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
            # Whose commands _show_plan is about to log (a row's details show them; by step count
            # only when no other dimension varies).
            self._restarting = None if dims else steps
            return await shown_restart(steps, dims)

        def on_progress(view: RestartProgress) -> None:
            self.flow.show_progress(view)

        try:
            sweep = Sweep(plan, session=dashboard.feeder.session, restart=restart, load=load,
                          recorder=dashboard.recorder, on_event=self._on_event, server_check=c.check_server)
        except SweepError as exc:
            self.line.notify(f"cannot sweep: {exc}", severity="error", timeout=8)
            return
        self.sweep = sweep
        self.result = None
        c.listeners.append(on_progress)
        self._event("info", f"sweep of {', '.join(map(str, plan.steps))} steps on {c.host}: confirmed, running")
        self.line.display = True
        self._refresh()
        self.line.run_worker(self._run(sweep, c, on_progress), name="sweep", group="control",
                             description="sweep step counts", exit_on_error=False)
        self.line.post_message(self.Started(plan))

    async def _run(self, sweep: Sweep, c: RestartController,
                   on_progress: Callable[[RestartProgress], None]) -> None:
        try:
            result = await sweep.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._event("error", f"sweep failed: {type(exc).__name__}: {exc}")
            self.line.notify(f"sweep failed: {exc}", severity="error", timeout=10)
            self.line.post_message(self.Finished(None))
            return
        finally:
            if on_progress in c.listeners:
                c.listeners.remove(on_progress)
            self.sweep = None
            self.line.display = False
        self.result = result
        # The one verdict: the numbers the panel, the run table and the report all show.
        doc = result.to_json()
        outcome = self.outcome = sweep_outcome(doc)
        self.groups = sweep_outcomes(doc)
        self.finding = doc.get("winners_differ")
        sentence = outcome.sentence if outcome is not None else "no verdict: nothing was measured"
        state = "finished" if result.finished else "stopped"
        self._event("info", f"sweep {state}: {sentence}")
        if len(self.groups) > 1:  # every group's verdict in the log, not only the headline's
            if self.finding:
                self._event("info", f"sweep: {self.finding}")
            for group in self.groups:
                if group.sentence != sentence:
                    self._event("info", f"sweep{group.group_text}: {group.sentence}")
        for cell in result.cells:
            if cell.status == "failed":
                self._event("warning", f"sweep: {cell.label or cell.key} failed: {cell.text}")
        path = await self._write_report(result)
        if outcome is not None:
            self.show_verdict(outcome, path, finished=result.finished)
        else:
            self.line.notify(sentence, title=f"sweep {state}", timeout=15)
        self.line.post_message(self.Finished(result))

    # -- the verdict panel -------------------------------------------------------------------------

    def show_verdict(self, outcome: SweepOutcome, report: Path | None, *, finished: bool = True) -> None:
        """The end of a sweep: the baseline, the run table and the panel, from one verdict."""
        from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
        from specmon.ui.views import outcome_table

        dashboard = self.dashboard
        if dashboard is None:
            return
        note = ""
        if outcome.baseline is not None and outcome.baseline.steps == 0:
            if dashboard.baseline_to_nospec is not None:
                note = dashboard.baseline_to_nospec()
            if note:
                self._event("info", note)
            else:
                note = f"baseline: {outcome.baseline.label}, which the sweep measured"
        if dashboard.pin_table is not None:
            run = dashboard.feeder.session.current
            try:
                drafts = {r.label: r.draft_tokens for r in dashboard.table_rows()}
            except Exception:  # the table without its draft column rather than no table
                drafts = {}
            dashboard.pin_table(outcome_table(outcome, run.label if run is not None else None, drafts))
        c = self.flow.controller
        best = outcome.best
        winner_note = ""
        if c is None:
            winner_note = "restart on the winner: no restart controller"
        elif best is not None and best.steps is not None and c.current_steps == best.steps:
            winner_note = f"the server runs {best.label} already: nothing to restart"
        screen = SweepVerdictScreen(outcome, report=report, finished=finished, baseline_note=note,
                                    winner_note=winner_note, groups=self.groups, finding=self.finding)
        app = self.line.app
        if isinstance(app.screen, SweepStopScreen):
            app.screen.dismiss(False)  # the offer to stop is moot: the sweep has ended
        self.verdict_screen = self.last_verdict = screen

        def done(choice: str | None) -> None:
            self.verdict_screen = None
            if choice == "winner" and best is not None and best.steps is not None:
                self.flow.choose(best.steps)  # the commands are shown; y runs them

        app.push_screen(screen, callback=done)

    # -- the report ------------------------------------------------------------------------------

    async def _write_report(self, result: SweepResult) -> Path | None:
        from specmon.output import report as report_mod

        dashboard = self.dashboard
        assert dashboard is not None  # a sweep runs only once attached
        folder = dashboard.export_dir if dashboard.export_dir is not None else paths.export_dir()
        stamp = datetime.fromtimestamp(dashboard.clock(), tz=UTC).strftime("%Y%m%d-%H%M%S")
        path = folder / f"specmon-sweep-{stamp}.md"
        n = 2
        while path.exists():
            path = folder / f"specmon-sweep-{stamp}-{n}.md"
            n += 1
        try:
            recorder = dashboard.recorder
            if recorder is not None and not recorder.closed:
                # The recording holds the lines, the restarts and the verdict: the full report.
                recorder.flush()
                data = await asyncio.to_thread(report_mod.load_report, recorder.path)
            else:
                data = _report_from_session(dashboard.feeder.session, result, path)
            text = report_mod.to_markdown(data)
            await asyncio.to_thread(paths.write_private, path, text)  # 0600 in a 0700 folder
        except Exception as exc:
            self._event("error", f"sweep report not written: {exc}")
            self.line.notify(f"sweep report not written: {exc}", severity="error", timeout=10)
            return None
        self.report_path = path
        self._event("info", f"sweep report written to {path}")
        return path

    # -- helpers ---------------------------------------------------------------------------------

    def _refresh(self) -> None:
        sweep = self.sweep
        if sweep is not None:
            self.line.update(literal(sweep_progress_text(sweep.snapshot()), newlines=True))

    def _show_plan(self, text: str) -> None:
        if self._restarting is not None:
            self.flow.commands[self._restarting] = text  # a row's details show what ran
        for line in text.splitlines():
            if line.strip():
                self._event("info", "  " + line)

    def _on_event(self, ev: SweepEvent) -> None:
        self._event("warning" if ev.kind == "failed" else "info", f"sweep: {ev.text}")

    def _event(self, level: str, text: str) -> None:
        if self.dashboard is not None:
            self.line.post_message(self.Logged(level, text, event_time(self.dashboard)))


def _report_from_session(session: Session, result: SweepResult, path: Path) -> ReportData:
    """A report's data from the live session (no recording): the table and the sweep's verdict."""
    from specmon.model.analysis import analyze
    from specmon.model.costmodel import build_cost_model
    from specmon.output.report import ReportData

    analysis = analyze(session.runs)
    return ReportData(str(path), session, analysis, [], "log time", {r.id: r.label for r in session.runs},
                      [result.to_json()], [], {}, build_cost_model(analysis))
