"""Restarts for real: the simulated SGLang server as a real process, run by the real plans.

Locally with :class:`LocalRunner` (restart changes the run; a crash during
start-up, then going back; a timeout), and once over SSH against the
in-process asyncssh server of ``tests/support/sshd.py``, whose commands run on this
machine. Every server started here is stopped by its pidfile in a finally,
and, should that fail, killed by the recorded PID.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import asyncssh
import pytest

from specmon.control.adopt_controller import controller_for_running_server
from specmon.control.demo import DemoSetup, demo_profile, make_demo, stop_demo_server
from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase, RestartProgress
from specmon.control.runner import SSHRunner
from specmon.ingest.files import ingest_lines
from specmon.model.session import ServerState, Session
from specmon.parsing import LineParser
from tests.support.sshd import AsyncSSHServer, ClientHome

FAST = {"time_scale": 50.0, "startup_s": 1.0, "seed": 5}


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def pid_in(pidfile: str | None) -> int | None:
    try:
        return int(Path(pidfile or "").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class Dashboard:
    """What the app does with a demo's source: read it into a session, a new input at each switch."""

    def __init__(self, setup: DemoSetup) -> None:
        self.session = Session()
        self.setup = setup
        setup.source.on_begin = self.session.begin_source
        self._task = asyncio.ensure_future(self._pump())

    async def _pump(self) -> None:
        parser, n = LineParser(), 1
        self.session.begin_source(self.setup.source.name)
        async for batch in self.setup.source.batches():
            n = ingest_lines(self.session, parser, batch, n)

    async def until(self, condition: Callable[[], bool], what: str, rounds: int = 300) -> None:
        """Let the log flow until ``condition()`` holds (bounded: a hang fails clearly)."""
        for _ in range(rounds):
            if condition():
                return
            await asyncio.sleep(0.05)
        raise AssertionError(f"never happened: {what}; runs: "
                             f"{[(r.id, r.label, r.state.value) for r in self.session.runs]}")

    async def close(self) -> None:
        await self.setup.source.close()
        await asyncio.wait_for(self._task, 5)


@pytest.fixture
async def demos(tmp_path: Path) -> AsyncIterator[Callable[..., DemoSetup]]:
    """Build demo set-ups; afterwards stop every server they started (pidfile, then PID)."""
    made: list[DemoSetup] = []

    def make(**kw: object) -> DemoSetup:
        folder = tmp_path / f"demo{len(made)}"
        folder.mkdir()
        prof = kw.pop("profile_factory", None)
        if prof is not None:
            kw["profile"] = prof(folder)  # type: ignore[operator]
        setup = make_demo(folder, poll_interval=0.05, **{**FAST, **kw})  # type: ignore[arg-type]
        made.append(setup)
        return setup

    try:
        yield make
    finally:
        for setup in made:
            pid = pid_in(setup.profile.pidfile)
            try:
                await stop_demo_server(setup.controller, lambda _: None)
            except (OSError, asyncssh.Error):
                pass  # the test closed its connection: the PID below is the fallback
            finally:
                await setup.controller.close()
                if pid is not None and alive(pid):
                    os.kill(pid, signal.SIGKILL)


async def start(c: RestartController, steps: int) -> RestartProgress:
    plan = c.plan_for(steps)
    assert "--steps" in c.describe(plan)
    return await c.run(plan)


async def test_restart_from_one_to_two_steps_begins_a_new_run(demos: Callable[..., DemoSetup]) -> None:
    setup = demos(steps=1)
    dash = Dashboard(setup)
    c = setup.controller
    try:
        first = await start(c, 1)
        assert first.phase is Phase.READY, (first.message, first.last_lines)
        old_pid = pid_in(setup.profile.pidfile)
        assert old_pid is not None and alive(old_pid)
        await dash.until(lambda: dash.session.current is not None and dash.session.current.accept_len,
                         "counted samples at 1 step")
        second = await start(c, 2)
        assert second.phase is Phase.READY, (second.message, second.last_lines)
        assert [p for p, _ in second.done] == [Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING]
        assert second.config == "EAGLE3 2 steps" and second.log is not None and second.log.endswith("sim_2step.log")
        new_pid = pid_in(setup.profile.pidfile)
        assert new_pid != old_pid and new_pid is not None and alive(new_pid) and not alive(old_pid)
        await dash.until(lambda: (cur := dash.session.current) is not None and cur.config is not None
                         and cur.config.steps == 2 and cur.state is ServerState.SERVING and len(cur.accept_len) > 0,
                         "a serving run at 2 steps with counted samples")
        runs = dash.session.runs
        assert [r.config.steps for r in runs if r.config] == [1, 2]
        assert runs[0].state is ServerState.STOPPED  # the old log showed the shutdown
        assert runs[-1].excluded_warmup >= 5  # warm-up excluded in the new run too
        assert c.previous_steps == 1 and c.current_steps == 2
    finally:
        await dash.close()


WRAPPER = """\
import os, sys
args = sys.argv[1:]
if args[args.index("--steps") + 1] == "2":
    args.append("--crash-on-start")  # this step count runs out of GPU memory
os.execv(sys.executable, [sys.executable, "-m", "specmon.sim.server", *args])
"""


def crashing_at_two(folder: Path) -> LaunchProfile:
    """The demo profile, through a wrapper that crashes the start-up at 2 steps only."""
    wrapper = folder / "server_wrapper.py"
    wrapper.write_text(WRAPPER)
    base = demo_profile(folder, **FAST)
    assert base.argv is not None
    argv = [sys.executable, str(wrapper), *base.argv[3:]]  # drop "python -m specmon.sim.server"
    return base.model_copy(update={"argv": argv})


async def test_crash_during_start_shows_it_then_go_back(demos: Callable[..., DemoSetup]) -> None:
    setup = demos(steps=1, profile_factory=crashing_at_two)
    dash = Dashboard(setup)
    c = setup.controller
    try:
        assert (await start(c, 1)).phase is Phase.READY
        crashed = await start(c, 2)
        assert crashed.phase is Phase.CRASHED, crashed.message
        assert "CUDA out of memory" in crashed.message
        assert any("torch.OutOfMemoryError" in line for line in crashed.last_lines)
        assert pid_in(setup.profile.pidfile) is None or not alive(pid_in(setup.profile.pidfile) or 0)
        assert crashed.previous_steps == 1 and not c.busy
        back = c.go_back_plan()
        assert back.steps == 1
        c.describe(back)
        again = await c.run(back)
        assert again.phase is Phase.READY, again.message
        await dash.until(lambda: (cur := dash.session.current) is not None and cur.config is not None
                         and cur.config.steps == 1 and cur.state is ServerState.SERVING, "serving at 1 step again")
        crashed_runs = [r for r in dash.session.runs if r.state is ServerState.CRASHED]
        assert len(crashed_runs) == 1 and crashed_runs[0].config is not None and crashed_runs[0].config.steps == 2
    finally:
        await dash.close()


async def test_timeout_when_ready_never_comes(demos: Callable[..., DemoSetup]) -> None:
    setup = demos(steps=1, profile_factory=lambda folder: demo_profile(
        folder, **FAST, ready_marker="this line is never printed", start_timeout_s=1.5))
    c = setup.controller
    final = await start(c, 1)
    assert final.phase is Phase.TIMEOUT and "not ready after 1.5 s" in final.message
    pid = pid_in(setup.profile.pidfile)
    assert pid is not None and alive(pid)  # still running: the user decides (go back, or wait)
    # Stopping at exit still finds it by the pidfile (the fixture checks nothing is left).
    outcome = await stop_demo_server(c, lambda _: None)
    assert outcome is not None and "result=stopped" in outcome and not alive(pid)


async def test_restart_over_ssh(demos: Callable[..., DemoSetup], asyncssh_server: AsyncSSHServer,
                                client_home: ClientHome) -> None:
    conn = await asyncssh.connect("127.0.0.1", asyncssh_server.port, username="specmon",
                                  known_hosts=str(client_home.known_hosts),
                                  client_keys=[client_home.key], agent_path=None)
    try:
        setup = demos(steps=1, runner=SSHRunner(conn))
        c = setup.controller
        final = await start(c, 2)
        assert final.phase is Phase.READY, (final.message, final.last_lines)
        assert any("specmon-start" in cmd for cmd in asyncssh_server.commands)  # it went through SSH
        pid = pid_in(setup.profile.pidfile)
        assert pid is not None and alive(pid)
        outcome = await stop_demo_server(c, lambda _: None)
        assert outcome is not None and "result=stopped" in outcome and not alive(pid)
    finally:
        conn.close()


async def test_adopt_the_running_server_then_restart_it(tmp_path: Path) -> None:
    """No profile: the server found on the host is restarted with its step flag rewritten, by PID first."""
    import subprocess

    from specmon.control.runner import LocalRunner
    from tests.support.fakeserver import FAKE_SERVER

    pkg = tmp_path / "pkg" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4", "--port", "30177"]
    with log.open("w") as out:
        old = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                               env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "pkg")})
    new_pid: int | None = None
    try:
        for _ in range(200):
            if "ready to roll" in log.read_text():
                break
            await asyncio.sleep(0.025)
        shown: list[str] = []
        c, server = await controller_for_running_server(LocalRunner(), log=str(log), show=shown.append,
                                                        pidfile=str(tmp_path / "adopted.pid"))
        assert shown and shown[0].startswith("probe: list the SGLang/vLLM server processes on localhost")
        assert server.pid == old.pid and c.current_steps == 3 and c.adopted == server.identity
        # The fake server answers no HTTP: readiness is its log line only.
        c.profile = c.profile.model_copy(update={"health_url": None})
        plan = c.plan_for(5)
        shown = c.describe(plan)
        assert f"PID {old.pid} (if it is still the process found" in shown
        assert "--speculative-num-steps 5 --speculative-num-draft-tokens 6" in shown
        final = await c.run(plan)
        assert final.phase is Phase.READY, (final.message, final.last_lines)
        assert old.wait(timeout=30) == 0
        new_pid = pid_in(str(tmp_path / "adopted.pid"))
        assert new_pid is not None and alive(new_pid)
        assert c.adopted is None  # from now on the pidfile names the server
        back = c.go_back_plan()
        assert back.steps == 3 and "recorded in" in back.stop.display
        await c.close()  # its lease goes with it
    finally:
        if old.poll() is None:
            old.kill()
            old.wait()
        if new_pid is not None and alive(new_pid):
            os.kill(new_pid, signal.SIGKILL)


async def test_adopt_says_clearly_when_nothing_runs(tmp_path: Path) -> None:
    from specmon.control.adopt import AdoptError
    from specmon.control.runner import Result

    class NoServers:
        async def run(self, command: str, timeout: float) -> Result:
            return Result(0, "specmon-done\0", "")

    with pytest.raises(AdoptError, match="no SGLang or vLLM server is running on gpu-box"):
        await controller_for_running_server(NoServers(), host="gpu-box")


async def test_connect_without_profile_adopts_the_server_over_ssh(
        tmp_path: Path, asyncssh_server: AsyncSSHServer, client_home: ClientHome) -> None:
    """The dashboard on a live log with no profile: the server is found over SSH, and r restarts it."""
    import subprocess

    from specmon.control.connecting_runner import ConnectingRunner
    from specmon.control.demo import local_tail_factory
    from specmon.control.eta import EtaStore
    from specmon.sources.local import LocalTailSource
    from specmon.ui.factories import make_app
    from specmon.ui.flows.restart import live_restart
    from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
    from specmon.ui.screens.restart_dialog import RestartDialog
    from tests.support.app_factory import FIXED_NOW, options, wait_for
    from tests.support.fakeserver import FAKE_SERVER

    pkg = tmp_path / "pkg" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    log = tmp_path / "server.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps", "3", "--port", "30178"]
    with log.open("w") as out:
        old = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=subprocess.STDOUT,
                               env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "pkg")})
    pidfile = str(tmp_path / "adopted.pid")
    new_pid: int | None = None

    async def connect() -> asyncssh.SSHClientConnection:
        return await asyncssh.connect("127.0.0.1", asyncssh_server.port, username="specmon",
                                      known_hosts=str(client_home.known_hosts), client_keys=[client_home.key],
                                      agent_path=None)

    runner = ConnectingRunner(connect)
    try:
        source, flow = live_restart(LocalTailSource(log, poll_interval=0.05), local_tail_factory(0.05), runner,
                                    host="127.0.0.1", launch=None, log=str(log),
                                    eta_store=EtaStore(tmp_path / "eta.json"), pidfile=pidfile)
        app = make_app(source, controller=flow, options=options(), clock=lambda: FIXED_NOW, user_themes=None)
        async with app.run_test(size=(110, 34)) as pilot:
            await wait_for(pilot, lambda: flow.controller is not None or flow.adopt_problem, "the adoption",
                           rounds=1500)
            assert flow.controller is not None, flow.adopt_problem
            # The flow's notes reach the event log as messages: the last one a moment after the controller.
            await wait_for(pilot, lambda: any(f"PID {old.pid} (3 steps)" in e.text for e in app.feeder.session.events),
                           "the adoption's note in the event log")
            texts = [e.text for e in app.feeder.session.events]
            assert any(t.startswith("probe: list the SGLang/vLLM server processes on 127.0.0.1") for t in texts)
            assert any("bash -c" in cmd and "specmon-proc" in cmd for cmd in asyncssh_server.commands)
            # The fake server answers no HTTP: readiness is its log line only.
            flow.controller.profile = flow.controller.profile.model_copy(update={"health_url": None})
            app._refresh_availability()
            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
            assert app.screen.current_steps == 3
            await pilot.press("5", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
            assert f"PID {old.pid} (if it is still the process found" in app.screen.text
            assert "--speculative-num-steps 5" in app.screen.text
            await pilot.press("y")
            await wait_for(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                           and not flow.controller.busy, "the restart", rounds=1500)
            final = flow.controller.progress
            assert final is not None and final.phase is Phase.READY, (final.message, final.last_lines)
            assert old.wait(timeout=30) == 0
            new_pid = pid_in(pidfile)
            assert new_pid is not None and alive(new_pid)
            assert any("specmon-start" in cmd for cmd in asyncssh_server.commands)
    finally:
        runner.close()
        if old.poll() is None:
            old.kill()
            old.wait()
        if new_pid is not None and alive(new_pid):
            os.kill(new_pid, signal.SIGKILL)
        Path(pidfile).unlink(missing_ok=True)
