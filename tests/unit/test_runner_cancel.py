"""A command whose run is cancelled (specmon ending on SIGTERM or a closed terminal) ends with it.

A start script left running after the sweep was cancelled went on to start a server after the
stop had looked for its pidfile: the stop waited a second for it, or the server was orphaned.
"""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path
from typing import Any

import pytest

from specmon.control.runner import CANCEL_GRACE_S, LocalRunner
from tests.support.ptyproc import running
from tests.support.sleeper import sleeper_profile


async def _cancel(task: asyncio.Future[Any]) -> float:
    """Cancels the run and waits until it has ended; when it was cancelled (``time.monotonic``)."""
    at = time.monotonic()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    return at


async def test_a_cancelled_command_and_its_helpers_are_ended(tmp_path: Path) -> None:
    marker = tmp_path / "started-a-server"
    pids = tmp_path / "pids"
    task = asyncio.ensure_future(LocalRunner().run(
        f"echo $$ > {pids}; sleep 30 & echo $! >> {pids}; wait; touch {marker}", 60))
    while not pids.exists() or len(pids.read_text().split()) < 2:
        await asyncio.sleep(0.02)
    at = await _cancel(task)
    took = time.monotonic() - at
    shell, helper = (int(p) for p in pids.read_text().split())
    for _ in range(100):
        if not running(shell) and not running(helper):
            break
        await asyncio.sleep(0.02)
    assert not running(shell) and not running(helper)
    assert not marker.exists()
    assert took < CANCEL_GRACE_S + 1.0


async def test_a_command_that_chooses_to_finish_on_sigterm_is_let_finish(tmp_path: Path) -> None:
    """The command gets SIGTERM first: one that finishes on it (start.sh once it has launched the
    server: it records and reports its PID) is not killed within the grace. (Its last write is the
    shell's own, no fork: at a load of 10 a forked ``touch`` could miss the 0.8 s grace.)"""
    started, done = tmp_path / "started", tmp_path / "done"
    task = asyncio.ensure_future(LocalRunner().run(
        f"trap 'echo finishing' TERM; touch {started}; sleep 0.3; : > {done}", 60))
    while not started.exists():
        await asyncio.sleep(0.005)
    await _cancel(task)
    assert done.exists()


async def test_start_sh_ended_by_sigterm_before_it_launches_starts_nothing(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM while start.sh is still choosing how to reset the signals (a slow perl, before the
    launch): it ends there, at once, and nothing is started."""
    from specmon.control.launch import build_plan

    slow = tmp_path / "bin"
    slow.mkdir()
    (slow / "perl").write_text(f"#!/bin/sh\ntouch {tmp_path / 'checking'}\nexec sleep 30\n")
    (slow / "perl").chmod(0o755)
    monkeypatch.setenv("PATH", f"{slow}:{os.environ['PATH']}")
    profile = sleeper_profile(tmp_path)
    step = build_plan(profile, 2).start
    runner = LocalRunner()
    task = asyncio.ensure_future(runner.run(step.command, 60, stdin=step.stdin))
    while not (tmp_path / "checking").exists():
        await asyncio.sleep(0.01)
    at = await _cancel(task)
    assert time.monotonic() - at < CANCEL_GRACE_S  # ended on SIGTERM, not killed after the grace
    assert not runner.killed_on_cancel
    await asyncio.sleep(0.3)
    assert not (tmp_path / "server.pid").exists()  # nothing launched: no shell ever recorded a PID


async def test_a_command_cancelled_while_it_is_being_made_is_ended_at_once(tmp_path: Path) -> None:
    """Cancelled before its pipes were connected: asyncio's own clean-up waited for the helper holding
    them (30 s here); it is ended with its group instead."""
    for _ in range(5):
        task = asyncio.ensure_future(LocalRunner().run("sleep 30 & wait", 60))
        await asyncio.sleep(0)  # the task has started making the process, no more
        at = await _cancel(task)
        assert time.monotonic() - at < CANCEL_GRACE_S + 1.0
