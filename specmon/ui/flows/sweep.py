"""The dashboard's sweep: ``s`` → step list → every plan's commands, confirmed once → the sweep → its verdict.

:class:`SweepFlow` is one worker (``@work``) that awaits the sweep screens in turn
(:mod:`specmon.ui.screens.sweep_screen`), then runs :class:`~specmon.experiment.sweep_run.Sweep` on the
dashboard's own session, then awaits the verdict panel: restarts through the restart flow's controller (each
plan's commands go to the event log as it runs, the restart panel shows its
phases), a progress line under the header, and at the end the verdict in the
event log and a Markdown report (:mod:`specmon.output.report`) in the export
folder. A second ``s`` during a sweep offers to stop it. It tells the app what
happened with messages (``SweepFlow.Started``, ``SweepFlow.Finished``, ...).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import work
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from specmon import paths
from specmon.control.dims import EXTRA, used_placeholders
from specmon.control.launch import LaunchError, build_plan
from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver, LoadError
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import RestartProgress
from specmon.control.runner import LocalRunner
from specmon.experiment.plan_restarter import controller_restarter
from specmon.experiment.rounds import known_restart_s, plan_budget
from specmon.experiment.sweep_plan import RestartOutcome, SweepError, SweepEvent, SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_run import Sweep
from specmon.model.session import Session
from specmon.output.tables import SweepOutcome, sweep_outcome, sweep_outcomes
from specmon.ui.flows import Dashboard
from specmon.ui.flows.restart import GROUP, RestartFlow
from specmon.ui.literal import literal
from specmon.ui.messages import FlowChanged, FlowLogged
from specmon.ui.screens.sweep_continue import SweepContinueScreen
from specmon.ui.screens.sweep_screen import (
    SweepChoice,
    SweepConfirmScreen,
    SweepScreen,
    SweepStopScreen,
    sweep_progress_text,
)
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from specmon.ui.views import outcome_table

if TYPE_CHECKING:
    from specmon.output.report import ReportData

__all__ = ["SweepFlow"]

#: Seconds between two refreshes of the progress line.
PROGRESS_TICK_S = 0.5


@dataclass(frozen=True)
class StoppedSweep:
    """A sweep that stopped before it measured every setting: what ``s`` offers to continue.

    Attributes:
        plan: Its plan (a continued sweep runs the same one: the state file checks it).
        state: Its state file, saved as it ran (0600 in specmon's sweeps folder).
        reason: Why it stopped, in one sentence (the server's exit, the restart that failed, a stop asked for).
        commands: The text of every restart it may run, shown again before it goes on.
        load: What drives the load (the confirmation's line).
    """

    plan: SweepPlan
    state: Path
    reason: str
    commands: str
    load: str


def state_file(host: str, plan: SweepPlan) -> Path:
    """The dashboard's state file for a sweep of ``plan`` on ``host``: one per host and plan, as the CLI's."""
    digest = hashlib.sha256(json.dumps(plan.identity(), sort_keys=True).encode()).hexdigest()[:10]
    return paths.sweeps_dir() / f"dashboard-{re.sub(r'[^A-Za-z0-9_.-]', '_', host)}-{digest}.json"


def unfinished_state(path: Path, plan: SweepPlan) -> dict[str, Any] | None:
    """The saved state of this plan's sweep at ``path`` when it stopped before its verdict (None: no such
    file, another plan's, finished, or unreadable): a dashboard opened again offers to continue it."""
    from specmon.experiment.sweep_state import STATE_VERSION, read_state

    try:
        data = read_state(path)
    except (OSError, ValueError):
        return None
    if (not isinstance(data, dict) or data.get("version") != STATE_VERSION or data.get("finished")
            or data.get("identity") != plan.identity() or not isinstance(data.get("cells"), list)):
        return None
    return data


def progress_of(cells: list[dict[str, Any]]) -> str:
    """``2 of 5 settings measured; left: 3 steps, 5 steps`` from a state file's cells."""
    settled = ("done", "failed", "skipped")
    left = [str(c.get("label") or c.get("key")) for c in cells if c.get("status") not in settled]
    return (f"{len(cells) - len(left)} of {len(cells)} settings measured"
            + (f"; left: {', '.join(left)}" if left else ""))


class SweepFlow(Widget):
    """Runs sweeps on the dashboard through its restart flow (``app.sweeper``).

    A hidden widget (it owns the workers); its progress line goes under the header.
    Messages: ``Logged`` (a line for the event log),
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

    DEFAULT_CSS = "SweepFlow { display: none; }"

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
        super().__init__(id="sweep-flow")
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
        #: The last sweep, when it stopped before its verdict: ``s`` offers to continue it.
        self.stopped: StoppedSweep | None = None
        self._stop_asked = False
        self._last_restart: RestartProgress | None = None
        #: Dialogs of this flow on screen now: a second ``s`` meanwhile would stack a second one.
        self._asking = 0
        self.line = Static("", id="sweep-progress", markup=False)
        self.line.display = False

    # -- the app's side ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        """Whether a sweep is in progress."""
        return self.sweep is not None

    def attach(self, dashboard: Dashboard, screen: Screen[Any]) -> None:
        """Mount on the running dashboard's ``screen``, the progress line under ``#header`` (called on mount)."""
        if self.dashboard is not None:
            return
        self.dashboard = dashboard
        anchor = screen.query("#header")
        if anchor:
            screen.mount(self.line, after=anchor.first())
        else:
            screen.mount(self.line)
        screen.mount(self)

    def on_mount(self) -> None:
        self.set_interval(PROGRESS_TICK_S, self._refresh, name="sweep progress")

    def unavailable_reason(self) -> str | None:
        """Why ``s`` cannot run now, or None (during a sweep ``s`` offers to stop it)."""
        if self.running:
            return None
        c = self.flow.controller
        if c is None:
            return self.flow.unavailable_reason("restart") or "no restart controller"
        if c.busy:
            return "a restart is in progress"
        if self._asking:
            return "a sweep dialog is open"
        return None

    # -- the flow: one worker, a screen awaited per step ---------------------------------------------

    @work(name="sweep flow", group=GROUP, description="sweep: settings, commands, run, verdict", exit_on_error=False)
    async def open(self) -> None:
        """``s``: the settings, every plan's commands confirmed once, the sweep, its verdict; during a
        sweep, the offer to stop it instead."""
        if self.dashboard is None:
            return
        if self.sweep is not None:
            sweep = self.sweep
            if await self.app.push_screen_wait(SweepStopScreen(sweep_progress_text(sweep.snapshot()))) \
                    and self.sweep is sweep:
                sweep.request_stop()
                self._stop_asked = True
                self._event("warning", "sweep: stopping after the current poll (what was measured is kept)")
            return
        c = self.flow.controller
        if c is None:
            return
        declined = False  # "n: a new sweep" was answered already: not asked twice
        if self.stopped is not None:
            stopped = self.stopped
            answer = await self._ask(SweepContinueScreen(stopped.reason, self._left(stopped.state)))
            if answer is None:
                return
            if answer == "continue":
                await self._continue(stopped)
                return
            declined = True
        lo, hi = c.steps_range
        minutes = self.plan_options.get("max_minutes", 10.0)
        budget = f", at most {minutes:g} min each" if minutes else ""
        p = c.profile
        used = used_placeholders([*(p.argv or []), *(p.start or []), *p.env.values()])
        choice = await self._ask(SweepScreen(host=c.host, lo=lo, hi=hi, budget=budget,
                                             dimensions=[d for d in EXTRA if d in used]))
        if choice is None:
            return  # escape: nothing chosen
        built = self._plan(c, choice)
        if built is None:
            return
        plan, text = built
        url = self._load_url(c)
        load = (f"Load: the built-in driver keeps requests going to {url}." if url else
                "Load: none from specmon — the server's own traffic is measured.")
        state = state_file(c.host, plan)
        saved = unfinished_state(state, plan)
        resume = False
        if saved is not None and not declined:
            # The same sweep stopped before (in an earlier dashboard, say): go on from it?
            when = datetime.fromtimestamp(float(saved.get("saved_at") or 0), tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
            reason = f"it stopped before its verdict (last saved {when})"
            answer = await self._ask(SweepContinueScreen(reason, self._left(state)))
            if answer is None:
                return
            resume = answer == "continue"
        # The launch design states its budget before it starts (the confirmation's own line and count).
        confirm = SweepConfirmScreen(c.host, choice.steps, text, load, settings=len(plan.settings),
                                     strategy=choice.strategy, budget=plan_budget(plan))
        if not await self._ask(confirm):
            self._event("info", "sweep cancelled: nothing was run")
            return
        self.stopped = None  # a new sweep: the stopped one is no longer offered
        result = await self._sweep(plan, commands=text, load_text=load, state=state, resume=resume)
        if result is not None:
            await self._verdict(result, await self._write_report(result), finished=result.finished)

    def _left(self, state: Path) -> str:
        """What a stopped sweep measured and what is left, read from its state file."""
        from specmon.experiment.sweep_state import read_state

        try:
            cells = read_state(state)["cells"]
            text = progress_of([c for c in cells if isinstance(c, dict)])
        except (OSError, ValueError, KeyError, TypeError):
            return f"its state file {state} cannot be read now"
        return f"{text} (saved in {state})"

    async def _continue(self, stopped: StoppedSweep) -> None:
        """Go on with a stopped sweep from its state file: its commands confirmed again, then the rest of it."""
        c = self.flow.controller
        if c is None:
            return
        confirm = SweepConfirmScreen(c.host, stopped.plan.steps, stopped.commands, stopped.load,
                                     settings=len(stopped.plan.settings), strategy=stopped.plan.strategy,
                                     budget=plan_budget(stopped.plan))
        if not await self._ask(confirm):
            self._event("info", "sweep not continued: nothing was run")
            return
        self._event("info", f"sweep: continuing from {stopped.state} ({self._left(stopped.state)})")
        result = await self._sweep(stopped.plan, commands=stopped.commands, load_text=stopped.load,
                                   state=stopped.state, resume=True)
        if result is not None:
            await self._verdict(result, await self._write_report(result), finished=result.finished)

    async def _ask(self, screen: Screen[Any]) -> Any:
        """One dialog of the flow, awaited; ``s`` is greyed meanwhile (a second one would stack on it)."""
        self._asking += 1
        self.post_message(FlowChanged())
        try:
            return await self.app.push_screen_wait(screen)
        finally:
            self._asking -= 1
            self.post_message(FlowChanged())

    def _load_url(self, c: RestartController) -> str | None:
        if self.load_url is not None:
            return self.load_url
        port = c.profile.port
        local = isinstance(c.runner, LocalRunner)
        return f"http://127.0.0.1:{port}" if port and local else None

    def _plan(self, c: RestartController, choice: SweepChoice) -> tuple[SweepPlan, str] | None:
        """The sweep's plan and the text of every restart it may run (None: it cannot, and the user was told)."""
        try:
            # The launch design by default (every setting launched twice, clearly slower ones dropped,
            # a stated budget); the guided strategy chooses its own order.
            order = "given" if choice.strategy == "guided" else "launches"
            known = known_restart_s(c.eta_store, c.host)  # the budget at this host's remembered restarts
            plan = SweepPlan(tuple(choice.steps), **{"strategy": choice.strategy, "points": tuple(choice.points),
                                                     "order": order, **({"restart_s": known} if known else {}),
                                                     **self.plan_options})
            # Built here only to be shown: the sweep builds (and shows again) each one as it runs.
            texts = [build_plan(c.profile, s, host=c.host, adopted=c.adopted if i == 0 else None,
                                dims=dict(pt) or None).describe() for i, (s, pt) in enumerate(plan.settings)]
        except (LaunchError, SweepError, ValueError) as exc:
            self.notify(f"cannot sweep: {exc}", severity="error", timeout=8)
            return None
        return plan, "\n\n".join(texts)

    async def _sweep(self, plan: SweepPlan, *, commands: str = "", load_text: str = "",
                     state: Path | None = None, resume: bool = False) -> SweepResult | None:
        """Run a confirmed sweep (``resume``: go on from ``state``); its result (None: it could not start, or
        failed: the event log says why). One that stops before its verdict is kept in :attr:`stopped`."""
        c = self.flow.controller
        dashboard = self.dashboard
        if c is None or dashboard is None:
            return None
        state = state if state is not None else state_file(c.host, plan)
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
            outcome = await shown_restart(steps, dims)
            for note in c.warnings.take():  # (signal dispositions the host could not reset: once a session)
                self._event("warning", note)
            return outcome

        try:
            # Saved as it runs: a sweep that stops can be continued (s) from what it measured.
            sweep = Sweep(plan, session=dashboard.feeder.session, restart=restart, load=load,
                          recorder=dashboard.recorder, on_event=self._on_event, server_check=c.check_server,
                          state_path=state, resume=resume)
        except SweepError as exc:
            self.notify(f"cannot sweep: {exc}", severity="error", timeout=8)
            return None
        self.sweep = sweep
        self.result = None
        self.stopped = None
        self._stop_asked = False
        self._last_restart = None
        on_progress = self.flow.show_progress  # each restart of the sweep in the restart panel
        c.listeners.append(on_progress)
        c.listeners.append(self._keep_restart)
        self._event("info", f"sweep of {', '.join(map(str, plan.steps))} steps on {c.host}: confirmed, running")
        self.line.display = True
        self._refresh()
        dashboard.sweep_running(True)
        self.post_message(self.Started(plan))
        try:
            result = await sweep.run()
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            self._event("error", f"sweep failed: {type(exc).__name__}: {exc}")
            self.notify(f"sweep failed: {exc}", severity="error", timeout=10)
            self.stopped = StoppedSweep(plan, state, f"it failed: {type(exc).__name__}: {exc}", commands, load_text)
            self.post_message(self.Finished(None))
            return None
        finally:
            for listener in (on_progress, self._keep_restart):
                if listener in c.listeners:
                    c.listeners.remove(listener)
            self.sweep = None
            self.line.display = False
            dashboard.sweep_running(False)
        self.result = result
        if not result.finished:
            reason = self._why_stopped(sweep)
            self.stopped = StoppedSweep(plan, state, reason, commands, load_text)
            self._event("warning", f"sweep stopped: {reason}; s continues it from where it stopped")
        self._say_result(result)
        return result

    def _keep_restart(self, view: RestartProgress) -> None:
        self._last_restart = view  # the last restart's phase and log lines, for why a sweep stopped

    def _why_stopped(self, sweep: Sweep) -> str:
        """Why a sweep ended before its verdict, in one sentence: the server's exit, the restart that
        failed with the log's last line, or the stop that was asked for."""
        if sweep.lost:
            return sweep.lost
        if self._stop_asked:
            return "you stopped it (s, then y); what was measured is kept"
        failed = [cell for cell in sweep.cells if cell.status == "failed"]
        if failed:
            cell = failed[-1]
            text = f"{cell.label or cell.setting_label}: {cell.text or cell.reason}"
            view = self._last_restart
            last = next((line for line in reversed(view.last_lines) if line.strip()), None) if view else None
            if cell.reason == "restart" and last:
                text += f" (the log's last line: {last.strip()})"
            return text
        return "it ended before every setting was measured"

    def _say_result(self, result: SweepResult) -> None:
        """The one verdict (the numbers the panel, the run table and the report all show), in the event log."""
        doc = result.to_json()
        outcome = self.outcome = sweep_outcome(doc)
        self.groups = sweep_outcomes(doc)
        self.finding = doc.get("winners_differ")
        # With its mark and words (☆ leads, undecided): the event log says what the panel says.
        sentence = outcome.verdict_line if outcome is not None else "no verdict: nothing was measured"
        state = "finished" if result.finished else "stopped"
        self._event("info", f"sweep {state}: {sentence}")
        if len(self.groups) > 1:  # every group's verdict in the log, not only the headline's
            if self.finding:
                self._event("info", f"sweep: {self.finding}")
            for group in self.groups:
                if group.verdict_line != sentence:
                    self._event("info", f"sweep{group.group_text}: {group.verdict_line}")
        for cell in result.cells:
            if cell.status == "failed":
                self._event("warning", f"sweep: {cell.label or cell.key} failed: {cell.text}")

    # -- the verdict panel -------------------------------------------------------------------------

    async def _verdict(self, result: SweepResult, path: Path | None, *, finished: bool) -> None:
        outcome = self.outcome
        if outcome is not None:
            await self._show_verdict(outcome, path, finished=finished)
        else:
            state = "finished" if result.finished else "stopped"
            why = f" (it stopped: {self.stopped.reason}; s continues it)" if self.stopped is not None else ""
            self.notify(f"no verdict: nothing was measured{why}", title=f"sweep {state}", timeout=15)
        self.post_message(self.Finished(result))

    @work(name="sweep verdict", group=GROUP, description="the sweep's verdict panel", exit_on_error=False)
    async def show_verdict(self, outcome: SweepOutcome, report: Path | None, *, finished: bool = True) -> None:
        """The end of a sweep: the baseline, the run table and the panel, from one verdict."""
        await self._show_verdict(outcome, report, finished=finished)

    async def _show_verdict(self, outcome: SweepOutcome, report: Path | None, *, finished: bool) -> None:
        dashboard = self.dashboard
        if dashboard is None:
            return
        note = ""
        if outcome.baseline is not None and outcome.baseline.steps == 0:
            note = dashboard.baseline_to_nospec()
            if note:
                self._event("info", note)
            else:
                note = f"baseline: {outcome.baseline.label}, which the sweep measured"
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
        stopped = self.stopped.reason if self.stopped is not None and not finished else ""
        screen = SweepVerdictScreen(outcome, report=report, finished=finished, baseline_note=note,
                                    winner_note=winner_note, groups=self.groups, finding=self.finding,
                                    stopped_reason=stopped)
        if isinstance(self.app.screen, SweepStopScreen):
            self.app.screen.dismiss(False)  # the offer to stop is moot: the sweep has ended
        self.verdict_screen = self.last_verdict = screen
        try:
            choice = await self.app.push_screen_wait(screen)
        finally:
            self.verdict_screen = None
        if choice == "winner" and best is not None and best.steps is not None:
            self.flow.restart(best.steps)  # the commands are shown; y runs them

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
            self.notify(f"sweep report not written: {exc}", severity="error", timeout=10)
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
        # (a lost server's event says what happened; that s continues it is said when the sweep stops)
        self._event("warning" if ev.kind == "failed" else "info", f"sweep: {ev.text}")

    def _event(self, level: str, text: str) -> None:
        # Specmon's own events are on the wall clock, never on the log's (see RestartFlow._event).
        if self.dashboard is not None:
            self.post_message(self.Logged(level, text, self.dashboard.clock()))



def _report_from_session(session: Session, result: SweepResult, path: Path) -> ReportData:
    """A report's data from the live session (no recording): the table and the sweep's verdict."""
    from specmon.model.analysis import analyze
    from specmon.model.costmodel import build_cost_model
    from specmon.output.report import ReportData

    analysis = analyze(session.runs)
    return ReportData(str(path), session, analysis, [], "log time", {r.id: r.label for r in session.runs},
                      [result.to_json()], [], {}, build_cost_model(analysis))
