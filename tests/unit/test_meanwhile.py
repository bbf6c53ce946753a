"""The caller's own work done while worker processes read (``meanwhile``; issue 10).

``summarize`` imports what its intervals need (scipy.special, 0.1-0.25 s) while the
bulk workers parse a big log, and ``report`` while its reading process reads a big
recording, instead of after them. Checked on real processes: the work runs once, in a
thread of the parent, while the workers exist and after they were forked (no fork
ever copies a process in the middle of an import), and it has ended when the ingest
returns; the session is the same as without it; no workers, no work (the caller does
it where it is needed); an import that fails in it leaves its error to the interval.
"""

from __future__ import annotations

import multiprocessing as mp
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from specmon.ingest import bulk
from specmon.ingest.files import ingest_files
from specmon.model import stats
from specmon.model.analysis import analyze
from specmon.output.tables import render
from tests.unit import test_fastscan

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="forks only")


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bulk, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(bulk, "PIECE", 64 << 10)


def _log(tmp_path: Path, name: str = "mixed.log") -> Path:
    log = tmp_path / name
    test_fastscan._mixed_log(log, 3)
    return log


@pytest.mark.usefixtures("small_pieces")
def test_the_work_runs_once_beside_live_workers_and_ends_before_the_ingest(tmp_path: Path) -> None:
    seen: list[tuple[bool, int, bool]] = []
    done = threading.Event()

    def work() -> None:
        seen.append((threading.current_thread() is threading.main_thread(), len(mp.active_children()),
                     done.is_set()))
        done.set()

    logs = [str(_log(tmp_path, "a.log")), str(_log(tmp_path, "b.log"))]
    with_work = ingest_files(logs, jobs=2, meanwhile=work)
    assert done.is_set()  # ended before the ingest returned
    assert seen == [(False, 2, False)]  # once for two big files, off the main thread, two workers alive
    plain = ingest_files(logs, jobs=2)
    assert _summary(with_work) == _summary(plain)
    assert with_work.lines == plain.lines > 10_000


def test_without_workers_the_work_is_left_to_the_caller(tmp_path: Path) -> None:
    calls: list[int] = []
    ingest_files([str(_log(tmp_path))], jobs=1, meanwhile=lambda: calls.append(1))
    assert calls == []


def test_summarize_has_the_intervals_module_imported_by_the_end_of_the_ingest(tmp_path: Path) -> None:
    """In a fresh process (this one has scipy already): the import is done by the time the ingest is."""
    log = _log(tmp_path)
    code = (
        "import sys\n"
        "from specmon.ingest import bulk\n"
        "from specmon.ingest.files import ingest_files\n"
        "from specmon.model.stats import preload, t975\n"
        "bulk.PARALLEL_MIN_BYTES, bulk.PIECE = 0, 64 << 10\n"
        "assert 'scipy.special' not in sys.modules\n"
        f"ingest_files([{str(log)!r}], jobs=2, meanwhile=preload)\n"
        "print('scipy.special' in sys.modules, round(t975(10.0), 9))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.split() == ["True", "2.228138852"]
    assert out.stderr == ""


def test_preload_without_scipy_leaves_the_error_to_the_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "scipy.special", None)  # as if it could not be imported
    stats.preload()  # no exception here, nothing printed from a thread
    with pytest.raises(ImportError):
        stats.t975(10.0)


def _summary(session) -> str:  # type: ignore[no-untyped-def]
    return render("json", session, analyze(session.runs))


def test_report_reads_with_the_work_done_beside_the_reading_process(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """``report``'s replay: the work runs once, off the main thread, while the reading process
    exists, and has ended when the replay returns; the session is the one without it."""
    from specmon.output import recording as recmod
    from tests.unit.test_report_stream import LOGS, _recorded_as_feeder

    rec = tmp_path / "r.jsonl"
    _recorded_as_feeder(LOGS[2], rec)
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 0)
    seen: list[tuple[bool, int]] = []
    done = threading.Event()

    def work() -> None:
        seen.append((threading.current_thread() is threading.main_thread(), len(mp.active_children())))
        done.set()

    with_work = recmod.replay_recording(rec, on_samples=lambda *a: None, meanwhile=work)
    assert done.is_set() and seen == [(False, 1)]
    plain = recmod.replay_recording(rec, on_samples=lambda *a: None)
    assert _summary(with_work) == _summary(plain)
