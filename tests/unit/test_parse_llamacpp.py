"""llama.cpp ``llama-server`` speculative summaries, from the real multi-line print_timing block.

``llamacpp_mtp_print_timing_multiline_1.log`` is a real ``docker compose logs``-style
capture: every line is wrapped in ``YYYY-MM-DD HH:MM:SS.mmm | `` by the collector and
the ``draft acceptance rate = ...`` line is an unprefixed continuation of a
``slot print_timing:`` header. The collector's time is the only time such a line has.

Lines marked SYNTHETIC were written from FORMATS.md §3 (the 2026 one-line variants of
PR #24536 and an intermediate build) because no real excerpt in the corpus shows them.
"""

from __future__ import annotations

from calendar import timegm
from functools import cache
from typing import Any

import pytest

from specmon.parsing import LineParser, parse_lines
from specmon.records import Decode, Spec, Unparsed
from tests.support.realdata import read_lines

MTP = "llamacpp_mtp_print_timing_multiline_1.log"


def ts(text: str) -> float:
    """``YYYY-MM-DD HH:MM:SS[.fff]`` read as UTC, in epoch seconds."""
    date, _, clock = text.partition(" ")
    hms, _, frac = clock.partition(".")
    y, mo, d = (int(x) for x in date.split("-"))
    h, mi, s = (int(x) for x in hms.split(":"))
    return timegm((y, mo, d, h, mi, s, 0, 0, 0)) + (int(frac) / 10 ** len(frac) if frac else 0.0)


@cache
def file_records(name: str) -> dict[int, list[Any]]:
    """All records of a whole file, parsed in order, by line number."""
    out: dict[int, list[Any]] = {}
    for rec in parse_lines(read_lines(name)):
        out.setdefault(rec.line, []).append(rec)
    return out


def spec_fields(**kw: Any) -> dict[str, Any]:
    """A full Spec expectation: every field not given must be None."""
    base = dict.fromkeys(
        ("mean_acceptance_length", "accepted", "drafted", "draft_acceptance_rate", "per_position",
         "accepted_throughput", "drafted_throughput")
    )
    base.update(kw)
    return base


def assert_fields(rec: Any, expected: dict[str, Any]) -> None:
    """Every expected field equal (floats to 1e-9), None meaning None."""
    for key, want in expected.items():
        got = getattr(rec, key)
        if want is None:
            assert got is None, f"{key}: expected None, got {got!r} in {rec!r}"
        elif isinstance(want, (float, tuple)):
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), f"{key}: expected {want!r}, got {got!r}"
            if isinstance(want, tuple):
                assert isinstance(got, tuple)
        else:
            assert got == want and type(got) is type(want), f"{key}: expected {want!r}, got {got!r}"


REAL_SPEC = [
    (31, "2026-05-14 22:40:29.046", spec_fields(draft_acceptance_rate=0.98260, accepted=1186, drafted=1207)),
    (60, "2026-05-14 22:40:43.119", spec_fields(draft_acceptance_rate=1.0, accepted=6, drafted=6)),
    (72, "2026-05-14 23:20:02.510", spec_fields(draft_acceptance_rate=0.98719, accepted=1156, drafted=1171)),
]


@pytest.mark.parametrize(("lineno", "when", "fields"), REAL_SPEC, ids=[f"{MTP}:{r[0]}" for r in REAL_SPEC])
def test_real_draft_acceptance_line(lineno: int, when: str, fields: dict[str, Any]) -> None:
    """The per-request summary: rate as printed (a fraction), accepted and generated drafts."""
    recs = [r for r in file_records(MTP).get(lineno, []) if isinstance(r, Spec)]
    assert len(recs) == 1, file_records(MTP).get(lineno)
    rec = recs[0]
    assert_fields(rec, fields)
    assert rec.line == lineno
    assert rec.rank is None
    assert rec.timestamp == pytest.approx(ts(when), abs=1e-6)


def test_only_draft_acceptance_lines_are_spec() -> None:
    """The cumulative ``statistics mtp:`` lines must not be counted as more Spec samples."""
    spec_lines = sorted(n for n, rs in file_records(MTP).items() for r in rs if isinstance(r, Spec))
    assert spec_lines == [31, 60, 72]


def test_draft_acceptance_line_alone_parses_the_same() -> None:
    """The continuation line read without its header gives the same values."""
    line = read_lines(MTP)[30]
    rec = LineParser().parse(line, 31)
    assert isinstance(rec, Spec)
    assert (rec.draft_acceptance_rate, rec.accepted, rec.drafted) == (0.98260, 1186, 1207)


def test_bare_print_timing_block() -> None:
    """SYNTHETIC: the FORMATS.md §3 block as printed without a collector (no timestamps)."""
    block = [
        "slot print_timing: id  3 | task 0 | ",
        "prompt eval time =     648.99 ms /   133 tokens (    4.88 ms per token,   204.94 tokens per second)",
        "       eval time =   30387.12 ms /  2048 tokens (   14.84 ms per token,    67.40 tokens per second)",
        "      total time =   31036.11 ms /  2181 tokens",
        "draft acceptance rate = 0.98260 ( 1186 accepted /  1207 generated)",
        "statistics mtp: #calls(b,g,a) = 1 861 690, #gen drafts = 690, #acc drafts = 690, #gen tokens = 1207, "
        "#acc tokens = 1186, dur(b,g,a) = 0.006, 3112.317, 0.287 ms",
    ]
    specs = [r for r in parse_lines(block) if isinstance(r, Spec)]
    assert len(specs) == 1
    assert specs[0].line == 5
    assert_fields(specs[0], spec_fields(draft_acceptance_rate=0.98260, accepted=1186, drafted=1207))
    assert specs[0].timestamp is None


SYNTHETIC_SPEC = [
    # PR #24536 (2026-06): one line with mean length and per-position rates; elapsed-time prefix.
    ("2026-per-position",
     "0.06.896.015 I slot print_timing: id  1 | task 0 | draft acceptance = 0.64479 (  167 accepted /   259 generated), "
     "mean acceptance length =  2.92, acceptance rate per position = (0.805, 0.632, 0.483)",
     spec_fields(draft_acceptance_rate=0.64479, accepted=167, drafted=259, mean_acceptance_length=2.92,
                 per_position=(0.805, 0.632, 0.483))),
    # An intermediate 2026 build: "mean len =".
    ("2026-mean-len",
     "slot print_timing: id  0 | task 12 | draft acceptance = 0.65959 ( 5995 accepted /  9089 generated), mean len =  4.30",
     spec_fields(draft_acceptance_rate=0.65959, accepted=5995, drafted=9089, mean_acceptance_length=4.30)),
    # The older SLT_INF form: header and value on one line once "\n" was dropped by a collector.
    ("one-line-rate",
     "slot print_timing: id  2 | task 927 | draft acceptance rate = 0.98719 ( 1156 accepted /  1171 generated)",
     spec_fields(draft_acceptance_rate=0.98719, accepted=1156, drafted=1171)),
]


@pytest.mark.parametrize(("name", "text", "fields"), SYNTHETIC_SPEC, ids=[s[0] for s in SYNTHETIC_SPEC])
def test_synthetic_draft_acceptance_variants(name: str, text: str, fields: dict[str, Any]) -> None:
    """SYNTHETIC: the documented 2026 variants read exactly; absent fields None."""
    rec = LineParser().parse(text, 9)
    assert isinstance(rec, Spec), rec
    assert rec.line == 9
    assert_fields(rec, fields)
    assert rec.rank is None


@pytest.mark.parametrize("text", [
    "draft acceptance rate = 0.98260 ( 1186 acc",
    "2026-05-14 22:40:29.046 | draft acceptance rate = 0.98260 (",
    "draft acceptance rate = 0.9x260 ( 1186 accepted /  1207 generated)",
], ids=["cut-in-counts", "cut-after-rate", "garbage-rate"])
def test_damaged_draft_acceptance_is_unparsed(text: str) -> None:
    """SYNTHETIC damage to the real line: no readable accepted/generated counts -> Unparsed."""
    rec = LineParser().parse(text, 4)
    assert isinstance(rec, Unparsed), rec
    assert rec.marker and rec.marker in text
    assert rec.line == 4


def test_per_round_and_throughput_lines_are_not_spec_or_decode() -> None:
    """Verbose per-round ``accepted 3/4 draft tokens`` and ``n_gen``/``tg`` lines are no Spec/Decode."""
    for name in ("llamacpp_per_round_accepted_2025_12.log", "llamacpp_n_decoded_tg_2026_06.log",
                 "llamacpp_ngen_tg_progress_2026_08.log", "llamacpp_ngram_mod_startup_2026_01.log"):
        for recs in file_records(name).values():
            for r in recs:
                assert not isinstance(r, (Spec, Decode, Unparsed)), (name, r)
