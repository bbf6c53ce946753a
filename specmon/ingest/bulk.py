"""The bulk path of ``summarize``: big logs read in pieces, on every core, line for line exact.

A busy server's log is mostly stats lines of a few shapes and HTTP access lines.
The grammar (:mod:`specmon.grammar.kinds`) turns a stats line the line parser
has read into a *template* of its shape; one ``re.split`` per line kind with the
alternation of its learned templates runs over a whole piece at C speed and yields
the values as columns (SGLang decode; vLLM and llama.cpp interval stats and spec
lines) or counts (SGLang prefill). Lines that provably give nothing (HTTP access
lines, *quiet* shapes learned from lines without any marker or lifecycle word) are
skipped outside tracebacks. The lines left — lifecycle lines, configurations,
damaged or unusual stats lines — and only those go to the ordinary line parser, in
order, with their line numbers, so the session receives exactly what the line path
gives it (tests compare both); only the cost differs.

Workers (forked processes of ``concurrent.futures``, one per core) parse byte ranges; the session
itself is fed in the parent, in file order, because runs, warm-up and idle
detection depend on order.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing as mp
import os
import re
from array import array
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import partial
from itertools import islice, repeat
from operator import add
from typing import Any, cast

import numpy as np

from specmon.engines import ADAPTERS, KINDS
from specmon.grammar.common import _day_start
from specmon.grammar.kinds import LineKind, Template, learn, read
from specmon.grammar.prefix import Rollover, stamp_value
from specmon.ingest.scan import (
    AS_BYTES,
    AS_DAY,
    AS_FLOAT,
    AS_FLOATS_C,
    AS_FLOATS_CS,
    AS_FRAC,
    AS_HMS,
    AS_INT,
    AS_STR,
    CONVERTERS,
    PACKABLE,
    PACKED,
    Pass,
    RePass,
    Unsupported,
    compile_pass,
)
from specmon.model.column_ingest import SpecColumns, StatsColumns
from specmon.model.rows import Rows
from specmon.model.session import Session
from specmon.parsing import FRAME_WORD, LineParser, detect_engine
from specmon.parsing.lifecycle import CAPTURE_WORDS, MARKERS
from specmon.records import Decode, Engine, EngineStats, ParsedRecord, Prefill, Spec
from specmon.sources.logfiles import LogFileError, check_readable, head_lines

#: Bytes a worker parses per piece (lines never straddle pieces). 8 MB: each piece costs a few
#: fixed steps (the passes' set-up, the marker tests, pickling, the feeding's per-block work);
#: interleaved runs against 4 MB, 8 each: vLLM k8s 1.00 -> 0.92 s, Ray 0.79 -> 0.77 s (medians),
#: and 2 MB was slower still. Peak RSS did not move (82 MB).
PIECE = 8 << 20
#: Below this size a file is parsed in-process (a pool costs more than it saves).
PARALLEL_MIN_BYTES = 32 << 20
#: Templates kept per line kind (a log prints few shapes), and samples tried per piece.
MAX_TEMPLATES = 16
MAX_LEARN = 32
#: Lines of a kind's marker passed over per piece as known to have no template, before its
#: search for one to learn from stops.
MAX_PASSED = 256
#: Shapes of lines that give nothing kept per process (each one a regex alternative).
MAX_QUIET = 48

# What a template-read line becomes in the piece's text while the rest is sorted out:
# a token no line of a real log is (checked: a piece whose count disagrees is redone).
_TOKEN = b"\x00\x01\x02"  # the last byte says the line kind
# uvicorn access lines: None for the line parser (its first test), skipped here (_drop_access).
_ACCESS_TEXTS = (b' - "', b"HTTP/")
_ACCESS = re.compile(rb"\n(?=[^\n]*%s)(?=[^\n]*%s)[^\n]*(?=\n)" % tuple(map(re.escape, _ACCESS_TEXTS)))
_drop_lines: Callable[[bytes, bytes, bytes], bytes] | None
_count_byte: Callable[[bytes, int], int] | None
_quiet_lines: Callable[[bytes, list[bytes], bytes], tuple[bytes, int]] | None
_holds: Callable[[bytes, bytes], bool]
_count_text: Callable[[bytes, bytes], int]
try:
    from specmon._native import count_byte as _count_byte
    from specmon._native import count_text as _count_text
    from specmon._native import drop_lines as _drop_lines
    from specmon._native import holds as _holds
    from specmon._native import quiet_lines as _quiet_lines
except ImportError:  # (no compiler: the regex, numpy, bytes' own search)
    _drop_lines = _count_byte = _quiet_lines = None
    _holds = bytes.__contains__
    _count_text = bytes.count


def _drop_access(rest: bytes) -> bytes:
    """``rest`` with the text of each access line removed (its newline kept).

    The regex tries its look-aheads at every line left (1.4 ms a 4 MB SGLang piece); the C
    one jumps between the lines that hold ``HTTP/``.
    """
    if _drop_lines is None:
        return _ACCESS.sub(b"\n", rest)
    return _drop_lines(rest, *_ACCESS_TEXTS)


class _Cache(dict[bytes, Any]):
    """A memo of one conversion (days, times of day, fractions: few distinct values)."""

    def __init__(self, fn: Callable[[bytes], Any]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, key: bytes) -> Any:
        value = self[key] = self.fn(key)
        return value


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


@dataclass
class Piece:
    """What a worker returns for one piece of the file: records and blocks, in file order."""

    lines: int
    items: list[ParsedRecord | Block | StatsBlock] = field(default_factory=list)
    #: Stats lines read by a template that the session only counts, by record kind.
    counted: dict[str, int] = field(default_factory=dict)
    # The piece ended inside a traceback: the next piece's first lines may name the exception.
    in_traceback: bool = False
    #: Lines read by a template (the rest went to the line parser).
    by_template: int = 0


class _Learner:
    """The templates of one process, learned from the lines the line parser reads."""

    def __init__(self) -> None:
        self.templates: dict[str, list[Template]] = {}
        #: The line each template was learned from (the C pass is checked against re on them).
        self.samples: dict[str, list[bytes]] = {}
        self.refused: dict[str, set[bytes]] = {}
        self._regex: dict[str, Pass | None] = {}
        #: Per ``kind/mode``: what each group's column holds (``scan``'s ``kinds`` and ``convs``).
        self.kinds: dict[str, bytes] = {}
        self.convs: dict[str, tuple[Any, ...]] = {}
        #: Per ``kind/mode``: each template with the index of its first group and its group numbers.
        self.layouts: dict[str, list[tuple[Template, int, dict[str, int]]]] = {}
        #: Shapes of lines the line parser gives nothing for, whatever their digits (see _quiet_source).
        self.quiet: list[bytes] = []
        #: Their pass, without a group: it only counts (a bytes object per line was 40% of it on
        #: llama.cpp's progress lines); the texts are made when needed (see _QuietTexts).
        self.quiet_rx: Pass | None = None

    def regex(self, kind: LineKind, mode: str = "records") -> Pass | None:
        """The alternation of a kind's templates, as a pass that splits a piece (``re.split``).

        ``mode``: ``records`` (every value, one outer group per template), ``columns`` (only
        what the session takes: fewer groups, a faster pass; the first group of each
        template tells which matched) or ``count`` (no group at all).
        """
        key = f"{kind.name}/{mode}"
        if key not in self._regex:
            tpls = self.templates.get(kind.name, [])
            if not tpls:
                self._regex[key] = None
            elif mode == "records":
                self._regex[key] = self._pass(kind, [b"(" + t.source + b")" for t in tpls])
                self.kinds[key] = bytes(sum(1 + t.ngroups for t in tpls))
                self.convs[key] = (None,) * len(self.kinds[key])
            else:
                roles = _column_roles(kind) if mode == "columns" else frozenset()
                layout = []
                base = 0
                sources = []
                kinds = bytearray()
                for t in tpls:
                    src, groups = t.lean(roles)
                    layout.append((t, base, groups))
                    base += len(groups)
                    sources.append(src)
                    # Plain numbers are converted by the pass (in C, without a bytes object each).
                    by_group = {i: _as(t, r) for r, i in groups.items()}
                    kinds += bytes(by_group[i] for i in range(1, len(groups) + 1))
                self.layouts[key] = layout
                self.convs[key] = tuple(CONVERTERS.get(k) for k in kinds)
                # Numbers packed as they are read: no float object per value (see _columns).
                self.kinds[key] = bytes(k | PACKED if k in PACKABLE else k for k in kinds)
                self._regex[key] = self._pass(kind, sources)
        return self._regex[key]

    def _pass(self, kind: LineKind, sources: list[bytes]) -> Pass:
        """The C pass of these template regexes where it runs them, else ``re``'s.

        The C pass is kept only if it reads the templates' own sample lines as ``re`` does.
        """
        rx = RePass(sources)
        try:
            fast = compile_pass(sources)
        except Unsupported:
            return rx
        probe = b"\n" + b"\n".join(self.samples.get(kind.name, [])) + b"\n"
        raw = bytes(rx.groups), (None,) * rx.groups  # the groups' texts, unconverted
        return fast if fast.scan(probe, _TOKEN, *raw) == rx.scan(probe, _TOKEN, *raw) else rx

    def add(self, tpl: Template, sample: bytes = b"") -> None:
        tpls = self.templates.setdefault(tpl.kind.name, [])
        samples = self.samples.setdefault(tpl.kind.name, [])
        if len(tpls) >= MAX_TEMPLATES:
            tpls.pop(0)
            samples.pop(0)
        tpls.append(tpl)
        samples.append(sample)
        for mode in ("records", "columns", "count"):
            self._regex.pop(f"{tpl.kind.name}/{mode}", None)

    def add_quiet(self, source: bytes) -> None:
        if source in self.quiet:
            return
        if len(self.quiet) >= MAX_QUIET:
            self.quiet.pop(0)
        self.quiet.append(source)
        # One trie of the shapes: a shared start (a wrapper, a prefix) is matched once per line.
        seqs = [_ATOMS.findall(q) for q in self.quiet]
        whole = all(b"".join(a) == q for a, q in zip(seqs, self.quiet, strict=True))
        if whole and _quiet_lines is not None:
            self.quiet_rx = _Shapes([_skeleton(a) for a in seqs])
            return
        body = _trie(seqs) if whole else b"|".join(self.quiet)
        sources = [b"(?:" + body + b")"]
        try:
            self.quiet_rx = compile_pass(sources)
        except Unsupported:
            self.quiet_rx = RePass(sources)


# The atoms of a quiet shape's regex (as _general writes them): digit runs, space runs, escaped text.
_ATOMS = re.compile(rb"\\d\+| \+|(?:\\.|[^\\ ])+?(?=\\d\+| \+|$)", re.S)


_UNESCAPE = re.compile(rb"\\(.)", re.S)


def _skeleton(atoms: list[bytes]) -> bytes:
    """A quiet shape's skeleton as _native.quiet_lines writes a line's: each digit run "\\0d", each
    space run "\\0s", the text between them as it is with a NUL byte doubled."""
    return b"".join(b"\0d" if a == rb"\d+" else b"\0s" if a == b" +" else
                    _UNESCAPE.sub(rb"\1", a).replace(b"\0", b"\0\0") for a in atoms)


class _Shapes:
    """The quiet pass by shape (see _native.quiet_lines): each line read once and looked up,
    where the regex trie backtracked through the shapes (4.6 ms of a 4 MB llama.cpp piece)."""

    groups = 0

    def __init__(self, skeletons: list[bytes]) -> None:
        self.skeletons = skeletons

    def scan(self, text: bytes, token: bytes, kinds: bytes, convs: tuple[Any, ...], /
             ) -> tuple[bytes, int, list[list[Any]], list[int]]:
        assert _quiet_lines is not None and not kinds and not convs  # (a pass without groups)
        rest, n = _quiet_lines(text, self.skeletons, token)
        return rest, n, [], [n]

    def reads(self, line: bytes, /) -> bool:
        assert _quiet_lines is not None
        return b"\n" not in line and _quiet_lines(b"\n" + line + b"\n", self.skeletons, b"")[1] == 1


def _trie(seqs: list[list[bytes]]) -> bytes:
    """An alternation of atom sequences with shared starts factored out (same language, fewer retries)."""
    groups: dict[bytes, list[list[bytes]]] = {}
    ends = False
    for seq in seqs:
        if not seq:
            ends = True
            continue
        groups.setdefault(seq[0], []).append(seq[1:])
    alts = [head + _trie(rest) for head, rest in groups.items()]
    if ends:
        alts.append(b"")
    if len(alts) == 1:
        return alts[0]
    return b"(?:" + b"|".join(alts) + b")"


_LEARNER = _Learner()
# Memos of the prefix arithmetic (few distinct days, at most 86,400 times of day, 1,000 ms).
_MD_DAYS: dict[int, _Cache] = {}


def _md_days(year: int) -> _Cache:
    memo = _MD_DAYS.get(year)
    if memo is None:
        memo = _MD_DAYS[year] = _Cache(lambda b: _day_start(f"{year:04d}-{b.decode()}"))
    return memo


def _stamp_fn(year: int, day: float) -> Callable[[dict[str, str]], float | None]:
    def fn(t: dict[str, str]) -> float | None:
        return stamp_value(t.get("date"), t.get("md"), t["hms"], t.get("frac", ""), year, day)
    return fn


def _try_learn(kind: LineKind, raw: bytes, probe: LineParser, year: int) -> Template | None:
    """A template from one line the bulk path could not read, if its shape allows one."""
    refused = _LEARNER.refused.setdefault(kind.name, set())
    if raw in refused:
        return None
    text = raw.decode("utf-8", errors="replace")
    rec = probe.parse(text, 1)
    tpl = None
    if rec is not None and isinstance(rec, kind.record):
        message, outer_ts = probe._clean(text)
        tpl = learn(kind, text, message, outer_ts, rec, _stamp_fn(year, probe.day))
    if tpl is None:
        if len(refused) >= 4096:
            refused.clear()
        refused.add(raw)
        return None
    _LEARNER.add(tpl, raw)
    return tpl


#: What the pass makes of the prefix's parts (the converters the line parser's arithmetic uses).
_ROLE_AS = {"rank": AS_STR, "hms": AS_HMS, "date": AS_DAY, "frac": AS_FRAC}
#: Lists of floats the pass makes itself, by their separator.
_ITEMS_AS = {(float, b", "): AS_FLOATS_CS, (float, b","): AS_FLOATS_C}


def _as(t: Template, role: str) -> int:
    """What the pass makes of a role's text: a prefix part, a plain number, or bytes (other converters)."""
    if role in _ROLE_AS:
        return _ROLE_AS[role]
    conv = t.converters.get(role)
    items = getattr(conv, "items", None)
    if items is not None:
        return _ITEMS_AS.get(items, AS_BYTES)
    return AS_FLOAT if conv is float else AS_INT if conv is int else AS_BYTES


_TS_ROLES = ("rank", "date", "md", "hms", "frac")


def _column_roles(kind: LineKind) -> frozenset[str]:
    return frozenset((*_TS_ROLES, *(kind.columns or ())))


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
    float32 array (0.33 ms); now both are copies (see session._extend). "d" keeps every
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


def _offsets(kind: LineKind) -> list[int]:
    """Column index + 1 of each template's outer group in the alternation (one outer group per template)."""
    offsets: list[int] = []
    pos = 0
    for t in _LEARNER.templates[kind.name]:
        offsets.append(pos + 1)
        pos += 1 + t.ngroups
    return offsets


def _record(kind: LineKind, f: tuple[bytes, ...], offsets: list[int], line: int, year: int,
            day: float) -> ParsedRecord:
    """The record of one template-read line (the slow way: tests, ``parse``, mixed pieces)."""
    tpls = _LEARNER.templates[kind.name]
    w = next(i for i, o in enumerate(offsets) if f[o - 1])
    vals = read(tpls[w], f[offsets[w]:offsets[w] + tpls[w].ngroups], _stamp_fn(year, day))
    ts, rank = vals.pop("timestamp"), vals.pop("rank")
    rec: ParsedRecord = kind.record(line, ts, rank, **vals)
    if isinstance(rec, EngineStats | Spec):
        rec.engine = kind.engine  # as the line parser: two engines print these
    return rec


def piece_records(data: bytes, engine: Engine = Engine.UNKNOWN, year: int = 2026,
                  day: float | None = None) -> tuple[list[ParsedRecord], int]:
    """Every record of a piece the bulk way, and how many lines a template read (tests, ``parse``)."""
    piece = bulk_piece(data, engine, year, records=True, day=day)
    return [r for r in piece.items if not isinstance(r, Block | StatsBlock)], piece.by_template


# Which kinds the session takes as columns, by family: SGLang decode (prefill only counted), or one
# interval-stats kind with one spec kind (vLLM, llama.cpp). Anything else in a piece: records.
# Read from what the engines declare (a kind the bulk path can read has a body).
_BULK = tuple(k for k in KINDS if k.body is not None)
_DECODE_KINDS = frozenset(k.name for k in _BULK if k.record is Decode)
_COUNTED_KINDS = frozenset(k.name for k in _BULK if k.record is Prefill)
_STATS_KINDS = frozenset(k.name for k in _BULK if k.record is EngineStats)
_SPEC_KINDS = frozenset(k.name for k in _BULK if k.record is Spec)
_KIND_ENGINE = {k.name: k.engine for k in KINDS}

# What the line parser reads besides stats lines: a line holding none of these texts (with
# digits and runs of spaces as they may vary) is given nothing outside a traceback.
def _general(text: str) -> str:
    """``text`` as a regex where every digit run is ``\\d+`` and every run of spaces `` +``."""
    return _RUNS.sub(lambda m: r"\d+" if m.group(1) else " +" if m.group(2) else re.escape(m.group()), text)


_RUNS = re.compile(r"(\d+)|( +)|[^\d ]+")


def _interesting() -> re.Pattern[str]:

    # The lifecycle phrases themselves, not match_lifecycle's cheap gate: the gate's fragments
    # ("erver", "oad", "rror") are in many lines that give nothing, such as llama.cpp's
    # "srv  log_server_r: done request: ..." (one line in four of a busy llama-server log),
    # which then went to the line parser one by one.
    words = [*(w for a in ADAPTERS for w in a.config_words),
             *(phrase for phrase, _event, _engines in MARKERS), *CAPTURE_WORDS, FRAME_WORD,
             *(k.marker for k in KINDS if not k.vetoes)]
    alts = [_general(w) for w in words]
    # A marker whose kind a veto turns away is harmless beside that veto.
    for k in KINDS:
        if k.vetoes:
            none_of = "".join(f"(?!.*{_general(v)})" for v in k.vetoes)
            alts.append(f"^{none_of}.*{_general(k.marker)}")
    return re.compile("|".join(f"(?:{a})" for a in alts) + r"|\x1b|\[[\d;]+m|\r", re.S)


_INTERESTING: re.Pattern[str] | None = None


def _quiet_source(raw: bytes) -> bytes | None:
    """The regex of lines shaped like ``raw`` (digits and space runs free), if no such line gives a record.

    ``raw`` gave no record and holds none of the texts that make the line parser give one
    (stats markers, configuration and lifecycle markers, ANSI): neither does any line of
    the same shape, since those texts hold no digits and the generalised test is blind to
    the length of digit and space runs. Outside a traceback such lines are skipped.
    """
    global _INTERESTING
    if _INTERESTING is None:
        _INTERESTING = _interesting()
    text = raw.decode("utf-8", errors="replace")
    if "\ufffd" in text or len(raw) > 2000 or _INTERESTING.search(text):
        return None
    return _general(text).encode()


def bulk_piece(data: bytes, engine: Engine, year: int, in_traceback: bool = False,
               records: bool = False, parser: LineParser | None = None, mixed: bool = False,
               day: float | None = None, framed: bool = False) -> Piece:
    """Parse one piece (whole lines, ``\\n``-separated): templates where they fit, the line parser elsewhere.

    Args:
        in_traceback: the previous piece ended inside a traceback (the parser's only
            multi-line context).
        records: give every template-read line as a record (tests, ``parse``) instead
            of columns and counts.
        parser: the line parser to continue with (live feeding keeps one per source);
            by default a new one with ``engine``, ``year`` and ``in_traceback``.
        mixed: the piece holds lines of two families: only SGLang decode in columns.
        day: the midnight of time-of-day stamps without a date (default: the parser's).
        framed: ``data`` already begins with the newline before its first line (and ends
            with its last line's): taken as it is, not copied with one added.
    """
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    if framed and data.startswith(b"\n") and data.endswith(b"\n") and len(data) > 1:
        text = data
    else:
        text = b"\n" + data if data.endswith(b"\n") else b"\n" + data + b"\n"
    nlines = count_newlines(text) - 1
    if parser is None:
        parser = LineParser(year=year, engine=engine, day=day)
        parser.in_traceback = in_traceback
    day = parser.day
    probe = LineParser(year=year, engine=engine, day=day)
    # Who takes what: columns for one family (SGLang decode with prefill counted, or one
    # stats kind with one spec kind of one engine), records for the rest (or all, if asked).
    # Decided as the kinds turn up, in pass order; a piece that mixes families is redone.
    kinds: list[LineKind] = []
    col_kinds: set[str] = set()
    count_kinds: set[str] = set()
    rec_kinds: set[str] = set()
    # One pass per kind: the values (as columns) and the text with the lines read as tokens.
    matched: dict[str, tuple[int, list[list[Any]], list[int]]] = {}  # kind -> (lines, columns, lines per template)
    tokens: dict[bytes, LineKind] = {}
    rest = text
    nq = 0
    quiet_texts = _QuietTexts(b"", b"")
    for step in _pass_order(engine if engine is not Engine.UNKNOWN else parser.engine):
        if step is None:
            # Lines known to give nothing (shapes learned as quiet), taken out before the other
            # engines' kinds look for their markers: those searches then read a small remainder.
            # A quiet line gives no record (see _quiet_source): no later pass may read it anyway.
            qrx = _LEARNER.quiet_rx
            if qrx is not None:
                before = rest
                rest, nq, _, _ = qrx.scan(rest, _QUIET, b"", ())
                if nq:
                    quiet_texts = _QuietTexts(before, rest)
            # HTTP access lines give nothing either (the line parser's first test): out here,
            # not after the other engines' searches, which read them all (0.56 ms of an SGLang piece).
            rest = _drop_access(rest)
            continue
        i, kind = step
        marker = kind.marker.encode()
        if not _holds(rest, marker):
            continue  # (tested on what earlier passes left: the whole piece only for the first kinds)
        kinds.append(kind)
        token = _TOKEN[:-1] + bytes([0x10 + i])
        tokens[token] = kind
        name = kind.name
        if records or mixed:
            mode = "records"
        elif name in _DECODE_KINDS or name in _COUNTED_KINDS:
            mode = "columns" if name in _DECODE_KINDS else "count"
        else:
            mode = "columns"
        tries = 0
        while True:
            rx = _LEARNER.regex(kind, mode)
            gcols: list[list[Any]]
            hits: list[int]
            if rx is None:
                new_rest, n, gcols, hits = rest, 0, [], []
            else:
                key = f"{name}/{mode}"
                new_rest, n, gcols, hits = rx.scan(rest, token, _LEARNER.kinds[key], _LEARNER.convs[key])
            if tries >= MAX_LEARN or not _holds(new_rest, marker):
                break
            # A line of this kind that no template read: learn its shape (or note it has none).
            learned = False
            refused = _LEARNER.refused.setdefault(kind.name, set())
            vetoes = [v.encode() for v in kind.vetoes]
            passed = 0
            for m in re.finditer(rb"\n([^\n]*" + re.escape(marker) + rb"[^\n]*)(?=\n)", new_rest):
                line = m.group(1)
                if line in refused or any(v in line for v in vetoes):
                    # Known to have no template (damaged, cut, unusual), or never this kind (a
                    # veto: llama.cpp's "prompt eval time" beside "eval time", a line in five,
                    # each with its own stamp, tried 32 times a piece): skipped. Past a few
                    # hundred such lines the search stops; the line parser has what is left.
                    passed += 1
                    if passed > MAX_PASSED:
                        break
                    continue
                tries += 1
                if _try_learn(kind, line, probe, year) is not None:
                    learned = True
                    break
                if tries >= MAX_LEARN:
                    break
            if not learned:
                break
            # Run the new alternation over this kind's lines again (its groups are renumbered).
        rest = new_rest
        if n:
            matched[name] = (n, gcols, hits)
            {"columns": col_kinds, "count": count_kinds, "records": rec_kinds}[mode].add(name)
    if col_kinds and not mixed:
        stats_k, spec_k = col_kinds & _STATS_KINDS, col_kinds & _SPEC_KINDS
        if ((stats_k or spec_k) and (col_kinds & _DECODE_KINDS or len(stats_k) > 1 or len(spec_k) > 1
                                     or len({k.split(".")[0] for k in stats_k | spec_k}) > 1)):
            # SGLang decode beside vLLM / llama.cpp stats, or two engines' stats: records for those.
            return bulk_piece(data, engine, year, in_traceback, records, parser, mixed=True, day=day, framed=framed)
    counted: dict[str, int] = {}
    for name in count_kinds:
        kind = next(k for k in kinds if k.name == name)
        rname: str = getattr(kind.record, "kind", name)
        counted[rname] = counted.get(rname, 0) + matched[name][0]
    cols = {name: _columns(next(k for k in kinds if k.name == name), *matched[name], year, day)
            for name in col_kinds}
    found = {name: list(zip(*matched[name][1], strict=True)) for name in rec_kinds}
    piece = Piece(nlines, counted=counted)
    piece.by_template = sum(v[0] for v in matched.values())
    by_kind = {k.name: t for t, k in tokens.items()}
    start_in_tb = parser.in_traceback
    if (not records and not rec_kinds and not (nq and start_in_tb)
            and len(rest) == count_newlines(rest) + piece.by_template * len(_TOKEN) + nq * len(_QUIET)):
        # Nothing but template-read, quiet and access lines: one block, no line parser.
        block = _whole_block(rest, col_kinds, cols, by_kind)
        if block is not None or not col_kinds:
            if block is not None:
                piece.items.append(block)
            if piece.by_template:
                parser.in_traceback = False
                if parser.engine is Engine.UNKNOWN:
                    parser.engine = next(iter(tokens.values())).engine
            piece.in_traceback = parser.in_traceback
            return piece
    _walk(piece, rest, parser, tokens, col_kinds, cols, found, quiet_texts, year, day)
    piece.in_traceback = parser.in_traceback
    return piece


_QUIET = b"\x00\x01\x03"


class _QuietTexts:
    """The texts of a piece's quiet lines in order, made only when the line parser needs one (a
    quiet line inside a traceback, where it may say something): the quiet pass replaces each
    line it reads by one token line, so line ``i`` of the text after it is the token exactly
    where line ``i`` of the text before it was a quiet line."""

    def __init__(self, before: bytes, after: bytes) -> None:
        self._sides: tuple[bytes, bytes] | None = (before, after)
        self._texts: list[bytes] = []

    def __getitem__(self, i: int) -> bytes:
        if self._sides is not None:
            before, after = self._sides
            self._texts = [b for b, a in zip(before.split(b"\n"), after.split(b"\n"), strict=True) if a == _QUIET]
            self._sides = None
        return self._texts[i]


def count_newlines(data: bytes) -> int:
    """``data.count(b"\\n")``, vectorised: 0.1 ms for 4 MB in C, 0.2-0.65 ms by numpy (a 4 MB array of
    booleans written first), where bytes.count takes 1.3 ms."""
    if _count_byte is not None:
        return _count_byte(data, 10)
    return int(np.count_nonzero(np.frombuffer(data, dtype=np.uint8) == 10))


def _pass_order(engine: Engine) -> list[tuple[int, LineKind] | None]:
    """The kinds with templates (and their token numbers), the log's own engine's first, then
    None (the quiet pass), then the other engines' kinds.

    Each pass looks for its marker in what the passes before it left, and a marker that is
    not there costs a search of the whole text: the log's own kinds and its quiet lines first
    leave little for the others' searches (vLLM pieces searched 4 MB twice for SGLang's
    markers). The order changes nothing else: a template reads only lines the line parser
    reads as its kind, and a quiet line is one it reads as nothing.
    """
    kinds = [(i, k) for i, k in enumerate(k for k in KINDS if k.body is not None)]
    own = [ik for ik in kinds if ik[1].engine is engine or engine is Engine.UNKNOWN]
    return [*own, None, *(ik for ik in kinds if ik not in own)]


def _whole_block(rest: bytes, col_kinds: set[str], cols: dict[str, dict[str, list[Any]]],
                 by_kind: dict[str, bytes]) -> Block | StatsBlock | None:
    """The one block of a piece whose lines are all template-read, quiet or access lines (None: walk it)."""
    if not col_kinds:
        return None
    spans = {name: (rest.find(by_kind[name]), rest.rfind(by_kind[name])) for name in col_kinds}
    first_kind = min(spans, key=lambda k: spans[k][0])
    last_kind = max(spans, key=lambda k: spans[k][1])
    first = rest.count(b"\n", 0, spans[first_kind][0])
    last = rest.count(b"\n", 0, spans[last_kind][1])
    if "sglang.decode" in col_kinds:
        c = cols["sglang.decode"]
        return _block(c, 0, len(c["ts"]), first, last)
    last_ts = cols[last_kind]["ts"][-1]
    if last_ts is None and any(t is not None for name in col_kinds for t in cols[name]["ts"]):
        return None  # the last time is on an earlier line: the walk finds it
    return _stats_block(cols, {name: (0, len(cols[name]["ts"])) for name in col_kinds}, first, last, last_ts,
                        first_kind in _SPEC_KINDS)


def _walk(piece: Piece, rest: bytes, parser: LineParser, tokens: dict[bytes, LineKind], col_kinds: set[str],
          cols: dict[str, dict[str, list[Any]]], found: dict[str, list[tuple[bytes, ...]]],
          quiet_texts: _QuietTexts, year: int, day: float) -> None:
    """Template-read lines join the current block (or become records); the others go to the line parser."""
    lines = rest.split(b"\n")
    seen = {t: 0 for t in tokens}
    offsets = {k.name: _offsets(k) for k in tokens.values() if k.name in found}
    start: dict[str, int] = {}
    first = last = 0
    first_spec = False
    last_ts: float | None = None
    q = tries = 0
    decode = "sglang.decode" in col_kinds
    # Shapes learned during this walk: the quiet pass ran before them, so the walk tests the
    # lines after with them itself. Without that, the first piece of each worker (nothing learned
    # yet) went to the line parser whole: 30,640 of a llama.cpp piece's 45,841 lines, 0.38 s.
    learned: Pass | None = None

    def close() -> None:
        if not start:
            return
        if decode:
            a = start.get("sglang.decode")
            if a is not None:
                piece.items.append(_block(cols["sglang.decode"], a, seen[by_name["sglang.decode"]], first, last))
        else:
            piece.items.append(_stats_block(cols, {k: (a, seen[by_name[k]]) for k, a in start.items()},
                                            first, last, last_ts, first_spec))
        start.clear()

    by_name = {k.name: t for t, k in tokens.items()}
    for ln in range(1, len(lines) - 1):
        x = lines[ln]
        if not x:
            continue
        kind_x = tokens.get(x)
        if kind_x is not None:
            # What the line parser does on a stats line it reads (its only state).
            parser.in_traceback = False
            if parser.engine is Engine.UNKNOWN:
                parser.engine = kind_x.engine
            j = seen[x]
            seen[x] = j + 1
            name = kind_x.name
            if name in found:
                close()
                piece.items.append(_record(kind_x, found[name][j], offsets[name], ln, year, day))
            elif name in col_kinds:
                if not start:
                    first, first_spec, last_ts = ln, name in _SPEC_KINDS, None
                start.setdefault(name, j)
                last = ln
                t = cols[name]["ts"][j]
                if t is not None:
                    last_ts = t
            continue
        if x == _QUIET:
            q += 1
            if not parser.in_traceback:
                continue  # gives nothing
            x = quiet_texts[q - 1]
        elif learned is not None and not parser.in_traceback and learned.reads(x):
            continue  # a quiet shape: gives nothing
        rec = parser.parse(x.decode("utf-8", errors="replace"), ln)
        if rec is not None:
            close()
            piece.items.append(rec)
        elif not parser.in_traceback and tries < MAX_LEARN:
            tries += 1
            source = _quiet_source(x)
            if source is not None:
                _LEARNER.add_quiet(source)
                learned = _LEARNER.quiet_rx
    close()


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


@dataclass
class Columns:
    """The decode columns and prefill count of a block made only of stats and access lines."""

    ranks: list[str | None]
    ts: list[float | None]
    running: list[int]
    tput: list[float]
    acc_len: list[float | None] | None
    acc_rate: list[float | None] | None
    prefill: int


def decode_columns(data: bytes, engine: Engine, year: int) -> Columns | None:
    """Columns of consecutive lines (``\\n``-joined) when no line gives a record of its own
    (report's replay); else None."""
    piece = bulk_piece(data, engine, year)
    blocks = [b for b in piece.items if isinstance(b, Block)]
    if len(blocks) != len(piece.items) or len(blocks) > 1:
        return None
    if set(piece.counted) - {"prefill"}:
        return None
    n = len(blocks[0].tput) if blocks else 0
    if _count_text(data, b"Decode batch") != n:
        return None  # a decode-marked line the session does not sample: keep the caller's pairing exact
    b = blocks[0] if blocks else Block(0, 0, [], [], [], [], None, None)
    return Columns(b.ranks, b.ts, b.running, b.tput, b.acc_len, b.acc_rate, piece.counted.get("prefill", 0))


def _block(cols: dict[str, list[Any]], a: int, b: int, first: int, last: int) -> Block:
    ranks, ts, running, tput, acc_len, acc_rate = (cols[k][a:b] for k in (
        "rank", "ts", "running_req", "gen_throughput", "accept_len", "accept_rate"))
    return Block(first, last, ranks, ts, running, tput,
                 acc_len if any(v is not None for v in acc_len) else None,
                 acc_rate if any(v is not None for v in acc_rate) else None)


Task = tuple[str, int, int, str, int, float]


def parse_piece(args: Task, in_traceback: bool = False, records: bool = False) -> Piece:
    """Worker entry: parse bytes ``[start, end)`` of a file (both on line starts)."""
    path, start, end, engine_value, year, day = args
    with open(path, "rb") as f:
        # From the newline that ends the previous piece: the pass's framing without a 4 MB copy.
        f.seek(start - 1 if start else 0)
        data = f.read(end - start + (1 if start else 0))
    if not start:
        data = b"\n" + data
    elif not data.startswith(b"\n"):
        data = b"\n" + data[1:]  # (the file changed since it was cut: still its lines from start)
    if not data.endswith(b"\n"):
        data += b"\n"  # the file's last line, without its newline
    return bulk_piece(data, Engine(engine_value), year, in_traceback, records=records, day=day, framed=True)


def line_ranges(path: str, size: int, piece: int | None = None) -> Iterator[tuple[int, int]]:
    """Byte ranges of about ``piece`` bytes (PIECE), each ending just after a newline (or at EOF)."""
    step = PIECE if piece is None else piece
    with open(path, "rb") as f:
        start = 0
        while start < size:
            end = min(start + step, size)
            if end < size:
                f.seek(end)
                tail = f.read(1 << 16)
                nl = tail.find(b"\n")
                while nl < 0 and tail:
                    # A line longer than the look-ahead: keep reading until it ends.
                    more = f.read(1 << 20)
                    if not more:
                        break
                    nl = len(tail) + more.find(b"\n") if b"\n" in more else -1
                    tail += more
                end = size if nl < 0 else end + nl + 1
            yield start, end
            start = end


def ingest_file_fast(session: Session, path: str, *, baseline: bool = False, jobs: int = 0,
                     year: int | None = None) -> None:
    """Read one file into the session like :func:`specmon.ingest.files.ingest_file`, faster on big files.

    Args:
        jobs: worker processes; 0 = one per core; 1 = in this process.
        year: the user's ``--year`` (else inferred from the file).
    """
    from specmon.ingest.files import log_clock

    p = check_readable(path)
    size = p.stat().st_size
    head = head_lines(p)
    clock = log_clock(p, head, year)
    engine = detect_engine(head)
    session.set_engine_hint(engine)  # as ingest_file: the signature breaks ties of the line markers
    session.begin_source(str(path), baseline=baseline)
    tasks = [(str(p), a, b, engine.value, clock.year, clock.day) for a, b in line_ranges(str(p), size)]
    rollover = clock.rollover()
    workers = jobs or os.cpu_count() or 1
    if workers > 1 and size >= PARALLEL_MIN_BYTES:
        _learn_from_head(str(p), engine, clock.year, clock.day)
        try:
            with feeding_pool(min(workers, len(tasks))) as pool:
                _feed(session, tasks, windowed(pool, parse_piece, ((t,) for t in tasks), 2 * workers), rollover)
        except BrokenProcessPool as exc:  # a worker killed (the kernel's OOM killer, a signal)
            raise LogFileError(f"{path}: a process reading it in parallel stopped ({exc}); "
                               "--jobs 1 reads it in this process") from exc
    else:
        _feed(session, tasks, map(parse_piece, tasks), rollover)


#: Bytes of the file's start the feeding process learns shapes from before it forks the workers.
LEARN_HEAD = 64 << 10


def _learn_from_head(path: str, engine: Engine, year: int, day: float) -> None:
    """Learn the file's templates and quiet shapes from its first lines, once, before the fork.

    Each worker otherwise learnt them alone on its first piece, sending lines to the line
    parser until it had them and compiling the same regexes: a first piece took 50 ms where
    the next took 14 (llama.cpp, vLLM). Forked after this, both start with what it learnt,
    for 8-14 ms here. Learning changes only which lines the passes read, never what a line
    gives (templates read what the line parser reads), so the pieces are the same.
    """
    with open(path, "rb") as f:
        data = f.read(LEARN_HEAD)
    end = data.rfind(b"\n")
    if end > 0:
        bulk_piece(data[:end + 1], engine, year, day=day)


def _worker_start() -> None:
    """A worker's set-up: freed blocks of a few pieces' size stay in its heap for the next piece.

    Each piece makes and drops several 4 MB blocks (its text, every pass's rest); glibc gave
    them back to the kernel, and each new one cost a page fault per page written. On a 346 MB
    SGLang log: 157,000 page faults → 32,000, CPU time 2.43 → 2.13 s, peak RSS 95 → 103 MB.
    """
    # No collections in a worker either: what it makes per piece is freed by reference counts
    # and what it keeps (templates, learned shapes) is small; it lives for one file's ingest.
    gc.disable()
    try:
        from specmon._native import keep_freed_memory
    except ImportError:  # (no compiler: the default, only slower)
        return
    keep_freed_memory(4 * PIECE)


def _fix_times(item: ParsedRecord | Block | StatsBlock, fix: Rollover) -> None:
    """Move a record's or block's day-less stamps on by the days (years) the log has crossed."""
    if isinstance(item, Block):
        item.ts = fix.fix_all(item.ts)
    elif isinstance(item, StatsBlock):
        # Stats and spec lines alternate and cross the same midnights: each column from the
        # state before the block, the state after it the later of the two.
        start = (fix.offset, fix.last, fix.year)
        ends = []
        for cols in (item.stats, item.spec):
            if cols is not None:
                fix.offset, fix.last, fix.year = start
                cols.ts = fix.fix_all(cols.ts)
                ends.append((fix.offset, fix.last, fix.year))
        if ends:
            fix.offset, fix.last, fix.year = max(ends, key=lambda e: (e[0], e[1] or 0.0))
        if item.last_ts is not None:
            item.last_ts += fix.offset
    else:
        item.timestamp = fix.fix(item.timestamp)


@contextlib.contextmanager
def feeding_pool(workers: int) -> Iterator[ProcessPoolExecutor]:
    """Forked worker processes for a process that feeds a session with what they parse
    (``summarize``'s pieces, ``report``'s spans); stopped on the way out.

    concurrent.futures' pool, not multiprocessing's: the latter's worker-handler thread waits
    on the result pipe too, which another thread empties, so it spun while results streamed
    in. Measured on the feeding process while it fed 2M Ray-shape lines on 2 cores: its other
    threads took 150-220 ms of CPU from the workers with multiprocessing.Pool (the spinning
    thread 80-160 ms of it), 50 ms with this one (its one thread reading the results).

    The workers' garbage collector leaves what they inherit alone (gc.freeze, as the gc docs
    advise before a fork): its collections otherwise walked every object of the parent's
    imports, again and again, and wrote to their pages. A 4 MB SGLang piece took 15.5 ms in a
    worker forked from a process with the CLI's imports, 13.4 ms so. The feeding process, too,
    makes objects by the hundred thousand (what it unpickles and takes in) and keeps nearly all
    of them: its collections found nothing to free, and each full one walked everything alive.
    Paused while it feeds (cycles are rare here and the ingest ends), the frozen imports left
    out of the collection that comes after it. vLLM 2M lines: 1.27 -> 1.17 s, llama.cpp 0.63 ->
    0.60 s (min of 6 interleaved runs).
    """
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    # (A caller that froze its own objects, the CLI's main, unfreezes them itself: gc cannot
    # unfreeze only what this froze, so then it is left frozen until the caller is done.)
    frozen_before = gc.get_freeze_count() > 0
    gc.freeze()  # (the workers are forked at the first piece handed out, still inside)
    was_enabled = gc.isenabled()
    try:
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_start)
        gc.disable()
        try:
            yield pool
        finally:
            # On the way out early (an error, ^C): the pieces not begun are dropped.
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if was_enabled:
            gc.enable()
        if not frozen_before:
            gc.unfreeze()


def windowed(pool: ProcessPoolExecutor, fn: Callable[..., Any], argss: Iterator[tuple[Any, ...]],
             window: int) -> Iterator[Any]:
    """``fn(*args)`` for each of ``argss`` on the pool, the results in order, at most ``window``
    made ahead of the feeding (bounded memory). ``argss`` is drawn from only as work is handed
    out: arguments made then may say what the feeding has learnt so far."""
    pending: deque[Future[Any]] = deque()
    for args in islice(argss, window):
        pending.append(pool.submit(fn, *args))
    while pending:
        result = pending.popleft().result()
        nxt = next(argss, None)
        if nxt is not None:
            pending.append(pool.submit(fn, *nxt))
        yield result


def _feed(session: Session, tasks: list[Task], pieces: Iterator[Piece], rollover: Rollover | None = None) -> None:
    offset = 0
    carry = False
    for task, piece in zip(tasks, pieces, strict=False):
        in_tb = carry
        if carry:
            # A traceback ran across the boundary: redo this piece here with that context (rare).
            piece = parse_piece(task, in_traceback=True)
        carry = piece.in_traceback
        feed_piece(session, piece, offset, partial(parse_piece, task, in_tb, True), rollover)
        offset += piece.lines
    session.lines += offset


def feed_piece(session: Session, piece: Piece, offset: int, redo: Callable[[], Piece] | None = None,
               rollover: Rollover | None = None) -> None:
    """Give a piece's records, blocks and counts to the session (line numbers + ``offset``).

    Args:
        redo: the same piece parsed into records (``records=True``), for a block of
            stats lines the session cannot take as columns (it follows the end of a run).
        rollover: keeps a log's day-less stamps in order across midnight, in file order.
    """
    for kind, n in piece.counted.items():
        session.count_lines(kind, n)
    fix = rollover if rollover is not None and rollover.mode is not None else None
    for item in piece.items:
        if fix is not None:
            _fix_times(item, fix)
        if isinstance(item, Block):
            session.ingest_decode_columns(item.ranks, item.ts, item.running, item.tput,
                                          item.acc_len, item.acc_rate,
                                          offset + item.first_line, offset + item.last_line)
        elif isinstance(item, StatsBlock):
            if not session.ingest_stats_columns(offset + item.first_line, offset + item.last_line, item.last_ts,
                                                item.first_is_spec, item.stats, item.spec):
                if redo is None:
                    raise AssertionError("a stats block after the end of a run needs its records")
                # The rest of the piece, record by record (counts of counted kinds are in already).
                for rec in redo().items:
                    if isinstance(rec, Block | StatsBlock) or rec.line < item.first_line:
                        continue
                    if rec.kind in piece.counted:
                        continue
                    if fix is not None:
                        rec.timestamp = fix.fix(rec.timestamp)
                    rec.line += offset
                    session.ingest(rec)
                return
        else:
            item.line += offset
            session.ingest(item)
