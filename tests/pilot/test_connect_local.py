"""``specmon connect PROFILE`` on a profile without a host: the server runs on this machine.

The simplest set-up there is (specmon on the GPU box itself) used to be refused with
"which host?". Now the log is tailed here and ``r`` runs the profile's launch commands
here with bash, no SSH anywhere. The server is the demo's simulated server, a real process,
started through the same controller and plan, and stopped by its pidfile in a finally.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.commands.remote import ConnectError, plan_connect, with_restart
from specmon.control.demo import demo_profile
from specmon.control.eta import EtaStore
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase
from specmon.control.runner import LocalRunner
from specmon.sources.local import LocalTailSource
from tests.support.connecting import SIZE, connect_args, runs_with_samples, stop_by_pidfile, write_config


async def test_r_restarts_a_server_on_this_machine_from_a_profile_without_a_host(tmp_path: Path) -> None:
    from specmon.commands.remote import connect_app
    from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
    from specmon.ui.screens.restart_dialog import RestartDialog
    from tests.support.app_factory import FIXED_NOW, options, wait_for

    srv = tmp_path / "srv"
    srv.mkdir()
    launch = demo_profile(srv, time_scale=20, startup_s=1, seed=5)
    config = write_config(tmp_path / "config.toml", "here", {"log": str(srv / "sim_2step.log")}, launch)
    plan = plan_connect(connect_args(config, "here"))
    assert plan.local and isinstance(plan.source, LocalTailSource)
    eta = EtaStore(tmp_path / "eta.json")
    try:
        assert plan.launch is not None
        starter = RestartController(plan.launch, LocalRunner(), host="localhost", eta_store=eta)
        first = starter.plan_for(2)
        starter.describe(first)
        started = await starter.run(first)
        assert started.phase is Phase.READY, (started.message, started.last_lines)
        plan, flow, runner = with_restart(plan, eta_store=eta)
        assert isinstance(runner, LocalRunner)
        app = connect_app(plan, controller=flow, options=options(), clock=lambda: FIXED_NOW, user_themes=None)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: any(r.config.steps == 2 for r in runs_with_samples(app)),
                           "samples of the 2-step run", rounds=1500)
            await wait_for(pilot, lambda: flow.controller is not None, "r to be offered", rounds=500)
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
            await pilot.press("4", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
            shown = app.screen.text
            assert "--steps 4" in shown and "sim_4step.log" in shown and "localhost" in shown
            await pilot.press("y")
            await wait_for(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                           and not flow.controller.busy, "the restart", rounds=1500)
            final = flow.controller.progress
            assert final is not None and final.phase is Phase.READY, (final.message, final.last_lines)
            await wait_for(pilot, lambda: any(r.config.steps == 4 for r in runs_with_samples(app)),
                           "samples of the 4-step run", rounds=1500)
            steps = [r.config.steps for r in runs_with_samples(app)]
            assert steps[0] == 2 and steps[-1] == 4
            assert (srv / "sim_4step.log").stat().st_size > 0  # written here, by a server started here
    finally:
        stop_by_pidfile(launch.pidfile)


@pytest.mark.parametrize("extra, says", [
    (("--port", "2222"), "--port is for SSH"),
    (("-i", "/x/id"), "--identity is for SSH"),
])
def test_ssh_options_on_a_local_profile_are_refused_with_the_reason(tmp_path: Path, extra: tuple[str, ...],
                                                                    says: str) -> None:
    launch = demo_profile(tmp_path, time_scale=20, startup_s=1)
    config = write_config(tmp_path / "config.toml", "here", {"log": str(tmp_path / "x.log")}, launch)
    with pytest.raises(ConnectError, match=says):
        plan_connect(connect_args(config, "here", *extra))


def test_a_local_profile_glob_tails_the_newest_match_and_no_match_is_one_sentence(tmp_path: Path) -> None:
    import os

    launch = demo_profile(tmp_path, time_scale=20, startup_s=1)
    config = write_config(tmp_path / "config.toml", "here", {"log_glob": str(tmp_path / "srv_*.log")}, launch)
    with pytest.raises(ConnectError, match="no file on this machine matches"):
        plan_connect(connect_args(config, "here"))
    old, new = tmp_path / "srv_a.log", tmp_path / "srv_b.log"
    new.write_text("x\n")
    old.write_text("x\n")
    os.utime(new, (2_000_000_000, 2_000_000_000))
    os.utime(old, (1_000_000_000, 1_000_000_000))
    plan = plan_connect(connect_args(config, "here"))
    assert isinstance(plan.source, LocalTailSource) and plan.source.path == new
