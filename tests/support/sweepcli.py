"""A profile sweep of the simulated server run as the real CLI, and the server processes it leaves.

Several tests start ``specmon sweep PROFILE`` against a managed simulated server (locally, over SSH,
or through a wrapper that crashes), signal it once its first setting is measured, and clean up the
server it started: the profile text, the wait, the signal and the clean-up are written once here.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import sys
from pathlib import Path

from tests.support.net import free_port
from tests.support.ptyproc import PtyProcess, running

# The simulated server at 200x time: a sweep's settings are measured in seconds.
SIM_SERVER = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
              "--time-scale", "200", "--startup-seconds", "0.3"]


def managed_launch(name: str, work: Path, argv: list[str], nospec_argv: list[str], port: int) -> str:
    """The ``[profiles.NAME.launch]`` table of a managed SGLang-like server whose files live in ``work``."""
    return (
        f"[profiles.{name}.launch]\n"
        'mode = "managed"\nengine = "sglang"\n'
        f"argv = {json.dumps(argv)}\n"
        f"nospec_argv = {json.dumps(nospec_argv)}\n"
        f"log = {json.dumps(str(work / 'sim_{steps}.log'))}\n"
        f"pidfile = {json.dumps(str(work / 'sim.pid'))}\n"
        f"cwd = {json.dumps(str(work))}\n"
        f"port = {port}\n"
        'health_url = "http://127.0.0.1:{port}/health"\n'
        "steps_min = 0\nstart_timeout_s = 60\nstop_grace_s = 5\nstop_signal = \"TERM\"\n")


def sim_launch(name: str, work: Path, server: list[str] = SIM_SERVER, port: int | None = None) -> str:
    """The launch table of the simulated server ``server`` (its steps appended), on ``port`` or a free one."""
    return managed_launch(name, work, [*server, "--steps", "{steps}"], [*server, "--steps", "0"],
                          free_port() if port is None else port)


def sim_profile(tmp_path: Path) -> tuple[Path, Path]:
    """A config with the profile ``sim`` (the simulated server) and the folder its server works in."""
    work = tmp_path / "srv"
    work.mkdir()
    config = tmp_path / "specmon.toml"
    config.write_text(sim_launch("sim", work))
    return config, work


def sweep_env(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """specmon's folders and the temp folder in the test's own (its state, records and servers)."""
    temp = tmp_path / "t"
    temp.mkdir()
    return temp, {"TMPDIR": str(temp), "XDG_DATA_HOME": str(tmp_path / "data"),
                  "XDG_CONFIG_HOME": str(tmp_path / "config"), "HOME": str(tmp_path / "home")}


def server_pid(pidfile: str) -> int | None:
    """The PID a pidfile records, while that process runs."""
    try:
        pid = int(Path(pidfile).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return pid if running(pid) else None


def server_pid_in(pattern: str) -> int | None:
    """The first running PID recorded by a pidfile matching the glob ``pattern``."""
    for name in glob.glob(pattern):
        pid = server_pid(name)
        if pid is not None:
            return pid
    return None


def kill_leftover(pid: int | None) -> None:
    if pid is not None and running(pid):
        os.killpg(pid, signal.SIGKILL)  # the server leads its own process group (setsid)


def first_setting_pid(p: PtyProcess, pidfile: str) -> int | None:
    """Waits until the sweep measures its first setting with its server up; that server's PID."""
    p.wait_until(lambda: "measuring" in p.output and server_pid(pidfile), "the first setting")
    return server_pid(pidfile)


def sigterm(p: PtyProcess) -> str:
    """SIGTERM to the sweep: it exits 128 + SIGTERM; what its terminal showed last."""
    p.proc.send_signal(signal.SIGTERM)
    assert p.wait_exit() == 128 + signal.SIGTERM
    return p.final_output()
