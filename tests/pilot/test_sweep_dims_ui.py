"""The dashboard's ``s`` over more than the step count: the dimensions field, live validation, the strategy.

Against the demo's real simulated server (its profile has ``{topk}`` and
``{draft_tokens}``): type a tree grid, see the settings counted and the
combinations SGLang refuses named as you type, choose guided, and get every
restart's commands — with each setting's own top-k and draft tokens — on one
confirmation screen, where escape runs nothing.
"""

from __future__ import annotations

from pathlib import Path

from textual.widgets import Input, RadioButton, Static

from specmon.control.demo import stop_demo_server
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen, read_grid
from tests.support.app_factory import wait_for
from tests.support.demo_dashboard import demo_dashboard

SIZE = (120, 40)


def test_read_grid_refuses_what_the_profile_cannot_vary() -> None:
    assert read_grid((1, 2), "  ", ("topk",)) is None
    grid = read_grid((2,), "topk=1,4 draft_tokens=3,8", ("topk", "draft_tokens"))
    assert grid is not None and len(grid.settings) == 3 and len(grid.skipped) == 1
    for text, allowed, why in [("prompt_lookup_max=2", ("topk",), "has no {prompt_lookup_max}"),
                               ("topk=2", (), "nothing but the step count"),
                               ("steps=1", ("topk",), "first field"), ("topk=x", ("topk",), "not a whole number")]:
        try:
            read_grid((1,), text, allowed)
        except ValueError as exc:
            assert why in str(exc), (text, str(exc))
        else:
            raise AssertionError(f"accepted {text!r}")


async def test_s_offers_the_dimensions_and_the_strategy_validated_live(isolated_home: Path, tmp_path: Path) -> None:
    app, setup = demo_dashboard(tmp_path, recorder=None, sweeper=None)
    c = setup.controller
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the sweep dialog")
            screen = app.screen
            assert isinstance(screen, SweepScreen)
            assert screen.dimensions == ("topk", "draft_tokens")
            dims = screen.query_one("#sweep-dims", Input)
            assert not dims.disabled and "topk=1,4" in dims.placeholder
            error = screen.query_one("#sweep-error", Static)
            count = screen.query_one("#sweep-count", Static)
            screen.query_one("#sweep-steps", Input).value = "2,3"
            dims.value = "topk=1,4 prompt_lookup_max=2"
            await pilot.pause()
            assert "has no {prompt_lookup_max}" in str(error.render())
            dims.value = "topk=1,4 draft_tokens=3,4,8"
            await pilot.pause()
            assert str(error.render()) == ""
            assert count.render() and "settings: a grid restarts" in str(count.render())
            assert "left out 2 steps, topk 1, draft_tokens 4" in str(count.render())
            screen.query_one("#strategy-guided", RadioButton).value = True
            await pilot.pause()
            assert screen.strategy == "guided"
            n = len(screen.grid.settings) if screen.grid else 0
            dims.focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands")
            confirm = app.screen
            assert isinstance(confirm, SweepConfirmScreen)
            assert confirm.text.count("start:") == n == confirm.settings
            assert "--topk 4" in confirm.text and "--draft-tokens 8" in confirm.text
            assert "guided" in str(confirm.query_one("#sweep-confirm-title", Static).render())
            await pilot.press("escape")
            await pilot.pause()
            assert app.sweeper is not None and app.sweeper.sweep is None  # nothing ran
            await pilot.press("q")
    finally:
        await stop_demo_server(c, lambda _: None)
