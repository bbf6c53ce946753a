"""Every process of one specmon run, found by a mark in its environment, wherever it went.

A process specmon starts inherits its environment, also when it leaves specmon's process tree
(the demo's simulated server is started with ``setsid -f`` and re-parented). So a run started
with ``SPECMON_TEST_MARK=<unique>`` in its environment is the set of processes whose
``/proc/PID/environ`` holds that mark: the command, its threads' helpers, worker processes,
shells, and the servers it started. A test of "nothing of its own is left" walks them all.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

MARK = "SPECMON_PROC_MARK"


def new_mark() -> dict[str, str]:
    """The environment entry that marks one run."""
    return {MARK: uuid.uuid4().hex}


def marked(env: dict[str, str]) -> dict[int, str]:
    """Running (not zombie) processes carrying ``env``'s mark: PID to command line."""
    needle = f"{MARK}={env[MARK]}".encode()
    found: dict[int, str] = {}
    me = os.getpid()
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            if needle not in Path(f"/proc/{entry}/environ").read_bytes().split(b"\0"):
                continue
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if stat[stat.rindex(")") + 2:].split()[0] in ("Z", "X"):
            continue
        found[int(entry)] = cmd.strip()
    return found


def all_gone_after(env: dict[str, str], since: float, bound_s: float = 15.0) -> tuple[float, dict[int, str]]:
    """Seconds from ``since`` until no process of the run is left (and what was left at ``bound_s``)."""
    while True:
        left = marked(env)
        now = time.monotonic()
        if not left:
            return now - since, {}
        if now - since > bound_s:
            return bound_s + 1, left
        time.sleep(0.01)


def kill_marked(env: dict[str, str]) -> None:
    """SIGKILL whatever of the run is still running (a test's clean-up)."""
    for pid in marked(env):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
