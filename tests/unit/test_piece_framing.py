"""A worker reads its piece from the newline before it (issue 10): the framing the pass needs,
without copying 4 MB to add it. Whatever the cut, the piece must read as its own bytes do."""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest import bulk, feeding, templates
from specmon.records import Engine

_LINES = st.sampled_from([
    "[2026-08-23 09:00:01] Decode batch, #running-req: 2, #token: 900, token usage: 0.02, "
    "gen throughput (token/s): 61.25, #queue-req: 0",
    "[2026-08-23 09:00:02] Prefill batch, #new-seq: 1, #new-token: 28, #cached-token: 0, "
    "token usage: 0.00, #running-req: 0, #queue-req: 0",
    'INFO:     127.0.0.1:3766 - "POST /v1/completions HTTP/1.1" 200 OK',
    "", "Traceback (most recent call last):", "RuntimeError: boom", "noise \r",
])


def _summary(piece: bulk.Piece) -> tuple[object, ...]:
    return (piece.lines, piece.by_template, piece.counted, piece.in_traceback, repr(piece.items))


@settings(max_examples=80, deadline=None)
@given(st.lists(_LINES, min_size=1, max_size=60), st.booleans(), st.integers(64, 2048))
def test_a_piece_read_by_a_worker_is_its_own_bytes(lines: list[str], last_newline: bool, size: int) -> None:
    data = "\n".join(lines).encode() + (b"\n" if last_newline else b"")
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.log"
        path.write_bytes(data)
        old = feeding.PIECE
        feeding.PIECE = size
        try:
            cuts = list(feeding.line_ranges(str(path), len(data)))
        finally:
            feeding.PIECE = old
        for a, b in cuts:
            templates._LEARNER.__init__()  # type: ignore[misc]
            got = feeding.parse_piece((str(path), a, b, Engine.SGLANG.value, 2026, 0.0))
            templates._LEARNER.__init__()  # type: ignore[misc]
            want = bulk.bulk_piece(data[a:b], Engine.SGLANG, 2026, day=0.0)
            assert _summary(got) == _summary(want), (a, b)


@given(st.binary(max_size=300))
def test_the_vectorised_line_count_is_bytes_count(data: bytes) -> None:
    assert bulk.count_newlines(data) == data.count(b"\n")


@given(st.binary(max_size=9000), st.integers(0, 255), st.integers(0, 40))
def test_the_c_byte_count_is_bytes_count(data: bytes, byte: int, offset: int) -> None:
    """Across every length and alignment (the 16-byte steps, the 255-step lane flushes, the tail),
    and runs of the byte longer than a lane holds."""
    from specmon._native import count_byte

    data = data[offset:] + bytes([byte]) * (offset * 97)
    assert count_byte(data, byte) == data.count(bytes([byte]))


def test_the_line_count_without_the_extension_is_numpy_s(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(bulk, "_count_byte", None)
    assert bulk.count_newlines(b"a\nb\n\n" * 1000) == 3000


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600), st.binary(max_size=12), st.integers(0, 600), st.booleans())
def test_the_c_search_is_bytes_in(data: bytes, text: bytes, at: int, plant: bool) -> None:
    """The marker test of each pass (memmem): present or not, at any place, empty texts too."""
    from specmon._native import holds

    if plant:
        data = data[:at] + text + data[at:]
    assert holds(data, text) is (text in data)
    assert holds(text, data) is (data in text)


_ABA = st.text(alphabet="ab\n", max_size=600).map(str.encode)  # (texts that meet often, and overlap)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.binary(max_size=600), _ABA), st.one_of(st.binary(min_size=1, max_size=14),
       st.text(alphabet="ab", min_size=1, max_size=14).map(str.encode)), st.integers(0, 5))
def test_the_c_text_count_is_bytes_count(data: bytes, text: bytes, copies: int) -> None:
    """Non-overlapping, as bytes.count (overlapping texts: "aa" in "aaa" is one); searched by
    Horspool's shifts, a table made once a call."""
    from specmon._native import count_text

    data = (data + text) * copies + data
    assert count_text(data, text) == data.count(text)
