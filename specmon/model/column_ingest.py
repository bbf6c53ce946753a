"""The session's bulk ingest: blocks of well-formed stats lines taken as columns.

The bulk path of ``summarize`` and ``report`` (:mod:`specmon.ingest.bulk`) hands the session
whole blocks of decode, stats and spec lines as columns; :class:`ColumnIngest` (a base of
:class:`specmon.model.session.Session`) applies to them the same rules :meth:`Session.ingest`
applies record by record, without building the records. Kept apart from the record path so
each reads on its own; the two must give the same runs (tests/unit/test_packed_columns.py).
"""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce
from itertools import compress
from operator import add
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from specmon.model.rows import Rows
from specmon.model.run import (
    DEFAULT_WARMUP,
    IDLE_GAP_FACTOR,
    IDLE_GAP_MIN_S,
    LIVE_POINTS,
    Run,
    ServerState,
    _RankState,
)
from specmon.records import Decode, Engine, EngineStats, ParsedRecord, Spec


# The bulk path hands a column without a missing value as an array (floats as "d", counts as
# "I"): it crosses from the worker as one buffer, not an object per value, and joins the run's
# float32 arrays in C. A column with a gap (None) stays a list. Both read the same by index.
def _packed(column: Any) -> bool:
    """The column crossed as an array (column_blocks._as_array: no None, every value fits its type)."""
    return isinstance(column, array)


def _complete(column: Any) -> bool:
    """No value is missing (an array cannot hold None; a list is searched)."""
    return isinstance(column, array) or None not in column


def _gap_average_py(times: Any, last: float | None, ema: float | None, floor: float, factor: float
                    ) -> tuple[float | None, float | None, list[int]]:
    """A rank's gap average over a column of times (None: no time), as :meth:`Session._update_gap`
    keeps it sample by sample, and the positions of the samples that came after an idle gap (as
    :meth:`Session._add_sample` finds them): ``(average, last time, idle positions)``."""
    idle = []
    for at, t in enumerate(times):
        if t is None:
            continue
        if last is not None:
            gap = t - last
            limit = max(floor, factor * (ema or 0.0))
            if gap > limit:
                idle.append(at)
            if gap >= 0:
                if ema is None:
                    ema = gap
                elif gap <= limit:
                    ema = 0.9 * ema + 0.1 * gap
        last = t
    return ema, last, idle


try:  # the same loop in C (specmon/_native.c: the feeding process's largest cost per piece)
    from specmon._native import gap_average as _gap_average
except ImportError:  # built without a C compiler
    _gap_average = _gap_average_py


def _times_by_rank(ranks: list[str | None], times: Any
                   ) -> tuple[dict[str | None, Any], Callable[[str | None], np.ndarray]]:
    """Each rank's times in line order, the ranks in the order they first appear (ranks that
    take turns: DP attention prints a line per DP rank), and where a rank's lines are in the
    column (its times' positions, asked only for a rank with an idle gap).

    Split by numpy on the ranks' numbers: a loop over the samples appending to each rank's list
    was the feeding process's largest cost on such logs (2 ranks, 2M lines: 0.3-0.5 s). The
    times are the same doubles, in the same order, so every sum over them is the same.
    """
    number = {r: k for k, r in enumerate(dict.fromkeys(ranks))}
    codes = np.fromiter(map(number.__getitem__, ranks), dtype=np.intp, count=len(ranks))
    values = (np.frombuffer(times, dtype=np.float64) if isinstance(times, array) and times.typecode == "d"
              else np.array(times, dtype=np.float64))
    split = {r: values[codes == k] for r, k in number.items()}
    if _gap_average is _gap_average_py:
        split = {r: t.tolist() for r, t in split.items()}  # (Python floats for the Python loop)
    return split, lambda r: np.flatnonzero(codes == number[r])


def _extend(dst: array[Any], values: Any) -> None:
    """``dst.extend(values)``, also from an array of another type (rounded as ``append`` rounds)."""
    if isinstance(values, array) and values.typecode != dst.typecode:
        dst.frombytes(np.frombuffer(values, dtype=values.typecode).astype(dst.typecode).tobytes())
    else:
        dst.extend(values)


@dataclass(slots=True)
class StatsColumns:
    """Consecutive interval stats lines (vLLM engine lines, llama.cpp eval lines) as columns."""

    engine: Engine
    ranks: list[str | None]
    ts: list[float | None]
    running: list[int | None]
    tput: list[float]

    def record(self, i: int, line: int) -> EngineStats:
        """Line ``i`` as the record the line parser gives (its line number: ``line``)."""
        return EngineStats(line, self.ts[i], self.ranks[i], gen_throughput=self.tput[i], running=self.running[i],
                           engine=self.engine)


@dataclass(slots=True)
class SpecColumns:
    """Consecutive speculative-decoding lines (vLLM SpecDecoding, llama.cpp draft acceptance) as columns."""

    engine: Engine
    ranks: list[str | None]
    ts: list[float | None]
    mal: list[float | None]
    rate: list[float | None]
    accepted: list[int | None]
    drafted: list[int | None]
    per_position: list[tuple[float, ...] | None] | Rows  # (Rows: packed by the bulk pass)

    def record(self, i: int, line: int) -> Spec:
        """Line ``i`` as a record with what the session reads of it."""
        return Spec(line, self.ts[i], self.ranks[i], mean_acceptance_length=self.mal[i], accepted=self.accepted[i],
                    drafted=self.drafted[i], draft_acceptance_rate=self.rate[i], per_position=self.per_position[i],
                    engine=self.engine)


class _Flags:
    """Which lines of a spec block count: numpy's flags, and the list only once something asks."""

    __slots__ = ("flags", "_list")

    def __init__(self, flags: np.ndarray) -> None:
        self.flags = flags
        self._list: list[bool] | None = None

    @property
    def list(self) -> list[bool]:
        if self._list is None:
            self._list = self.flags.tolist()
        return self._list


class ColumnIngest:
    """Blocks of consecutive stats lines as columns: the session's bulk ingest (see module docstring)."""

    if TYPE_CHECKING:  # what the session (the only class built on this one) holds and does
        warmup: int | None
        counts: Counter[str]
        state: ServerState
        _current: Run | None
        ingest: Callable[[ParsedRecord], None]
        _vote: Callable[..., None]
        _run_for_sample: Callable[[ParsedRecord], Run]
        _warmup_for: Callable[[], int]
        _add_sample: Callable[..., None]

    def count_lines(self, kind: str, n: int) -> None:
        """Lines of a kind the bulk path counts without records (SGLang prefill): counted, and
        voting for their engine, as :meth:`ingest` counts and votes for each record."""
        if not n:
            return
        self.counts[kind] += n
        if kind == "prefill":
            self._vote(Engine.SGLANG, n)

    def ingest_decode_columns(self, ranks: list[str | None], ts: list[float | None], running: list[int],
                              tput: list[float], acc_len: list[float | None] | None,
                              acc_rate: list[float | None] | None, first_line: int, last_line: int) -> None:
        """Take a block of consecutive, well-formed SGLang decode lines as columns.

        The bulk path of ``summarize`` on large files: the same rules as
        :meth:`ingest` applied to ``Decode`` records, without building them.
        """
        n = len(tput)
        if not n:
            return
        self.counts["decode"] += n
        self._vote(Engine.SGLANG, n)
        first = Decode(first_line, ts[0], ranks[0])
        run = self._run_for_sample(first)
        if run.engine is Engine.UNKNOWN:
            run.engine = Engine.SGLANG
        run.last_line = last_line
        for t in reversed(ts):
            if t is not None:
                run.last_at = t
                break
        if run.state is not ServerState.SERVING:
            run.state = self.state = ServerState.SERVING
        warmup = self._warmup_for()
        add = self._add_sample
        i = 0
        rank = ranks[0]
        rs = run._ranks.get(rank)
        # Per sample while the rank is warming up (or has no history yet) ...
        while i < n and (rs is None or rs.seen < max(warmup, 1) or rs.last_ts is None):
            add(run, ranks[i], ts[i], tput[i], running[i], acc_len[i] if acc_len else None,
                acc_rate[i] if acc_rate else None, True, False, warmup)
            rs = run._ranks.get(rank)
            i += 1
        if i < n and not self._bulk_steady(run, rank, ranks, ts, running, tput, acc_len, acc_rate, i, warmup):
            # Per sample. Ranks in turn (DP attention) warm up one beside the other, and the loop
            # above waited for the first only: once each has had its warm-up, the steady path is
            # tried once more (the first block of a DP log went through here whole, 14,000 lines).
            # A sample without its time fails it too, for the whole rest of the block: it is
            # tried again at growing distances, so the lines after it go back to the steady path.
            span = max(warmup, 1) * len(set(ranks[i:])) + 1
            retry = i + span
            for j in range(i, n):
                if j == retry:
                    if self._bulk_steady(run, ranks[j], ranks, ts, running, tput, acc_len, acc_rate, j, warmup):
                        break
                    span *= 2
                    retry = j + span
                add(run, ranks[j], ts[j], tput[j], running[j], acc_len[j] if acc_len else None,
                    acc_rate[j] if acc_rate else None, True, False, warmup)

    def _bulk_steady(self, run: Run, rank: str | None, ranks: list[str | None], ts: list[float | None],
                     running: list[int], tput: list[float], acc_len: list[float | None] | None,
                     acc_rate: list[float | None] | None, i: int, warmup: int) -> bool:
        """The common case in bulk: warmed-up ranks, every sample with its time.

        The rules of :meth:`_add_sample` then reduce to appends in line order, each rank's
        gap average over its own samples, and the samples after an idle gap (found by the
        same loop as the average: a pause between benchmark runs, a night) left out of
        throughput and concurrency. Several ranks in turn (DP attention prints one line per
        DP rank) are the same rules per rank. Returns False (nothing done) otherwise.

        (Before idle gaps were found here, a block with one went sample by sample from the
        gap until a retry found the rest of it gap-free: 43,000 samples of a 2M-line log
        with pauses, 0.2 s of the feeding process.)
        """
        tail_ts = ts[i:]
        tail_ranks = ranks[i:]
        if not _complete(tail_ts):
            return False
        by_rank: dict[str | None, Any]
        where: Callable[[str | None], np.ndarray] | None = None
        # In C: count() (the bulk path hands one object per rank).
        if tail_ranks.count(rank) == len(tail_ts):
            by_rank = {rank: tail_ts}  # (no None: tested above)
        else:
            by_rank, where = _times_by_rank(tail_ranks, tail_ts)
        steady: list[tuple[str | None, _RankState, float | None, float | None, int]] = []
        idle: list[int] = []
        for r, times in by_rank.items():
            rs = run._ranks.get(r)
            if rs is None or rs.seen < max(warmup, 1) or rs.last_ts is None:
                return False
            ema, last, gaps = _gap_average(times, rs.last_ts, rs.gap_ema, IDLE_GAP_MIN_S, IDLE_GAP_FACTOR)
            if gaps:
                idle.extend(gaps if where is None else where(r)[gaps].tolist())
            steady.append((r, rs, ema, last, len(times)))
        for r, rs, ema, last, n in steady:
            rs.gap_ema, rs.last_ts = ema, last
            rs.seen += n
            if r:
                run.ranks.add(r)
        busy_tput: Any = tput[i:]
        busy_running: Any = running[i:]
        if idle:
            run.excluded_idle += len(idle)
            busy = [True] * len(busy_tput)
            for k in idle:
                busy[k] = False
            busy_tput = list(compress(busy_tput, busy))
            busy_running = list(compress(busy_running, busy))
        tail = slice(max(i, len(tput) - LIVE_POINTS), None)
        run.live_throughput.extend(tput[tail])
        _extend(run.throughput, busy_tput)
        _extend(run.concurrency, busy_running)
        for column, counted, live in ((acc_len, run.accept_len, run.live_accept_len),
                                      (acc_rate, run.accept_rate, run.live_accept_rate)):
            if column:
                after: Any = column[i:]  # a list, or an array (column_blocks._as_array) that holds no None
                values = after if isinstance(after, array) else [v for v in after if v is not None]
                _extend(counted, values)
                live.extend(values[-LIVE_POINTS:])
        return True

    def ingest_stats_columns(self, first_line: int, last_line: int, last_ts: float | None, first_is_spec: bool,
                             stats: StatsColumns | None, spec: SpecColumns | None) -> bool:
        """Take a block of consecutive, well-formed vLLM / llama.cpp stats and spec lines as columns.

        The same rules as :meth:`ingest` on the records, in line order (stats and spec
        lines touch different figures, so only the block's first line and last time need
        the order). Returns False, having done nothing, when the current run has ended
        (which line comes first then decides whether a new run begins): feed the records.
        """
        run = self._current
        if run is not None and run.state in (ServerState.CRASHED, ServerState.STOPPED):
            return False
        wmax = self.warmup if self.warmup is not None else max(DEFAULT_WARMUP.values())
        order = ((spec, True), (stats, False)) if first_is_spec else ((stats, False), (spec, True))
        for cols, is_spec in order:
            if cols is None or not cols.ts:
                continue
            n = len(cols.ts)
            i = 0
            # Where the column's last rank begins its unbroken stretch (bulk only there).
            same = n - 1
            if cols.ranks.count(cols.ranks[-1]) == n:
                same = 0  # one rank throughout (in C: the loop below took 1.6 ms a piece)
            while same > 0 and cols.ranks[same - 1] == cols.ranks[-1]:
                same -= 1
            # Record by record while the run or the rank warms up (and to open the run).
            while i < n and not self._steady(cols, is_spec, i, wmax, same):
                self.ingest(cols.record(i, first_line))
                i += 1
            if i < n:
                if is_spec:
                    self._bulk_spec(cols, i)  # type: ignore[arg-type]
                else:
                    self._bulk_stats(cols, i)  # type: ignore[arg-type]
        run = self._current
        if run is not None:
            run.last_line = last_line
            if last_ts is not None:
                run.last_at = last_ts
        return True

    def _steady(self, cols: StatsColumns | SpecColumns, is_spec: bool, i: int, wmax: int, same: int) -> bool:
        run = self._current
        if run is None or run.engine is Engine.UNKNOWN:
            return False
        if is_spec:
            return run._spec_seen >= wmax
        rank = cols.ranks[i]
        rs = run._ranks.get(rank)
        return rs is not None and rs.seen >= wmax and run.state is ServerState.SERVING and i >= same

    def _bulk_stats(self, c: StatsColumns, i: int) -> None:
        run = self._current
        assert run is not None
        n = len(c.ts) - i
        self.counts["engine_stats"] += n
        self._vote(c.engine, n)
        rank = c.ranks[i]
        rs = run._ranks[rank]
        if rank:
            run.ranks.add(rank)
        rs.seen += n
        # The gap average, in order (what _add_sample keeps through _update_gap).
        rs.gap_ema, rs.last_ts, _idle = _gap_average(c.ts[i:], rs.last_ts, rs.gap_ema, IDLE_GAP_MIN_S,
                                                    IDLE_GAP_FACTOR)
        tput, running = c.tput[i:], c.running[i:]
        run.live_throughput.extend(tput[-LIVE_POINTS:])
        if 0 not in running and 0.0 not in tput:
            # No idle interval: the common case, in C (llama.cpp prints no concurrency: 0 = unknown).
            _extend(run.throughput, tput)
            if _complete(running):
                _extend(run.concurrency, running)
            elif running.count(None) == len(running):
                run.concurrency.extend([0] * len(running))
            else:
                run.concurrency.extend(0 if r is None else r for r in running)
            return
        busy = [not (r == 0 or t == 0) for r, t in zip(running, tput, strict=True)]
        run.excluded_idle += busy.count(False)
        run.throughput.extend(compress(tput, busy))
        run.concurrency.extend(r if r is not None and r >= 0 else 0 for r in compress(running, busy))

    def _bulk_spec(self, c: SpecColumns, i: int) -> None:
        run = self._current
        assert run is not None
        n = len(c.ts) - i
        self.counts["spec"] += n
        self._vote(c.engine, n)
        run._spec_seen += n
        mal, rate, acc, dra, pps = c.mal[i:], c.rate[i:], c.accepted[i:], c.drafted[i:], c.per_position[i:]
        for column, live in ((mal, run.live_accept_len), (rate, run.live_accept_rate)):
            live.extend(column[-LIVE_POINTS:] if _complete(column)
                        else [v for v in column if v is not None][-LIVE_POINTS:])  # type: ignore[arg-type]
        pp = run.per_position_sum
        if 0 not in dra and _complete(mal) and _complete(rate) and _complete(acc) and _complete(dra):
            # Every line drafted and read whole: the common case, in C (sums in line order).
            _extend(run.accept_len, mal)
            _extend(run.accept_rate, rate)
            run.accepted += sum(acc)  # type: ignore[arg-type]
            run.drafted += sum(dra)  # type: ignore[arg-type]
            if isinstance(pps, Rows) and pps.width >= len(pp):
                # Packed by the bulk pass (rows of one width, no None): a position at a time.
                pp.extend([0.0] * (pps.width - len(pp)))
                pps.add_to(pp)
                run.per_position_n += len(pps)
                return
            if not isinstance(pps, Rows) and None not in pps and pps:
                whole = cast("list[tuple[float, ...]]", pps)
                width = len(whole[0])
                # (the widths as a set, in C: a generator over the rows took 50 ms of a 2M-line log)
                if width and width >= len(pp) and set(map(len, whole)) == {width}:
                    pp.extend([0.0] * (width - len(pp)))
                    for j, values in enumerate(zip(*whole, strict=True)):
                        pp[j] = reduce(add, values, pp[j])
                    run.per_position_n += len(whole)
                    return
            keep = _Flags(np.ones(len(dra), dtype=bool))
        else:
            # Some line drafted nothing, or gave no mean length (llama.cpp before its
            # acceptance length: every line), or a value was cut: line by line, except where a
            # column is whole (in numpy) or empty (no None to skip one by one). The lines kept are
            # found in numpy from the packed drafted counts, and listed only if a column needs it
            # (a comprehension took 30 ms of a 2M-line llama.cpp log).
            counts = cast("array[int] | None", dra if _packed(dra) else None)
            keep = _Flags(np.frombuffer(counts, dtype=counts.typecode) != 0 if counts is not None
                          else np.array([d != 0 for d in dra], dtype=bool))
            kept = keep.flags
            columns: tuple[tuple[Any, array[float]], ...] = ((mal, run.accept_len), (rate, run.accept_rate))
            for column, dst in columns:
                if _packed(column):
                    code = column.typecode
                    _extend(dst, array(code, np.frombuffer(column, dtype=code)[kept].tobytes()))
                elif column.count(None) != len(column):
                    dst.extend(v for v in compress(column, keep.list) if v is not None)
            if _packed(acc) and _packed(dra):  # (counts of 32 bits: a list may hold any int)
                run.accepted += int(np.asarray(acc, dtype=np.int64)[kept].sum())
                run.drafted += int(np.asarray(dra, dtype=np.int64)[kept].sum())
            else:
                for a, d, k in zip(acc, dra, keep.list, strict=True):
                    if k and a is not None and d is not None:
                        run.accepted += a
                        run.drafted += d
            if not isinstance(pps, Rows) and pps.count(None) == len(pps):
                return  # (no line gave its rates per position)
        for p in compress(pps, keep.list):
            if p:
                if len(pp) < len(p):
                    pp.extend([0.0] * (len(p) - len(pp)))
                if len(p) == len(pp):
                    for j, v in enumerate(p):
                        pp[j] += v
                    run.per_position_n += 1
