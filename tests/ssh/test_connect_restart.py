"""``specmon connect`` with a launch profile: ``r`` restarts the remote server over SSH.

The whole connect path: a config file with a managed ``[launch]`` table,
:func:`plan_connect`, :func:`with_restart` and :func:`connect_app`, on the
in-process asyncssh server of ``tests/support/sshd.py`` (its commands run as real
``/bin/sh`` processes here, so the simulated server is a real process). The
server is first started through the same controller and plan (never by hand),
then the test drives the dashboard with Pilot: ``r``, a step count, the
confirmation screen, and waits for the new run. Servers are stopped by their
pidfile in a finally.
"""

from __future__ import annotations

import os
from pathlib import Path

from specmon.cli import build_parser
from specmon.commands.remote import plan_connect, with_restart
from specmon.control.demo import demo_profile
from specmon.control.eta import EtaStore
from specmon.control.restart_progress import Phase
from tests.support.connecting import (
    SIZE,
    connect_args,
    runs_with_samples,
    start_through_controller,
    stop_by_pidfile,
    write_config,
)
from tests.support.sshd import AsyncSSHServer, ClientHome


async def test_r_restarts_the_remote_server_and_a_new_run_begins(
        tmp_path: Path, asyncssh_server: AsyncSSHServer, client_home: ClientHome) -> None:
    from specmon.commands.remote import connect_app
    from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
    from specmon.ui.screens.restart_dialog import RestartDialog
    from tests.support.app_factory import FIXED_NOW, options, wait_for

    srv = tmp_path / "srv"
    srv.mkdir()
    launch = demo_profile(srv, time_scale=20, startup_s=1, seed=5)
    config = write_config(tmp_path / "config.toml", "sim", {
        "host": f"specmon@127.0.0.1:{asyncssh_server.port}",
        "identity": str(client_home.ssh_dir / "id_ed25519"),
        "log": str(srv / "sim_2step.log"),
    }, launch)
    plan = plan_connect(connect_args(config, "sim"))
    assert plan.launch is not None and plan.launch.argv == launch.argv
    eta = EtaStore(tmp_path / "eta.json")
    runner = None
    try:
        await start_through_controller(plan, 2, eta)
        plan, flow, runner = with_restart(plan, eta_store=eta)
        app = connect_app(plan, controller=flow, options=options(), clock=lambda: FIXED_NOW, user_themes=None)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: any(r.config.steps == 2 for r in runs_with_samples(app)),
                           "samples of the 2-step run", rounds=1500)
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
            await pilot.press("4", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
            shown = app.screen.text
            assert "--steps 4" in shown and "sim_4step.log" in shown
            await pilot.press("y")
            await wait_for(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                           and not flow.controller.busy, "the restart", rounds=1500)
            final = flow.controller.progress
            assert final is not None and final.phase is Phase.READY, (final.message, final.last_lines)
            await wait_for(pilot, lambda: any(r.config.steps == 4 for r in runs_with_samples(app)),
                           "samples of the 4-step run", rounds=1500)
            steps = [r.config.steps for r in runs_with_samples(app)]
            assert steps[0] == 2 and steps[-1] == 4
            # Every command that ran on the host was a field of a plan the user saw.
            assert any("sim_4step.log" in cmd for cmd in asyncssh_server.commands)
            texts = [e.text for e in app.feeder.session.events]
            assert any("restart to 4 steps" in t for t in texts)
    finally:
        if runner is not None:
            runner.close()
        stop_by_pidfile(launch.pidfile)


async def test_without_a_launch_table_the_server_writing_the_log_is_adopted(
        tmp_path: Path, asyncssh_server: AsyncSSHServer, client_home: ClientHome) -> None:
    """No ``[launch]``: once the dashboard is up, the probe over SSH finds the process writing the log."""
    import subprocess
    import sys

    from specmon.commands.remote import connect_app
    from tests.support.app_factory import FIXED_NOW, options, wait_for
    from tests.support.fakeserver import FAKE_SERVER

    pkg = tmp_path / "pkg" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "3", "--port", "30179"]
    with log.open("w") as out:
        server = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                                  env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "pkg")})
    (tmp_path / "empty.toml").write_text("")
    args = build_parser().parse_args(["connect", f"specmon@127.0.0.1:{asyncssh_server.port}", "--log", str(log),
                                      "-i", str(client_home.ssh_dir / "id_ed25519"),
                                      "--config", str(tmp_path / "empty.toml"), "--no-record"])
    plan = plan_connect(args)
    assert plan.launch is None
    plan, flow, runner = with_restart(plan, eta_store=EtaStore(tmp_path / "eta.json"),
                                      pidfile=str(tmp_path / "adopted.pid"))
    try:
        app = connect_app(plan, controller=flow, options=options(), clock=lambda: FIXED_NOW, user_themes=None)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: flow.adopt_problem is not None or flow.controller is not None,
                           "the adoption's answer", rounds=1500)
            assert flow.controller is not None, flow.adopt_problem
            assert flow.controller.adopted is not None and flow.controller.adopted.pid == server.pid
            assert flow.unavailable_reason("restart") is None
            assert any("specmon-proc" in cmd for cmd in asyncssh_server.commands)  # the read-only probe ran
            # The flow's notes reach the event log as messages: the last one a moment after the controller.
            await wait_for(pilot, lambda: any(f"PID {server.pid} (3 steps)" in e.text
                                              for e in app.feeder.session.events), "the adoption's note")
    finally:
        runner.close()
        server.kill()
        server.wait()
