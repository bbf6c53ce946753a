"""A command whose run is cancelled (specmon ending on SIGTERM or a closed terminal) ends with it.

A start script left running after the sweep was cancelled went on to start a server after the
stop had looked for its pidfile: the stop waited a second for it, or the server was orphaned.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from specmon.control.runner import CANCEL_GRACE_S, LocalRunner
from tests.support.ptyproc import running


async def test_a_cancelled_command_and_its_helpers_are_ended(tmp_path: Path) -> None:
    marker = tmp_path / "started-a-server"
    pids = tmp_path / "pids"
    task = asyncio.ensure_future(LocalRunner().run(
        f"echo $$ > {pids}; sleep 30 & echo $! >> {pids}; wait; touch {marker}", 60))
    while not pids.exists() or len(pids.read_text().split()) < 2:
        await asyncio.sleep(0.02)
    at = time.monotonic()
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    took = time.monotonic() - at
    shell, helper = (int(p) for p in pids.read_text().split())
    for _ in range(100):
        if not running(shell) and not running(helper):
            break
        await asyncio.sleep(0.02)
    assert not running(shell) and not running(helper)
    assert not marker.exists()
    assert took < CANCEL_GRACE_S + 1.0


async def test_a_command_about_to_finish_is_let_finish(tmp_path: Path) -> None:
    """Within the grace a start finishes and reports (the PID the stop needs), rather than being cut."""
    started, done = tmp_path / "started", tmp_path / "done"
    task = asyncio.ensure_future(LocalRunner().run(f"touch {started}; sleep 0.05; touch {done}", 60))
    while not started.exists():
        await asyncio.sleep(0.005)
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    assert done.exists()


async def test_a_command_cancelled_while_it_is_being_made_is_ended_at_once(tmp_path: Path) -> None:
    """Cancelled before its pipes were connected: asyncio's own clean-up waited for the helper holding
    them (30 s here); it is ended with its group instead."""
    for _ in range(5):
        task = asyncio.ensure_future(LocalRunner().run("sleep 30 & wait", 60))
        await asyncio.sleep(0)  # the task has started making the process, no more
        at = time.monotonic()
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        assert time.monotonic() - at < CANCEL_GRACE_S + 1.0
