"""``specmon sweep PROFILE`` on a "remote" host: the in-process SSH server on 127.0.0.1.

Restarts run over SSH (SSHRunner), the log is tailed over SSH, and the load
reaches the server through an SSH local port forward — the whole remote path,
against a real (in-process) SSH server with a verified host key.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
from pathlib import Path

import pytest

from specmon.cli import main
from tests.support.net import free_port
from tests.support.sshd import AsyncSSHServer
from tests.support.sweepcli import SIM_SERVER, sim_launch


async def test_remote_sweep_over_ssh(asyncssh_server: AsyncSSHServer, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    port = free_port()
    work = tmp_path / "remote" / "srv"
    work.mkdir(parents=True)
    config = tmp_path / "specmon.toml"
    config.write_text(f'[profiles.gpu]\nhost = "127.0.0.1"\nport = {asyncssh_server.port}\n'
                      + sim_launch("gpu", work, [*SIM_SERVER, "--seed", "2"], port))
    args = ["sweep", "--order", "given", "gpu", "--config", str(config), "--steps", "0,2", "--min-samples", "40",
            "--max-samples", "120", "--looks", "2", "--yes", "--state", str(tmp_path / "state.json"),
            "--format", "json", "--record", str(tmp_path / "rec.jsonl")]
    try:
        # The CLI runs its own event loop; the SSH server keeps serving on this one meanwhile.
        code = await asyncio.wait_for(asyncio.to_thread(main, args), 150)
        out, err = capsys.readouterr()
        assert code == 0, err[-3000:]
    finally:
        try:
            os.killpg(int((work / "sim.pid").read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            pass
    doc = json.loads(out)
    # Which setting is faster is not asked: at 200x time the client's gaps between requests
    # (milliseconds, i.e. a fifth of a simulated second each) can hide the sim's +6% on a busy
    # machine. What the sweep must get right whatever the load: both settings measured, the
    # drafter's acceptance seen only where it drafts, and a verdict that follows its numbers.
    runs = {r["steps"]: r for r in doc["runs"]}
    assert runs[0]["accept_len"] is None and runs[2]["accept_len"]["mean"] > 1.5
    verdict = doc["verdict"]
    best = max(doc["runs"], key=lambda r: r["throughput"]["mean"])
    assert verdict["best_steps"] == best["steps"]
    assert verdict["winner_steps"] == (best["steps"] if verdict["separated"] else None)
    assert [r["status"] for r in doc["runs"]] == ["done", "done"]
    assert all(r["client"]["requests"] > 0 and r["client"]["errors"] == 0 for r in doc["runs"])
    # Everything went through SSH: the fixed scripts ran there, the log was tailed there,
    # and the load went through a forward to the server's port on the host.
    commands = "\n".join(asyncssh_server.commands)
    assert "specmon-start" in commands and "specmon-stop" in commands and "specmon-ready" in commands
    assert "tail" in commands
    assert ("127.0.0.1", port) in asyncssh_server.forwards
    assert "host:  127.0.0.1:" in err  # the plan names the host it runs on
