"""The bulk path of ``summarize``: big logs read in pieces, on every core, line for line exact.

A busy server's log is mostly stats lines of a few shapes and HTTP access lines.
The grammar (:mod:`specmon.grammar.kinds`) turns a stats line the line parser
has read into a *template* of its shape; one ``re.split`` per line kind with the
alternation of its learned templates runs over a whole piece at C speed and yields
the values as columns (SGLang decode; vLLM and llama.cpp interval stats and spec
lines) or counts (SGLang prefill). Lines that provably give nothing (HTTP access
lines, *quiet* shapes learned from lines without any marker or lifecycle word) are
skipped outside tracebacks and outside a pending error (after one, the line parser reads them
until a request answered or a sample says the server went on serving). The lines left —
lifecycle lines, configurations, damaged or unusual stats lines — and only those go to the
ordinary line parser, in order, with their line numbers, so the session receives exactly
what the line path gives it (tests compare both); only the cost differs.

This module reads one piece (:func:`bulk_piece`). The templates are learnt in
:mod:`specmon.ingest.templates`, the lines that give nothing found by :mod:`specmon.ingest.quiet`,
the session's columns made by :mod:`specmon.ingest.column_blocks`; :mod:`specmon.ingest.feeding`
parses the pieces on every core and feeds the session in file order.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from specmon.engines import KINDS
from specmon.grammar.kinds import LineKind, read
from specmon.ingest.column_blocks import (
    _COUNTED_KINDS,
    _DECODE_KINDS,
    _SPEC_KINDS,
    _STATS_KINDS,
    Block,
    StatsBlock,
    _block,
    _columns,
    _stats_block,
)
from specmon.ingest.quiet import _QUIET, _drop_access, _quiet_source, _QuietTexts
from specmon.ingest.scan import Pass
from specmon.ingest.templates import _LEARNER, _TOKEN, _stamp_fn, _try_learn
from specmon.parsing import SAMPLE_KINDS, LineParser
from specmon.records import Decode, Engine, EngineStats, ParsedRecord, Spec

#: Lines of a kind tried per piece as samples to learn a template from.
MAX_LEARN = 32
#: Lines of a kind's marker passed over per piece as known to have no template, before its
#: search for one to learn from stops.
MAX_PASSED = 256

_count_byte: Callable[[bytes, int], int] | None
_holds: Callable[[bytes, bytes], bool]
_count_text: Callable[[bytes, bytes], int]
try:
    from specmon._native import count_byte as _count_byte
    from specmon._native import count_text as _count_text
    from specmon._native import holds as _holds
except ImportError:  # (no compiler: numpy, bytes' own search)
    _count_byte = None
    _holds = bytes.__contains__
    _count_text = bytes.count


@dataclass
class Piece:
    """What a worker returns for one piece of the file: records and blocks, in file order."""

    lines: int
    items: list[ParsedRecord | Block | StatsBlock] = field(default_factory=list)
    #: Stats lines read by a template that the session only counts, by record kind.
    counted: dict[str, int] = field(default_factory=dict)
    # The piece ended inside a traceback: the next piece's first lines may name the exception.
    in_traceback: bool = False
    #: The piece ended with an error pending (LineParser.awaiting_serving): the next piece's
    #: access and quiet lines go to the line parser until one of them is a request answered.
    awaiting_serving: bool = False
    #: Lines read by a template (the rest went to the line parser).
    by_template: int = 0


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
    if isinstance(rec, Decode | EngineStats | Spec):
        rec.engine = kind.engine  # as the line parser: two engines print these
    return rec


def piece_records(data: bytes, engine: Engine = Engine.UNKNOWN, year: int = 2026,
                  day: float | None = None) -> tuple[list[ParsedRecord], int]:
    """Every record of a piece the bulk way, and how many lines a template read (tests, ``parse``)."""
    piece = bulk_piece(data, engine, year, records=True, day=day)
    return [r for r in piece.items if not isinstance(r, Block | StatsBlock)], piece.by_template


def bulk_piece(data: bytes, engine: Engine, year: int, in_traceback: bool = False,
               records: bool = False, parser: LineParser | None = None, mixed: bool = False,
               day: float | None = None, framed: bool = False, awaiting_serving: bool = False) -> Piece:
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
        awaiting_serving: the previous piece ended with an error pending (the parser's other
            context across pieces).
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
        parser.awaiting_serving = awaiting_serving
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
    access_texts = _AccessTexts(b"")
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
            access_texts = _AccessTexts(rest)
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
            return bulk_piece(data, engine, year, in_traceback, records, parser, mixed=True, day=day, framed=framed,
                              awaiting_serving=awaiting_serving)
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
    # An error pending from the piece before: its access and quiet lines may answer for it (walk).
    if (not records and not rec_kinds and not (nq and start_in_tb) and not parser.awaiting_serving
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
    _walk(piece, rest, parser, tokens, col_kinds, cols, found, quiet_texts, access_texts, year, day)
    piece.in_traceback = parser.in_traceback
    piece.awaiting_serving = parser.awaiting_serving
    return piece


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
          quiet_texts: _QuietTexts, access_texts: _AccessTexts, year: int, day: float) -> None:
    """Template-read lines join the current block (or become records); the others go to the line parser.

    While an error is pending (``parser.awaiting_serving``) the access and quiet lines go to the
    line parser too, as the line path gives it every line: one may show a request answered.
    """
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
            if not parser.awaiting_serving or parser.in_traceback:
                continue
            x = access_texts[ln]  # (an access line, or an empty one)
            if x:
                rec = parser.parse(x.decode("utf-8", errors="replace"), ln)
                if rec is not None:
                    close()
                    piece.items.append(rec)
            continue
        kind_x = tokens.get(x)
        if kind_x is not None:
            # What the line parser does on a stats line it reads (its state).
            parser.in_traceback = False
            if getattr(kind_x.record, "kind", None) in SAMPLE_KINDS:
                parser.awaiting_serving = False
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
            if not parser.in_traceback and not parser.awaiting_serving:
                continue  # gives nothing
            x = quiet_texts[q - 1]
        elif learned is not None and not parser.in_traceback and not parser.awaiting_serving and learned.reads(x):
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


class _AccessTexts:
    """The text of line ``i`` before the access lines were taken out (they leave an empty line):
    split only when the line parser needs one (an error pending in the piece)."""

    def __init__(self, before: bytes) -> None:
        self._before: bytes | None = before
        self._lines: list[bytes] = []

    def __getitem__(self, i: int) -> bytes:
        if self._before is not None:
            self._lines = self._before.split(b"\n")
            self._before = None
        return self._lines[i] if i < len(self._lines) else b""


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
