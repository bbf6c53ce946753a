"""The bulk workers keep freed blocks of a few pieces' size for reuse (issue 10).

glibc's default gives a freed 4 MB block back to the kernel, and the next piece's
blocks then cost a page fault per 4 KiB page: 157,000 faults on a 346 MB log, 10% of
the CPU time. Tested on real processes by what freeing a written 12 MB block does to the
resident set: a started worker keeps it (ready for the next piece), a process with glibc's
default setting gives it back.
"""

from __future__ import annotations

import ctypes
import multiprocessing as mp
import os
import platform
from pathlib import Path

import pytest

from specmon.ingest import feeding

native = pytest.importorskip("specmon._native")

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc" or "fork" not in mp.get_all_start_methods(), reason="glibc's malloc, forked workers")

#: Three pieces: under the four a started worker keeps.
BLOCK = 3 * feeding.PIECE
_M_MMAP_THRESHOLD = -3  # (glibc's malloc.h)


def _resident() -> int:
    return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _given_back_on_free(size: int = BLOCK) -> int:
    """Bytes the resident set drops by when a block of ``size`` bytes, every page written, is freed."""
    # (a forked process inherits its parent's free heap: given back first, so the block is new pages)
    ctypes.CDLL(None).malloc_trim(0)
    block = bytearray(size)
    block[::4096] = b"\x01" * len(range(0, size, 4096))  # (each page written: resident)
    with_block = _resident()
    del block
    return with_block - _resident()


def _given_back_with_glibcs_default() -> int:
    # glibc raises its threshold by itself to the size of each mapped block freed, so a forked
    # process's setting depends on what its parent freed: fixed at glibc's documented 128 KiB.
    assert ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, 128 << 10) == 1
    return _given_back_on_free()


def test_a_started_worker_keeps_a_freed_block_of_a_few_pieces() -> None:
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:  # glibc's default: the block goes back
        assert pool.apply(_given_back_with_glibcs_default) > BLOCK - (1 << 20)
    with ctx.Pool(1, initializer=feeding._worker_start) as pool:
        assert pool.apply(_given_back_on_free) < 1 << 20


def test_keep_freed_memory_says_whether_it_applied_and_refuses_nonsense() -> None:
    ctx = mp.get_context("fork")
    with ctx.Pool(1) as pool:
        assert pool.apply(native.keep_freed_memory, (4 * feeding.PIECE,)) is True
    with pytest.raises(ValueError):
        native.keep_freed_memory(-1)
