"""A recording that got nothing but meta entries (a refused connect) leaves no file behind."""

from __future__ import annotations

from pathlib import Path

from specmon.output.recording import Recorder, read_recording


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
