"""Replaying a recording: the session it captured, rebuilt from its raw lines.

Replay re-parses the recorded raw lines per source, in order, into a fresh
:class:`~specmon.model.session.Session` with the recorded warm-up, so
``specmon replay RECORDING`` reproduces the table the live session showed. Blocks of plain
stats lines take the bulk path (:mod:`specmon.ingest.bulk`), as ``summarize`` reads a log, and
a big recording is read in spans by forked processes while this one feeds the session.
"""

from __future__ import annotations

import io
import multiprocessing as mp
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from itertools import compress, groupby, repeat
from operator import contains, itemgetter
from pathlib import Path
from typing import Any, cast

from specmon.model.session import Session
from specmon.output.recording_reader import RECORDING_HINT, ReadStats, _decode_lines, _raw_chunks, check_header
from specmon.parsing import LineParser, detect_engine
from specmon.recording_format import RecordingError, record_from_json, times_sound
from specmon.records import Engine, ParsedRecord
from specmon.smallfile import InputError, check_input

#: Raw lines replayed together: a block of plain stats lines goes through the bulk path.
REPLAY_BLOCK = 8192
#: What engine detection looks at, as ``summarize`` does (``head_lines`` + ``detect_engine``).
_HEAD_LINES, _HEAD_BYTES = 5000, 1 << 20

#: ``on_samples(log times, receive times, throughputs, run id)``: a bulk block's decode samples.
SamplesCallback = Callable[[Sequence[float | None], Sequence[float | None], Sequence[float], int], None]


#: Recordings at least this big are read and pre-parsed by a second process while this one
#: feeds the session (the way ``summarize`` splits a big log over the cores).
PIPELINE_MIN_BYTES = 32 << 20


def replay_recording(path: str | os.PathLike[str], *, warmup: int | None = None,
                     stats: ReadStats | None = None,
                     on_record: Callable[[float | None, ParsedRecord, Session], None] | None = None,
                     on_entry: Callable[[dict[str, Any]], None] | None = None,
                     on_samples: SamplesCallback | None = None, year: int | None = None) -> Session:
    """Rebuild the session a recording captured, streaming (memory bounded by a block of lines).

    Raw lines are parsed again per source, in order, with the recorded
    warm-up (``warmup`` overrides it), the way ``summarize`` reads a log: the
    engine is recognised from each source's first lines, and blocks made only of
    plain stats lines take the bulk path, which gives what the line parser gives.
    A source that recorded parsed records but no raw lines is rebuilt from those records.
    A big recording is read and decoded by a second process while this one parses its blocks
    and feeds the session.

    Args:
        path: The recording.
        warmup: Override the recorded warm-up.
        stats: Receives what reading skipped (truncated tail, bad lines).
        on_record: Called after each record is ingested, with the line's receive time.
        on_entry: Called with every entry but the raw lines (meta, records, runs, restarts,
            verdicts), in order.
        on_samples: Called for the decode samples of a block read in bulk (no records are built
            for them). Without it, every line goes through the line parser and ``on_record``.
        year: the year of year-less stamps (``--year``), instead of the recorded one.

    Raises:
        RecordingError: as for :func:`read_recording`.
    """
    bulk = on_samples is not None or on_record is None
    try:  # a FIFO or a device: one sentence before anything opens it (nor any worker process)
        info = check_input(path, "recording", hint=RECORDING_HINT)
    except InputError as exc:
        raise RecordingError(str(exc)) from None
    size = info.st_size if info is not None else 0
    check_header(path)  # (one bounded line) a file that is no recording is said before any span or worker
    session: Session | None = None
    parsers: dict[str, LineParser] = {}
    #: Sources begun (a source entry, or lines of an undeclared name) whose first block is to come:
    #: the engine is recognised from that block, as summarize recognises a file's head.
    fresh: set[str] = set()
    last_year: list[int | None] = [None]  # the year of the source begun last

    def known() -> _Known:
        # What the reading processes may take as known, as this side knows it now.
        return _Known({src: p.year for src, p in parsers.items()},
                      {src: p.engine for src, p in parsers.items() if src not in fresh}, last_year[0])

    workers = min(os.cpu_count() or 1, -(-size // READ_SPAN))
    if bulk and size >= PIPELINE_MIN_BYTES and workers > 1 and "fork" in mp.get_all_start_methods():
        ops: Iterator[_Op] = _ops_from_pool(Path(path), size, workers, stats, year, known)
    else:
        ops = _replay_ops(path, stats, bulk, year)
    has_lines: set[str] = set()
    pending_records: list[tuple[str, dict[str, Any]]] = []
    reread: dict[tuple[int, int], list[_Block]] = {}  # the last span read again here
    for op in ops:
        kind = op[0]
        if kind == "block":
            assert session is not None
            _, src, block, piece, engine_used, detected, year_used, cut_at = op
            parser = parsers[src]
            if src in fresh:
                fresh.discard(src)
                if detected is None or (cut_at is not None and len(block.ns) < REPLAY_BLOCK):
                    block = _whole_block(Path(path), block, year, reread)
                    # Read apart: its reading process took the source for one begun before (it
                    # had not seen it begun again), or the block's lines go on past its span.
                    detected = _detect_head(_first_block(Path(path), block, src, cut_at))
            else:
                detected = None
            if detected is not None:
                session.set_engine_hint(detected)
                if parser.engine is Engine.UNKNOWN:
                    parser.engine = detected
            if piece is not None and (parser.in_traceback or parser.awaiting_serving or parser.engine is not engine_used
                                      or parser.year != year_used):
                block = _whole_block(Path(path), block, year, reread)
                piece = None  # it assumed another parser state: redo it here
                if bulk and not parser.in_traceback and not parser.awaiting_serving:
                    piece = _bulk(block, parser)
            _apply_block(session, parser, block, piece, on_record, on_samples, bulk)
            continue
        if kind == "entry":
            entry = op[1]
            if on_entry is not None:
                on_entry(entry)
            if session is None:
                recorded = entry.get("warmup")
                session = Session(warmup=warmup if warmup is not None
                                  else (recorded if isinstance(recorded, int) else None))
                continue
            if entry["type"] == "meta" and entry.get("event") == "source":
                _flush_records(session, pending_records, has_lines, on_record)
                current = str(entry.get("source", ""))
                session.begin_source(current, baseline=bool(entry.get("baseline")))
                recorded_year = entry.get("year") if year is None else year
                parsers[current] = LineParser(year=recorded_year if isinstance(recorded_year, int) else None)
                fresh.add(current)
                last_year[0] = parsers[current].year
            elif entry["type"] == "record":
                src = str(entry.get("src", ""))
                if src not in has_lines:  # lines are authoritative: their source's records are not kept
                    pending_records.append((src, entry))
        elif kind == "implicit" and op[1] not in parsers:  # (a reading process may not know it begun)
            assert session is not None
            session.begin_source(op[1])
            parsers[op[1]] = LineParser()
            fresh.add(op[1])
        elif kind == "has_lines":
            has_lines.add(op[1])
        elif kind == "stats" and stats is not None:
            st = op[1]
            stats.entries, stats.bad_lines, stats.truncated_tail = st.entries, st.bad_lines, st.truncated_tail
    if session is None:  # pragma: no cover - read_recording raises for empty files
        raise RecordingError(f"{path}: empty recording")
    _flush_records(session, pending_records, has_lines, on_record)
    return session


_LineRun = Callable[[bytes, int, "str | None", int, int], tuple[int, int, Any, Any, Any, Any, Any]]
_line_run: _LineRun | None
try:  # in C: the usual raw line read in place (see _native.c)
    from specmon._native import line_run as _line_run
except ImportError:  # built without a C compiler: every line through the JSON decoder
    _line_run = None


#: The key of an entry that is not a raw line of a text-named source (runs are grouped by source).
_OTHER = object()

#: What the reading side hands the session side, in order (see :func:`_replay_ops`).
_Op = tuple[Any, ...]


def _run_keys(batch: list[dict[str, Any]]) -> list[Any]:
    """Per entry: its source if it is a raw line of a text-named source, else _OTHER.

    In C for the usual chunk, raw lines only, each with a text source name.
    """
    types = set(map(itemgetter("type"), batch))
    if types == {"line"}:
        srcs = _field(batch, "src", None)
        if set(map(type, srcs)) == {str}:
            return srcs
    return [e["src"] if e["type"] == "line" and type(e.get("src")) is str else _OTHER for e in batch]


def _field(part: list[dict[str, Any]], key: str, default: Any) -> list[Any]:
    """One field of every entry of a run, in C (itemgetter) when all have it, as .get otherwise."""
    try:
        return list(map(itemgetter(key), part))
    except KeyError:
        return [e.get(key, default) for e in part]


@dataclass
class _Block:
    """Consecutive raw lines of one source: numbers, texts and receive times."""

    ns: list[int]
    texts: list[str]
    ts: list[Any]
    #: The receive times of its decode lines, found by the reading process (None: not yet).
    recv: list[Any] | None = None
    #: The texts UTF-8 encoded and joined by newlines, as the reading process sends them
    #: (one bytes object pickles as a copy; 8,192 strings took most of the hand-over).
    data: bytes | None = None
    #: Sent without its texts and times (the feeding side takes its bulk parse): the span it
    #: was read from and its place there, to read it again (:func:`_whole_block`).
    at: tuple[int, int, int] | None = None

    def lines(self) -> list[str]:
        """The texts (decoded from ``data`` when sent that way: an exact round trip)."""
        assert self.at is None, "a block sent without its lines"
        return self.texts if self.data is None else self.data.decode("utf-8").split("\n")


def _replay_ops(path: str | os.PathLike[str], stats: ReadStats | None, bulk: bool,
                year_override: int | None = None, span: tuple[int, int] | None = None,
                known: _Known | None = None) -> Iterator[_Op]:
    """Read a recording into ordered operations: entries, new implicit sources, and blocks of
    raw lines with their bulk parse, made with the parser state this side can know (the year,
    the engine recognised from the source's first lines, no traceback open) and sent with it:
    ``("block", source, block, parse, engine, detected, year, cut_at)``. ``detected`` is the
    engine of the block's lines when this side takes it for the source's first block.

    ``span`` reads only those bytes (:func:`_ops_from_pool`); ``known`` is then what the
    feeding side knew of the sources begun before it, and a name it does not know is guessed
    (the year of the source begun last, the engine of the block's lines): the feeding side
    redoes a block whose guess was wrong. ``cut_at`` is the span's end for its last block
    (that source's lines may go on in the next span).
    """
    local = ReadStats()
    years: dict[str, int | None] = dict(known.years) if known is not None else {}
    engines: dict[str, Engine] = dict(known.engines) if known is not None else {}
    last_year = known.last_year if known is not None else None
    seen: set[str] = set()
    blocks = 0  # blocks made so far (a block's place in its span: _Block.at)
    block_src: str | None = None  # None: no block open (a source may be named "")
    # The open block: line numbers, receive times, and its texts in order, as runs read in C
    # (UTF-8, newline-joined: bytes) and as decoded entries gave them (lists of str).
    ns: list[int] = []
    ts: list[Any] = []
    parts: list[bytes | list[str]] = []
    recvs: list[Any] = []  # the receive times of the C runs' decode lines

    def flush(cut_at: int | None = None) -> Iterator[_Op]:
        nonlocal ns, ts, parts, recvs, blocks
        if not ns or block_src is None:
            return
        if all(type(part) is bytes for part in parts):
            data = b"\n".join(cast(list[bytes], parts))
            out = _Block(ns, [], ts, recvs, data)
            texts: list[str] | None = None
        else:
            texts = []
            for part in parts:
                texts.extend(part.decode("utf-8").split("\n") if isinstance(part, bytes) else part)
            out = _Block(ns, texts, ts)
        detected = None
        if block_src not in engines:
            detected = _detect_head(out.lines())
            engines[block_src] = detected
        engine = engines[block_src]
        parser = LineParser(year=years.get(block_src), engine=engine)
        piece = _bulk(out, parser) if bulk else None
        if piece is not None and (piece.tput or piece.prefill) and engine is Engine.UNKNOWN:
            engines[block_src] = Engine.SGLANG
        if span is not None:  # (it crosses to the feeding process)
            if piece is not None:
                # The feeding side takes its parse: the lines stay here (read again from the
                # file in the rare case that side must parse them itself). 438 MB of pickles
                # crossed for a 2M-line recording with the lines, 70 without.
                recv = out.recv if out.recv is not None else _decode_recv(out.lines(), ts)
                out = _Block(ns, [], [], recv, at=(span[0], span[1], blocks))
            elif texts is not None:
                out = _Block(ns, [], ts, _decode_recv(texts, ts), _packed(texts))
                if out.data is None:
                    out.texts = texts
        blocks += 1
        yield ("block", block_src, out, piece, engine, detected, parser.year, cut_at)
        ns, ts, parts, recvs = [], [], [], []

    def add_texts(texts: list[str]) -> None:
        if parts and type(parts[-1]) is list:
            parts[-1].extend(texts)
        else:
            parts.append(list(texts))

    def open_block(src: str) -> Iterator[_Op]:
        nonlocal block_src
        yield from flush()
        block_src = src
        if src not in years:
            # Lines before any source entry (a hand-made file): one implicit source. Or, read
            # from a span on, a source begun before it that the feeding side had not yet told.
            years[src] = None if span is None else last_year
            yield ("implicit", src)
        if src not in seen:
            seen.add(src)
            yield ("has_lines", src)

    def other_entry(entry: dict[str, Any]) -> Iterator[_Op]:
        """One entry that is not a raw line of a text-named source, the way lines used to go."""
        nonlocal block_src, last_year
        kind = entry["type"]
        if kind == "line":  # a hand-made file's source name that is not a string
            src = str(entry.get("src", ""))
            if src != block_src or len(ns) >= REPLAY_BLOCK:
                yield from open_block(src)
            n, text = entry.get("n", 0), entry.get("text", "")
            ns.append(n if type(n) is int else int(n))
            add_texts([text if type(text) is str else str(text)])
            ts.append(entry.get("t"))
            return
        yield from flush()
        if kind == "meta" and entry.get("event") == "source":
            name = str(entry.get("source", ""))
            year = entry.get("year") if year_override is None else year_override
            years[name] = year if isinstance(year, int) else None
            last_year = LineParser(year=years[name]).year
            engines.pop(name, None)
            seen.discard(name)
            block_src = None  # the next line, even of the same name, opens a block of this source
        yield ("entry", entry)

    def decoded(batch: list[dict[str, Any]]) -> Iterator[_Op]:
        # Runs of raw lines of one source are taken a run at a time:
        # a comprehension per field, not a loop turn per line (3 µs a line, most of report's time).
        keys = _run_keys(batch)
        at = 0
        for key, group in groupby(keys):
            count = len(list(group))
            run, at = batch[at:at + count], at + count
            if key is _OTHER:
                for entry in run:
                    yield from other_entry(entry)
                continue
            assert isinstance(key, str)
            while run:
                if key != block_src or len(ns) >= REPLAY_BLOCK:
                    yield from open_block(key)
                room = REPLAY_BLOCK - len(ns)
                part, run = run[:room], run[room:]
                part_ns = _field(part, "n", 0)
                texts = _field(part, "text", "")
                if set(map(type, part_ns)) != {int}:
                    part_ns = [int(n) for n in part_ns]
                if set(map(type, texts)) != {str}:
                    texts = [str(t) for t in texts]
                ns.extend(part_ns)
                add_texts(texts)
                ts.extend(_field(part, "t", None))

    p = Path(path)
    for chunk in _raw_chunks(p, local, span):
        if not isinstance(chunk, bytes):  # the header line
            yield from decoded(chunk)
            continue
        pos, size = 0, len(chunk)
        while pos < size:
            if _line_run is None:
                count, end = 0, size
            else:
                room = REPLAY_BLOCK - len(ns) if block_src is not None else 0
                count, end, src, run_ns, run_ts, data, recv = _line_run(chunk, pos, block_src, room, REPLAY_BLOCK)
                if count and not times_sound(run_ts):
                    # The C reader takes any JSON number as a time (1e999, -5, 40 digits): a run
                    # holding one goes through the decoder, which skips and counts its entry.
                    count = 0
            if count:
                local.entries += count
                if src != block_src or len(ns) >= REPLAY_BLOCK:
                    yield from open_block(src)
                ns.extend(run_ns)
                ts.extend(run_ts)
                parts.append(data)
                recvs.extend(recv)
            else:
                # (split at newlines only, as the file's lines)
                yield from decoded(_decode_lines(p, io.BytesIO(chunk[pos:end]).readlines(), local))
            pos = end
    yield from flush(span[1] if span is not None else None)
    if stats is not None:
        yield ("stats", local)


@dataclass(frozen=True)
class _Known:
    """What the feeding side knows of the sources begun so far, handed to a reading process."""

    years: dict[str, int | None]
    #: The engine each source's parser has (sources whose first block was read).
    engines: dict[str, Engine]
    #: The year of the source begun last (a guess for a source the feeding side has not told).
    last_year: int | None


#: Bytes of a big recording each reading process takes at a time (whole lines).
READ_SPAN = 8 << 20


def _read_span(path: str, span: tuple[int, int], with_stats: bool, year: int | None, known: _Known) -> list[_Op]:
    """A reading process's work: the operations of one span of the recording, parsed."""
    return list(_replay_ops(path, ReadStats() if with_stats else None, True, year, span, known))


def _ops_from_pool(path: Path, size: int, workers: int, stats: ReadStats | None, year: int | None,
                   known: Callable[[], _Known]) -> Iterator[_Op]:
    """:func:`_replay_ops` over spans of the recording, read and parsed by forked processes, one
    per core, while this one feeds the session; the operations in the file's order.

    A span's reading is handed what the feeding side knows when it starts (at most
    ``2 * workers`` spans ahead): the sources begun, their years and engines. A source begun in
    a span not yet fed is guessed, and a block whose guess was wrong is parsed again here (the
    year of the source begun last and the engine of its own lines are nearly always right).
    """
    from concurrent.futures.process import BrokenProcessPool

    from specmon.ingest.feeding import feeding_pool, line_ranges, windowed

    read = ReadStats()
    try:
        with feeding_pool(workers) as pool:
            # (known() is called as each span is handed out: what has been fed by then)
            argss = ((str(path), span, stats is not None, year, known())
                     for span in line_ranges(str(path), size, READ_SPAN))
            for ops in windowed(pool, _read_span, argss, 2 * workers):
                for op in ops:
                    if op[0] == "stats":
                        st = op[1]
                        read.entries += st.entries
                        read.bad_lines += st.bad_lines
                        read.truncated_tail = st.truncated_tail  # (the last span's)
                    else:
                        yield op
    except BrokenProcessPool as exc:  # a worker killed (the kernel's OOM killer, a signal)
        raise RecordingError(f"{path}: a process reading it in parallel stopped ({exc})") from exc
    if stats is not None:
        yield ("stats", read)


def _whole_block(path: Path, block: _Block, year: int | None, reread: dict[tuple[int, int], list[_Block]]
                 ) -> _Block:
    """A block sent without its lines, read again here from its span (the same reading makes the
    same blocks); the span's blocks are kept in ``reread`` for the next one."""
    if block.at is None:
        return block
    start, end, index = block.at
    if (start, end) not in reread:
        reread.clear()
        reread[start, end] = [op[2] for op in _replay_ops(path, None, False, year, (start, end),
                                                          _Known({}, {}, None)) if op[0] == "block"]
    whole = reread[start, end][index]
    if whole.ns != block.ns:  # pragma: no cover - the file changed under the report
        raise RecordingError(f"{path}: the recording changed while it was read")
    return whole


def _first_block(path: Path, block: _Block, src: str, cut_at: int | None) -> list[str]:
    """The lines of a source's first block as one reading of the whole file makes it: ``block``,
    and when it ends at a span's end, the lines of that source right after it."""
    lines = block.lines()
    if cut_at is None or len(lines) >= REPLAY_BLOCK:
        return lines
    span = (cut_at, path.stat().st_size)
    for op in _replay_ops(path, None, False, None, span, _Known({src: None}, {src: Engine.UNKNOWN}, None)):
        if op[0] == "has_lines" and op[1] == src:
            continue
        if op[0] == "block" and op[1] == src:
            lines = lines + op[2].lines()[:REPLAY_BLOCK - len(lines)]
        break
    return lines


def _detect_head(texts: list[str]) -> Engine:
    """The engine of a source's first lines, as ``summarize`` recognises a file's head."""
    head: list[str] = []
    size = 0
    for text in texts[:_HEAD_LINES]:
        size += len(text) + 1
        if size > _HEAD_BYTES:
            break
        head.append(text)
    return detect_engine(head)


def _packed(texts: list[str]) -> bytes | None:
    """The texts as one UTF-8 block, if that gives them back exactly (no newline inside a text,
    no lone surrogate); else None (they cross over as a list)."""
    try:
        data = "\n".join(texts).encode("utf-8")
    except UnicodeEncodeError:
        return None
    from specmon.ingest.bulk import count_newlines

    return data if count_newlines(data) == len(texts) - 1 else None


def _decode_recv(texts: list[str], ts: list[Any]) -> list[Any]:
    """The receive times of a block's decode lines (bulk_piece takes decode lines by this same test)."""
    # (in C: the test and the selection by map and compress)
    return list(compress(ts, map(contains, texts, repeat("Decode batch"))))


def _bulk(block: _Block, parser: LineParser) -> Any:
    """The bulk parse of a block (``decode_columns``), or None when it must be read line by line."""
    from specmon.ingest.bulk import decode_columns

    if block.data is not None:
        return decode_columns(block.data, parser.engine, parser.year)
    # One encode of the joined block instead of one per line (raw lines hold no newline;
    # a hand-made one that does, or a lone surrogate, is encoded line by line).
    data = _packed(block.texts)
    if data is None:
        data = b"\n".join(t.encode("utf-8", errors="replace") for t in block.texts)
    return decode_columns(data, parser.engine, parser.year)


#: Texts one of which every line the bulk parse of a block takes holds (decode, prefill, HTTP
#: access lines); a line with none of them may give a record of its own.
_BULK_LINE_TEXTS = ("Decode batch", "Prefill batch", "HTTP/")

#: The fewest lines worth a bulk parse of a block's tail.
BULK_TAIL_MIN = 256


def _apply_block(session: Session, parser: LineParser, block: _Block, piece: Any,
                 on_record: Callable[[float | None, ParsedRecord, Session], None] | None,
                 on_samples: SamplesCallback | None, bulk: bool = False) -> None:
    """Ingest a block of raw lines: its bulk parse when there is one, else line by line.

    A block without one (a line in it gives a record of its own: a source's first block, with
    the server's start, or a restart) is read line by line up to its last such line only, when
    enough plain stats lines follow it to be worth their bulk parse: the first 8,192-line block
    of a 2M-line SGLang recording went line by line whole, 80 ms of the feeding process.
    """
    if piece is None:
        lines = block.lines()
        cut = len(lines)
        if bulk and len(lines) >= BULK_TAIL_MIN:
            cut = _plain_tail(lines)
        parse = parser.parse
        for n, text, t in zip(block.ns[:cut], lines[:cut], block.ts[:cut], strict=True):
            rec = parse(text, n)
            session.lines += 1
            if rec is not None:
                session.ingest(rec)
                if on_record is not None:
                    on_record(t, rec, session)
        if cut < len(lines):
            # (in a traceback the line parser reads the lines after it otherwise: line by line)
            tail = _Block(block.ns[cut:], lines[cut:], block.ts[cut:])
            # (after a pending error its access lines may answer for it: line by line too)
            parsed = None if parser.in_traceback or parser.awaiting_serving else _bulk(tail, parser)
            _apply_block(session, parser, tail, parsed, on_record, on_samples)
        return
    # The parser state the line path would leave: stats lines end a traceback and name the engine.
    if piece.tput or piece.prefill:
        parser.in_traceback = False
        if parser.engine is Engine.UNKNOWN:
            parser.engine = Engine.SGLANG
    session.count_lines("prefill", piece.prefill)
    if piece.tput:
        session.ingest_decode_columns(piece.ranks, piece.ts, piece.running, piece.tput,
                                      piece.acc_len, piece.acc_rate, block.ns[0], block.ns[-1])
        if on_samples is not None and session.current is not None:
            recv = block.recv if block.recv is not None else _decode_recv(block.lines(), block.ts)
            on_samples(piece.ts, recv, piece.tput, session.current.id)
    session.lines += len(block.ns)


def _plain_tail(lines: list[str]) -> int:
    """Where a block's lines that all hold one of _BULK_LINE_TEXTS begin, counted from its end;
    the block's length when fewer than BULK_TAIL_MIN of them end it."""
    decode, prefill, access = _BULK_LINE_TEXTS
    k = len(lines)
    while k > 0 and (decode in (line := lines[k - 1]) or prefill in line or access in line):
        k -= 1  # (three tests, not any() over a generator: a third of the time)
    return k if len(lines) - k >= BULK_TAIL_MIN else len(lines)


def _flush_records(session: Session, pending: list[tuple[str, dict[str, Any]]], has_lines: set[str],
                   on_record: Callable[[float | None, ParsedRecord, Session], None] | None = None) -> None:
    # Records only count for sources whose raw lines were not recorded (lines are authoritative).
    for src, entry in pending:
        if src in has_lines:
            continue
        try:
            rec = record_from_json(entry.get("rec") or {})
        except (ValueError, TypeError):
            continue
        session.ingest(rec)
        if on_record is not None:
            on_record(entry.get("t"), rec, session)
    pending.clear()
