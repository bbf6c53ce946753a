"""The bulk workers are forked with the parent's objects frozen for their garbage collector (issue 10).

Without gc.freeze() each worker's collections walked every object the parent had
imported, piece after piece (a 4 MB SGLang piece: 20 ms in a worker instead of 15).
Tested on real worker processes: each sees the inherited objects frozen, and the
parent is left unfrozen (its own garbage still collected), with the file read whole.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from specmon.ingest import bulk
from specmon.model.session import Session
from tests.unit import test_fastscan

_ORIGINAL = bulk.parse_piece


def _seen(task, *args):  # type: ignore[no-untyped-def]
    """parse_piece, noting how many objects the worker's collector has frozen."""
    piece = _ORIGINAL(task, *args)
    piece.counted["frozen objects"] = gc.get_freeze_count()
    return piece


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="forks only")
def test_workers_inherit_frozen_objects_and_the_parent_stays_unfrozen(tmp_path: Path, monkeypatch) -> None:
    log = tmp_path / "mixed.log"
    test_fastscan._mixed_log(log, 3)
    monkeypatch.setattr(bulk, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(bulk, "PIECE", 64 << 10)
    frozen: list[int] = []
    monkeypatch.setattr(bulk, "parse_piece", _seen)
    original_feed = bulk.feed_piece

    def feed(session, piece, *args, **kw):  # type: ignore[no-untyped-def]
        frozen.append(piece.counted.pop("frozen objects", -1))
        return original_feed(session, piece, *args, **kw)

    monkeypatch.setattr(bulk, "feed_piece", feed)
    before = gc.get_freeze_count()
    session = Session()
    bulk.ingest_file_fast(session, str(log), jobs=2)
    assert len(frozen) > 2 and min(frozen) > 1000  # every worker: the parent's objects frozen
    assert gc.get_freeze_count() == before  # the parent: as it was
    assert session.lines == len(log.read_text().splitlines())
