"""The bulk path of ``summarize``: big logs read in pieces, on every core, line for line exact.

A busy server's log is mostly stats lines of a few shapes and HTTP access lines.
The grammar (:mod:`specmon.parsing.grammar`) turns a stats line the line parser
has read into a *template* of its shape; one alternation of the learned templates
runs over a whole piece at C speed and yields the values as columns. Lines no
template fits — lifecycle lines, configurations, damaged or unusual stats lines —
and only those go to the ordinary line parser, in order, with their line numbers,
so the session receives exactly what the line path gives it (tests compare both);
only the cost differs.

Workers (``multiprocessing``, one per core) parse byte ranges; the session
itself is fed in the parent, in file order, because runs, warm-up and idle
detection depend on order.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from operator import add, itemgetter
from typing import Any

from specmon.model.session import Session
from specmon.parsing import LineParser, detect_engine
from specmon.parsing.common import _day_start, parse_fraction, parse_hms
from specmon.parsing.grammar import KINDS, LineKind, Template, learn, read
from specmon.parsing.prefix import stamp_value
from specmon.records import Engine, ParsedRecord
from specmon.sources.logfiles import check_readable, head_lines, log_year

#: Bytes a worker parses per piece (lines never straddle pieces).
PIECE = 4 << 20
#: Below this size a file is parsed in-process (a pool costs more than it saves).
PARALLEL_MIN_BYTES = 32 << 20
#: Templates kept per line kind (a log prints few shapes), and samples tried per piece.
MAX_TEMPLATES = 16
MAX_LEARN = 32

# What a template-read line becomes in the piece's text while the rest is sorted out:
# a token no line of a real log is (checked: a piece whose count disagrees is redone).
_TOKEN = b"\x00\x01\x02"  # the last byte says the line kind
# uvicorn access lines: None for the line parser (its first test), skipped here.
_ACCESS = re.compile(rb'\n(?=[^\n]* - ")(?=[^\n]*HTTP/)[^\n]*(?=\n)')


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
class Piece:
    """What a worker returns for one piece of the file: records and blocks, in file order."""

    lines: int
    items: list[ParsedRecord | Block] = field(default_factory=list)
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
        self.refused: dict[str, set[bytes]] = {}
        self._regex: dict[str, re.Pattern[bytes] | None] = {}

    def regex(self, kind: LineKind) -> re.Pattern[bytes] | None:
        if kind.name not in self._regex:
            tpls = self.templates.get(kind.name, [])
            self._regex[kind.name] = (re.compile(b"\n(?:" + b"|".join(b"(" + t.source + b")" for t in tpls)
                                                 + b")(?=\n)") if tpls else None)
        return self._regex[kind.name]

    def add(self, tpl: Template) -> None:
        tpls = self.templates.setdefault(tpl.kind.name, [])
        if len(tpls) >= MAX_TEMPLATES:
            tpls.pop(0)
        tpls.append(tpl)
        self._regex.pop(tpl.kind.name, None)


_LEARNER = _Learner()
# Memos of the prefix arithmetic (few distinct days, at most 86,400 times of day, 1,000 ms).
_RANKS = _Cache(lambda b: b.decode())
_HMS = _Cache(lambda b: parse_hms(b.decode()))
_DAYS = _Cache(lambda b: _day_start(b.decode()))
_FRACS = _Cache(lambda b: parse_fraction(b.decode()))
_MD_DAYS: dict[int, _Cache] = {}


def _md_days(year: int) -> _Cache:
    memo = _MD_DAYS.get(year)
    if memo is None:
        memo = _MD_DAYS[year] = _Cache(lambda b: _day_start(f"{year:04d}-{b.decode()}"))
    return memo


def _stamp_fn(year: int) -> Callable[[dict[str, str]], float | None]:
    def fn(t: dict[str, str]) -> float | None:
        return stamp_value(t.get("date"), t.get("md"), t["hms"], t.get("frac", ""), year)
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
        tpl = learn(kind, text, message, outer_ts, rec, _stamp_fn(year))
    if tpl is None:
        if len(refused) >= 4096:
            refused.clear()
        refused.add(raw)
        return None
    _LEARNER.add(tpl)
    return tpl


def _columns(kind: LineKind, found: list[tuple[bytes, ...]], year: int) -> tuple[list[Any], ...] | None:
    """Columns (rank, ts, then ``kind.columns``) of template-matched lines, template by template."""
    tpls = _LEARNER.templates[kind.name]
    # Offsets of each template's groups inside the alternation (each template is one extra group).
    offsets: list[int] = []
    pos = 0
    for t in tpls:
        offsets.append(pos + 1)
        pos += 1 + t.ngroups
    # Usually one shape fills the piece: find it in C (all/map) before going line by line.
    single = next((w for w, o in enumerate(offsets) if all(map(itemgetter(o - 1), found))), None)
    ncol = 2 + len(kind.columns or ())
    if single is None:
        # Lines of several shapes interleaved: one line at a time (rare).
        which = [next(i for i, o in enumerate(offsets) if f[o - 1]) for f in found]
        cols: tuple[list[Any], ...] = tuple([] for _ in range(ncol))
        stamp = _stamp_fn(year)
        for f, w in zip(found, which, strict=True):
            t = tpls[w]
            vals = read(t, f[offsets[w]:offsets[w] + t.ngroups], stamp)
            cols[0].append(vals["rank"])
            cols[1].append(vals["timestamp"])
            for c, attr in enumerate(kind.columns or (), 2):
                cols[c].append(vals[attr])
        return cols
    w = single
    t = tpls[w]
    base = offsets[w]  # tuple index of the template's group 1
    g = {role: base + i - 1 for role, i in t.groups.items()}
    out: list[list[Any]] = []
    n = len(found)
    # map/itemgetter keep the per-line work in C; the memos persist across pieces.
    ri = g.get("rank")
    out.append([None] * n if ri is None else list(map(_RANKS.__getitem__, map(itemgetter(ri), found))))
    hi = g.get("hms")
    if hi is None:
        out.append([None] * n)
    else:
        secs = list(map(_HMS.__getitem__, map(itemgetter(hi), found)))
        di, mi = g.get("date"), g.get("md")
        if di is not None:
            days = list(map(_DAYS.__getitem__, map(itemgetter(di), found)))
        elif mi is not None:
            memo = _md_days(year)
            days = list(map(memo.__getitem__, map(itemgetter(mi), found)))
        else:
            days = None
        fi = g.get("frac")
        fracs = list(map(_FRACS.__getitem__, map(itemgetter(fi), found))) if fi is not None else None
        if None in secs or (days is not None and None in days):
            # An impossible date or time somewhere (month 13, 25:00:00): no timestamp there.
            ts = [None if h is None or (days is not None and days[j] is None)
                  else (days[j] if days is not None else 0.0) + h + (fracs[j] if fracs is not None else 0.0)
                  for j, h in enumerate(secs)]
            if days is None:
                ts = [None if h is None else h + (fracs[j] if fracs is not None else 0.0)
                      for j, h in enumerate(secs)]
        elif days is None:
            ts = secs if fracs is None else list(map(add, secs, fracs))
        else:
            ts = list(map(add, days, secs))
            if fracs is not None:
                ts = list(map(add, ts, fracs))
        out.append(ts)
    for attr in kind.columns or ():
        i = g.get(attr)
        if i is None:
            out.append([None] * n)
        else:
            # A template's groups always take part: every value is there and matches its pattern.
            out.append(list(map(t.converters[attr], map(itemgetter(i), found))))
    return tuple(out)


def _offsets(kind: LineKind) -> list[int]:
    """Tuple index of each template's group 1 in the alternation (one outer group per template)."""
    offsets: list[int] = []
    pos = 0
    for t in _LEARNER.templates[kind.name]:
        offsets.append(pos + 1)
        pos += 1 + t.ngroups
    return offsets


def _record(kind: LineKind, f: tuple[bytes, ...], line: int, year: int) -> ParsedRecord:
    """The record of one template-read line (the slow way: tests, ``parse``)."""
    tpls = _LEARNER.templates[kind.name]
    offsets = _offsets(kind)
    w = next(i for i, o in enumerate(offsets) if f[o - 1])
    vals = read(tpls[w], f[offsets[w]:offsets[w] + tpls[w].ngroups], _stamp_fn(year))
    ts, rank = vals.pop("timestamp"), vals.pop("rank")
    rec: ParsedRecord = kind.record(line, ts, rank, **vals)
    return rec


def piece_records(data: bytes, engine: Engine = Engine.UNKNOWN, year: int = 2026) -> tuple[list[ParsedRecord], int]:
    """Every record of a piece the bulk way, and how many lines a template read (tests, ``parse``)."""
    piece = bulk_piece(data, engine, year, records=True)
    return [r for r in piece.items if not isinstance(r, Block)], piece.by_template


def bulk_piece(data: bytes, engine: Engine, year: int, in_traceback: bool = False,
               records: bool = False, parser: LineParser | None = None) -> Piece:
    """Parse one piece (whole lines, ``\\n``-separated): templates where they fit, the line parser elsewhere.

    Args:
        in_traceback: the previous piece ended inside a traceback (the parser's only
            multi-line context).
        records: give every template-read line as a record (tests, ``parse``) instead
            of decode columns and counts.
        parser: the line parser to continue with (live feeding keeps one per source);
            by default a new one with ``engine``, ``year`` and ``in_traceback``.
    """
    if b"\r" in data:
        data = data.replace(b"\r\n", b"\n")
    text = b"\n" + data if data.endswith(b"\n") else b"\n" + data + b"\n"
    nlines = text.count(b"\n") - 1
    if parser is None:
        parser = LineParser(year=year, engine=engine)
        parser.in_traceback = in_traceback
    probe = LineParser(year=year, engine=engine)
    kinds = [k for k in KINDS if k.body is not None and k.marker.encode() in text]
    decode = None if records else next((k for k in kinds if k.columns), None)
    found: dict[str, list[tuple[bytes, ...]]] = {}
    counted: dict[str, int] = {}
    tokens: dict[bytes, LineKind] = {}
    rest = text
    for i, kind in enumerate(kinds):
        marker = kind.marker.encode()
        token = _TOKEN[:-1] + bytes([0x10 + i])
        tokens[token] = kind
        keep = records or kind is decode
        tries = 0
        while True:
            rx = _LEARNER.regex(kind)
            matched: list[tuple[bytes, ...]] = []
            n = 0
            new_rest = rest
            if rx is not None:
                if keep:
                    matched = rx.findall(rest)
                new_rest, n = rx.subn(b"\n" + token, rest)
            if tries >= MAX_LEARN or marker not in new_rest:
                break
            # A line of this kind that no template read: learn its shape (or note it has none).
            learned = False
            refused = _LEARNER.refused.setdefault(kind.name, set())
            for m in re.finditer(rb"\n([^\n]*" + re.escape(marker) + rb"[^\n]*)(?=\n)", new_rest):
                if m.group(1) in refused:
                    continue  # known to have no template (damaged, cut, unusual): free to skip
                tries += 1
                if _try_learn(kind, m.group(1), probe, year) is not None:
                    learned = True
                    break
                if tries >= MAX_LEARN:
                    break
            if not learned:
                break
            # Run the new alternation over this kind's lines again (its groups are renumbered).
        rest = new_rest
        if keep:
            found[kind.name] = matched
        elif n:
            name: str = getattr(kind.record, "kind", kind.name)
            counted[name] = counted.get(name, 0) + n
    piece = Piece(nlines, counted=counted)
    dec_found = found.get(decode.name, []) if decode is not None else []
    cols = _columns(decode, dec_found, year) if decode is not None and dec_found else None
    piece.by_template = sum(counted.values()) + sum(len(v) for v in found.values())
    rest = _ACCESS.sub(b"\n", rest)
    if not records and len(rest) == rest.count(b"\n") + piece.by_template * len(_TOKEN):
        # Nothing but template-read lines and access lines: one block, no line parser.
        if dec_found:
            dec_token = next(t for t, k in tokens.items() if k is decode)
            first = rest.count(b"\n", 0, rest.find(dec_token))
            last = rest.count(b"\n", 0, rest.rfind(dec_token))
            piece.items.append(_block(cols, 0, len(dec_found), first, last))  # type: ignore[arg-type]
        if piece.by_template:
            parser.in_traceback = False
            if parser.engine is Engine.UNKNOWN:
                parser.engine = next(iter(tokens.values())).engine
        piece.in_traceback = parser.in_traceback
        return piece
    # Walk the lines: template-read ones join the current block, the others go to the parser.
    lines = rest.split(b"\n")
    seen = dict.fromkeys(found, 0)
    k = start_k = first = last = 0
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
            if records:
                j = seen[kind_x.name]
                seen[kind_x.name] = j + 1
                piece.items.append(_record(kind_x, found[kind_x.name][j], ln, year))
            elif kind_x is decode:
                if k == start_k:
                    first = ln
                last = ln
                k += 1
            continue
        rec = parser.parse(x.decode("utf-8", errors="replace"), ln)
        if rec is not None:
            if k > start_k:
                piece.items.append(_block(cols, start_k, k, first, last))  # type: ignore[arg-type]
                start_k = k
            piece.items.append(rec)
    if k > start_k:
        piece.items.append(_block(cols, start_k, k, first, last))  # type: ignore[arg-type]
    if k != len(dec_found):
        raise AssertionError("template-read lines and their tokens disagree")
    piece.in_traceback = parser.in_traceback
    return piece


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


def decode_columns(lines: list[bytes], engine: Engine, year: int) -> Columns | None:
    """Columns of consecutive lines when no line gives a record of its own (report's replay); else None."""
    data = b"\n".join(lines)
    piece = bulk_piece(data, engine, year)
    blocks = [b for b in piece.items if isinstance(b, Block)]
    if len(blocks) != len(piece.items) or len(blocks) > 1:
        return None
    if set(piece.counted) - {"prefill"}:
        return None
    n = len(blocks[0].tput) if blocks else 0
    if data.count(b"Decode batch") != n:
        return None  # a decode-marked line the session does not sample: keep the caller's pairing exact
    b = blocks[0] if blocks else Block(0, 0, [], [], [], [], None, None)
    return Columns(b.ranks, b.ts, b.running, b.tput, b.acc_len, b.acc_rate, piece.counted.get("prefill", 0))


def _block(cols: tuple[list[Any], ...], a: int, b: int, first: int, last: int) -> Block:
    ranks, ts, running, tput, acc_len, acc_rate = (c[a:b] for c in cols)
    return Block(first, last, ranks, ts, running, tput,
                 acc_len if any(v is not None for v in acc_len) else None,
                 acc_rate if any(v is not None for v in acc_rate) else None)


def parse_piece(args: tuple[str, int, int, str, int], in_traceback: bool = False) -> Piece:
    """Worker entry: parse bytes ``[start, end)`` of a file (both on line starts)."""
    path, start, end, engine_value, year = args
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    return bulk_piece(data, Engine(engine_value), year, in_traceback)


def _pieces(path: str, size: int) -> Iterator[tuple[int, int]]:
    """Byte ranges of about PIECE bytes, each ending just after a newline (or at EOF)."""
    with open(path, "rb") as f:
        start = 0
        while start < size:
            end = min(start + PIECE, size)
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


def ingest_file_fast(session: Session, path: str, *, baseline: bool = False, jobs: int = 0) -> None:
    """Read one file into the session like :func:`specmon.ingest.files.ingest_file`, faster on big files.

    Args:
        jobs: worker processes; 0 = one per core; 1 = in this process.
    """
    p = check_readable(path)
    size = p.stat().st_size
    head = head_lines(p)
    year = log_year(p, head)
    engine = detect_engine(head)
    session.set_engine_hint(engine)  # as ingest_file: the signature breaks ties of the line markers
    session.begin_source(str(path), baseline=baseline)
    tasks = [(str(p), a, b, engine.value, year) for a, b in _pieces(str(p), size)]
    workers = jobs or os.cpu_count() or 1
    if workers > 1 and size >= PARALLEL_MIN_BYTES:
        ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
        with ctx.Pool(min(workers, len(tasks))) as pool:
            _feed(session, tasks, pool.imap(parse_piece, tasks, chunksize=1))
    else:
        _feed(session, tasks, map(parse_piece, tasks))


def _feed(session: Session, tasks: list[tuple[str, int, int, str, int]], pieces: Iterator[Piece]) -> None:
    offset = 0
    carry = False
    for task, piece in zip(tasks, pieces, strict=False):
        if carry:
            # A traceback ran across the boundary: redo this piece here with that context (rare).
            piece = parse_piece(task, in_traceback=True)
        carry = piece.in_traceback
        feed_piece(session, piece, offset)
        offset += piece.lines
    session.lines += offset


def feed_piece(session: Session, piece: Piece, offset: int) -> None:
    """Give a piece's records, blocks and counts to the session (line numbers + ``offset``)."""
    for kind, n in piece.counted.items():
        session.counts[kind] += n
    for item in piece.items:
        if isinstance(item, Block):
            session.ingest_decode_columns(item.ranks, item.ts, item.running, item.tput,
                                          item.acc_len, item.acc_rate,
                                          offset + item.first_line, offset + item.last_line)
        else:
            item.line += offset
            session.ingest(item)
