"""Hostile bytes through the C extension: the same records as Python's re alone, and no crash.

The extension parses bytes from remote hosts. This corpus is what a broken, cut or malicious
log holds: truncated UTF-8, NULs and control bytes, lines cut at any byte, a very long line
(``SPECMON_HOSTILE_MB``, default 4; the sanitizer job runs 100), deep nesting past the C stack
bound, and every learned template's lines. Each is read by the bulk path with the C pass and
again with re alone (as an install without a C compiler): the records must be the same. The
per-value loops get the same bytes. ``.ci/sanitize`` runs this file under AddressSanitizer and
UndefinedBehaviorSanitizer, where a memory error aborts the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon import _native
from specmon.ingest import bulk, scan, templates
from specmon.ingest.scan import RePass

ROOT = Path(__file__).resolve().parents[2]
YEAR = 2026
REAL = sorted((ROOT / "sample_logs" / "real").glob("*.log"))
BIG_MB = int(os.environ.get("SPECMON_HOSTILE_MB", "4"))


def both_ways(data: bytes, monkeypatch: pytest.MonkeyPatch) -> bool:
    """The bulk path's records with the C pass equal those with re alone; whether C read any."""
    templates._LEARNER.__init__()  # type: ignore[misc]
    with_c, read_c = bulk.piece_records(data, year=YEAR)
    in_c = any(p is not None and not isinstance(p, RePass) for p in templates._LEARNER._regex.values())
    with monkeypatch.context() as m:
        m.setattr(scan, "Scanner", None)
        templates._LEARNER.__init__()  # type: ignore[misc]
        with_re, read_re = bulk.piece_records(data, year=YEAR)
    templates._LEARNER.__init__()  # type: ignore[misc]
    assert read_c == read_re
    assert [r.to_json() for r in with_c] == [r.to_json() for r in with_re]
    return in_c


def real_lines() -> list[bytes]:
    out: list[bytes] = []
    for log in REAL:
        out += [ln for ln in log.read_bytes().split(b"\n")[:400] if ln]
    return out


LINES = real_lines()
HOSTILE = [b"\x00", b"\xff", b"\xc3", b"\xe2\x82", b"\xf0\x9f\x98", b"\r", b"\x1b[31m", b"\x7f", b"\xef\xbb\xbf",
           b"\xe2\x80\xae", b"(", b")", b"[", b"]", b"\\", b"%", b",", b":", b"\t", b" " * 64]


@settings(max_examples=60)
@given(st.data())
def test_real_lines_cut_and_spiked_read_the_same_in_c_and_re(data: st.DataObject) -> None:
    monkeypatch = pytest.MonkeyPatch()
    try:
        picked = data.draw(st.lists(st.sampled_from(LINES), min_size=1, max_size=40))
        out = []
        for line in picked:
            how = data.draw(st.sampled_from(("keep", "cut", "spike", "double")))
            at = data.draw(st.integers(0, len(line)))
            bad = data.draw(st.sampled_from(HOSTILE))
            if how == "cut":
                line = line[:at]
            elif how == "spike":
                line = line[:at] + bad + line[at:]
            elif how == "double":
                line = line + bad + line
            out.append(line)
        text = b"\n".join(out)
        if data.draw(st.booleans()):
            text += b"\n"  # or not: the piece may end mid-line
        both_ways(text, monkeypatch)
        for needle in (b"accept", b"\x00", b"Decode batch", b"\xff\xfe"):
            assert _native.count_text(text, needle) == text.count(needle)
            assert _native.holds(text, needle) == (needle in text)
        assert _native.count_byte(text, 10) == text.count(b"\n")
    finally:
        monkeypatch.undo()


@pytest.mark.parametrize("filler", [b"\x00", b"a", b"\xc3", b"0.5, ", b"accept len: "])
def test_a_very_long_line_of_hostile_bytes(filler: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    size = BIG_MB << 20
    long = (filler * (size // len(filler) + 1))[:size]
    text = LINES[0] + b"\n" + long + b"\n" + LINES[-1] + b"\n"
    both_ways(text, monkeypatch)
    assert _native.count_text(long, filler) == long.count(filler)


@pytest.mark.parametrize("depth", [10, 1_000, 100_000])
def test_deep_nesting_and_long_repeats(depth: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rates = b"[2026-08-23 09:00:00] SpecDecoding metrics: Per-position acceptance rate: " + \
        b", ".join([b"0.5"] * depth)
    nested = b"[2026-08-23 09:00:00 TP0] Decode batch, " + b"(" * depth + b"accept len: 2.0" + b")" * depth
    brackets = b"[" * depth + b"2026-08-23 09:00:00" + b"]" * depth + b" Decode batch, accept len: 1.5"
    both_ways(b"\n".join([rates, nested, brackets, *LINES[:20]]) + b"\n", monkeypatch)


@pytest.mark.parametrize("log", REAL, ids=[p.name for p in REAL])
def test_every_real_log_cut_at_every_kind_of_boundary(log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = log.read_bytes()[: 1 << 20]
    used_c = False
    for cut in (1, 7, len(data) // 3, len(data) - 1):
        used_c |= both_ways(data[:cut], monkeypatch)
        used_c |= both_ways(data[cut:], monkeypatch)
    if bulk.piece_records(data, year=YEAR)[1]:
        assert used_c, "stats lines read, none of them through the C pass"
