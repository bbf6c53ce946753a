"""The one honest exception, end to end over Debian's sshd: lines destroyed on the host while
disconnected are counted and reported — in the source's ``lost`` count and :class:`Loss`
entries, the dashboard header, the event log, and the recording.

Two ways a file is destroyed before it was read: rotated away and deleted, and truncated.
Everything written before the drop and after the reconnect arrives exactly once.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from specmon.ingest.live import Feeder, FeedInput
from specmon.output.recording import Recorder
from specmon.sources.base import ConnectionState
from specmon.sources.ssh import SSHTailSource
from specmon.ssh.connect import SSHTarget
from specmon.ui.views import connection_text
from tests.support.sshd import OpenSSHServer


class Gate:
    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()

    async def sleep(self, _seconds: float) -> None:
        await self.open.wait()


async def until(predicate: Callable[[], bool], what: str, source: SSHTailSource) -> None:
    for _ in range(18000):  # 90 s: a login can wait out a pyenv lock another session left (60 s)
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}; status={source.status!r}")


def lines(start: int, count: int) -> str:
    return "".join(f"[2026-01-01 00:00:00] line {i}\n" for i in range(start, start + count))


@pytest.mark.sshd
@pytest.mark.parametrize("how", ["rotated and deleted", "truncated"])
async def test_destroyed_while_disconnected_is_counted_and_reported(
    openssh_server: OpenSSHServer, tmp_path: Path, how: str
) -> None:
    log = tmp_path / "server.log"
    log.write_text(lines(0, 10))
    gate = Gate()
    source = SSHTailSource(SSHTarget("127.0.0.1", port=openssh_server.port, user=openssh_server.user), str(log),
                           lines=None, sleep=gate.sleep, poll_interval=0.05)
    recording = tmp_path / "rec.jsonl"
    recorder = Recorder(recording)
    feeder = Feeder([FeedInput(source)], recorder=recorder)
    task = asyncio.create_task(feeder.run())
    try:
        await until(lambda: source.status.lines == 10 and source.status.state is ConnectionState.LIVE,
                    "the first 10 lines", source)
        gate.open.clear()
        assert openssh_server.drop() >= 1
        await until(lambda: source.status.state is ConnectionState.RECONNECTING, "the drop", source)
        with open(log, "a") as f:
            f.write(lines(10, 5))  # written while disconnected, then destroyed before anyone read it
        if how == "truncated":
            log.write_text("")
        else:
            log.rename(tmp_path / "server.log.1")
            log.write_text("")  # before the old one goes, so it cannot get the old inode number back
            (tmp_path / "server.log.1").unlink()
        with open(log, "a") as f:
            f.write(lines(15, 5))
        gate.open.set()
        await until(lambda: source.status.lines == 15, "the lines after the reconnect", source)
        feeder.drain_events()
        header, _level = connection_text(source.status, now=source.status.last_line_at or 0)
    finally:
        await feeder.close()
        await asyncio.wait_for(task, 20)
        recorder.close()
    assert feeder.session.lines == 15  # 0-9 and 15-19, each once; 10-14 are gone from the host
    assert source.status.lost == 1 and len(source.losses) == 1
    loss = source.losses[0]
    assert loss.offset == len(lines(0, 10).encode())
    assert "1 lost on the host" in header
    said = [e.text for e in feeder.session.events if "are lost" in e.text]
    expected = "truncated while disconnected" if how == "truncated" else "no longer exists on the host"
    assert len(said) == 1 and expected in said[0] and str(loss.offset) in said[0]
    entries = [json.loads(raw) for raw in recording.read_text().splitlines()]
    recorded = [e["text"] for e in entries if e["type"] == "line"]
    assert recorded == [f"[2026-01-01 00:00:00] line {i}" for i in [*range(10), *range(15, 20)]]
    reported = [e for e in entries if e.get("event") == "source-event" and expected in e["text"]]
    assert len(reported) == 1 and reported[0]["lost"] == 1
