"""A stopped sweep says why and goes on (issue 42, item 6): the demo's server killed mid-sweep, the verdict
panel names its exit, and ``s`` offers to continue from the saved state, which measures what was left."""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

import pytest

from specmon.commands.demo import build_demo_app, register
from specmon.control import sweep_run
from specmon.control.demo import stop_demo_server
from specmon.model.stopping import StoppingRule
from specmon.ui.screens.sweep_continue import SweepContinueScreen
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from tests.support.app_factory import FIXED_NOW, options, wait_for

SIZE = (80, 24)


def demo_args(folder: Path) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="specmon")
    register(p.add_subparsers())
    return p.parse_args(["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5",
                         "--dir", str(folder)])


async def test_a_killed_server_stops_the_sweep_with_its_reason_and_s_continues_it(
        isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The sweep asks whether its server still runs every SERVER_CHECK_S (10 s): sooner here, so the
    # kill is seen while the setting is measured, not after its samples ran out.
    monkeypatch.setattr(sweep_run, "SERVER_CHECK_S", 0.2)
    folder = tmp_path / "demo"
    folder.mkdir()
    app, setup = build_demo_app(demo_args(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None, export_dir=tmp_path)
    app.sweeper.plan_options.update(rule=StoppingRule(looks=1, min_samples=10, max_samples=400), max_minutes=5.0,
                                    poll_s=0.05, settle=1, stall_s=20.0, attach_s=20.0, order="given")
    c = setup.controller
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the step list")
            app.screen.query_one("#sweep-steps").value = "0,3"
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands")
            await pilot.press("y")

            def measuring() -> bool:
                sweep = app.sweeper.sweep
                return sweep is not None and sweep.current is not None and sweep.current.n > 0

            await wait_for(pilot, measuring, "the first setting to be measured", rounds=1500)
            assert c.started is not None
            killed = c.started.pid
            os.kill(killed, signal.SIGKILL)  # the server dies mid-sweep
            await wait_for(pilot, lambda: isinstance(app.screen, SweepVerdictScreen)
                           or (app.sweeper.result is not None and not app.sweeper.running),
                           "the sweep to stop", rounds=3000)
            stopped = app.sweeper.stopped
            assert stopped is not None, [e.text for e in app.feeder.session.events][-8:]
            assert f"PID {killed}" in stopped.reason and "exited" in stopped.reason
            assert stopped.state.exists()
            if isinstance(app.screen, SweepVerdictScreen):
                panel = app.screen
                assert f"Why it stopped: {stopped.reason}" in panel.text
                assert "continue the sweep from where it stopped" in panel.text
                await pilot.press("escape")
                await wait_for(pilot, lambda: not isinstance(app.screen, SweepVerdictScreen), "the panel closed")
            texts = [e.text for e in app.feeder.session.events]
            assert any("s continues it from where it stopped" in t for t in texts)
            assert not any("same command again" in t for t in texts)  # the CLI's advice does not fit here
            # s: the offer to continue, with the reason and what is left.
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepContinueScreen), "the offer to continue")
            offer = app.screen
            assert isinstance(offer, SweepContinueScreen)
            assert stopped.reason in offer.text and "left:" in offer.text and str(stopped.state) in offer.text
            await pilot.press("c")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands again")
            await pilot.press("y")
            await wait_for(pilot, lambda: app.sweeper.result is not None and app.sweeper.result.finished
                           and not app.sweeper.running, "the continued sweep to finish", rounds=6000)
            result = app.sweeper.result
            assert result is not None and result.finished
            assert all(cell.status in ("done", "failed", "skipped") for cell in result.cells)
            assert any(e.text.startswith("sweep: resuming:") for e in app.feeder.session.events)
            assert app.sweeper.stopped is None
            await pilot.press("escape")
            await pilot.press("q")
    finally:
        await stop_demo_server(c, lambda _: None)
