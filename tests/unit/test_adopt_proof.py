"""Adoption only of a server that provably writes the followed log; otherwise say what was found.

Real fake-server processes (``tests/support/fakeserver.py``) are found by the real
probe, locally and over the in-process asyncssh server. Other servers may run on
this machine at the same time (other tests): the assertions pick by PID.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import asyncssh
import pytest

from specmon.control.adopt import AdoptError, ServerProcess, parse_probe
from specmon.control.adopt_controller import controller_for_running_server, not_adopting
from specmon.control.connecting_runner import ConnectingRunner
from specmon.control.runner import LocalRunner
from tests.support.fakeserver import FAKE_SERVER
from tests.support.sshd import AsyncSSHServer, ClientHome


def _server(**kw: object) -> ServerProcess:
    fields: dict[str, object] = dict(pid=123, starttime=1, ppid=1, pgid=123, engine="vllm",
                                     argv=("vllm", "serve", "/m"), cwd="/srv", stdout="/x.log")
    fields.update(kw)
    return ServerProcess(**fields)  # type: ignore[arg-type]


@pytest.mark.parametrize("kw, log, how", [
    ({}, "/x.log", "stdout"),
    ({}, "/srv/../x.log", "stdout"),
    ({"stdout": "pipe:[77]", "stderr": "/x.log"}, "/x.log", "stderr"),
    ({"stdout": "/dev/null", "argv": ("vllm", "serve", "/m", "--log-file", "logs/v.log")}, "/srv/logs/v.log",
     "--log-file"),
    ({"stdout": "socket:[9]", "argv": ("vllm", "serve", "--uvicorn-log-path=/var/v.log")}, "/var/v.log",
     "--uvicorn-log-path"),
    ({}, "/y.log", None),
    ({"stdout": "/x.log (deleted)"}, "/x.log", None),
    ({"stdout": "pipe:[1]", "argv": ("vllm", "serve", "--log-level", "x.log")}, "/x.log", None),
])
def test_what_counts_as_proof(kw: dict[str, object], log: str, how: str | None) -> None:
    assert _server(**kw).writes(log) == how


def test_the_refusal_says_what_was_found() -> None:
    assert not_adopting([_server()], "/y.log", "gpu-box") == (
        "1 vLLM server found on gpu-box (PID 123) but it writes /x.log, not /y.log: not adopting; "
        "follow the log it writes, or write a launch profile")
    text = not_adopting([_server(), _server(pid=456, engine="sglang", stdout="pipe:[3]")], "/y.log", "h")
    assert text.startswith("2 servers found on h (vLLM PID 123 writes /x.log; SGLang PID 456 writes to a pipe) "
                           "but none writes /y.log: not adopting")


def test_the_probe_reports_stderr_and_older_output_still_parses() -> None:
    head = ["specmon-proc", "123", "1000", "1", "123", "/srv", "pipe:[5]", "argv", "2", "vllm", "serve",
            "env", "0", "withheld", "0"]
    new = parse_probe("\0".join([*head, "stderr", "/x.log", "end", "specmon-done", ""]))
    old = parse_probe("\0".join([*head, "end", "specmon-done", ""]))
    assert new[0].stderr == "/x.log" and new[0].writes("/x.log") == "stderr"
    assert old[0].stderr is None and old[0].writes("/x.log") is None


# --------------------------------------------------------------------------- real processes


@pytest.fixture
def fake_sglang(tmp_path: Path) -> Iterator[object]:
    """Start fake SGLang servers (by argv and where their output goes); killed by PID at the end."""
    pkg = tmp_path / "pkg" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    started: list[subprocess.Popen[bytes]] = []

    def start(stdout: Path | None, stderr: Path | None = None, *extra: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
                "--speculative-num-steps", "3", *extra]
        out = stdout.open("w") if stdout else subprocess.DEVNULL
        err = stderr.open("w") if stderr else subprocess.STDOUT
        try:
            p = subprocess.Popen(argv, cwd=tmp_path, stdout=out, stderr=err,
                                 env={"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "pkg")})
        finally:
            for f in (out, err):
                if hasattr(f, "close"):
                    f.close()  # type: ignore[union-attr]
        started.append(p)
        return p

    yield start
    for p in started:
        if p.poll() is None:
            p.send_signal(signal.SIGKILL)
        p.wait()


async def _until_ready(path: Path) -> None:
    for _ in range(400):
        if path.exists() and "ready to roll" in path.read_text():
            return
        await asyncio.sleep(0.025)
    raise AssertionError(f"the fake server never got ready: {path}")


async def test_a_server_writing_another_log_is_not_adopted(tmp_path: Path, fake_sglang: object) -> None:
    writes = tmp_path / "other.log"
    p = fake_sglang(writes)  # type: ignore[operator]
    await _until_ready(writes)
    followed = tmp_path / "followed.log"
    shown: list[str] = []
    with pytest.raises(AdoptError) as caught:
        await controller_for_running_server(LocalRunner(), log=str(followed), show=shown.append)
    text = str(caught.value)
    assert "not adopting" in text and f"PID {p.pid}" in text and f"writes {writes}" in text
    assert f"not {followed}" in text or f"none writes {followed}" in text
    assert p.poll() is None  # untouched


async def test_a_server_writing_the_log_on_stderr_or_by_argument_is_adopted(tmp_path: Path,
                                                                             fake_sglang: object) -> None:
    log = tmp_path / "err.log"
    p = fake_sglang(None, log)  # type: ignore[operator]  # stdout to /dev/null, stderr to the log
    c = None
    for _ in range(400):  # it prints nothing on stderr: wait until the probe lists it
        try:
            shown: list[str] = []
            c, server = await controller_for_running_server(LocalRunner(), log=str(log), show=shown.append)
            break
        except AdoptError:
            await asyncio.sleep(0.05)  # the probe may run before the process is listed
    assert c is not None and server.pid == p.pid and c.adopted == server.identity
    assert shown[-1] == f"adopting PID {p.pid} (SGLang): its stderr is {log}"

    named = tmp_path / "named.log"
    q = fake_sglang(tmp_path / "out.log", None, "--log-file", "named.log")  # type: ignore[operator]
    await _until_ready(tmp_path / "out.log")
    c, server = await controller_for_running_server(LocalRunner(), log=str(named), show=shown.append)
    assert server.pid == q.pid and shown[-1] == f"adopting PID {q.pid} (SGLang): its --log-file is {named}"


async def test_over_ssh_the_same_refusal(tmp_path: Path, fake_sglang: object, asyncssh_server: AsyncSSHServer,
                                         client_home: ClientHome) -> None:
    writes = tmp_path / "remote-other.log"
    p = fake_sglang(writes)  # type: ignore[operator]
    await _until_ready(writes)

    async def connect() -> asyncssh.SSHClientConnection:
        return await asyncssh.connect("127.0.0.1", asyncssh_server.port, username="specmon",
                                      known_hosts=str(client_home.known_hosts), client_keys=[client_home.key],
                                      agent_path=None)

    runner = ConnectingRunner(connect)
    try:
        with pytest.raises(AdoptError) as caught:
            await controller_for_running_server(runner, host="127.0.0.1", log=str(tmp_path / "followed.log"))
        text = str(caught.value)
        assert "not adopting" in text and f"PID {p.pid}" in text and f"writes {writes}" in text
        assert any("specmon-proc" in cmd for cmd in asyncssh_server.commands)
        # And the server that does write the followed log is adopted over the same connection.
        c, server = await controller_for_running_server(runner, host="127.0.0.1", log=str(writes))
        assert server.pid == p.pid and c.host == "127.0.0.1"
    finally:
        runner.close()
    assert p.poll() is None
