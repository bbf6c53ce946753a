"""The scans of a log's head that run before any worker starts, against their plain definitions.

``summarize`` reads the first megabyte of a log for the year, the first day and
whether its stamps lack a date. Done line by line with the full patterns, a head
of 10,000 lines without a date (llama.cpp) cost 0.1 s before the first worker
started. The fast forms search the whole head for a part of the pattern that starts
with a literal, then check each hit with the full pattern. Generated heads (dates and
near-dates, unicode digits, times with and without dates, ANSI colours, docker and
Ray wrappers, lines cut anywhere) must give exactly what the line-by-line
definitions give. Likewise the engine of a head: its lines' votes, with the signs
that occur nowhere in the head left out of each line's count.
"""

from __future__ import annotations

import re
from itertools import islice

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.grammar.common import strip_ansi, strip_outer
from specmon.grammar.prefix import _TS, clock_mode
from specmon.parsing.detect import _SHAPES, detect_engine, line_engine
from specmon.records import Engine
from specmon.sources.logfiles import first_date

_DATED = re.compile(r"(?<!\d)((?:19|20)\d{2})-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])[ T]\d{2}:\d{2}:\d{2}")


def first_date_by_line(lines: list[str]) -> tuple[int, int, int] | None:
    for line in lines:
        m = _DATED.search(line)
        if m is not None:
            return int(m.group(1)), int(m.group(2)), int(m.group(3))
    return None


def clock_mode_by_line(lines: list[str], limit: int = 5000) -> str | None:
    for line in islice(lines, limit):
        m = _TS.search(strip_outer(strip_ansi(line[:300]))[0][:200])
        if m is not None:
            return None if m.group("date") else "md" if m.group("md") else "time"
    return None


_PIECES = st.sampled_from([
    "2026-08-23 ", "2026-08-23T", "1999-12-31 ", "2026-13-01 ", "2026-02-30 ", "12026-08-23 ", "x2026-08-23 ",
    "08-23 ", "10-22 ", "09:15:26", "23:59:59", "9:15:26", ":15:26", ".123", ",456", "٢٠٢٦-08-23 ",
    "09:1٥:26", "[", "] ", " TP0", " DP1 TP1 EP1", "INFO ", "\x1b[36m", "\x1b[0m", "[36m", "(WorkerDict pid=1, ip=1.2.3.4) ",
    "2026-08-23T09:00:00.123456789Z ", "2026-08-23T09:00:00.1Z stdout F ", "2026-05-14 09:00:00.123 | ",
    "Decode batch, #running-req: 1", "slot print_timing: id  0 | ", "-", ":", " ", "0", "7", "T",
])
_LINE = st.lists(_PIECES, max_size=12).map("".join)
_HEAD = st.lists(_LINE, max_size=30)


@settings(max_examples=600, deadline=None)
@given(_HEAD)
def test_first_date_is_the_first_dated_line(lines: list[str]) -> None:
    assert first_date(lines) == first_date_by_line(lines)


@settings(max_examples=600, deadline=None)
@given(_HEAD, st.integers(0, 40))
def test_clock_mode_is_the_first_stamped_lines(lines: list[str], limit: int) -> None:
    assert clock_mode(lines, limit) == clock_mode_by_line(lines, limit)


def test_named_cases() -> None:
    assert first_date(["llama 1.02.003.004 I srv", "12026-08-23 09:00:00", "[2025-01-02 03:04:05 TP0] a"]) == (2025, 1, 2)
    assert first_date(["2026-08-23 9:00:00", "02026-08-23 09:00:00"]) is None
    assert clock_mode(["no time", "(WorkerDict pid=1) [09:15:26 TP1] Decode batch"]) == "time"
    assert clock_mode(["2026-08-23T09:00:00.1Z INFO 10-22 09:15:26 [loggers.py:1] x"]) == "md"
    assert clock_mode(["[2026-08-23 09:15:26] x"]) is None


# -- the engine of a head -------------------------------------------------------------------------

_OLD_SGLANG_SHAPE = re.compile(r"\d{2}:\d{2}:\d{2}(?:\.\d{3})?(?: [A-Z_]+\d+)+\] "
                               r"|^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?\] ")
_SIGN_PIECES = st.sampled_from([
    "Decode batch", "Prefill batch", "server_args=ServerArgs(", "server_args={'", "sglang", "Avg prompt throughput", "vLLM",
    "SpecDecoding metrics", "[loggers.py:", "Speculative metrics", "slot print_timing", "llama_", "srv  ",
    "draft acceptance", "ggml_", "llama-server", "INFO ", "INFO 10-22 09:15:26 [loggers.py:123] ",
    "[2026-08-23 09:15:26] ", "[2026-08-23 09:15:26.123 TP0] ", "09:15:26 DP1 TP1 EP1] ", "12:3", "4:56 TP",
    "0] ", "9:15:26 TP0] ", "x1:02:03.456 DP0 TP0] ", "slot  launch: id  0 ", "srv  update_slots:", "| ", " ", "[", "]", ":", "0", "TP", "\x1b[0m",
])
_ENGINE_LINE = st.lists(st.one_of(_PIECES, _SIGN_PIECES), max_size=10).map("".join)


@settings(max_examples=600, deadline=None)
@given(st.lists(_ENGINE_LINE, max_size=25), st.integers(1, 30))
def test_detect_engine_is_the_vote_of_its_lines(lines: list[str], limit: int) -> None:
    score = dict.fromkeys((Engine.SGLANG, Engine.VLLM, Engine.LLAMACPP), 0)
    for line in lines[:limit]:
        engine, weight = line_engine(line)
        if weight:
            score[engine] += weight
    best = max(score, key=lambda e: score[e])
    assert detect_engine(iter(lines), limit) == (best if score[best] > 0 else Engine.UNKNOWN)


@settings(max_examples=1000, deadline=None)
@given(_ENGINE_LINE)
def test_the_sglang_shape_searched_from_its_colon_is_the_same_shape(line: str) -> None:
    assert any(p.search(line) for p in _SHAPES[Engine.SGLANG]) == bool(_OLD_SGLANG_SHAPE.search(line))


@settings(max_examples=600, deadline=None)
@given(_ENGINE_LINE, st.sampled_from(["", "2026-08-23T09:00:00.123Z ", "2026-05-14 09:00:00.000 | ",
                                      "(WorkerDict pid=12, ip=10.0.0.7) ", "(VllmWorker rank=0 pid=7) "]),
       st.sampled_from(["", "(EngineCore_DP0 pid=123) ", "2026-08-23T09:00:00Z "]))
def test_the_inner_line_is_strip_outers(line: str, outer: str, inner: str) -> None:
    from specmon.grammar.common import inner_line

    text = outer + inner + line
    assert inner_line(text) == strip_outer(text)[0]
