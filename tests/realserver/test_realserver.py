"""The proof on a real inference server: ``specmon connect`` restarts vLLM over OpenSSH.

Needs the CPU vLLM kit of ``/work/shared/real_server`` (``/tmp/vllmenv`` and
``/tmp/tinyllama``; ``VLLM_VENV`` / ``VLLM_MODEL`` override) and Debian's sshd.
Marked ``realserver``: excluded by default (``pytest -m realserver`` runs it);
it skips, saying what is missing, when the kit is not installed. It takes a
few minutes: vLLM starts in 25-40 s on 2 cores and logs its statistics every
10 s under load.

The flow: a real sshd on 127.0.0.1, a config file with a managed vLLM
profile (n-gram speculation, ``{steps}`` inside the ``--speculative-config``
JSON), the server started at 3 speculative tokens through the profile's plan
over SSH, bounded background load, the dashboard opened through the connect
code path with Pilot, ``r`` → 1 → confirm, and the new run measured. The server
is stopped by its pidfile in a finally; the load generator by its PID.
"""

from __future__ import annotations

import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from specmon.commands.remote import connect_app, plan_connect, with_restart
from specmon.control.eta import EtaStore
from specmon.control.launch import LaunchProfile
from specmon.control.restart import Phase
from specmon.model.session import Run
from tests.support.connecting import (
    connect_args,
    start_through_controller,
    stop_by_pidfile,
    write_config,
)
from tests.support.sshd import ClientHome, OpenSSHServer, local_user

pytestmark = pytest.mark.realserver

VENV = Path(os.environ.get("VLLM_VENV", "/tmp/vllmenv"))
MODEL = Path(os.environ.get("VLLM_MODEL", "/tmp/tinyllama"))
LOAD_GEN = Path("/work/shared/real_server/load_gen.py")
#: Upper bounds that only turn a hang into a clear failure (the machine is shared and slow).
SAMPLES_WAIT_S = 180.0
RESTART_WAIT_S = 360.0
ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1",
       "VLLM_HOST_IP": "127.0.0.1", "VLLM_CPU_KVCACHE_SPACE": "1"}


def _missing() -> str | None:
    if not (VENV / "bin" / "vllm").exists():
        return f"the vLLM kit is not installed: no {VENV / 'bin' / 'vllm'} (run /work/shared/real_server/setup.sh)"
    if not MODEL.is_dir():
        return f"the model is missing: no {MODEL} (run /work/shared/real_server/setup.sh)"
    if not LOAD_GEN.exists():
        return f"the load generator is missing: {LOAD_GEN}"
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def vllm_profile(folder: Path, port: int) -> LaunchProfile:
    """A managed vLLM launch: n-gram speculation with ``{steps}`` tokens, logs and pidfile in ``folder``."""
    common = [str(VENV / "bin" / "vllm"), "serve", str(MODEL), "--host", "127.0.0.1", "--port", "{port}",
              "--max-model-len", "1024"]
    return LaunchProfile(
        mode="managed", engine="vllm",
        argv=[*common, "--speculative-config",
              '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": 4}'],
        nospec_argv=common, env=ENV, log=str(folder / "vllm_{steps}.log"), pidfile=str(folder / "vllm.pid"),
        port=port, steps_min=0, steps_max=8, ready_marker="Application startup complete",
        health_url=f"http://127.0.0.1:{port}/health", start_timeout_s=300, stop_grace_s=20,
    )


def measured(run: Run) -> list[float]:
    """Accept lengths of intervals that drafted something (warm-up is 0 here)."""
    return list(run.accept_len)


def runs_by_steps(app: Any, steps: int) -> list[Run]:
    return [r for r in app.feeder.session.runs if r.config is not None and r.config.steps == steps]


async def wait_until(pilot: Any, condition: Any, what: str, limit_s: float) -> None:
    """Let the app run until ``condition()`` holds; the bound only turns a hang into a failure."""
    deadline = time.monotonic() + limit_s
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never happened within {limit_s:g} s: {what}")
        await pilot.pause(0.5)


def summary_line(run: Run) -> str:
    tput = [t for t in run.throughput if t > 0] or [t for t in run.live_throughput if t and t > 0]
    mean_tps = f"{statistics.fmean(tput):.1f}" if tput else "n/a"
    return (f"steps={run.config.steps if run.config else '?'} samples={len(run.accept_len)} "
            f"mean_accept_len={statistics.fmean(run.accept_len):.3f} "
            f"mean_accept_rate={statistics.fmean(run.accept_rate):.3f} mean_tok/s={mean_tps}")


async def test_connect_restarts_a_real_vllm_server_from_3_to_1_tokens(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
    from specmon.ui.screens.restart_dialog import RestartDialog

    missing = _missing()
    if missing:
        pytest.skip(missing)
    from tests.support.app_factory import options

    folder = tmp_path / "vllm"
    folder.mkdir()
    port = _free_port()
    launch = vllm_profile(folder, port)
    config = write_config(tmp_path / "config.toml", "cpu-vllm", {
        "host": f"{local_user()}@127.0.0.1", "port": openssh_server.port,
        "identity": str(client_home.ssh_dir / "id_ed25519"), "log": str(folder / "vllm_3.log"), "engine": "vllm",
    }, launch)
    plan = plan_connect(connect_args(config, "cpu-vllm", "--warmup", "0"))
    assert plan.launch is not None
    eta = EtaStore(tmp_path / "eta.json")
    load: subprocess.Popen[bytes] | None = None
    runner = None
    try:
        # The first start goes through the profile's plan over SSH, as r would run it.
        await start_through_controller(plan, 3, eta)
        with open(tmp_path / "load.json", "wb") as out:
            load = subprocess.Popen([sys.executable, str(LOAD_GEN), "--port", str(port), "--duration", "420",
                                     "--concurrency", "4"], stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
        plan, flow, runner = with_restart(plan, eta_store=eta)
        app = connect_app(plan, controller=flow, options=options(warmup=0, window=plan.window), user_themes=None)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: any(len(measured(r)) >= 2 for r in runs_by_steps(app, 3)),
                             "two SpecDecoding samples of the 3-token run", SAMPLES_WAIT_S)
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog", 30)
            await pilot.press("1", "enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands", 30)
            shown = app.screen.text
            assert '"num_speculative_tokens": 1' in shown and "vllm_1.log" in shown
            await pilot.press("y")
            await wait_until(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                             and not flow.controller.busy, "the restart to end", RESTART_WAIT_S)
            final = flow.controller.progress
            assert final is not None and final.phase is Phase.READY, (final.message, final.last_lines)
            await wait_until(pilot, lambda: any(len(measured(r)) >= 2 for r in runs_by_steps(app, 1)),
                             "two SpecDecoding samples of the 1-token run", SAMPLES_WAIT_S)
            three = max(runs_by_steps(app, 3), key=lambda r: len(r.accept_len))
            one = max(runs_by_steps(app, 1), key=lambda r: len(r.accept_len))
            runs = [r for r in app.feeder.session.runs if r.used]
            print("\nreal vLLM over OpenSSH, restarted from the dashboard:")
            for run in (three, one):
                print("  " + summary_line(run))
            print(f"  restart: {final.message} after {final.elapsed_s:.0f} s; runs in the session: "
                  f"{[r.config.steps if r.config else None for r in runs]}")
            assert [three.config.steps, one.config.steps] == [3, 1]  # type: ignore[union-attr]
            assert three.id < one.id
            for run, top in ((three, 4.0), (one, 2.0)):
                assert len(run.accept_len) >= 2
                mean_len = statistics.fmean(run.accept_len)
                assert 1.0 < mean_len <= top, (run.config, list(run.accept_len))
                assert all(0.0 < r <= 1.0 for r in run.accept_rate), list(run.accept_rate)
    finally:
        if load is not None and load.poll() is None:
            load.send_signal(signal.SIGTERM)
            try:
                load.wait(10)
            except subprocess.TimeoutExpired:
                load.kill()
                load.wait()
        if runner is not None:
            runner.close()
        stop_by_pidfile(launch.pidfile, signal.SIGINT)
