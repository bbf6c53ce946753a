"""Columns without a missing value cross from the bulk workers as arrays (issue 10).

A piece's float and count columns travel as ``array("d")`` / ``array("I")`` when no value
is missing (one buffer to pickle instead of an object per value), and as lists
otherwise. Tested: the packing keeps every value bit for bit and falls back to the list
for a None or a count past 32 bits; a session fed the same columns as lists or as arrays
ends in the same state, for SGLang decode blocks and for vLLM / llama.cpp stats and
spec blocks; and the bulk path really hands arrays (else the speed-up is gone).
"""

from __future__ import annotations

import struct
from array import array
from itertools import chain
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest import bulk, column_blocks, templates
from specmon.model.column_ingest import SpecColumns, StatsColumns
from specmon.model.rows import Rows
from specmon.model.session import Session
from specmon.records import Engine
from tests.unit.test_fastscan import _state

_FLOATS = st.floats(allow_nan=False, width=64, min_value=-1e300, max_value=1e300)


@given(st.lists(st.one_of(_FLOATS, st.none()), max_size=40))
def test_a_float_column_packs_exactly_or_stays_a_list(values: list[float | None]) -> None:
    got = column_blocks._as_array(values, "d")
    if None in values:
        assert got is values
    else:
        assert isinstance(got, array)
        assert [struct.pack("d", v) for v in got] == [struct.pack("d", v) for v in values]


@given(st.lists(st.one_of(st.integers(-5, 2**33), st.none()), max_size=40))
def test_a_count_column_packs_only_within_32_bits(values: list[int | None]) -> None:
    got = column_blocks._as_array(values, "I")
    if None in values or any(v < 0 or v >= 2**32 for v in values if v is not None):
        assert got is values
    else:
        assert isinstance(got, array) and list(got) == values


def _as_arrays(cols: dict[str, list]) -> dict[str, object]:
    out: dict[str, object] = {}
    for name, col in cols.items():
        code = "I" if name in ("running", "accepted", "drafted") else "d"
        out[name] = column_blocks._as_array(col, code) if name not in ("ranks", "per_position") else col
    return out


_TS = st.lists(st.floats(0.0, 3.0), min_size=1, max_size=60).map(
    lambda gaps: [1_700_000_000.0 + sum(gaps[:i + 1]) for i in range(len(gaps))])


@settings(max_examples=150, deadline=None)
@given(_TS, st.data(), st.integers(0, 8))
def test_decode_columns_as_arrays_leave_the_session_as_lists_do(ts: list[float], data: st.DataObject,
                                                                warmup: int) -> None:
    n = len(ts)
    cols = {
        "ranks": [None] * n,
        "ts": ts,
        "running": data.draw(st.lists(st.integers(0, 64), min_size=n, max_size=n)),
        "tput": data.draw(st.lists(st.floats(0.0, 500.0), min_size=n, max_size=n)),
        "acc_len": data.draw(st.lists(st.floats(1.0, 4.0), min_size=n, max_size=n)),
        "acc_rate": data.draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n)),
    }
    packed = _as_arrays(cols)
    sessions = []
    for c in (cols, packed):
        s = Session(warmup=warmup)
        half = n // 2  # two blocks: the second finds warmed-up ranks (the steady path)
        for a, b in ((0, half), (half, n)):
            s.ingest_decode_columns(*(c[k][a:b] for k in ("ranks", "ts", "running", "tput", "acc_len", "acc_rate")),
                                    a + 1, b)
        sessions.append(s)
    lists, arrays = sessions
    assert _state(arrays) == _state(lists)
    assert [list(r.live_throughput) for r in arrays.runs] == [list(r.live_throughput) for r in lists.runs]
    assert [list(r.live_accept_len) for r in arrays.runs] == [list(r.live_accept_len) for r in lists.runs]


@settings(max_examples=150, deadline=None)
@given(_TS, st.data(), st.sampled_from([Engine.VLLM, Engine.LLAMACPP]), st.integers(0, 6))
def test_stats_and_spec_columns_as_arrays_leave_the_session_as_lists_do(ts: list[float], data: st.DataObject,
                                                                        engine: Engine, warmup: int) -> None:
    n = len(ts)
    running = data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n))
    tput = data.draw(st.lists(st.sampled_from([0.0, 12.5, 88.25, 101.0]), min_size=n, max_size=n))
    # A mean length on every line, or on none (llama.cpp before it printed one); rates per
    # position on every line, or on none; some lines that drafted nothing.
    mal: list[float | None] = (data.draw(st.lists(st.floats(1.0, 4.0), min_size=n, max_size=n))
                               if data.draw(st.booleans()) else [None] * n)
    rate = data.draw(st.lists(st.floats(0.0, 1.0), min_size=n, max_size=n))
    drafted = data.draw(st.lists(st.integers(0, 2000), min_size=n, max_size=n))
    accepted = [d // 2 for d in drafted]
    width = data.draw(st.integers(1, 5))
    pps: list[tuple[float, ...] | None] = (
        data.draw(st.lists(st.tuples(*[st.floats(0.0, 1.0)] * width), min_size=n, max_size=n))
        if data.draw(st.booleans()) else [None] * n)
    # A run already summing more positions than these lines have (a shorter draft setting):
    # the line path adds none of them, and neither may the rows.
    before = data.draw(st.lists(st.integers(1, 7), max_size=2))
    sessions = []
    for pack in (False, True):
        p = (lambda c, code: column_blocks._as_array(c, code)) if pack else (lambda c, code: c)
        s = Session(warmup=warmup)
        for k, w in enumerate(before):
            early = SpecColumns(engine, [None], [ts[0]], [2.0], [0.5], [1], [2], [(0.5,) * w])
            assert s.ingest_stats_columns(k + 1, k + 1, ts[0], True, None, early)
        stats = StatsColumns(engine, [None] * n, p(ts, "d"), p(running, "I"), p(tput, "d"))
        # Packed: rows of one buffer, as the C pass hands them (scan.PACKED on a list of floats).
        rows = Rows(width, array("d", chain.from_iterable(pps))) if pack and None not in pps else pps  # type: ignore[arg-type]
        spec = SpecColumns(engine, [None] * n, p(ts, "d"), p(mal, "d"), p(rate, "d"), p(accepted, "I"),
                           p(drafted, "I"), rows)
        assert s.ingest_stats_columns(10, 2 * n + 10, ts[-1], False, stats, spec)
        sessions.append(s)
    lists, arrays = sessions
    assert _state(arrays) == _state(lists)
    assert [(r.accepted, r.drafted, r.per_position_n, [_bits(v) for v in r.per_position_sum]) for r in arrays.runs] \
        == [(r.accepted, r.drafted, r.per_position_n, [_bits(v) for v in r.per_position_sum]) for r in lists.runs]


def _the_block(lines: list[str]) -> column_blocks.Block:
    """The one decode block a fresh learner makes of these SGLang lines."""
    templates._LEARNER.__init__()  # type: ignore[misc]
    piece = bulk.bulk_piece(("\n".join(lines) + "\n").encode(), Engine.SGLANG, 2026)
    (block,) = [b for b in piece.items if isinstance(b, column_blocks.Block)]
    return block


def test_the_bulk_path_hands_decode_columns_as_arrays(tmp_path: Path) -> None:
    lines = [f"[2026-08-23 09:00:{i % 60:02d}] Decode batch, #running-req: {1 + i % 3}, #token: 900, "
             f"token usage: 0.02, accept len: 2.{i % 10}0, accept rate: 0.5{i % 10}, cuda graph: True, "
             f"gen throughput (token/s): {60 + i % 40}.25, #queue-req: 0" for i in range(400)]
    block = _the_block(lines)
    for col in (block.ts, block.tput, block.acc_len, block.acc_rate):
        assert isinstance(col, array) and col.typecode == "d"
    assert isinstance(block.running, array) and block.running.typecode == "I"
    assert list(block.tput[:3]) == [60.25, 61.25, 62.25]


def test_the_bulk_path_hands_each_rank_as_one_object() -> None:
    """Ranks in turn (DP attention): each distinct rank crosses as one object (pickle sends it once),
    and the pickled block is not a text per line."""
    import pickle

    lines = [f"[2026-08-23 09:00:{i % 60:02d} DP{i % 4} TP{i % 4} EP{i % 4}] Decode batch. #running-req: 1, "
             f"#token: 900, token usage: 0.02, cuda graph: True, gen throughput (token/s): {60 + i % 40}.25, "
             f"#queue-req: 0, " for i in range(400)]
    block = _the_block(lines)
    assert block.ranks[:5] == ["DP0 TP0 EP0", "DP1 TP1 EP1", "DP2 TP2 EP2", "DP3 TP3 EP3", "DP0 TP0 EP0"]
    assert len({id(r) for r in block.ranks}) == 4
    assert pickle.dumps(block.ranks).count(b"DP1 TP1 EP1") == 1


def _bits(v: float | None) -> bytes | None:
    return None if v is None else struct.pack("d", v)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(st.floats(-1e6, 1e10, allow_nan=False), st.none()), max_size=50),
       st.one_of(st.none(), st.floats(-1e6, 1e10, allow_nan=False)),
       st.one_of(st.none(), st.floats(0.0, 100.0)), st.booleans())
def test_the_gap_average_in_c_is_the_python_loop_bit_for_bit(times: list[float | None], last: float | None,
                                                            ema: float | None, packed: bool) -> None:
    # Gaps below and above the idle limit, negative steps, missing times, a first sample with
    # no history: the C loop must give the float the Python loop gives (no fused multiply-add),
    # and find idle gaps at the same positions.
    from specmon import _native as _scan
    from specmon.model import column_ingest as session

    column = column_blocks._as_array(times, "d") if packed else times
    want = session._gap_average_py(times, last, ema, session.IDLE_GAP_MIN_S, session.IDLE_GAP_FACTOR)
    got = _scan.gap_average(column, last, ema, session.IDLE_GAP_MIN_S, session.IDLE_GAP_FACTOR)
    assert [_bits(v) for v in got[:2]] == [_bits(None if v is None else float(v)) for v in want[:2]]
    assert got[2] == want[2]  # the same samples found after an idle gap


def test_the_gap_average_refuses_what_is_not_a_column_of_times() -> None:
    from specmon import _native as _scan

    with pytest.raises(TypeError):
        _scan.gap_average(array("i", [1, 2]), None, None, 5.0, 4.0)
    with pytest.raises(TypeError):
        _scan.gap_average(["x"], None, None, 5.0, 4.0)


def _both_paths(cols: tuple[list, ...], warmup: int) -> tuple[Session, Session, int]:
    """One decode block into a session as the bulk path takes it (and how many samples it took one
    by one), and into another with the steady path refused (the per-sample path alone)."""
    n = len(cols[0])
    calls = []
    fast = Session(warmup=warmup)
    original = Session._add_sample

    def counting(self, *args):  # type: ignore[no-untyped-def]
        calls.append(1)
        return original(self, *args)

    Session._add_sample = counting  # type: ignore[method-assign]
    try:
        fast.ingest_decode_columns(*cols, 1, n)
    finally:
        Session._add_sample = original  # type: ignore[method-assign]
    slow = Session(warmup=warmup)
    steady = Session._bulk_steady
    Session._bulk_steady = lambda *a: False  # type: ignore[method-assign,assignment]
    try:
        slow.ingest_decode_columns(*cols, 1, n)
    finally:
        Session._bulk_steady = steady  # type: ignore[method-assign]
    return fast, slow, len(calls)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 6), st.integers(0, 6), st.integers(100, 400))
def test_ranks_in_turn_leave_the_per_sample_path_once_all_have_warmed_up(ranks: int, warmup: int, n: int) -> None:
    # DP attention prints one line per rank in turn: a fresh run's first block is taken sample by
    # sample only until every rank has had its warm-up, and ends as the per-sample path ends.
    names = [f"DP{r} TP{r}" for r in range(ranks)]
    cols = ([names[i % ranks] for i in range(n)], [1_700_000_000.0 + i * 0.25 for i in range(n)],
            [1 + i % 3 for i in range(n)], [60.0 + i % 7 for i in range(n)], [2.0] * n, [0.5] * n)
    fast, slow, calls = _both_paths(cols, warmup)
    assert calls <= 2 * max(warmup, 1) * ranks + 2 < n  # the warm-ups, not the block
    assert _state(fast) == _state(slow)


_RANKS = st.lists(st.sampled_from([None, "DP0 TP0", "DP1 TP1", "DP2 TP2", "PP0 ATTN_CP7 TP7"]), min_size=2, max_size=240)


@settings(max_examples=120, deadline=None)
@given(_RANKS, st.data(), st.integers(0, 4), st.booleans())
def test_ranks_in_any_order_take_the_steady_path_as_the_per_sample_one(ranks: list[str | None], data: st.DataObject,
                                                                      warmup: int, packed: bool) -> None:
    """Ranks interleaved in any order (real DP logs do not strictly alternate), as lists or arrays:
    the session splits the block's times by rank in numpy and ends where the per-sample path ends."""
    n = len(ranks)
    gaps = data.draw(st.lists(st.floats(0.0, 0.02), min_size=n, max_size=n))  # no rank idle
    ts = [1_700_000_000.0 + sum(gaps[:i + 1]) for i in range(n)]
    cols = [ranks, ts, [1 + i % 3 for i in range(n)], [60.0 + (i * 7) % 11 for i in range(n)],
            [1.5 + (i % 5) / 4 for i in range(n)], [0.5] * n]
    if packed:
        cols = [ranks, column_blocks._as_array(ts, "d"), column_blocks._as_array(cols[2], "I"), *(column_blocks._as_array(c, "d") for c in cols[3:])]
    blocks = [(0, n // 2), (n // 2, n)]  # the second block finds the ranks warmed up
    assert _state(_fed(cols, blocks, warmup, True)[0]) == _state(_fed(cols, blocks, warmup, False)[0])


def _fed(cols: list, blocks: list[tuple[int, int]], warmup: int, steady: bool) -> tuple[Session, int]:
    """The decode columns fed block by block (the steady path allowed or refused), and how many
    samples went one by one."""
    s = Session(warmup=warmup)
    calls = []
    original, adding = Session._bulk_steady, Session._add_sample

    def counting(self, *args):  # type: ignore[no-untyped-def]
        calls.append(1)
        return adding(self, *args)

    Session._add_sample = counting  # type: ignore[method-assign]
    if not steady:
        Session._bulk_steady = lambda *a: False  # type: ignore[method-assign,assignment]
    try:
        for a, b in blocks:
            s.ingest_decode_columns(*(c[a:b] for c in cols), a + 1, b)
    finally:
        Session._bulk_steady, Session._add_sample = original, adding  # type: ignore[method-assign]
    return s, len(calls)


# Gaps a rank's samples come at: steady steps, steps near the idle limit (5 s, or 4x the rank's
# average gap), pauses (a benchmark's, a night's), clocks set back.
_GAPS = st.one_of(st.floats(0.0, 0.3), st.floats(4.5, 5.5), st.floats(0.9, 30.0), st.floats(60.0, 90_000.0),
                  st.floats(-3.0, 0.0))


@settings(max_examples=200, deadline=None)
@given(_RANKS, st.data(), st.integers(0, 4), st.booleans())
def test_idle_gaps_are_found_on_the_steady_path_as_sample_by_sample(ranks: list[str | None], data: st.DataObject,
                                                                    warmup: int, packed: bool) -> None:
    """Pauses of any length, on any rank, in blocks cut anywhere: the steady path leaves out of
    throughput the samples the per-sample path leaves out (each after a gap above its rank's idle
    limit), keeps the same gap averages, and takes no sample one by one past the warm-ups."""
    n = len(ranks)
    steps = data.draw(st.lists(_GAPS, min_size=n, max_size=n))
    cuts = sorted(set(data.draw(st.lists(st.integers(1, n - 1), max_size=4))))
    blocks = list(zip([0, *cuts], [*cuts, n], strict=True))

    def fed(steps: list[float], steady: bool) -> tuple[Session, int]:
        ts = [1_700_000_000.0 + sum(steps[:i + 1]) for i in range(n)]
        cols: list = [ranks, ts, [1 + i % 3 for i in range(n)], [60.0 + (i * 7) % 11 for i in range(n)],
                      [1.5 + (i % 5) / 4 for i in range(n)], [0.5] * n]
        if packed:
            cols = [ranks, column_blocks._as_array(ts, "d"), column_blocks._as_array(cols[2], "I"),
                    *(column_blocks._as_array(c, "d") for c in cols[3:])]
        return _fed(cols, blocks, warmup, steady)

    (fast, calls), (slow, _) = fed(steps, True), fed(steps, False)
    assert _state(fast) == _state(slow)
    # Samples one by one: as many as the same lines without a pause take (warm-ups, ranks first
    # seen late in a block), whatever the gaps.
    assert calls == fed([0.25] * n, True)[1]


def test_a_pause_between_benchmark_runs_leaves_out_the_sample_after_it() -> None:
    # Two ranks in turn at 0.5 s, then a 10-minute pause: the first sample of each rank after it
    # spans idle time; the bulk path finds both without going sample by sample.
    n = 400
    ranks = [f"DP{i % 2} TP{i % 2}" for i in range(n)]
    ts = [1_700_000_000.0 + i * 0.25 + (600.0 if i >= 300 else 0.0) for i in range(n)]
    cols = (ranks, ts, [2] * n, [float(i) for i in range(n)], [2.0] * n, [0.5] * n)
    s = Session(warmup=2)
    s.ingest_decode_columns(*(c[:100] for c in cols), 1, 100)
    calls = []
    adding = Session._add_sample
    Session._add_sample = lambda self, *a: calls.append(1) or adding(self, *a)  # type: ignore[method-assign]
    try:
        s.ingest_decode_columns(*(c[100:] for c in cols), 101, n)
    finally:
        Session._add_sample = adding  # type: ignore[method-assign]
    (run,) = s.runs
    assert calls == [] and run.excluded_idle == 2
    assert 300.0 not in run.throughput and 301.0 not in run.throughput and 302.0 in run.throughput
    assert len(run.throughput) == n - 4 - 2  # warm-ups (2 per rank) and the two idle samples out


@settings(max_examples=200, deadline=None)
@given(_RANKS, st.booleans(), st.booleans())
def test_times_split_by_rank_are_each_ranks_times_in_order(ranks: list[str | None], packed: bool,
                                                           python_loop: bool) -> None:
    from specmon.model import column_ingest as session_module

    times = [1_700_000_000.0 + i / 3 for i in range(len(ranks))]
    expected: dict[str | None, list[float]] = {}
    for r, t in zip(ranks, times, strict=True):
        expected.setdefault(r, []).append(t)
    original = session_module._gap_average
    if python_loop:  # a build without the extension: the Python loop gets Python floats
        session_module._gap_average = session_module._gap_average_py
    try:
        got, where = session_module._times_by_rank(ranks, column_blocks._as_array(times, "d") if packed else times)
    finally:
        session_module._gap_average = original
    assert list(got) == list(expected)  # the ranks in the order they first appear
    assert {r: list(t) for r, t in got.items()} == expected
    assert {r: where(r).tolist() for r in got} == {r: [i for i, q in enumerate(ranks) if q == r] for r in expected}
    if python_loop:
        assert all(type(v) is float for t in got.values() for v in t)


def test_the_bulk_path_hands_per_position_rates_as_rows() -> None:
    """llama.cpp's per-position rates cross as rows of one buffer (a float object per value and
    the feeding process's transposition were its largest cost per piece), read as the tuples."""
    import pickle

    templates._LEARNER.__init__()  # type: ignore[misc]
    lines = []
    for i in range(300):
        lines.append(f"prompt eval time =     648.99 ms /   133 tokens (    4.88 ms per token,   204.94 tokens "
                     f"per second)\n       eval time =   25040.27 ms /  2048 tokens (   12.23 ms per token,    "
                     f"{80 + i % 9}.79 tokens per second)")
        lines.append(f"slot print_timing: id  0 | task {i} | draft acceptance = 0.81081 (  210 accepted /   259 "
                     f"generated), mean acceptance length =  3.44, acceptance rate per position = "
                     f"(0.{i % 9}21, 0.653, 0.439)")
    piece = bulk.bulk_piece(("\n".join(lines) + "\n").encode(), Engine.LLAMACPP, 2026)
    (block,) = [b for b in piece.items if isinstance(b, column_blocks.StatsBlock)]
    assert block.spec is not None
    rows = block.spec.per_position
    assert isinstance(rows, Rows) and rows.width == 3 and len(rows) == 300
    assert rows[0] == (0.021, 0.653, 0.439) and rows[10] == (0.121, 0.653, 0.439)
    assert pickle.loads(pickle.dumps(block, -1)).spec.per_position == rows


@settings(max_examples=80, deadline=None)
@given(st.integers(1, 4), st.integers(0, 5), st.integers(300, 3000), st.lists(st.tuples(st.floats(0.0, 1.0),
       st.floats(30.0, 50_000.0)), min_size=1, max_size=3))
def test_a_block_with_idle_gaps_goes_back_to_the_steady_path(ranks: int, warmup: int, n: int,
                                                            gaps: list[tuple[float, float]]) -> None:
    # Idle gaps (a pause between runs, a night) anywhere in a block: the lines after them leave
    # the per-sample path again, and the session ends as the per-sample path alone leaves it.
    names = [f"DP{r} TP{r}" for r in range(ranks)]
    ts = [1_700_000_000.0 + i * 0.25 for i in range(n)]
    for where, length in gaps:
        at = int(where * (n - 1)) + 1
        ts = ts[:at] + [t + length for t in ts[at:]]
    cols = ([names[i % ranks] for i in range(n)], ts, [1 + i % 3 for i in range(n)],
            [60.0 + i % 7 for i in range(n)], [2.0] * n, [0.5] * n)
    fast, slow, calls = _both_paths(cols, warmup)
    assert _state(fast) == _state(slow)
    last_gap = max(int(w * (n - 1)) + 1 for w, _ in gaps)
    assert calls <= 2 * last_gap + 4 * max(warmup, 1) * ranks + 8  # not the whole block after a gap
