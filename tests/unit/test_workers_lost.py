"""A worker process killed while it reads (the kernel's OOM killer, a signal) ends ``summarize``
and ``report`` with a clear error, no traceback and no process left behind.

multiprocessing.Pool, which the bulk path used, waited forever for the piece a killed worker
had taken; concurrent.futures' pool says it broke, and the commands say which file and what to
do. Tested on real forked workers: the one given the second piece or span kills itself.
"""

from __future__ import annotations

import multiprocessing as mp
import os
from pathlib import Path

import pytest

from specmon import recording_format
from specmon.cli import main
from specmon.ingest import feeding
from specmon.output import recording_replay as recmod
from tests.unit import test_fastscan
from tests.unit.test_report_spans import _entry

pytestmark = pytest.mark.skipif("fork" not in mp.get_all_start_methods(), reason="forks only")


def _children() -> list[int]:
    """This process's child processes still alive (zombies left unreaped count too)."""
    me = os.getpid()
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                stat = Path(f"/proc/{pid}/stat").read_text()
            except OSError:
                continue
            if int(stat[stat.rindex(")") + 2:].split()[1]) == me:
                found.append(int(pid))
    return found


_PARSE_PIECE = feeding.parse_piece
_READ_SPAN = recmod._read_span


# (module functions: the pool hands a worker its function by name)
def _piece_dies_on_the_second(task, *args):  # type: ignore[no-untyped-def]
    if task[1] > 0:
        os._exit(9)  # as a SIGKILL leaves it: no clean-up, no result
    return _PARSE_PIECE(task, *args)


def _span_dies_on_the_second(path, span, *args):  # type: ignore[no-untyped-def]
    if span[0] > 0:
        os._exit(9)
    return _READ_SPAN(path, span, *args)


def test_summarize_names_the_file_when_a_worker_is_killed(tmp_path: Path, monkeypatch, capsys) -> None:
    before = set(_children())  # what earlier tests of this worker left is theirs to answer for
    log = tmp_path / "mixed.log"
    test_fastscan._mixed_log(log, 5)
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(feeding, "PIECE", 32 << 10)
    original = feeding.parse_piece
    monkeypatch.setattr(feeding, "parse_piece", _piece_dies_on_the_second)
    assert main(["summarize", "--format", "json", "--jobs", "2", str(log)]) == 2
    err = capsys.readouterr().err
    assert str(log) in err and "stopped" in err and "--jobs 1" in err and "Traceback" not in err
    assert not mp.active_children() and set(_children()) <= before
    monkeypatch.setattr(feeding, "parse_piece", original)
    assert main(["summarize", "--format", "json", "--jobs", "1", str(log)]) == 0  # what it says to do


def test_report_names_the_recording_when_a_worker_is_killed(tmp_path: Path, monkeypatch, capsys) -> None:
    before = set(_children())
    rec = tmp_path / "rec.jsonl"
    lines = (Path(__file__).resolve().parents[2] / "sample_logs" / "sim_eagle3_2step.log").read_text().splitlines()
    rec.write_bytes(_entry(type="meta", event="start", format=recording_format.FORMAT, version=recording_format.VERSION, warmup=None,
                           t=1.0)
                    + b"".join(_entry(type="line", src="a.log", n=i + 1, text=t, t=2.0 + i / 8)
                               for i, t in enumerate(lines)))
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 0)
    monkeypatch.setattr(recmod, "READ_SPAN", 16 << 10)
    monkeypatch.setattr(recmod.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(recmod, "_read_span", _span_dies_on_the_second)
    assert main(["report", str(rec)]) != 0
    err = capsys.readouterr().err
    assert str(rec) in err and "stopped" in err and "Traceback" not in err
    assert not mp.active_children() and set(_children()) <= before


def test_an_interrupt_while_feeding_stops_the_workers_at_once(tmp_path: Path, monkeypatch, capsys) -> None:
    """^C while the session is fed: exit code 130, the workers gone, no wait for the pieces not
    begun (multiprocessing's pool hung on a ^C half a second into a 2M-line summarize)."""
    import signal
    import time

    before = set(_children())
    log = tmp_path / "mixed.log"
    test_fastscan._mixed_log(log, 6)
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(feeding, "PIECE", 16 << 10)
    original = feeding.feed_piece
    fed: list[int] = []

    def interrupted(*args, **kw):  # type: ignore[no-untyped-def]
        fed.append(1)
        if len(fed) == 3:
            raise KeyboardInterrupt
        return original(*args, **kw)

    def hung(*_args: object) -> None:
        raise AssertionError("the interrupted summarize did not return")

    monkeypatch.setattr(feeding, "feed_piece", interrupted)
    previous = signal.signal(signal.SIGALRM, hung)
    signal.alarm(30)
    try:
        t0 = time.monotonic()
        assert main(["summarize", "--format", "json", "--jobs", "2", str(log)]) == 130
        assert time.monotonic() - t0 < 10
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert len(fed) == 3
    assert not mp.active_children() and set(_children()) <= before
