"""The column blocks: what a piece's template-read stats lines become for the session.

The C pass hands back each kind's values as columns; this module makes of them the columns the
session takes (:meth:`specmon.model.session.Session.ingest_decode_columns`,
:meth:`~specmon.model.session.Session.ingest_stats_columns`): ranks, times from the prefix's
parts, and each kind's fields, as arrays where no value is missing (one buffer to pickle, not
an object per value), in blocks of consecutive lines.
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from itertools import repeat
from operator import add
from typing import Any, cast

import numpy as np

from specmon.engines import KINDS
from specmon.grammar.kinds import LineKind, Template
from specmon.ingest.scan import AS_BYTES, AS_FLOAT, AS_INT
from specmon.ingest.templates import _LEARNER, _as, _md_days
from specmon.model.column_ingest import SpecColumns, StatsColumns
from specmon.model.rows import Rows
from specmon.records import Decode, EngineStats, Prefill, Spec


@dataclass
class Block:
    """Consecutive template-read decode lines as columns (line numbers relative to the piece)."""

    first_line: int
    last_line: int
    ranks: list[str | None]
    ts: list[float | None]
    running: list[int]
    tput: list[float]
    acc_len: list[float | None] | None
    acc_rate: list[float | None] | None


@dataclass
class StatsBlock:
    """Consecutive template-read interval stats and spec lines (vLLM, llama.cpp) as columns."""

    first_line: int
    last_line: int
    last_ts: float | None
    first_is_spec: bool
    stats: StatsColumns | None
    spec: SpecColumns | None


# Which kinds the session takes as columns, by family: SGLang decode (prefill only counted), or one
# interval-stats kind with one spec kind (vLLM, llama.cpp). Anything else in a piece: records.
# Read from what the engines declare (a kind the bulk path can read has a body).
_BULK = tuple(k for k in KINDS if k.body is not None)
_DECODE_KINDS = frozenset(k.name for k in _BULK if k.record is Decode)
_COUNTED_KINDS = frozenset(k.name for k in _BULK if k.record is Prefill)
_STATS_KINDS = frozenset(k.name for k in _BULK if k.record is EngineStats)
_SPEC_KINDS = frozenset(k.name for k in _BULK if k.record is Spec)
_KIND_ENGINE = {k.name: k.engine for k in KINDS}


def _columns(kind: LineKind, n: int, gcols: list[list[Any]], hits: list[int], year: int,
             day: float) -> dict[str, Any]:
    """Columns (``rank``, ``ts``, then ``kind.columns``) of the ``n`` lines read by the kind's lean templates.

    The pass has made the prefix parts and plain numbers values already (see :func:`_as`).
    """
    layout = _LEARNER.layouts[f"{kind.name}/columns"]
    names = ("rank", "ts", *(kind.columns or ()))
    # Lists of floats the pass packed as rows of one width (scan.PACKED): read as the list.
    gcols = cast("list[list[Any]]", [Rows(*c) if isinstance(c, tuple) else c for c in cast("list[Any]", gcols)])
    # Usually one shape fills the piece (the pass counts each template's lines).
    single = next((w for w, h in enumerate(hits) if h == n), None)
    if single is None:
        # Lines of several shapes interleaved: one line at a time (rare).
        found = list(zip(*gcols, strict=True))
        cols: dict[str, list[Any]] = {name: [] for name in names}
        for f in found:
            t, base, groups = next(x for x in layout if any(v is not None for v in f[x[1]:x[1] + len(x[2])]))
            vals = _read_lean(t, groups, f[base:base + len(groups)], year, day)
            for name in names:
                cols[name].append(vals.get(name))
        return cols
    t, base, groups = layout[single]
    g = {role: base + i - 1 for role, i in groups.items()}
    n = len(gcols[0])
    out: dict[str, Any] = {}  # lists, and arrays where nothing is missing (_as_array)
    # map keeps the per-line work in C; the memos persist across pieces.
    ri = g.get("rank")
    out["rank"] = [None] * n if ri is None else _one_object_each(gcols[ri])
    hi = g.get("hms")
    if hi is None:
        out["ts"] = [None] * n
    else:
        # Lists, or arrays where the pass packed every value (scan.PACKED).
        secs: list[float | None] | array[float] = gcols[hi]
        di, mi = g.get("date"), g.get("md")
        days: list[float | None] | array[float] | None
        if di is not None:
            days = gcols[di]
        elif mi is not None:
            days = list(map(_md_days(year).__getitem__, gcols[mi]))
        else:
            days = None
        fi = g.get("frac")
        fracs = gcols[fi] if fi is not None else None
        if _has_none(secs) or (days is not None and _has_none(days)):
            # An impossible date or time somewhere (month 13, 25:00:00): no timestamp there.
            ts: list[float | None] = []
            for j, h in enumerate(secs):
                d = days[j] if days is not None else day
                if h is None or d is None:
                    ts.append(None)
                else:
                    ts.append(d + h + (fracs[j] if fracs is not None else 0.0))
        elif isinstance(secs, array) and not isinstance(days, list) and not isinstance(fracs, list):
            out["ts"] = _packed_ts(secs, days, fracs, day)
        elif days is None:
            # A time of day without a date: on the file's day (the session keeps the days in order).
            ts = list(map(add, secs, repeat(day)))
            if fracs is not None:
                ts = list(map(add, ts, fracs))
        else:
            ts = list(map(add, days, secs))
            if fracs is not None:
                ts = list(map(add, ts, fracs))
        if "ts" not in out:
            out["ts"] = _as_array(ts, "d")
    for attr in kind.columns or ():
        i = g.get(attr)
        # A template's groups always take part: every value is there and matches its pattern.
        if i is None:
            out[attr] = [None] * n
        else:
            conv = t.converters[attr]
            column = getattr(conv, "column", None)  # a converter that does a whole column in C
            made = _as(t, attr)
            if made != AS_BYTES:
                out[attr] = _as_array(gcols[i], _ARRAY_TYPES.get(made))  # made by the pass (Rows: as it is)
            else:
                out[attr] = column(gcols[i]) if column is not None else list(map(conv, gcols[i]))
    return out


def _one_object_each(column: list[Any]) -> list[Any]:
    """The column with equal values as one object each (the first of them).

    The pass makes a new text object for a rank unless the line before had the same one, so
    ranks in turn (DP attention: a line per DP rank) came out as one object per line: pickled
    and unpickled one by one, and hashed again by each of the feeding process's look-ups.
    Shared, each crosses once (pickle's memo) and is found by identity.
    """
    seen: dict[Any, Any] = {}
    return list(map(seen.setdefault, column, column))


#: The array type a column of floats or counts made by the pass travels in (see _as_array).
_ARRAY_TYPES = {AS_FLOAT: "d", AS_INT: "I"}


def _as_array(column: list[Any] | array[Any], typecode: str | None) -> list[Any] | array[Any]:
    """A column without a missing value as an array of ``typecode``, else as it is.

    An array pickles as one buffer: the feeding process unpickled 14,500 floats per column
    of an SGLang piece one object at a time (0.19 ms), then converted each into the run's
    float32 array (0.33 ms); now both are copies (see column_ingest._extend). "d" keeps every
    float exact; a count past 32 bits or a None keeps the list.
    """
    if typecode is None or isinstance(column, array):  # (packed by the pass already)
        return column
    try:
        return array(typecode, column)
    except (TypeError, OverflowError):
        return column


def _packed_ts(secs: array[float], days: array[float] | None, fracs: array[float] | None,
               day: float) -> array[float]:
    """The times of columns the pass packed: the list path's sums, in its order (day + time +
    fraction, IEEE adds of doubles: the same bits), a column at a time."""
    whole = np.frombuffer(secs) + (day if days is None else np.frombuffer(days))
    if fracs is not None:
        whole += np.frombuffer(fracs)
    return array("d", whole.tobytes())


def _has_none(column: list[Any] | array[Any]) -> bool:
    return not isinstance(column, array) and None in column


def _read_lean(t: Template, groups: dict[str, int], f: tuple[Any, ...], year: int, day: float) -> dict[str, Any]:
    """The column values of one line read by a lean template (groups numbered from 1 within it).

    The time is :func:`specmon.grammar.prefix.stamp_value`'s arithmetic on the parts the pass made.
    """
    out: dict[str, Any] = {"ts": None}
    hi = groups.get("hms")
    if hi:
        di, mi, fi = groups.get("date"), groups.get("md"), groups.get("frac")
        d = f[di - 1] if di else _md_days(year)[f[mi - 1]] if mi else day
        sec = f[hi - 1]
        if d is not None and sec is not None:
            out["ts"] = d + sec + (f[fi - 1] if fi else 0.0)
    ri = groups.get("rank")
    out["rank"] = f[ri - 1] if ri else None
    for attr in t.kind.columns or ():
        i = groups.get(attr)
        out[attr] = None if not i else f[i - 1] if _as(t, attr) != AS_BYTES else t.converters[attr](f[i - 1])
    return out


def _block(cols: dict[str, list[Any]], a: int, b: int, first: int, last: int) -> Block:
    ranks, ts, running, tput, acc_len, acc_rate = (cols[k][a:b] for k in (
        "rank", "ts", "running_req", "gen_throughput", "accept_len", "accept_rate"))
    return Block(first, last, ranks, ts, running, tput,
                 acc_len if any(v is not None for v in acc_len) else None,
                 acc_rate if any(v is not None for v in acc_rate) else None)


def _stats_block(cols: dict[str, dict[str, list[Any]]], ranges: dict[str, tuple[int, int]], first: int, last: int,
                 last_ts: float | None, first_is_spec: bool) -> StatsBlock:
    stats = spec = None
    for name, (a, b) in ranges.items():
        c = cols[name]
        engine = _KIND_ENGINE[name]
        if name in _STATS_KINDS:
            stats = StatsColumns(engine, c["rank"][a:b], c["ts"][a:b], c["running"][a:b], c["gen_throughput"][a:b])
        else:
            spec = SpecColumns(engine, c["rank"][a:b], c["ts"][a:b], c["mean_acceptance_length"][a:b],
                               c["draft_acceptance_rate"][a:b], c["accepted"][a:b], c["drafted"][a:b],
                               c["per_position"][a:b])
    return StatsBlock(first, last, last_ts, first_is_spec, stats, spec)
