"""Session recordings: format, replay to the same table, tolerance, and crash safety (a killed process)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon import paths, recording_format
from specmon.ingest.summarize import ingest_files
from specmon.model.analysis import analyze
from specmon.model.session import Session
from specmon.output import recording_reader, recording_replay
from specmon.output.recording import RecordedIngest, Recorder, new_recording_path, write_lines_recording
from specmon.output.recording_reader import ReadStats, is_recording, read_recording, recording_lines
from specmon.output.recording_replay import replay_recording
from specmon.output.tables import to_json
from specmon.parsing import parse_lines
from specmon.recording_format import RecordingError, record_from_json

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted((ROOT / "sample_logs").glob("sim_eagle3_*.log"))
REAL = ROOT / "tests" / "data" / "real_logs"


def table(session: Session) -> dict[str, object]:
    doc = to_json(session, analyze(session.runs))
    doc.pop("unparsed_examples", None)
    return doc


def test_recorded_session_replays_to_the_same_table(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    live = Session()
    with Recorder(path, meta={"command": "watch"}) as rec:
        ingest = RecordedIngest(live, rec)
        for f in SAMPLES[:3]:
            ingest.begin_source(str(f))
            lines = f.read_text().splitlines()
            for i in range(0, len(lines), 97):  # arrives in batches, like a tail
                ingest.feed(lines[i:i + 97], t=1000.0 + i)
        ingest.close()
    replayed = replay_recording(path)
    assert table(replayed) == table(live)
    assert replayed.lines == live.lines and len(replayed.runs) == len(live.runs) == 3
    # The same as summarize on the files themselves.
    assert table(ingest_files([str(f) for f in SAMPLES[:3]]))["runs"] == table(live)["runs"]


def test_entry_types_and_order(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    session = Session()
    with Recorder(path, warmup=3) as rec:
        ingest = RecordedIngest(session, rec)
        ingest.begin_source("a.log", year=2026)
        ingest.feed(SAMPLES[0].read_text().splitlines()[:400], t=5.0)
        rec.restart(steps=2, phase="finished", ok=True, detail="ready")
        rec.verdict({"best_steps": 2})
        ingest.close()
    entries = list(read_recording(path))
    kinds = [e["type"] for e in entries]
    assert kinds[0] == "meta" and entries[0]["format"] == "specmon-recording" and entries[0]["warmup"] == 3
    assert entries[1] == {"type": "meta", "event": "source", "source": "a.log", "baseline": False, "year": 2026,
                          "t": entries[1]["t"]}
    assert {"line", "record", "run", "restart", "verdict"} <= set(kinds)
    assert kinds[-1] == "meta" and entries[-1]["event"] == "end"
    lines = [e for e in entries if e["type"] == "line"]
    assert [e["n"] for e in lines] == list(range(1, 401)) and all(e["t"] == 5.0 for e in lines)
    records = [e for e in entries if e["type"] == "record"]
    assert records and all(e["run"] == 1 for e in records)
    begins = [e for e in entries if e["type"] == "run" and e["event"] == "begin"]
    ends = [e for e in entries if e["type"] == "run" and e["event"] == "end"]
    assert len(begins) == len(ends) == 1 and ends[0]["samples"] > 0
    # The recorded warm-up is used again on replay (3, not the default 5).
    assert replay_recording(path).runs[0].excluded_warmup == Session(warmup=3).warmup


@pytest.mark.parametrize("log", sorted(p.name for p in REAL.glob("*.log"))[:8])
def test_records_round_trip_through_json(log: str) -> None:
    text = (REAL / log).read_text(errors="replace").splitlines()
    for rec in parse_lines(text, year=2025):
        back = record_from_json(json.loads(json.dumps(rec.to_json())))
        assert back.to_json() == rec.to_json()
        assert type(back) is type(rec)
        if rec.timestamp is not None:
            assert back.timestamp == pytest.approx(rec.timestamp, abs=1e-5)


def test_records_only_recording_replays(tmp_path: Path) -> None:
    # A recorder that kept parsed records but not the raw lines (a hand-made or filtered file).
    full = tmp_path / "full.jsonl"
    write_lines_recording(full, [(str(SAMPLES[1]), SAMPLES[1].read_text().splitlines())])
    slim = tmp_path / "slim.jsonl"
    slim.write_text("".join(json.dumps(e) + "\n" for e in read_recording(full) if e["type"] != "line"))
    assert table(replay_recording(slim))["runs"] == table(replay_recording(full))["runs"]


def test_truncated_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    write_lines_recording(path, [(str(SAMPLES[0]), SAMPLES[0].read_text().splitlines()[:300])])
    whole = table(replay_recording(path))
    data = path.read_bytes()
    cut = data.rfind(b'{"type":"line"')
    path.write_bytes(data[:cut + 40])  # killed mid-write: half a line at the end
    stats = ReadStats()
    replayed = replay_recording(path, stats=stats)
    assert stats.truncated_tail and stats.bad_lines == 0
    assert replayed.lines == 299 or replayed.lines == 300 - 1
    assert table(replayed)["runs"][0]["samples"] <= whole["runs"][0]["samples"]


@pytest.fixture(scope="module")
def small_recording(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    path = tmp_path_factory.mktemp("small") / "rec.jsonl"
    write_lines_recording(path, [(str(SAMPLES[0]), SAMPLES[0].read_text().splitlines()[:40])])
    return path.read_bytes()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_recording_cut_anywhere_reads_every_whole_entry(small_recording: bytes, tmp_path: Path,
                                                         data: st.DataObject) -> None:
    """The recorder killed at any byte: every whole entry is read, and "ends mid-line" is said
    exactly when a piece of one is left (an entry whole but for its newline is read, not flagged)."""
    header_end = small_recording.index(b"\n") + 1
    cut = data.draw(st.integers(header_end, len(small_recording)))
    if data.draw(st.booleans()):  # just before the next newline: an entry whole but for it
        cut = small_recording.find(b"\n", cut) % (len(small_recording) + 1)
    path = tmp_path / "cut.jsonl"
    path.write_bytes(small_recording[:cut])
    head, _, fragment = small_recording[:cut].rpartition(b"\n")
    try:
        whole = isinstance(json.loads(fragment), dict) if fragment else False
    except ValueError:
        whole = False
    for pipelined in (False, True):
        stats = ReadStats()
        with pytest.MonkeyPatch.context() as m:
            m.setattr(recording_replay, "PIPELINE_MIN_BYTES", 0 if pipelined else 1 << 60)
            session = replay_recording(path, stats=stats)
        assert stats.truncated_tail == (bool(fragment) and not whole), (cut, fragment[-40:])
        assert stats.entries == head.count(b"\n") + 1 + whole and stats.bad_lines == 0
        lines = sum(1 for ln in (head + b"\n" + fragment * whole).splitlines() if b'"type":"line"' in ln)
        assert session.lines == lines


def test_damaged_middle_line_is_counted_not_fatal(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    write_lines_recording(path, [("x.log", SAMPLES[0].read_text().splitlines()[:50])])
    lines = path.read_text().splitlines(keepends=True)
    lines[10] = "garbage\n"
    path.write_text("".join(lines))
    stats = ReadStats()
    list(read_recording(path, stats))
    assert stats.bad_lines == 1 and not stats.truncated_tail


@pytest.mark.parametrize("damage", [b"\n", b'{"type":"line","n":1},{"type":"line","n":2}\n'])
@pytest.mark.parametrize("chunk", [1, 40, 1 << 21])
def test_a_blank_line_or_two_entries_on_one_line_is_one_bad_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                   damage: bytes, chunk: int) -> None:
    # Alone in a chunk or among good lines: the same count, as the line-by-line reading gives.
    monkeypatch.setattr(recording_reader, "_CHUNK_BYTES", chunk)
    path = tmp_path / "rec.jsonl"
    good = b'{"type":"line","src":"a.log","n":0,"text":"","t":null}\n'
    path.write_bytes(json.dumps({"type": "meta", "event": "start", "format": recording_format.FORMAT,
                                 "version": recording_format.VERSION}).encode() + b"\n" + good * 3 + damage + good)
    stats = ReadStats()
    assert len(list(read_recording(path, stats))) == 5
    assert (stats.entries, stats.bad_lines) == (5, 1)


@pytest.mark.parametrize("content, message", [
    (None, "no such file"), ("", "empty"), ("hello\n", "not a specmon recording"),
    ('{"type": "meta", "format": "other"}\n', "no 'specmon-recording' header"),
    ('{"type": "meta", "format": "specmon-recording", "version": 99}\n', "newer"),
])
def test_not_a_recording(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "x.jsonl"
    if content is not None:
        path.write_text(content)
    with pytest.raises(RecordingError, match=message):
        replay_recording(path)
    # A newer recording is still a recording (the message says to upgrade); the rest are not.
    assert is_recording(path) == (message == "newer")


def test_batches_recorded_by_an_outside_ingest_loop_replay(tmp_path: Path) -> None:
    # The dashboard's feeder parses on its own and records raw batches: that is enough for replay.
    path = tmp_path / "rec.jsonl"
    lines = SAMPLES[2].read_text().splitlines()
    with Recorder(path) as rec:
        rec.source(str(SAMPLES[2]))
        for i in range(0, len(lines), 200):
            rec.batch(str(SAMPLES[2]), i + 1, lines[i:i + 200], t=float(i))
    assert table(replay_recording(path))["runs"] == table(ingest_files([str(SAMPLES[2])]))["runs"]
    assert [e["n"] for e in read_recording(path) if e["type"] == "line"] == list(range(1, len(lines) + 1))


def test_is_recording_and_lines_for_paced_replay(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    write_lines_recording(path, [("a.log", ["first", "second"]), ("b.log", ["third"])])
    assert is_recording(path) and not is_recording(SAMPLES[0])
    got = [(src, text) for _, src, text in recording_lines(path)]
    assert got == [("a.log", "first"), ("a.log", "second"), ("b.log", "third")]


def test_file_is_private_and_lives_in_the_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert paths.recordings_dir() == tmp_path / "data" / "specmon" / "recordings"
    path = new_recording_path("watch")
    assert path.parent == paths.recordings_dir() and path.name.startswith("watch-")
    with Recorder(path) as recorder:
        recorder.line("x.log", 1, "a line")  # a recording of nothing but meta is not kept
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    second = new_recording_path("watch")
    assert second != path


def test_flush_interval_is_bounded(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        Recorder(tmp_path / "r.jsonl", flush_interval=2.0)


def test_close_is_idempotent_and_later_writes_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rec = Recorder(path)
    rec.meta("note", text="hello")
    rec.line("x.log", 1, "a line")
    rec.close()
    rec.close()
    rec.meta("note", text="after close")
    entries = list(read_recording(path))
    assert [e.get("text") for e in entries if e.get("event") == "note"] == ["hello"]
    assert rec.closed


# --------------------------------------------------------------------------- crash safety

CHILD = r"""
import sys, time
from specmon.output.recording import Recorder
rec = Recorder(sys.argv[1], flush_interval=0.2, meta={"command": "crash-test"})
n = int(sys.argv[2])
for i in range(n):
    rec.meta("tick", i=i, pad="x" * 200)
    if sys.argv[3] == "stream":
        time.sleep(0.002)
print("written", flush=True)
time.sleep(120)  # never exits by itself: only the timer can have flushed
"""


def _spawn(path: Path, n: int, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", CHILD, str(path), str(n), mode], cwd=ROOT,
                            stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})


def _ticks(path: Path, stats: ReadStats | None = None) -> list[int]:
    return [e["i"] for e in read_recording(path, stats) if e.get("event") == "tick"]


def _ticks_so_far(path: Path) -> int:
    # While the child writes, the reader may catch the very first write half done.
    try:
        return len(_ticks(path))
    except RecordingError:
        return 0


def test_killed_process_keeps_everything_flushed_before(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    proc = _spawn(path, 500, "burst")
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "written"
        # The process now sleeps without writing or exiting: the background timer alone
        # must bring every entry to disk. Wait for it (bounded), then kill -9.
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and _ticks_so_far(path) < 500:
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert _ticks(path) == list(range(500))
    assert not any(e.get("event") == "end" for e in read_recording(path))  # it never closed cleanly


def test_killed_mid_stream_leaves_a_valid_prefix(tmp_path: Path) -> None:
    path = tmp_path / "rec.jsonl"
    proc = _spawn(path, 100000, "stream")
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (not path.exists() or path.stat().st_size < 50_000):
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    stats = ReadStats()
    ticks = _ticks(path, stats)
    # Valid up to the last flushed entry: a gap-free prefix, nothing damaged in the middle.
    assert len(ticks) > 10 and ticks == list(range(len(ticks)))
    assert stats.bad_lines == 0
    assert path.read_bytes().endswith(b"\n") or stats.truncated_tail
