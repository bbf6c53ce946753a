"""The SSH tail over Debian's real sshd: a directory or a missing log is said in one sentence."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from specmon.sources.base import ConnectionState
from specmon.sources.ssh import SSHTailSource, status_line
from specmon.ssh.connect import SSHTarget
from tests.support.sshd import OpenSSHServer

pytestmark = pytest.mark.sshd


async def until(predicate: Callable[[], bool], what: str, source: SSHTailSource) -> None:
    for _ in range(12000):
        if predicate():
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}; status={source.status!r}")


def source_for(server: OpenSSHServer, path: Path) -> SSHTailSource:
    async def retry_at_once(_seconds: float) -> None:
        await asyncio.sleep(0.01)

    return SSHTailSource(SSHTarget("127.0.0.1", port=server.port, user=server.user), str(path),
                         sleep=retry_at_once, poll_interval=0.05)


async def test_a_directory_fails_at_once_with_a_sentence(openssh_server: OpenSSHServer, tmp_path: Path) -> None:
    source = source_for(openssh_server, tmp_path)
    batches = [b async for b in source.batches()]  # a fatal error ends the iterator by itself
    assert batches == [] and source.status.state is ConnectionState.FAILED
    assert source.status.attempts == 0, "not retried"
    assert source.status.detail.startswith(f"{tmp_path} on {openssh_server.user}@127.0.0.1:{openssh_server.port} is a directory")
    assert f"--log {tmp_path}/server.log" in source.status.detail


async def test_missing_log_is_visible_then_followed_then_a_directory(
    openssh_server: OpenSSHServer, tmp_path: Path
) -> None:
    log = tmp_path / "later.log"
    source = source_for(openssh_server, log)
    got: list[str] = []

    async def read() -> None:
        async for batch in source.batches():
            got.extend(batch)

    task = asyncio.create_task(read())
    try:
        await until(lambda: "file not found" in source.status.detail, "the missing file said", source)
        assert f"file not found: {log}" in status_line(source.status, now=0)
        log.write_text("hello\n")
        await until(lambda: got == ["hello"], "the line", source)
        assert "file not found" not in status_line(source.status, now=0)
        log.unlink()
        log.mkdir()  # the log path now names a directory
        await until(lambda: source.status.state is ConnectionState.FAILED, "the directory noticed", source)
        assert "is a directory, not a log file" in source.status.detail
    finally:
        await source.close()
        await asyncio.wait_for(task, 30)
        if log.is_dir():
            shutil.rmtree(log)
