"""Every screen and dialog of the dashboard at 80×24 (designed for it) and 120×40; the main screen at 60×15.

The dashboard behind the dialogs is the whole simulated sweep, replayed to its end
(fixed wall clock, animations off, no user themes); the dialogs show plans built
from a profile with fixed paths (tests/support/dialogs.py), so nothing depends on
the machine. Toasts are cleared before each picture (they time out on a wall clock).
Update after a reviewed change with ``--snapshot-update`` and read the SVGs' text.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from textual.screen import Screen

from specmon.control.restart_progress import RestartProgress
from specmon.ui.app import SpecmonApp
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.help import HelpScreen
from specmon.ui.screens.quit_confirm import QuitConfirmScreen
from specmon.ui.screens.restart_dialog import MeasuredStep, RestartDialog
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen, SweepStopScreen
from tests.support.app_factory import SWEEP, build_app, settle, sweep_app
from tests.support.dialogs import crashed_view, fixed_controller, loading_view, ready_view

# Every screen at the four sizes of issue 30: the tiny layout, the terminal's default, a laptop, a big monitor.
SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 40), id="120x40"),
         pytest.param((60, 15), id="60x15"), pytest.param((200, 60), id="200x60")]


def on_dashboard(make_screen: Callable[[SpecmonApp], Screen[Any]] | None = None,
                 panel: RestartProgress | None = None, keys: tuple[str, ...] = ()) -> Any:
    """A run_before: the replay ends, one refresh, then a restart panel, a dialog or keys."""

    async def run_before(pilot: Any) -> None:
        app: SpecmonApp = pilot.app
        await settle(app, pilot)
        await pilot.pause()
        if panel is not None:
            flow = app.controller
            assert isinstance(flow, RestartFlow)
            flow._visible = True
            flow.panel.view = panel
        if make_screen is not None:
            app.push_screen(make_screen(app))
            await pilot.pause()
            await pilot.pause()  # mounted and focused before any key
        for key in keys:
            await pilot.press(key)
        app._tick()  # the size and panel classes now, not at the next timer tick
        await pilot.pause()
        # Then every view drawn at the final layout (the plot redraws at most once a second).
        app.refresh_now()
        await pilot.pause()
        app.dashboard._push_slow(force=True)
        app.clear_notifications()
        await pilot.pause()
        await pilot.pause()

    return run_before


def with_flow() -> SpecmonApp:
    """The replayed sweep with a restart flow on gpu-box (its commands never run)."""
    return build_app(SWEEP, controller=RestartFlow(fixed_controller()))


def measured(app: SpecmonApp) -> list[MeasuredStep]:
    return [MeasuredStep.from_row(r) for r in app.builder.table(app.feeder.session).rows]


# -- the main screen --------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_dashboard(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """Header and footer pinned, every run in the table with its configuration, units in the titles."""
    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard())


@pytest.mark.parametrize("size", SIZES)
def test_dashboard_restart_loading(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """A restart loading its weights: the panel under the header, the table still there."""
    assert snap_compare(with_flow(), terminal_size=size, run_before=on_dashboard(panel=loading_view()))


@pytest.mark.parametrize("size", SIZES)
def test_dashboard_restart_crashed(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """A crashed restart: the reason, the last lines, and g / d in the footer."""
    assert snap_compare(with_flow(), terminal_size=size, run_before=on_dashboard(panel=crashed_view()))


@pytest.mark.parametrize("size", SIZES)
def test_dashboard_restart_ready(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """A restart that reached ready: d dismisses the panel."""
    assert snap_compare(with_flow(), terminal_size=size, run_before=on_dashboard(panel=ready_view()))


# -- screens and dialogs ----------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES)
def test_help(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """The help over the dashboard (its top: what the numbers mean)."""
    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(lambda app: HelpScreen()))


@pytest.mark.parametrize("size", SIZES)
def test_help_keys(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """The help scrolled to its end: the key tables, dialogs included."""
    assert snap_compare(sweep_app(), terminal_size=size,
                        run_before=on_dashboard(lambda app: HelpScreen(), keys=("end",)))


@pytest.mark.parametrize("size", SIZES)
def test_restart_dialog(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """The step-count dialog: what was measured (acc len in full), the range, the rule."""

    def dialog(app: SpecmonApp) -> Screen[Any]:
        return RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10, rule="draft tokens = steps+1",
                             measured=measured(app))

    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(dialog))


@pytest.mark.parametrize("size", SIZES)
def test_restart_dialog_same_setting(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """Typing the step count already running says so."""

    def dialog(app: SpecmonApp) -> Screen[Any]:
        return RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10, rule="draft tokens = steps+1",
                             measured=measured(app))

    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(dialog, keys=("1", "0")))


@pytest.mark.parametrize("size", SIZES)
def test_confirmation(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """The exact commands; y: run and the Run / Cancel buttons stay on screen at 80×24."""

    def confirm(app: SpecmonApp) -> Screen[Any]:
        c = fixed_controller()
        return ConfirmCommandsScreen(c, c.plan_for(2), now_steps=1,
                                     eta_text="usually 11m 39s on gpu-box, from 2 earlier restarts")

    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(confirm))


@pytest.mark.parametrize("size", SIZES)
def test_confirmation_same_setting(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """Restarting to the setting already running: a warning above the commands."""

    def confirm(app: SpecmonApp) -> Screen[Any]:
        c = fixed_controller(current_steps=2)
        return ConfirmCommandsScreen(c, c.plan_for(2), now_steps=2)

    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(confirm))


@pytest.mark.parametrize("size", SIZES)
def test_confirmation_exact(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """``x``: the exact strings sent to the host."""

    def confirm(app: SpecmonApp) -> Screen[Any]:
        c = fixed_controller()
        return ConfirmCommandsScreen(c, c.plan_for(2), now_steps=1)

    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(confirm, keys=("x",)))


@pytest.mark.parametrize("size", SIZES)
def test_sweep_dialog(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """The step list, with a refused list (``,2``) and the reason."""
    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(
        lambda app: SweepScreen(host="gpu-box", lo=0, hi=16, budget=", at most 10 min each"),
        keys=(*"0,1,2,3,5", "ctrl+a", "ctrl+k", ",", "2")))


@pytest.mark.parametrize("size", SIZES)
def test_sweep_confirmation(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """Every restart of a sweep, for one confirmation; the keys stay on screen."""

    def confirm(app: SpecmonApp) -> Screen[Any]:
        c = fixed_controller()
        text = "\n\n".join(c.describe(c.plan_for(s)) for s in (0, 1, 2))
        return SweepConfirmScreen("gpu-box", (0, 1, 2), text, "Load: 1 request at a time from specmon.")

    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(confirm))


@pytest.mark.parametrize("size", SIZES)
def test_sweep_stop(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """``s`` during a sweep: stop it?"""
    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(
        lambda app: SweepStopScreen("sweep 2/3: 1 step, measuring · 41 samples · 3m 10s")))


@pytest.mark.parametrize("size", SIZES)
def test_quit_confirmation(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """``q`` or Ctrl+C while a restart runs: quit anyway?"""
    assert snap_compare(sweep_app(), terminal_size=size, run_before=on_dashboard(
        lambda app: QuitConfirmScreen("a restart is in progress")))
