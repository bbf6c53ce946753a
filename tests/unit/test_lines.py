"""LineSplitter: any chunking gives the lines of the whole stream; long lines are capped."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.sources.lines import LineSplitter


def reference(stream: bytes, max_line: int) -> tuple[list[str], bytes]:
    """What a splitter must release for ``stream``, and the unfinished rest."""
    *complete, rest = stream.split(b"\n")
    lines = []
    for raw in complete:
        if len(raw) > max_line:
            raw = raw[:max_line]
        elif raw.endswith(b"\r"):
            raw = raw[:-1]
        lines.append(raw.decode("utf-8", errors="replace"))
    return lines, rest


def chunked(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    return [stream[a:b] for a, b in zip(points, points[1:], strict=False)]


alphabet = st.sampled_from([b"a", b"\n", b"\r", b"\xcf", b"\x80", b"\xff", "π".encode(), b"xyz" * 5])


@settings(max_examples=150, deadline=None)
@given(
    pieces=st.lists(alphabet, max_size=200),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
    max_line=st.integers(min_value=1, max_value=40),
    start=st.integers(min_value=0, max_value=1000),
)
def test_any_chunking_gives_the_lines_of_the_stream(
    pieces: list[bytes], cuts: list[int], max_line: int, start: int
) -> None:
    stream = b"".join(pieces)
    splitter = LineSplitter(start, max_line=max_line)
    got: list[str] = []
    for chunk in chunked(stream, cuts):
        got.extend(splitter.feed(chunk))
    lines, rest = reference(stream, max_line)
    assert got == lines
    assert splitter.read_position == start + len(stream)
    assert splitter.offset == start + len(stream) - len(rest)
    assert splitter.pending == rest[:max_line]
    assert splitter.recent == stream[-64:]
    assert splitter.tail == stream[: len(stream) - len(rest)][-64:]
    assert splitter.overlong == sum(len(raw) > max_line for raw in stream.split(b"\n")[:-1])
    if rest:
        released = splitter.take_pending()
        assert released == reference(rest + b"\n", max_line)[0][0]
        assert splitter.offset == start + len(stream)


def test_plain_lines_match_splitlines() -> None:
    text = "".join(f"Decode batch {i}, accept len: 2.{i}\n" for i in range(1000))
    data = text.encode()
    splitter = LineSplitter()
    got = [line for i in range(0, len(data), 777) for line in splitter.feed(data[i : i + 777])]
    assert got == text.splitlines()


def test_a_long_line_is_cut_counted_and_does_not_keep_its_bytes() -> None:
    splitter = LineSplitter(max_line=1000)
    for _ in range(500):
        assert splitter.feed(b"x" * 1000) == []
    assert len(splitter.pending) == 1000  # bounded memory while the line grows
    assert splitter.feed(b"yy\nnext\n") == ["x" * 1000, "next"]
    assert (splitter.overlong, splitter.longest) == (1, 500_002)
    assert splitter.offset == 500_000 + 8


def test_drop_pending_rewinds_to_the_last_complete_line() -> None:
    splitter = LineSplitter(10)
    splitter.feed(b"one\ntw")
    splitter.drop_pending()
    assert (splitter.offset, splitter.read_position, splitter.recent) == (14, 14, b"one\n")


def test_max_line_must_be_positive() -> None:
    with pytest.raises(ValueError):
        LineSplitter(max_line=0)
