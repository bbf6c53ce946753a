"""A server that exits at once is named by its own last words, over Debian's real OpenSSH sshd.

The case that found it: a launch profile with a mistyped flag (``--max-model-lenn``). The
real server's argument parser refused it and exited within a second, before the restart's
SSH tail had read the new log, and the restart said "the server process exited (no error
in its log)" with no lines. Here a real argparse program (as vLLM's and SGLang's are)
and a program dying in a traceback are started through a managed profile over sshd and
followed by the real SSH tail.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import asyncssh
import pytest

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase
from specmon.control.runner import SSHRunner
from specmon.sources.ssh import SSHTailSource
from specmon.ssh.connect import SSHTarget
from tests.support.sshd import ClientHome, OpenSSHServer

ARGPARSE_SERVER = r'''
import argparse, time
time.sleep(1.5)  # vLLM imports for seconds before it parses its arguments
parser = argparse.ArgumentParser(prog="vllm serve")
parser.add_argument("--max-model-len", type=int)
parser.add_argument("--speculative-num-steps", type=int)
args = parser.parse_args()
print("The server is fired up and ready to roll!", flush=True)
time.sleep(600)
'''

TRACEBACK_SERVER = r'''
import sys, time
time.sleep(1.5)
print("INFO 12-01 10:00:00 [api_server.py:1] vLLM API server version 0.11.0", flush=True)
def load(path):
    raise ValueError(f"No config.json in {path}: is it a model folder?")
load(sys.argv[1])
'''


def managed(tmp_path: Path, script: str, *args: str) -> LaunchProfile:
    path = tmp_path / "server.py"
    path.write_text(script)
    return LaunchProfile(mode="managed", engine="vllm", argv=[sys.executable, str(path), *args],
                         log=str(tmp_path / "server_{steps}.log"), pidfile=str(tmp_path / "server.pid"),
                         ready_marker="ready to roll", start_timeout_s=60, stop_grace_s=5, steps_min=1, steps_max=4)


async def restart_over_ssh(server: OpenSSHServer, home: ClientHome, profile: LaunchProfile, tmp_path: Path):  # type: ignore[no-untyped-def]
    target = SSHTarget("127.0.0.1", port=server.port, user=server.user)
    conn = await asyncssh.connect("127.0.0.1", server.port, username=server.user, known_hosts=str(home.known_hosts),
                                  client_keys=[home.key], agent_path=None)
    controller = RestartController(
        profile, SSHRunner(conn), host="127.0.0.1", ready_poll_s=0.2,
        # A tail that polls every 5 s: the process is gone before it reads the lines (on the
        # real vLLM the restart followed no private tail at all, which is the same to the verdict).
        make_source=lambda p, start: SSHTailSource(target, p, lines=None if start else 0, poll_interval=5.0))
    try:
        plan = controller.plan_for(2)
        controller.describe(plan)
        return await controller.run(plan)
    finally:
        await controller.close()
        conn.close()
        try:  # a start that did not fail leaves a server: stop it by its recorded PID
            os.killpg(int((tmp_path / "server.pid").read_text().split()[0]), signal.SIGKILL)
        except (OSError, ValueError, IndexError):
            pass


@pytest.mark.sshd
async def test_a_mistyped_flag_is_named_with_the_parser_s_usage(openssh_server: OpenSSHServer,
                                                                client_home: ClientHome, tmp_path: Path) -> None:
    profile = managed(tmp_path, ARGPARSE_SERVER, "--max-model-lenn", "1024", "--speculative-num-steps", "{steps}")
    view = await restart_over_ssh(openssh_server, client_home, profile, tmp_path)
    assert view.phase is Phase.CRASHED
    assert view.message.endswith("vllm serve: error: unrecognized arguments: --max-model-lenn 1024"), view.message
    assert view.last_lines[0].startswith("usage: vllm serve") and view.last_lines[-1].startswith("vllm serve: error:")


@pytest.mark.sshd
async def test_a_traceback_at_once_is_named_by_its_exception(openssh_server: OpenSSHServer,
                                                             client_home: ClientHome, tmp_path: Path) -> None:
    profile = managed(tmp_path, TRACEBACK_SERVER, str(tmp_path / "no-model"), "{steps}")
    view = await restart_over_ssh(openssh_server, client_home, profile, tmp_path)
    assert view.phase is Phase.CRASHED
    assert "ValueError: No config.json in" in view.message, view.message
    assert any(line.startswith("Traceback") for line in view.last_lines)
