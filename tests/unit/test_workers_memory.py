"""The bulk workers keep freed blocks of a few pieces' size for reuse (issue 10).

glibc's default gives a freed 4 MB block back to the kernel, and the next piece's
blocks then cost a page fault per 4 KiB page: 157,000 faults on a 346 MB log, 10% of
the CPU time. Tested on real processes by what a kept block does to the resident set:
a started worker that frees a written 48 MB block keeps it resident (ready for the
next), a process with glibc's default gives it back.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import platform
from pathlib import Path

import pytest

from specmon.ingest import bulk

native = pytest.importorskip("specmon._native")

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or "fork" not in mp.get_all_start_methods(), reason="glibc's malloc, forked workers")


def _resident() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


#: Past glibc's largest self-raised threshold (32 MiB on 64 bits): given back by default, whatever
#: blocks the process freed before (each freed block raises the threshold to its size).
BLOCK = 48 << 20


def _kept_after_free(size: int = BLOCK) -> int:
    """Bytes still resident after a block of ``size`` bytes, every page written, is freed."""
    before = _resident()
    block = bytearray(size)
    block[::4096] = b"\x01" * len(range(0, size, 4096))  # (each page written: resident)
    del block
    return _resident() - before


def test_a_started_worker_keeps_a_freed_block_of_a_few_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:  # glibc's default: the block goes back
        assert pool.apply(_kept_after_free) < 1 << 20
    monkeypatch.setattr(bulk, "PIECE", 16 << 20)  # (kept: blocks up to 4 pieces, 64 MiB here)
    with ctx.Pool(1, initializer=bulk._worker_start) as pool:
        assert pool.apply(_kept_after_free) > BLOCK // 2


def test_keep_freed_memory_says_whether_it_applied_and_refuses_nonsense() -> None:
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply(native.keep_freed_memory, (16 << 20,)) is True
    with pytest.raises(ValueError):
        native.keep_freed_memory(-1)
