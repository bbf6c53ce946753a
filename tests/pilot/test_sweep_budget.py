"""The dashboard's ``s`` runs the launch design by default, and its confirmation states the budget first."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

from textual.widgets import Static

from specmon.control.demo import DEMO_LAUNCH_CV, stop_demo_server
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen
from tests.support.app_factory import wait_for
from tests.support.demo_dashboard import demo_dashboard

SIZE = (120, 40)


async def test_s_states_the_launch_designs_budget_before_anything_restarts(isolated_home: Path,
                                                                         tmp_path: Path) -> None:
    app, setup = demo_dashboard(tmp_path, recorder=None)
    c = setup.controller
    # The demo's simulated server differs from launch to launch, as the sweep's plan says.
    assert f"--launch-cv {100 * DEMO_LAUNCH_CV:g}" in " ".join(setup.profile.argv or [])
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the step list")
            app.screen.query_one("#sweep-steps").value = "0,2"  # type: ignore[attr-defined]
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands")
            screen = app.screen
            assert isinstance(screen, SweepConfirmScreen)
            # Two settings, up to 16 rounds each, in the demo's clock (its restart is the simulated start-up),
            # read as drawn: the title's count is the budget's (it once said "up to 2" above "at most 32"),
            # and the budget is its own sentence (it was joined to the load's with a newline drawn as ␊).
            title = str(screen.query_one("#sweep-confirm-title", Static).render())
            drawn = str(screen.query_one("#sweep-confirm-budget", Static).render())
            assert "0, 2 steps — up to 32 restarts" in title
            assert drawn.startswith("Budget: at most 32 restarts (16 rounds of 2 settings), about ")
            assert (f"0.5 s a restart (the simulated server runs 200× faster than a real one, its launches "
                    f"{100 * DEMO_LAUNCH_CV:g}% apart)") in drawn
            assert "every setting is launched twice before any is judged" in drawn
            assert not any("␊" in str(w.render()) for w in screen.query(Static))
            assert app.sweeper.sweep is None  # nothing runs before the confirmation
            await pilot.press("escape")
            await pilot.pause()
            assert app.sweeper.sweep is None
    finally:
        await asyncio.wait_for(stop_demo_server(c, lambda _: None), 30)
        shutil.rmtree(tmp_path / "demo", ignore_errors=True)


async def test_a_best_arm_sweeps_confirmation_says_whom_it_restarts_and_its_own_count(isolated_home: Path) -> None:
    from specmon.experiment.rounds import plan_budget
    from specmon.experiment.stats import bai
    from specmon.experiment.sweep_plan import SweepPlan
    from tests.support.app_factory import settle, sweep_app

    for design, words, restarts in (
            (bai.NAME, "then only the leader and its closest challenger", 4 * bai.WARMUP + 2 * (40 - bai.WARMUP)),
            ("today", "each setting restarted in rounds", 4 * 16)):
        stated = plan_budget(SweepPlan((0, 1, 3, 5), order="launches", resolve_pct=5.0, design=design))
        assert stated is not None
        app = sweep_app()
        async with app.run_test(size=(80, 24)) as pilot:
            await settle(app, pilot)
            app.push_screen(SweepConfirmScreen("gpu-box", (0, 1, 3, 5), "start: ...", "Load: 1 request at a time.",
                                               budget=stated))
            for _ in range(4):
                await pilot.pause()
            screen = app.screen
            assert isinstance(screen, SweepConfirmScreen)
            drawn = " ".join(str(w.render()) for w in screen.query(Static))
            assert f"up to {restarts} restarts" in drawn and words in drawn, drawn
            assert f"Budget: at most {restarts} restarts" in drawn
