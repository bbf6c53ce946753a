"""LocalTailSource on a directory: one sentence and FAILED, not an empty dashboard or a traceback."""

from __future__ import annotations

import asyncio
from pathlib import Path

from specmon.sources.base import ConnectionState
from specmon.sources.local import LocalTailSource


async def test_a_directory_fails_with_a_sentence(tmp_path: Path) -> None:
    source = LocalTailSource(tmp_path, poll_interval=0.01)
    batches = [b async for b in source.batches()]  # ends by itself
    assert batches == []
    assert source.status.state is ConnectionState.FAILED
    assert source.status.detail == f"{tmp_path} is a directory, not a log file: pass the log itself"


async def test_a_long_line_is_cut_and_counted(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"x" * 5000 + b"\nshort\n")
    source = LocalTailSource(log, poll_interval=0.01, max_line=100, chunk_size=1000)
    got: list[str] = []

    async def read() -> None:
        async for batch in source.batches():
            got.extend(batch)

    task = asyncio.create_task(read())
    for _ in range(2000):
        if len(got) >= 2:
            break
        await asyncio.sleep(0.005)
    await source.close()
    await asyncio.wait_for(task, 10)
    assert got == ["x" * 100, "short"]
    # Counted and said, as the SSH tail does (it was cut silently): the first one in an event.
    assert source.status.overlong == 1
    assert [e for e in source.status.events if "line cap" in e] == [
        "a line longer than the line cap (100 bytes) is being read, no newline yet after 1,000 bytes: only its "
        "first 100 bytes are kept; later over-long lines are counted in the status line"]
