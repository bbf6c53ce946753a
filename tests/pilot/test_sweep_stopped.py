"""A stopped sweep says why and goes on (issue 42, item 6): the demo's server killed mid-sweep, the verdict
panel names its exit, and ``s`` offers to continue from the saved state, which measures what was left;
a dashboard that no longer remembers it (opened again) finds the saved state when the same sweep is asked for."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from specmon.control.demo import stop_demo_server
from specmon.experiment import sweep_run
from specmon.model.stopping import StoppingRule
from specmon.ui.screens.sweep_continue import SweepContinueScreen
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from tests.support.app_factory import wait_for
from tests.support.demo_dashboard import demo_dashboard

SIZE = (80, 24)


def demo_app(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    # The sweep asks whether its server still runs every SERVER_CHECK_S (10 s): sooner here, so the
    # kill is seen while the setting is measured, not after its samples ran out.
    monkeypatch.setattr(sweep_run, "SERVER_CHECK_S", 0.2)
    app, setup = demo_dashboard(tmp_path)
    app.sweeper.plan_options.update(rule=StoppingRule(looks=1, min_samples=10, max_samples=400), max_minutes=5.0,
                                    poll_s=0.05, settle=1, stall_s=20.0, attach_s=20.0, order="given")
    return app, setup.controller


async def ask_for_the_sweep(app: Any, pilot: Any) -> None:
    await pilot.press("s")
    await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the step list")
    app.screen.query_one("#sweep-steps").value = "0,3"
    await pilot.press("enter")


async def kill_mid_sweep(app: Any, pilot: Any, c: Any) -> int:
    """Sweep 0 and 3 steps; kill the server as the second setting starts to be measured (the first is
    measured: the stop ends on a verdict panel); wait for that panel."""
    await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
    killed: list[int] = []
    told = app.sweeper._on_event

    def on_event(ev: Any) -> None:  # the sweep's own event, so the kill lands mid-setting however loaded the machine
        told(ev)
        if ev.text.startswith("measuring ") and ev.text.endswith("source: log)"):
            starts.append(ev.text)
            if len(starts) == 2 and c.started is not None:
                killed.append(c.started.pid)
                os.kill(c.started.pid, signal.SIGKILL)  # the server dies mid-sweep

    starts: list[str] = []
    app.sweeper._on_event = on_event
    await ask_for_the_sweep(app, pilot)
    await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands")
    await pilot.press("y")
    # Something was measured: the stop ends on the verdict panel (after the report is written).
    try:
        await wait_for(pilot, lambda: isinstance(app.screen, SweepVerdictScreen), "the stopped sweep's panel",
                       rounds=3000)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; the last events: {[e.text for e in app.feeder.session.events][-12:]}") from None
    app.sweeper._on_event = told
    assert killed
    return killed[0]


async def continues_to_the_end_and_quits(app: Any, pilot: Any) -> None:
    """c on the offer to continue: the sweep goes on from its state to the end; then the panel and the app close."""
    await pilot.press("c")
    await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands again")
    await pilot.press("y")
    await wait_for(pilot, lambda: app.sweeper.result is not None and app.sweeper.result.finished
                   and not app.sweeper.running, "the continued sweep to finish", rounds=6000)
    result = app.sweeper.result
    assert all(cell.status in ("done", "failed", "skipped") for cell in result.cells)
    assert any(e.text.startswith("sweep: resuming:") for e in app.feeder.session.events)
    assert app.sweeper.stopped is None
    await pilot.press("escape")
    await pilot.press("q")


async def test_a_killed_server_stops_the_sweep_with_its_reason_and_s_continues_it(
        isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, c = demo_app(tmp_path, monkeypatch)
    try:
        async with app.run_test(size=SIZE) as pilot:
            killed = await kill_mid_sweep(app, pilot, c)
            stopped = app.sweeper.stopped
            assert stopped is not None, [e.text for e in app.feeder.session.events][-8:]
            assert f"PID {killed}" in stopped.reason and "exited" in stopped.reason
            assert stopped.state.exists()
            panel = app.screen
            assert isinstance(panel, SweepVerdictScreen)
            assert f"Why it stopped: {stopped.reason}" in panel.text
            assert "continue the sweep from where it stopped" in panel.text
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, SweepVerdictScreen), "the panel closed")
            await wait_for(pilot, lambda: any("s continues it from where it stopped" in e.text
                                              for e in app.feeder.session.events), "the event log's advice")
            texts = [e.text for e in app.feeder.session.events]
            assert not any("same command again" in t for t in texts)  # the CLI's advice does not fit here
            # s: the offer to continue, with the reason and what is left.
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepContinueScreen), "the offer to continue")
            offer = app.screen
            assert isinstance(offer, SweepContinueScreen)
            assert stopped.reason in offer.text and "left:" in offer.text and str(stopped.state) in offer.text
            await continues_to_the_end_and_quits(app, pilot)
    finally:
        await stop_demo_server(c, lambda _: None)


async def test_the_same_sweep_asked_for_again_is_offered_from_its_saved_state(
        isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app, c = demo_app(tmp_path, monkeypatch)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await kill_mid_sweep(app, pilot, c)
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, SweepVerdictScreen), "the panel closed")
            app.sweeper.stopped = None  # a dashboard opened again remembers nothing: the state file does
            await ask_for_the_sweep(app, pilot)
            await wait_for(pilot, lambda: isinstance(app.screen, SweepContinueScreen), "the saved sweep offered")
            assert "last saved" in app.screen.text and "left:" in app.screen.text
            await continues_to_the_end_and_quits(app, pilot)
    finally:
        await stop_demo_server(c, lambda _: None)
