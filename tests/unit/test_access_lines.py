"""The bulk path drops uvicorn's access lines (issue 10): C's drop_lines is the regex's re.sub.

Texts are made of pieces that stand near the edges: the two marks, either alone, split by
a newline, at the text's first or last line, next to each other, and the token lines the
passes leave.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest import quiet

native = pytest.importorskip("specmon._native")

_PARTS = [b"\n", b" - \"", b"HTTP/", b"HTTP", b"/", b" - ", b"\"", b"x", b"POST /v1 ", b"\x00\x01\x02",
          b"\n\x00\x01\x02", b'INFO:     127.0.0.1:3766 - "POST /v1/completions HTTP/1.1" 200 OK']


def _regex(text: bytes, a: bytes, b: bytes) -> bytes:
    rx = re.compile(rb"\n(?=[^\n]*%s)(?=[^\n]*%s)[^\n]*(?=\n)" % (re.escape(a), re.escape(b)))
    return rx.sub(b"\n", text)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PARTS), max_size=30).map(b"".join))
def test_drop_lines_is_the_regexs_sub(text: bytes) -> None:
    assert native.drop_lines(text, *quiet._ACCESS_TEXTS) == _regex(text, *quiet._ACCESS_TEXTS)
    assert quiet._drop_access(text) == quiet._ACCESS.sub(b"\n", text)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=60), st.binary(min_size=1, max_size=3), st.binary(min_size=1, max_size=3))
def test_drop_lines_is_the_regexs_sub_for_any_texts(text: bytes, a: bytes, b: bytes) -> None:
    a, b = a.replace(b"\n", b"a"), b.replace(b"\n", b"b")
    assert native.drop_lines(text, a, b) == _regex(text, a, b)


def test_the_access_lines_of_a_piece_go_and_the_rest_stays() -> None:
    access = b'[2026-08-23 09:00:01] INFO:     127.0.0.1:3766 - "POST /generate HTTP/1.1" 200 OK'
    text = b"\n\x00\x01\x02\n" + access + b"\nDecode batch\n" + access + b"\n" + access
    # (the last line has no newline after it: the next piece's, kept whole)
    assert native.drop_lines(text, *quiet._ACCESS_TEXTS) == b"\n\x00\x01\x02\n\nDecode batch\n\n" + access
    plain = b"\nno access line here\n"
    assert native.drop_lines(plain, *quiet._ACCESS_TEXTS) is plain  # nothing dropped: no copy


@pytest.mark.parametrize(("a", "b"), [(b"", b"x"), (b"x", b""), (b"a\nb", b"x"), (b"x", b"\n")])
def test_drop_lines_refuses_empty_texts_and_newlines(a: bytes, b: bytes) -> None:
    with pytest.raises(ValueError):
        native.drop_lines(b"\nab\n", a, b)
