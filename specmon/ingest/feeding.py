"""Feeding a session from a big log: pieces parsed on every core, fed in file order.

Workers (forked processes of ``concurrent.futures``, one per core) parse byte ranges
(:func:`parse_piece`: :func:`specmon.ingest.bulk.bulk_piece` over one piece); the session itself
is fed in the parent, in file order (:func:`feed_piece`), because runs, warm-up and idle
detection depend on order. ``report`` reads a big recording's spans through the same pool
(:func:`feeding_pool`, :func:`windowed`).
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import multiprocessing as mp
import os
import signal
import threading
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from functools import partial
from itertools import islice
from typing import Any

from specmon.grammar.prefix import Rollover
from specmon.ingest.bulk import Piece, bulk_piece
from specmon.ingest.column_blocks import Block, StatsBlock
from specmon.model.session import Session
from specmon.parsing import detect_engine
from specmon.records import Engine, ParsedRecord
from specmon.sources.logfiles import LogFileError, check_readable, head_lines, open_log

#: Bytes a worker parses per piece (lines never straddle pieces). 8 MB: each piece costs a few
#: fixed steps (the passes' set-up, the marker tests, pickling, the feeding's per-block work);
#: interleaved runs against 4 MB, 8 each: vLLM k8s 1.00 -> 0.92 s, Ray 0.79 -> 0.77 s (medians),
#: and 2 MB was slower still. Peak RSS did not move (82 MB).
PIECE = 8 << 20
#: Below this size a file is parsed in-process (a pool costs more than it saves).
PARALLEL_MIN_BYTES = 32 << 20


Task = tuple[str, int, int, str, int, float]


def parse_piece(args: Task, in_traceback: bool = False, records: bool = False,
                awaiting_serving: bool = False) -> Piece:
    """Worker entry: parse bytes ``[start, end)`` of a file (both on line starts)."""
    path, start, end, engine_value, year, day = args
    with open_log(path) as f:  # (checked in the parent; a FIFO put in its place since: a sentence, no wait)
        # From the newline that ends the previous piece: the pass's framing without a 4 MB copy.
        f.seek(start - 1 if start else 0)
        data = f.read(end - start + (1 if start else 0))
    if not start:
        data = b"\n" + data
    elif not data.startswith(b"\n"):
        data = b"\n" + data[1:]  # (the file changed since it was cut: still its lines from start)
    if not data.endswith(b"\n"):
        data += b"\n"  # the file's last line, without its newline
    return bulk_piece(data, Engine(engine_value), year, in_traceback, records=records, day=day, framed=True,
                      awaiting_serving=awaiting_serving)


def line_ranges(path: str, size: int, piece: int | None = None) -> Iterator[tuple[int, int]]:
    """Byte ranges of about ``piece`` bytes (PIECE), each ending just after a newline (or at EOF)."""
    step = PIECE if piece is None else piece
    with open_log(path) as f:
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
    with open_log(path) as f:
        data = f.read(LEARN_HEAD)
    end = data.rfind(b"\n")
    if end > 0:
        bulk_piece(data[:end + 1], engine, year, day=day)


#: prctl's option that sends a process a signal when the thread that forked it ends (linux/prctl.h).
PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    """Make this worker die with the process that forked it, on every path (issue 43, item 4).

    A SIGTERM to ``report`` (a CI timeout, a process manager) ended only the parent: its workers
    were left blocked on the result pipe for ever, their own SIGTERM handled by the parent's
    handler they inherited. The kernel sends SIGKILL at the parent's death (``PR_SET_PDEATHSIG``);
    a parent gone before that was set is seen by ``getppid``. The signals the parent handles
    itself are the default again here.
    """
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):  # (not Linux: the parent's handler kills us)
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:
        os._exit(1)


def _worker_start(parent: int | None = None) -> None:
    """A worker's set-up: it dies with its parent (:func:`_die_with_parent`), and freed blocks of
    a few pieces' size stay in its heap for the next piece.

    Each piece makes and drops several 4 MB blocks (its text, every pass's rest); glibc gave
    them back to the kernel, and each new one cost a page fault per page written. On a 346 MB
    SGLang log: 157,000 page faults → 32,000, CPU time 2.43 → 2.13 s, peak RSS 95 → 103 MB.
    """
    if parent is not None:
        _die_with_parent(parent)
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
        pool = ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_start, initargs=(os.getpid(),))
        gc.disable()
        try:
            with _workers_end_on_signals(pool):
                yield pool
        finally:
            # On the way out early (an error, ^C): the pieces not begun are dropped.
            pool.shutdown(wait=True, cancel_futures=True)
    finally:
        if was_enabled:
            gc.enable()
        if not frozen_before:
            gc.unfreeze()


@contextlib.contextmanager
def _workers_end_on_signals(pool: ProcessPoolExecutor) -> Iterator[None]:
    """While the pool works: SIGTERM or SIGHUP to this process kills its workers first, then does
    what it did before (the default: this process ends by the signal; a handler: it runs).

    The workers die with this process anyway (:func:`_die_with_parent`); killed here first, a
    handler that unwinds (``SystemExit``) does not wait for the spans they are reading (up to
    a second each on a loaded machine) when the pool shuts down.
    """
    if threading.current_thread() is not threading.main_thread():
        yield  # (handlers are set from the main thread only; the workers still die with us)
        return
    previous: dict[int, Any] = {}

    def on_signal(signum: int, frame: Any) -> None:
        # (the pool's own record of its processes: no public one; the kernel's parent-death
        # signal stands behind it)
        for process in list((getattr(pool, "_processes", None) or {}).values()):
            with contextlib.suppress(OSError, ValueError, AttributeError):
                process.kill()
        before = previous.get(signum, signal.SIG_DFL)
        if callable(before):
            before(signum, frame)
        elif before != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)  # (ends this process as the signal would have)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        before = signal.getsignal(sig)
        if before != signal.SIG_IGN:  # (nohup's SIGHUP stays ignored)
            previous[sig] = before
            signal.signal(sig, on_signal)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)


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
    in_tb = waiting = False
    for task, piece in zip(tasks, pieces, strict=False):
        if in_tb or waiting:
            # A traceback ran across the boundary, or an error was pending at it: redo this piece
            # here with that context (rare).
            piece = parse_piece(task, in_tb, False, waiting)
        feed_piece(session, piece, offset, partial(parse_piece, task, in_tb, True, waiting), rollover)
        in_tb, waiting = piece.in_traceback, piece.awaiting_serving
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
