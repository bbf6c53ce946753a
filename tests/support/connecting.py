"""Helpers for connect-with-restart tests: config files, connect arguments, pidfile stops."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

from specmon.cli import build_parser
from specmon.control.connecting_runner import ConnectingRunner
from specmon.control.eta import EtaStore
from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase
from specmon.model.session import Run
from tests.support.sshd import AsyncSSHServer, ClientHome, asyncssh_server, client_home  # noqa: F401 - fixtures

SIZE = (110, 34)


def toml_value(value: Any) -> str:
    """One TOML value (strings and lists as JSON, which TOML reads the same way)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{k} = {toml_value(v)}" for k, v in value.items()) + " }"
    return json.dumps(value)


def write_config(path: Path, name: str, profile: dict[str, Any], launch: LaunchProfile) -> Path:
    """A specmon config file with one profile and its ``[launch]`` table."""
    lines = [f"[profiles.{name}]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in profile.items()]
    lines += ["", f"[profiles.{name}.launch]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in launch.model_dump(exclude_none=True, mode="json").items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def connect_args(config: Path, profile: str, *extra: str) -> Any:
    """``specmon connect PROFILE --config FILE ...`` parsed by the real command line."""
    return build_parser().parse_args(["connect", profile, "--config", str(config), "--no-record", *extra])


def pid_in(pidfile: str | None) -> int | None:
    try:
        return int(Path(pidfile or "").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop_by_pidfile(pidfile: str | None, sig: int = signal.SIGTERM) -> None:
    """Stop what the pidfile names (``sig``, then KILL): nothing outlives the test."""
    pid = pid_in(pidfile)
    if pid is None:
        return
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


async def start_through_controller(plan: Any, steps: int, eta: EtaStore) -> RestartController:
    """Start the server at ``steps`` with the profile's own plan, over SSH (shown, then run)."""
    from specmon.ssh import connect as sshconfig

    target = plan.source.target
    runner = ConnectingRunner(lambda: sshconfig.connect(target))
    controller = RestartController(plan.launch, runner, host=target.label, eta_store=eta)
    try:
        first = controller.plan_for(steps)
        controller.describe(first)  # what the user would see; the controller runs only shown plans
        final = await controller.run(first)
        assert final.phase is Phase.READY, (final.message, final.last_lines)
    finally:
        runner.close()
    return controller


def runs_with_samples(app: Any) -> list[Run]:
    return [r for r in app.feeder.session.runs if r.config is not None and r.live_accept_len]
