"""A server started through the host script over Debian's real OpenSSH sshd gets default signal
dispositions and an empty mask, whatever the shell that runs the script inherited (issue 43, item 5).

sshd gives its sessions the defaults; a host where the script's shell inherits ignores is one whose
login shell or wrapper sets them (``nohup``, a background job, a job runner). The command the
runner sends is the plan's own start command, run under coreutils' ``env --ignore-signal
--block-signal`` on the host, so the script's shell really starts with them.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import signal
from pathlib import Path

import asyncssh
import pytest

from specmon.control.launch import LaunchProfile, build_plan, parse_result_line
from specmon.control.runner import SSHRunner
from tests.support.sleeper import sleeper_profile
from tests.support.sshd import ClientHome, OpenSSHServer
from tests.unit.test_signal_dispositions import SERVER, masks

WRAP = "env --ignore-signal=HUP,INT,QUIT,USR2 --block-signal=USR1,TERM "


def _profile(tmp_path: Path) -> LaunchProfile:
    return sleeper_profile(tmp_path, SERVER)


@pytest.mark.sshd
async def test_the_host_script_over_sshd_resets_what_its_shell_inherited(openssh_server: OpenSSHServer,
                                                                         client_home: ClientHome,
                                                                         tmp_path: Path) -> None:
    step = build_plan(_profile(tmp_path), 3).start
    conn = await asyncssh.connect("127.0.0.1", openssh_server.port, username=openssh_server.user,
                                  known_hosts=str(client_home.known_hosts), client_keys=[client_home.key],
                                  agent_path=None)
    pid = None
    try:
        runner = SSHRunner(conn)
        # The wrapper itself passes them on: the same wrapper's shell reports its own state.
        own = await runner.run(WRAP + "sh -c " + shlex.quote("exec cat /proc/self/status"), 30)
        assert masks(own.stdout)["SigIgn"] & 0b111 == 0b111
        result = await runner.run(WRAP + step.command, 60, stdin=step.stdin)
        fields = parse_result_line(result.stdout, "specmon-start")
        assert fields.get("result") == "started", result
        assert fields["signals"] == "default"
        pid = int(fields["pid"])
        status = ""
        for _ in range(500):  # until the recorded PID has exec'd the server (sleep)
            if Path(f"/proc/{pid}/comm").read_text().strip() == "sleep":
                status = Path(f"/proc/{pid}/status").read_text()
                break
            await asyncio.sleep(0.02)
        assert masks(status) == {"SigIgn": 0, "SigBlk": 0}
    finally:
        conn.close()
        if pid is not None:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
