"""The bulk path of ``summarize``: big logs read in chunks, on every core, with exactness checks.

A busy server's log is mostly three kinds of line: SGLang decode stats, prefill
stats and HTTP access lines. For a chunk made only of those, in their standard
shapes, one regular expression over the chunk's decode lines (C speed) yields
the values as columns, and the session takes them in bulk. Any chunk with
anything else in it — a lifecycle line, a configuration, a damaged or unusual
decode line, vLLM stats — is parsed line by line by the ordinary parser, so
the result is *identical* to the line-by-line path (a test compares them);
only the cost differs.

Workers (``multiprocessing``, one per core) parse byte ranges; the session
itself is fed in the parent, in file order, because runs, warm-up and idle
detection depend on order.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from specmon.ingest.logfiles import check_readable, file_year, head_lines
from specmon.model.session import Session
from specmon.parsing import LineParser, detect_engine
from specmon.parsing.common import parse_datetime
from specmon.records import Engine, ParsedRecord

#: Bytes a worker parses per piece (lines never straddle pieces).
PIECE = 4 << 20
#: Below this size a file is parsed in-process (a pool costs more than it saves).
PARALLEL_MIN_BYTES = 32 << 20

_NUM = rb"\d+(?:\.\d+)?"
# One standard SGLang decode line (≥ v0.4.6.post3, both separators, optional accept fields,
# optional trailing ", "), anchored at both ends of the line. Lines are joined as
# "\nline\nline...\n": a leading literal "\n[" lets the regex engine skip ahead fast
# (a ^ anchor would make it try every position). Groups: ts, ranks, running,
# accept len, accept rate, throughput.
_DECODE = re.compile(
    rb"\n\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)((?: (?:DP|PP|TP|EP)\d+)*)\] Decode batch[.,] "
    rb"#running-req: (\d+), #token: \d+, token usage: " + _NUM + rb", "
    rb"(?:accept len: (" + _NUM + rb"), accept rate: (" + _NUM + rb"), )?"
    rb"(?:cuda|cpu|npu) graph: (?:True|False), gen throughput \(token/s\): (" + _NUM + rb"), "
    rb"#queue-req: \d+(?:, )?(?=\n)",
)
_PREFILL = re.compile(
    rb"\n\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?: (?:DP|PP|TP|EP)\d+)*\] Prefill batch[.,] "
    rb"#new-seq: \d+, #new-token: \d+, #cached-token: \d+, token usage: " + _NUM + rb", "
    rb"#running-req: \d+, #queue-req: \d+, (?:#pending-token: \d+, )?"
    rb"(?:(?:cuda|cpu|npu) graph: (?:True|False), input throughput \(token/s\): " + _NUM + rb"(?:, )?)?(?=\n)",
)


@dataclass
class Piece:
    """What a worker returns for one piece of the file, in file order."""

    lines: int
    # Either records (line numbers relative to the piece) ...
    records: list[ParsedRecord] | None = None
    # ... or a bulk block of decode columns plus a count of standard prefill lines.
    ranks: list[str | None] = field(default_factory=list)
    ts: list[float | None] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    tput: list[float] = field(default_factory=list)
    acc_len: list[float | None] | None = None
    acc_rate: list[float | None] | None = None
    prefill: int = 0
    # The piece ended inside a traceback: the next piece's first lines may name the exception.
    in_traceback: bool = False


def bulk_piece(lines: list[bytes], engine: Engine, year: int) -> Piece | None:
    """Columns for a piece made only of standard decode/prefill/access lines; else None."""
    dec: list[bytes] = []
    pre: list[bytes] = []
    others: list[bytes] = []
    for ln in lines:
        # Same order of tests as LineParser.parse, so a line is classified the same way.
        if b"Decode batch" in ln:
            dec.append(ln)
        elif b' - "' in ln and b"HTTP/" in ln:
            continue
        elif b"Prefill batch" in ln:
            pre.append(ln)
        elif ln:
            others.append(ln)
    if others:
        probe = LineParser(year=year, engine=engine)
        for ln in others:
            if probe.parse(ln.decode("utf-8", errors="replace").rstrip("\r"), 1) is not None:
                return None  # a record that must be ingested in order: parse the piece line by line
    if pre and len(_PREFILL.findall(b"\n" + b"\n".join(pre) + b"\n")) != len(pre):
        return None
    if not dec:
        return Piece(len(lines), prefill=len(pre))
    found = _DECODE.findall(b"\n" + b"\n".join(dec) + b"\n")
    if len(found) != len(dec):
        return None
    cache: dict[bytes, float | None] = {}
    ts: list[float | None] = []
    for t in (f[0] for f in found):
        v = cache.get(t, -1.0)
        if v == -1.0:
            s = t.decode()
            v = cache[t] = parse_datetime(s[:10], s[11:19])
        ts.append(v)
    rank_names: dict[bytes, str | None] = {}
    ranks = [rank_names.setdefault(f[1], f[1].decode().strip() or None) for f in found]
    has_acc = any(f[3] for f in found)
    return Piece(
        len(lines),
        ranks=ranks,
        ts=ts,
        running=[int(f[2]) for f in found],
        tput=[float(f[5]) for f in found],
        acc_len=[float(f[3]) if f[3] else None for f in found] if has_acc else None,
        acc_rate=[float(f[4]) if f[4] else None for f in found] if has_acc else None,
        prefill=len(pre),
    )


def parse_piece(args: tuple[str, int, int, str, int], in_traceback: bool = False) -> Piece:
    """Worker entry: parse bytes ``[start, end)`` of a file (both on line starts).

    Args:
        in_traceback: the previous piece ended inside a traceback (the parser's only
            multi-line context); such a piece is always parsed line by line.
    """
    path, start, end, engine_value, year = args
    engine = Engine(engine_value)
    with open(path, "rb") as f:
        f.seek(start)
        data = f.read(end - start)
    raw = data.split(b"\n")
    if raw and raw[-1] == b"":
        raw.pop()  # the piece ends with a newline: no empty last line
    lines = [ln[:-1] if ln.endswith(b"\r") else ln for ln in raw]
    piece = None if in_traceback else bulk_piece(lines, engine, year)
    if piece is not None:
        return piece
    parser = LineParser(year=year, engine=engine)
    parser.in_traceback = in_traceback
    recs = []
    for i, ln in enumerate(lines, 1):
        rec = parser.parse(ln.decode("utf-8", errors="replace"), i)
        if rec is not None:
            recs.append(rec)
    return Piece(len(lines), records=recs, in_traceback=parser.in_traceback)


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
    year = file_year(p)
    engine = detect_engine(head_lines(p))
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
        if piece.records is not None:
            for rec in piece.records:
                rec.line += offset
                session.ingest(rec)
        else:
            session.counts["prefill"] += piece.prefill
            if piece.tput:
                session.ingest_decode_columns(piece.ranks, piece.ts, piece.running, piece.tput,
                                              piece.acc_len, piece.acc_rate, offset + 1, offset + piece.lines)
        offset += piece.lines
    session.lines += offset
