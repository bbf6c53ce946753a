"""Issue 34, item 2: the lease's pieces — the client lock across real processes, the holder's line.

A second specmon process on the same machine is refused by the client lock alone (a runner
with no host side), with the first one's PID and action; the kernel drops the lock when the
holder dies, however it dies (SIGKILL here), so nothing goes stale. The holder's line, which
crosses the host and comes back as data, keeps only plain characters whatever the machine
name or action holds (generated).
"""

from __future__ import annotations

import calendar
import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon import paths
from specmon.control.lease import Holder, LeaseHeld, ServerLease
from specmon.control.runner import Result

ROOT = Path(__file__).resolve().parents[2]

HOLD = r'''
import asyncio, sys
from specmon.control.lease import ServerLease

class NoHost:
    async def run(self, command, timeout):
        raise AssertionError("nothing runs")

async def main():
    lease = ServerLease(NoHost(), "gpu-box", "/srv/x.pid", "a sweep")
    await lease.acquire()
    print("held", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
'''


class NoHost:
    """A runner without ``hold``: the client lock only."""

    async def run(self, command: str, timeout: float) -> Result:
        raise AssertionError("nothing runs")


async def test_a_second_process_is_refused_until_the_first_dies(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    first = subprocess.Popen([sys.executable, "-c", HOLD], cwd=ROOT, env={**os.environ}, stdout=subprocess.PIPE,
                             text=True)
    try:
        assert first.stdout is not None and first.stdout.readline().strip() == "held"
        mine = ServerLease(NoHost(), "gpu-box", "/srv/x.pid", "dashboard restarts")
        with pytest.raises(LeaseHeld) as caught:
            await mine.acquire()
        assert caught.value.holder is not None
        assert caught.value.holder.pid == first.pid and caught.value.holder.action == "a sweep"
        assert f"specmon PID {first.pid}" in str(caught.value) and "on this machine" in str(caught.value)
        assert not mine.held
        # Another server (another pidfile, another host) is not this one's business.
        other = ServerLease(NoHost(), "gpu-box", "/srv/y.pid", "dashboard restarts")
        await other.acquire()
        await other.release()
        lock = Path(mine.path)
        assert stat.S_IMODE(lock.stat().st_mode) == 0o600 and stat.S_IMODE(paths.locks_dir().stat().st_mode) == 0o700
    finally:
        first.send_signal(signal.SIGKILL)
        first.wait()
    await mine.acquire()  # the kernel dropped the dead holder's lock: nothing stale
    assert mine.held
    await mine.release()
    assert not mine.held


async def test_held_twice_by_one_holder_is_one_lease(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    lease = ServerLease(NoHost(), "h", "~/run/x.pid", "a sweep")
    async with lease.holding():
        await lease.acquire()  # the sweep's restarts under its own lease
        assert lease.held
    assert not lease.held
    again = ServerLease(NoHost(), "h", "~/run/x.pid", "a sweep")
    await again.acquire()
    await again.release()


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**22), st.text(max_size=100), st.floats(0, 4e9, allow_nan=False), st.text(max_size=100))
def test_the_holder_line_stays_plain_whatever_it_names(pid: int, machine: str, since: float, action: str) -> None:
    line = Holder(pid, machine, since, action).info()
    assert line.isascii() and "\n" not in line and "[" not in line and "\x1b" not in line
    back = Holder.parse(line)
    assert back.pid == (pid or None)
    assert all(c.isalnum() or c in "._:@- " for c in back.machine + back.action)
    assert back.since == (float(int(since)) if int(since) > 0 else None)
    text = back.text()
    assert text.startswith("specmon PID" if pid else "another specmon")


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_any_holder_line_parses_without_error(text: str) -> None:
    Holder.parse(text).text()  # a damaged or hostile lock file is read, never a crash


def test_a_holder_says_when() -> None:
    h = Holder(4242, "laptop", calendar.timegm((2026, 12, 4, 17, 40, 0, 0, 0, 0)), "a sweep")
    assert h.text() == "specmon PID 4242 on laptop, since 2026-12-04 17:40:00 UTC, for a sweep"
