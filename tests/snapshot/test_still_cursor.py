"""The pictures' cursor holds still however long the setup took (tests/conftest.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.widgets import Input

from specmon.ui.screens.restart_dialog import RestartDialog
from tests.support.app_factory import settle, sweep_app


async def test_a_focused_input_looks_the_same_after_a_blink_period(snap_compare: Any, isolated_home: Path) -> None:
    # snap_compare is asked for (not called): a test that takes pictures gets the still cursor.
    app = sweep_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        app.push_screen(RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10))
        await pilot.pause()
        await pilot.pause()
        assert isinstance(app.focused, Input)
        before = app.export_screenshot()
        for _ in range(6):  # looks 0.2 s apart over 1.2 s: at least one falls in each half-second of a blink
            await pilot.pause(0.2)
            assert app.export_screenshot() == before
