"""The flow paths the other pilot tests do not walk: a dialog left with escape, a second ``r`` or
``s`` while a flow's dialog is open, the sweep cancelled mid-way (after its settings were chosen).

Each flow is one worker awaiting its screens in turn; these check that leaving at any step runs
nothing, says what it should, and leaves the keys working for the next try.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from specmon.control.restart_controller import RestartController
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.restart_dialog import RestartDialog
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen
from tests.support.app_factory import StaticSource, source_app, wait_for
from tests.support.logtext import ready, server_args
from tests.support.restarting import STARTED, STOPPED, WAITING, ScriptedRunner, profile

SIZE = (110, 34)


def live_source() -> StaticSource:
    return StaticSource([[server_args(1), ready(1)]], name="/srv/sglang/logs/sglang_1step.log")


def flow_and_runner(tmp_path: Path) -> tuple[RestartFlow, ScriptedRunner]:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING])
    return RestartFlow(RestartController(profile(tmp_path), runner, host="gpu-box", current_steps=1)), runner


async def test_escape_on_the_step_count_dialog_runs_nothing_and_r_works_again(
        isolated_home: Path, tmp_path: Path) -> None:
    flow, runner = flow_and_runner(tmp_path)
    source = live_source()
    app = source_app(source, controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await source.delivered.wait()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
        assert flow.unavailable_reason("restart") == "a restart dialog is open"
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, "back to the dashboard")
        await wait_for(pilot, lambda: app.check_action("restart", ()) is True, "r offered again")
        assert not any(isinstance(s, ConfirmCommandsScreen) for s in app.screen_stack)
        # Nothing chosen: nothing to cancel either (the confirmation's "cancelled" line is not said).
        assert not any("cancelled" in e.text for e in app.feeder.session.events)
        # The next r is a fresh flow: the dialog again, and on to the commands.
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the dialog, again")
        await pilot.press("2", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
        assert app.screen.plan.steps == 2
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, "cancelled")
        assert any(e.text == "restart cancelled: nothing was run" for e in app.feeder.session.events)
    assert runner.kinds == []


async def test_a_second_r_while_the_confirmation_is_open_stacks_no_second_dialog(
        isolated_home: Path, tmp_path: Path) -> None:
    flow, runner = flow_and_runner(tmp_path)
    source = live_source()
    app = source_app(source, controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await source.delivered.wait()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
        await pilot.press("3", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
        confirm = app.screen
        depth = len(app.screen_stack)
        # The confirmation's focus is on Cancel, not an input: r reaches the app's binding.
        await pilot.press("r")
        await pilot.pause()
        assert app.screen is confirm and len(app.screen_stack) == depth
        assert not any(isinstance(s, RestartDialog) for s in app.screen_stack)
        assert app.check_action("restart", ()) is None  # greyed while the flow asks
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, "back to the dashboard")
        await wait_for(pilot, lambda: app.check_action("restart", ()) is True, "r offered again")
    assert runner.kinds == []


async def test_the_sweep_left_at_each_dialog_runs_nothing(isolated_home: Path, tmp_path: Path) -> None:
    """Escape on the settings: nothing said; escape on the commands (cancel mid-way): said, nothing ran;
    a second ``s`` while the settings are open stacks nothing."""
    flow, runner = flow_and_runner(tmp_path)
    source = live_source()
    app = source_app(source, controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await source.delivered.wait()
        sweeper = app.sweeper
        assert isinstance(sweeper, SweepFlow)
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the settings")
        settings = app.screen
        settings.set_focus(None)  # away from the input: the key reaches the app's binding
        await pilot.press("s")
        await pilot.pause()
        assert app.screen is settings and len(app.screen_stack) == 2
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, "back to the dashboard")
        assert sweeper.sweep is None and not any("sweep" in e.text for e in app.feeder.session.events)
        await wait_for(pilot, lambda: app.check_action("sweep", ()) is True, "s offered again")
        await pilot.press("s")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the settings, again")
        app.screen.query_one("#sweep-steps", Input).value = "1,2"
        app.screen.query_one("#sweep-steps", Input).focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "every plan's commands")
        assert app.screen.text.count("start:") == 2
        await pilot.press("escape")
        await wait_for(pilot, lambda: len(app.screen_stack) == 1, "cancelled")
        assert any(e.text == "sweep cancelled: nothing was run" for e in app.feeder.session.events)
        assert sweeper.sweep is None and sweeper.result is None and not sweeper.running
    assert runner.kinds == []
