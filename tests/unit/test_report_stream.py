"""``report`` reads a recording in bounded memory and gives summarize's numbers for the same lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from specmon.cli import main
from specmon.ingest.logfiles import file_year
from specmon.output import recording as recmod
from specmon.output.recording import ReadStats, Recorder, read_recording, write_lines_recording
from specmon.output.report import load_report, text_chart

ROOT = Path(__file__).resolve().parents[2]
LOGS = [ROOT / "sample_logs" / f"sim_eagle3_{n}.log" for n in ("nospec", "1step", "2step", "3step")]


def _json(args: list[str], capsys: pytest.CaptureFixture[str]) -> dict:
    assert main(args) == 0
    return json.loads(capsys.readouterr().out)


def _recorded_as_feeder(log: Path, path: Path, batch: int = 37) -> None:
    """What ``--record`` writes: a source entry, then the raw lines in batches."""
    lines = log.read_text().splitlines()
    with Recorder(path, meta={"command": "watch"}) as rec:
        rec.source(str(log), baseline=False, year=file_year(log))
        for i in range(0, len(lines), batch):
            rec.batch(str(log), i + 1, lines[i:i + batch])


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_report_numbers_equal_summarize(log: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Same lines, same table: runs, samples, means, intervals, crashes, verdict."""
    rec = tmp_path / "r.jsonl"
    _recorded_as_feeder(log, rec)
    summary = _json(["summarize", str(log), "--format", "json"], capsys)
    report = _json(["report", str(rec), "--format", "json"], capsys)
    for key in ("lines", "engine", "counts", "runs", "verdict", "crashes"):
        assert report[key] == summary[key], key


def test_chunked_read_equals_line_by_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Decoding whole chunks gives the entries and skip counts reading line by line gives,
    with damaged lines and a truncated tail anywhere."""
    path = tmp_path / "r.jsonl"
    write_lines_recording(path, [(str(p), p.read_text().splitlines()) for p in LOGS[:2]])
    raw = path.read_bytes().split(b"\n")
    raw.insert(50, b"{not json")
    raw.insert(300, b"")
    raw.insert(700, b'["a list"]')
    path.write_bytes(b"\n".join(raw)[:-40])  # and a truncated last line
    monkeypatch.setattr(recmod, "_CHUNK_BYTES", 1 << 12)
    small, s1 = list(read_recording(path, st1 := ReadStats())), st1
    monkeypatch.setattr(recmod, "_CHUNK_BYTES", 1)  # one line per chunk: the line-by-line path
    single, s2 = list(read_recording(path, st2 := ReadStats())), st2
    assert small == single
    assert (s1.entries, s1.bad_lines, s1.truncated_tail) == (s2.entries, s2.bad_lines, s2.truncated_tail)
    assert s1.bad_lines == 3 and s1.truncated_tail


def test_series_and_chart_from_columns(tmp_path: Path) -> None:
    """The series is time-ordered, one point per throughput sample, and the chart draws every run."""
    path = tmp_path / "r.jsonl"
    write_lines_recording(path, [(str(p), p.read_text().splitlines()) for p in LOGS])
    data = load_report(path)
    ts = [p.t for p in data.series]
    assert ts == sorted(ts) and ts[0] == 0.0
    assert len(data.series) == data.session.counts["decode"]
    assert {p.run for p in data.series} == {r.id for r in data.session.runs if r.used}
    chart = "\n".join(text_chart(data))
    assert all(f"{c} = run" in chart for c in "ABCD")
