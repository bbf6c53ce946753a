"""A recording that got nothing but meta entries (a refused connect) leaves no file behind."""

from __future__ import annotations

from pathlib import Path

from specmon.output.recording import Recorder
from specmon.output.recording_reader import read_recording


def test_meta_only_recording_is_removed(tmp_path: Path) -> None:
    path = tmp_path / "rec" / "session.jsonl"
    recorder = Recorder(path, meta={"command": "connect"})
    recorder.meta("source", source="host:/x.log")
    recorder.close()
    assert not path.exists()


def test_recording_with_a_line_is_kept(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Recorder(path, meta={"command": "watch"}) as recorder:
        recorder.line("x.log", 1, "Decode batch ...")
    assert [e["type"] for e in read_recording(path)] == ["meta", "line", "meta"]


def test_an_existing_recording_appended_to_is_never_removed(tmp_path: Path) -> None:
    path = tmp_path / "session.jsonl"
    with Recorder(path) as recorder:
        recorder.line("x.log", 1, "first session")
    Recorder(path).close()  # a second, empty session appended to the same file
    assert [e.get("text") for e in read_recording(path) if e["type"] == "line"] == ["first session"]


async def test_replay_notes_a_damaged_entry_once(tmp_path: Path) -> None:
    from specmon.ingest.live import RecordingSource
    from specmon.sources.replay import ReplayClock

    path = tmp_path / "session.jsonl"
    with Recorder(path) as recorder:
        for i in range(3):
            recorder.line("x.log", i, f"line {i}")
    raw = path.read_bytes().split(b"\n")
    raw[2] = raw[2][:-5] + b"#####"  # the second line entry, damaged in the middle of the file
    path.write_bytes(b"\n".join(raw))
    source = RecordingSource(path, 0, "x.log", ReplayClock(None))
    got = [line async for batch in source.batches() for line in batch]
    assert got == ["line 0", "line 2"]
    assert source.status.events == [f"{path}: 1 damaged recording entry skipped"]
