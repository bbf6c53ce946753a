"""The bulk workers are forked with the parent's objects frozen for their garbage collector (issue 10).

Without gc.freeze() each worker's collections walked every object the parent had
imported, piece after piece (a 4 MB SGLang piece: 20 ms in a worker instead of 15).
Tested on real worker processes: each sees the inherited objects frozen, and the
parent is left unfrozen (its own garbage still collected), with the file read whole.

Neither the workers nor the feeding process collect while the file is read (their
collections freed nothing and walked all they kept: vLLM 2M lines 1.27 -> 1.17 s); the
parent's collector is as it was afterwards, enabled or not.
"""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from specmon.ingest import feeding, templates
from specmon.model.session import Session
from tests.unit import test_fastscan

_ORIGINAL = feeding.parse_piece


def _seen(task, *args):  # type: ignore[no-untyped-def]
    """parse_piece, noting how many objects the worker's collector has frozen."""
    piece = _ORIGINAL(task, *args)
    piece.counted["frozen objects"] = gc.get_freeze_count()
    piece.counted["collecting"] = int(gc.isenabled())
    return piece


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="forks only")
@pytest.mark.parametrize("enabled", [True, False])
def test_workers_inherit_frozen_objects_and_the_parent_stays_unfrozen(tmp_path: Path, monkeypatch,
                                                                      enabled: bool) -> None:
    log = tmp_path / "mixed.log"
    test_fastscan._mixed_log(log, 3)
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(feeding, "PIECE", 64 << 10)
    frozen: list[int] = []
    collecting: list[int] = []
    monkeypatch.setattr(feeding, "parse_piece", _seen)
    original_feed = feeding.feed_piece

    def feed(session, piece, *args, **kw):  # type: ignore[no-untyped-def]
        frozen.append(piece.counted.pop("frozen objects", -1))
        collecting.append(piece.counted.pop("collecting", -1))
        collecting.append(int(gc.isenabled()))  # the feeding process's
        return original_feed(session, piece, *args, **kw)

    monkeypatch.setattr(feeding, "feed_piece", feed)
    before = gc.get_freeze_count()
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        session = Session()
        feeding.ingest_file_fast(session, str(log), jobs=2)
        assert gc.isenabled() is enabled  # the parent's collector: as it was
    finally:
        (gc.enable if was else gc.disable)()
    assert len(frozen) > 2 and min(frozen) > 1000  # every worker: the parent's objects frozen
    assert collecting == [0] * len(collecting)  # no worker, nor the feeding, collected
    assert gc.get_freeze_count() == before  # the parent: as it was
    assert session.lines == len(log.read_text().splitlines())


def _learnt(task, *args):  # type: ignore[no-untyped-def]
    """parse_piece, noting how many templates the worker had when it began the piece."""
    known = sum(len(t) for t in templates._LEARNER.templates.values())
    piece = _ORIGINAL(task, *args)
    piece.counted["templates known"] = known
    return piece


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="forks only")
def test_workers_begin_with_the_shapes_learnt_from_the_head(tmp_path: Path, monkeypatch) -> None:
    # Each worker learnt alone on its first piece (a first piece 50 ms, the next 14): the feeding
    # process learns from the file's start before the fork, so no piece begins without them.
    log = tmp_path / "mixed.log"
    test_fastscan._mixed_log(log, 3)
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(feeding, "PIECE", 64 << 10)
    monkeypatch.setattr(feeding, "parse_piece", _learnt)
    known: list[int] = []
    original_feed = feeding.feed_piece

    def feed(session, piece, *args, **kw):  # type: ignore[no-untyped-def]
        known.append(piece.counted.pop("templates known", -1))
        return original_feed(session, piece, *args, **kw)

    monkeypatch.setattr(feeding, "feed_piece", feed)
    templates._LEARNER.__init__()  # type: ignore[misc]  # (nothing learnt by earlier tests)
    fast = Session()
    feeding.ingest_file_fast(fast, str(log), jobs=2)
    assert len(known) > 2 and min(known) > 0
    templates._LEARNER.__init__()  # type: ignore[misc]
    slow = Session()
    feeding.ingest_file_fast(slow, str(log), jobs=1)
    assert test_fastscan._state(fast) == test_fastscan._state(slow)


@pytest.mark.skipif("fork" not in __import__("multiprocessing").get_all_start_methods(), reason="forks only")
def test_the_cli_keeps_its_imports_frozen_while_it_runs_and_gives_the_collector_back(
        tmp_path: Path, monkeypatch, capsys) -> None:
    """``main`` freezes what building its parser imported (every later collection walked it
    again), through the feeding pool too (which froze and then unfroze everything: the
    analysis after it walked the imports again), and leaves the collector as it found it."""
    from specmon.cli import main

    log = tmp_path / "mixed.log"
    test_fastscan._mixed_log(log, 4)
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(feeding, "PIECE", 64 << 10)
    seen: list[int] = []
    original_analyze = __import__("specmon.model.analysis", fromlist=["analyze"]).analyze

    def analyze(*args, **kw):  # type: ignore[no-untyped-def]
        seen.append(gc.get_freeze_count())  # after the feeding pool has gone
        return original_analyze(*args, **kw)

    monkeypatch.setattr("specmon.model.analysis.analyze", analyze)
    gc.unfreeze()
    assert gc.isenabled()
    assert main(["summarize", "--format", "json", "--jobs", "2", str(log)]) == 0
    assert '"runs"' in capsys.readouterr().out
    assert len(seen) == 1 and seen[0] > 1000  # the imports still frozen after the feeding
    assert gc.get_freeze_count() == 0 and gc.isenabled()  # the caller's collector, as it was
