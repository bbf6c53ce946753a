"""Toasts do not pile up over the panels (issue 30, item 6): at most two on a small terminal, four on a
larger one, the newest kept (what the dashboard says in a toast it also writes to the event log)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets._toast import Toast

from specmon.ui.base import MAX_TOASTS, MAX_TOASTS_SMALL
from tests.support.app_factory import settle, sweep_app


@pytest.mark.parametrize(("size", "cap"), [((80, 24), MAX_TOASTS_SMALL), ((120, 40), MAX_TOASTS)])
async def test_only_the_newest_toasts_stay(isolated_home: Path, size: tuple[int, int], cap: int) -> None:
    app = sweep_app()
    async with app.run_test(size=size, notifications=True) as pilot:
        await settle(app, pilot)
        for i in range(7):
            app.notify(f"message {i}", timeout=60)
            await pilot.pause()
        await pilot.pause()
        for _ in range(5):
            await pilot.pause()
        shown = [t._notification.message for t in app.query(Toast)]  # (textual is pinned)
        assert sorted(shown) == [f"message {i}" for i in range(7 - cap, 7)], shown  # the newest, on screen
