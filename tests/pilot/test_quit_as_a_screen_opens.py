"""Quitting the moment a screen opens ends the app cleanly, for every screen the dashboard pushes.

A q pressed as a finished sweep's panel opened closed the app with ``NoMatches('#verdict-table')``:
shutdown had pruned the panel's widgets before its Mount was handled, and its Mount queried them.
The class, not the one panel: each screen is pushed, and the app told to exit at the push and one and
two ticks after it; the run must end without an exception.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from specmon.ingest.summarize import ingest_files
from specmon.model.analysis import analyze
from specmon.output.tables import sweep_outcome
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.events_screen import EventsScreen
from specmon.ui.screens.help import HelpScreen
from specmon.ui.screens.quit_confirm import QuitConfirmScreen
from specmon.ui.screens.restart_dialog import MeasuredStep, RestartDialog
from specmon.ui.screens.run_details import RunDetailsScreen
from specmon.ui.screens.sweep_continue import SweepContinueScreen
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen, SweepStopScreen
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from specmon.ui.screens.text_view import TextViewScreen
from tests.support.app_factory import settle, sweep_app
from tests.support.dialogs import fixed_controller
from tests.support.verdict_doc import sweep_doc

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = sorted(str(p) for p in (ROOT / "sample_logs").glob("sim_eagle3_*.log"))


def _verdict(app: Any) -> Any:
    outcome = sweep_outcome(sweep_doc(analyze(ingest_files(CAMPAIGN).runs), pending_below=600))
    assert outcome is not None
    return SweepVerdictScreen(outcome, report=None, finished=True)


def _confirm_commands(app: Any) -> Any:
    c = fixed_controller()
    return ConfirmCommandsScreen(c, c.plan_for(2), now_steps=1)


def _restart(app: Any) -> Any:
    rows = [MeasuredStep.from_row(r) for r in app.builder.table(app.feeder.session).rows]
    return RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10, measured=rows)


def _details(app: Any) -> Any:
    row = app.dashboard.config_row("EAGLE3 2 steps")
    assert row is not None
    return RunDetailsScreen(row, command="start: ...")


SCREENS: dict[str, Callable[[Any], Any]] = {
    "run details": _details,
    "sweep verdict": _verdict,
    "restart dialog": _restart,
    "confirm commands": _confirm_commands,
    "sweep steps": lambda app: SweepScreen(host="gpu-box", lo=0, hi=16),
    "sweep confirm": lambda app: SweepConfirmScreen("gpu-box", (0, 1, 2), "start: ...", "Load: 1 request."),
    "sweep stop": lambda app: SweepStopScreen("sweep 2/3: 1 step, measuring · 41 samples · 3m 10s"),
    "sweep continue": lambda app: SweepContinueScreen("the server exited", "left: 2 of 3 settings"),
    "quit confirm": lambda app: QuitConfirmScreen("a restart is in progress"),
    "help": lambda app: HelpScreen(),
    "events": lambda app: EventsScreen(lambda: list(app.feeder.session.events)),
    "text view": lambda app: TextViewScreen("report.md", "# a report\nline"),
}


@pytest.mark.parametrize("ticks", [0, 1, 2])
@pytest.mark.parametrize("name", sorted(SCREENS))
async def test_quitting_as_a_screen_opens_ends_cleanly(isolated_home: Path, name: str, ticks: int) -> None:
    app = sweep_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.push_screen(SCREENS[name](app))
        for _ in range(ticks):
            await pilot.pause()
        app.exit()
    # run_test re-raises what the app died of (it did: NoMatches); here it has ended, and cleanly.
    assert not app.is_running and app.return_code in (0, None)
