"""While another specmon holds the server's lease, this dashboard only watches: ``r`` is greyed with
who holds it (the footer, the palette, the key itself say so), and comes back once it is given back.

Real lease: the fixed lease script holds a flock beside the pidfile in a real shell (LocalRunner).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.ui.flows import restart as restart_flow
from specmon.ui.flows.restart import RestartFlow
from tests.support.app_factory import StaticSource, source_app, wait_for
from tests.support.logtext import campaign


def profile(tmp: Path) -> LaunchProfile:
    return LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, "-c", "pass", "{steps}"],
                         log=str(tmp / "s_{steps}.log"), pidfile=str(tmp / "server.pid"),
                         ready_marker="ready to roll", start_timeout_s=30, stop_grace_s=5, stop_signal="TERM")


async def test_r_is_greyed_while_another_specmon_holds_the_server(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(restart_flow, "LEASE_RELOOK_S", 0.2)
    other = RestartController(profile(tmp_path), LocalRunner(), host="gpu-box", record_servers=True,
                              lease_action="a sweep")
    assert other.lease is not None
    await other.lease.acquire()  # a headless sweep controls the server
    flow = RestartFlow(RestartController(profile(tmp_path), LocalRunner(), host="gpu-box", record_servers=True))
    app = source_app(StaticSource([campaign(3, 90.0, 5)], name=str(tmp_path / "s_3.log")), controller=flow)
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: flow.held_by is not None, "the look at the lease", rounds=1500)
            assert "a sweep" in flow.held_by  # who, and what it does
            assert app.check_action("restart", ()) is None  # greyed in the footer
            reason = app._unavailable_reason("restart")
            assert reason is not None and "a sweep" in reason and "watching only" in reason
            assert any("watches only" in e.text for e in app.feeder.session.events)
            await pilot.press("r")  # says why, opens nothing
            await pilot.pause()
            assert not app.screen_stack[1:], app.screen_stack
            await other.lease.release()  # the sweep ends
            await wait_for(pilot, lambda: flow.held_by is None, "the lease given back", rounds=1500)
            assert app.check_action("restart", ()) is True
            # the event is a message: it reaches the session a turn of the loop after held_by clears
            await wait_for(pilot, lambda: any("gave the server back" in e.text for e in app.feeder.session.events),
                           "the event saying so", rounds=1500)
    finally:
        await other.close()
