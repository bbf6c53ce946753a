"""The next dashboard with the same profile says the recorded server still runs, and adopts it."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner
from specmon.ui.flows.restart import RestartFlow
from tests.support.app_factory import StaticSource, source_app, wait_for
from tests.support.logtext import campaign
from tests.support.ptyproc import running

SERVER = r'''
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
print("The server is fired up and ready to roll!", flush=True)
while True:
    time.sleep(0.05)
'''


async def test_the_dashboard_says_the_recorded_server_still_runs(tmp_path: Path) -> None:
    script = tmp_path / "server.py"
    script.write_text(SERVER)
    profile = LaunchProfile(mode="managed", engine="sglang", argv=[sys.executable, str(script), "{steps}"],
                            log=str(tmp_path / "s_{steps}.log"), pidfile=str(tmp_path / "server.pid"),
                            ready_marker="ready to roll", start_timeout_s=30, stop_grace_s=5, stop_signal="TERM")
    earlier = RestartController(profile, LocalRunner(), host="gpu-box", record_servers=True, ready_poll_s=0.1)
    plan = earlier.plan_for(3)
    earlier.describe(plan)
    pid = None
    try:
        assert (await earlier.run(plan)).phase.value == "ready"
        pid = int((tmp_path / "server.pid").read_text().split()[0])
        await earlier.close()  # the earlier session exits (its lease goes with it), leaving the server running
        # A new session.
        flow = RestartFlow(RestartController(profile, LocalRunner(), host="gpu-box", record_servers=True))
        source = StaticSource([campaign(3, 90.0, 5)], name=str(tmp_path / "s_3.log"))
        app = source_app(source, controller=flow)
        async with app.run_test(size=(110, 34)) as pilot:
            await wait_for(pilot, lambda: any("is still running" in e.text for e in app.feeder.session.events),
                           "the note about the recorded server", rounds=1500)
            text = next(e.text for e in app.feeder.session.events if "is still running" in e.text)
            assert f"PID {pid} (3 steps" in text and "adopted from" in text
            assert flow.controller is not None and flow.controller.current_steps == 3
        assert running(pid)  # looking never touches it
    finally:
        if pid is not None and running(pid):
            os.killpg(pid, signal.SIGTERM)
