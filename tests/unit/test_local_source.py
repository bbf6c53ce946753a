"""LocalTailSource: follows a real file on disk like ``tail -F``."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.sources.base import ConnectionState, LineSource
from specmon.sources.lines import LineSplitter
from specmon.sources.local import LocalTailSource, newest_match, start_of_last_lines


async def fast_sleep(_seconds: float) -> None:
    """Poll without waiting wall-clock time (the loop still gets a turn)."""
    await asyncio.sleep(0.001)


class Collector:
    """Drain a source in a task; wait for conditions without timed assertions."""

    def __init__(self, source: LocalTailSource) -> None:
        self.source = source
        self.lines: list[str] = []
        self.batches = 0
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        iterator: AsyncIterator[list[str]] = self.source.batches()
        async for batch in iterator:
            assert batch, "sources never yield empty batches"
            self.batches += 1
            self.lines.extend(batch)

    async def wait_for(self, predicate, what: str) -> None:
        # Generous bound only to turn a hang into a failure; not a timing assertion.
        for _ in range(20000):
            if predicate():
                return
            await asyncio.sleep(0.001)
        raise AssertionError(f"timed out waiting for {what}; got {self.lines[-5:]!r}")

    async def stop(self) -> None:
        await self.source.close()
        await asyncio.wait_for(self._task, 10)


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def test_splitter_keeps_partial_lines_and_offsets() -> None:
    split = LineSplitter(offset=10)
    assert split.feed(b"ab") == []
    assert split.feed(b"c\nde") == ["abc"]
    assert split.offset == 14 and split.pending == b"de"
    assert split.feed(b"f\r\n\xff\n") == ["def", "\ufffd"]
    assert split.offset == 21 and split.read_position == 21


def test_splitter_decodes_multibyte_split_across_chunks() -> None:
    split = LineSplitter()
    data = "tok/s: 88.8 — ok\n".encode()
    cut = data.index("—".encode()) + 1  # inside the 3-byte dash
    assert split.feed(data[:cut]) == []
    assert split.feed(data[cut:]) == ["tok/s: 88.8 — ok"]


@pytest.mark.parametrize(
    ("content", "count", "expected"),
    [
        (b"a\nb\nc\n", 2, b"b\nc\n"),
        (b"a\nb\nc", 2, b"b\nc"),
        (b"a\nb\nc\n", 5, b"a\nb\nc\n"),
        (b"a\nb\nc\n", 0, b""),
        (b"", 3, b""),
        (b"\n\n\n", 2, b"\n\n"),
    ],
)
def test_start_of_last_lines_matches_tail_n(tmp_path: Path, content: bytes, count: int, expected: bytes) -> None:
    path = tmp_path / "f"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        start = start_of_last_lines(fd, len(content), count)
    finally:
        os.close(fd)
    assert content[start:] == expected


def test_start_of_last_lines_across_blocks(tmp_path: Path) -> None:
    lines = [f"line {i:06d} " + "x" * 200 for i in range(2000)]  # ~420 kB, many 64 kB blocks
    path = tmp_path / "big.log"
    path.write_text("\n".join(lines) + "\n")
    fd = os.open(path, os.O_RDONLY)
    try:
        start = start_of_last_lines(fd, path.stat().st_size, 700)
    finally:
        os.close(fd)
    assert path.read_bytes()[start:].decode().splitlines() == lines[-700:]


def test_newest_match_picks_latest_mtime(tmp_path: Path) -> None:
    for i, name in enumerate(["a.log", "b.log", "c.txt"]):
        (tmp_path / name).write_text("x")
        os.utime(tmp_path / name, (1000 + i, 1000 + i))
    (tmp_path / "dir.log").mkdir()
    assert newest_match(str(tmp_path / "*.log")) == tmp_path / "b.log"
    assert newest_match(str(tmp_path / "*.nothing")) is None


async def test_reads_whole_file_then_follows_appends(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("one\ntwo\n")
    source = LocalTailSource(path, sleep=fast_sleep)
    assert isinstance(source, LineSource)
    c = Collector(source)
    await c.wait_for(lambda: len(c.lines) == 2, "initial lines")
    assert source.status.state is ConnectionState.LIVE
    append(path, b"three\nfo")
    await c.wait_for(lambda: len(c.lines) == 3, "third line")
    append(path, b"ur\n")
    await c.wait_for(lambda: len(c.lines) == 4, "completed partial line")
    await c.stop()
    assert c.lines == ["one", "two", "three", "four"]
    assert source.status.lines == 4
    assert source.status.bytes == len(b"one\ntwo\nthree\nfour\n")
    assert source.status.last_line_at is not None
    assert source.status.state is ConnectionState.ENDED


async def test_lines_option_starts_with_last_n(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("".join(f"l{i}\n" for i in range(10)))
    c = Collector(LocalTailSource(path, lines=3, sleep=fast_sleep))
    await c.wait_for(lambda: len(c.lines) >= 3, "history")
    append(path, b"l10\n")
    await c.wait_for(lambda: len(c.lines) >= 4, "new line")
    await c.stop()
    assert c.lines == ["l7", "l8", "l9", "l10"]


async def test_partial_line_is_held_until_completed(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_bytes(b"")
    source = LocalTailSource(path, sleep=fast_sleep)
    c = Collector(source)
    append(path, b"Decode batch, accept len: 2.")
    await c.wait_for(lambda: source.status.bytes > 0, "partial bytes read")
    assert c.lines == []
    append(path, b"13\n")
    await c.wait_for(lambda: len(c.lines) == 1, "completed line")
    await c.stop()
    assert c.lines == ["Decode batch, accept len: 2.13"]


async def test_waits_for_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "later.log"
    source = LocalTailSource(path, lines=10, sleep=fast_sleep)
    c = Collector(source)
    await c.wait_for(lambda: "file not found" in source.status.detail, "missing-file state")
    assert source.status.state is ConnectionState.CONNECTING
    path.write_text("hello\n")
    await c.wait_for(lambda: c.lines == ["hello"], "line of the new file")
    assert source.status.state is ConnectionState.LIVE
    await c.stop()


async def test_rotation_reads_old_file_to_end_then_new_file(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("a1\na2\n")
    source = LocalTailSource(path, sleep=fast_sleep)
    c = Collector(source)
    await c.wait_for(lambda: len(c.lines) == 2, "first lines")
    # The writer still holds the old file: its last writes land after the rename.
    with open(path, "ab") as old:
        path.rename(tmp_path / "server.log.1")
        old.write(b"a3\na4")  # unterminated last line of the old file
    path.write_text("b1\nb2\n")
    await c.wait_for(lambda: len(c.lines) == 6, "lines of both files")
    await c.stop()
    assert c.lines == ["a1", "a2", "a3", "a4", "b1", "b2"]
    assert any("rotated" in e for e in source.status.events)


async def test_truncation_restarts_from_zero(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    path.write_text("x" * 50 + "\n")
    source = LocalTailSource(path, sleep=fast_sleep)
    c = Collector(source)
    await c.wait_for(lambda: len(c.lines) == 1, "first line")
    with open(path, "r+b") as f:
        f.truncate(0)
    await c.wait_for(lambda: any("truncated" in e for e in source.status.events), "truncation event")
    append(path, b"after\n")
    await c.wait_for(lambda: len(c.lines) == 2, "line after truncation")
    await c.stop()
    assert c.lines == ["x" * 50, "after"]


async def test_big_file_arrives_in_several_batches(tmp_path: Path) -> None:
    path = tmp_path / "server.log"
    expected = [f"line {i}" for i in range(20000)]
    path.write_text("\n".join(expected) + "\n")
    c = Collector(LocalTailSource(path, chunk_size=16 * 1024, sleep=fast_sleep))
    await c.wait_for(lambda: len(c.lines) == len(expected), "all lines")
    await c.stop()
    assert c.lines == expected
    assert c.batches > 5


def test_build_local_source_from_profile(tmp_path: Path) -> None:
    from specmon.config import Profile
    from specmon.sources.local import build_local_source

    (tmp_path / "a.log").write_text("x")
    os.utime(tmp_path / "a.log", (1000, 1000))
    (tmp_path / "b.log").write_text("y")
    assert build_local_source(None, profile=Profile(log_glob=str(tmp_path / "*.log"))).path == tmp_path / "b.log"
    assert build_local_source("/x.log", profile=Profile(log="/y.log")).path == Path("/x.log")
    assert build_local_source(None, profile=Profile(log="/y.log", lines=5))._lines == 5
    with pytest.raises(ValueError, match="specmon watch /path/to/server.log"):
        build_local_source(None)
    with pytest.raises(ValueError, match="no file matches"):
        build_local_source(None, profile=Profile(log_glob=str(tmp_path / "*.none")))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.binary(max_size=40).map(lambda b: b.replace(b"\n", b"")), max_size=30), st.booleans(),
       st.integers(0, 12), st.integers(0, 400))
def test_start_of_last_lines_within_a_limit_is_tail_n_or_the_limit(
        tmp_path_factory: pytest.TempPathFactory, lines: list[bytes], final: bool, count: int, limit: int) -> None:
    """With ``limit``: the same start as without it when the last ``count`` lines lie within the last
    ``limit`` bytes, else exactly ``size - limit`` (never further back)."""
    content = b"\n".join(lines) + (b"\n" if final and lines else b"")
    path = tmp_path_factory.mktemp("tail") / "f"
    path.write_bytes(content)
    fd = os.open(path, os.O_RDONLY)
    try:
        whole = start_of_last_lines(fd, len(content), count)
        bounded = start_of_last_lines(fd, len(content), count, limit)
    finally:
        os.close(fd)
    if count <= 0 or len(content) - whole <= limit:
        assert bounded == whole
    else:
        assert bounded == len(content) - limit


def test_the_last_lines_of_a_huge_file_without_a_newline_are_found_at_once(tmp_path: Path) -> None:
    """``watch --lines N`` on a sparse 1 TB file with no newline: the scan stops N line caps back
    instead of reading the terabyte backwards before the first frame."""
    path = tmp_path / "sparse.log"
    with open(path, "wb") as f:
        f.truncate(1 << 40)
    fd = os.open(path, os.O_RDONLY)
    try:
        t0 = time.monotonic()
        start = start_of_last_lines(fd, 1 << 40, 10, 10 * ((1 << 20) + 1))
        took = time.monotonic() - t0
    finally:
        os.close(fd)
    assert start == (1 << 40) - 10 * ((1 << 20) + 1)
    assert took < 5.0
