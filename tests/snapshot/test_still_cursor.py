"""The pictures' cursor holds still however long the setup took (see conftest.py)."""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input

from specmon.ui.screens.restart_dialog import RestartDialog
from tests.support.app_factory import settle, sweep_app


async def test_a_focused_input_looks_the_same_after_a_blink_period(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.push_screen(RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10))
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.focused, Input)
        before = app.export_screenshot()
        await pilot.pause(0.75)  # one blink period and a half: an odd number of toggles
        assert app.export_screenshot() == before
