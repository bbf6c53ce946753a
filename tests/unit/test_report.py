"""``specmon report RECORDING`` in every format, from recordings of the bundled campaign."""

from __future__ import annotations

import csv
import io
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from specmon.cli import main
from specmon.model.session import Session
from specmon.output.recording import RecordedIngest, Recorder, write_lines_recording
from specmon.output.report import load_report, render_report, text_chart

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = [ROOT / "sample_logs" / f"sim_eagle3_{n}.log" for n in ("nospec", "1step", "2step", "3step")]


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("rec") / "campaign.jsonl"
    write_lines_recording(path, [(str(p), p.read_text().splitlines()) for p in CAMPAIGN])
    return path


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_markdown_report(recording: Path, capsys) -> None:
    code, out, _ = run_cli(["report", str(recording)], capsys)
    assert code == 0
    assert out.startswith("# specmon report — campaign.jsonl")
    assert "## Verdict" in out and "**EAGLE3 2 steps:" in out
    rows = [ln for ln in out.splitlines() if ln.startswith("| ")]
    assert len(rows) == 5  # header + 4 configurations
    # ★ only for a declared winner; this campaign's leader is not separated: ☆, and no ★ anywhere.
    assert "**☆ EAGLE3 2 steps**" in out and "no winner declared" in " ".join(out.split()) and "★ EAGLE3" not in out
    chart = out.split("## Throughput over time", 1)[1].split("```")[1]
    # One letter per run, drawn where its samples are, and a legend naming them.
    assert all(letter in chart for letter in "ABCD")
    words = " ".join(chart.split())  # the legend wraps within 80 columns
    assert "A = run 1: no speculation" in words and "D = run 4: EAGLE3 3 steps" in words
    assert "## Cost model" in out and "cycle ≈" in out


def test_html_report_is_self_contained_and_escaped(recording: Path, tmp_path: Path, capsys) -> None:
    target = tmp_path / "r.html"
    code, out, _ = run_cli(["report", str(recording), "--format", "html", "-o", str(target)], capsys)
    assert code == 0 and out == ""
    page = target.read_text()

    class Collect(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.tags: list[str] = []

        def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
            self.tags.append(tag)

    p = Collect()
    p.feed(page)
    assert len(re.findall(r'<g id="time-run-\d+"', page)) == 4  # one series per run (output/charts.py)
    assert "svg" in p.tags and p.tags.count("tr") == 5
    assert "script" not in p.tags and not re.search(r'(src|href)="http', page)
    assert "EAGLE3 2 steps" in page


def test_html_escapes_what_the_log_controls(tmp_path: Path) -> None:
    path = tmp_path / "evil.jsonl"
    # Without its configuration line the run is named after its source, which the log side controls.
    lines = [ln for ln in CAMPAIGN[2].read_text().splitlines() if "server_args" not in ln]
    write_lines_recording(path, [("<script>alert(1)</script>.log", lines)])
    page = render_report(load_report(path), "html")
    assert "<script>" not in page and "&lt;script&gt;" in page


def test_json_report(recording: Path, capsys) -> None:
    code, out, _ = run_cli(["report", str(recording), "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert doc["verdict"]["best_steps"] == 2 and [r["steps"] for r in doc["runs"]] == [0, 1, 2, 3]
    rep = doc["report"]
    series = rep["series"]
    assert len(series["t"]) == len(series["tps"]) == len(series["run"]) > 100
    assert series["t"] == sorted(series["t"]) and series["t"][0] == 0
    assert series["time_basis"] == "log time"  # the logs are timestamped; all lines were received at once
    assert set(series["runs"]) == {"1", "2", "3", "4"}
    assert rep["cost_model"]["fit"]["per_step_ms"] > 0
    assert rep["sentence"] == doc["verdict"]["sentence"]


def test_csv_report(recording: Path, capsys) -> None:
    code, out, _ = run_cli(["report", str(recording), "--format", "csv"], capsys)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    assert [r["steps"] for r in rows] == ["0", "1", "2", "3"]
    assert [r["best"] for r in rows] == ["0", "0", "1", "0"]


def test_a_sweep_verdict_in_the_recording_leads_the_report(tmp_path: Path) -> None:
    path = tmp_path / "sweep.jsonl"
    session = Session()
    with Recorder(path, meta={"command": "sweep"}) as rec:
        ingest = RecordedIngest(session, rec)
        for p in CAMPAIGN:
            rec.restart(steps=0, phase="started")
            ingest.begin_source(str(p))
            ingest.feed(p.read_text().splitlines())
            rec.restart(steps=0 if "nospec" in p.name else int(p.name.split("_")[-1][0]), phase="finished", ok=True)
        sentence = "EAGLE3 2 steps: +5.3% (+4.4…+6.3%) over no speculation; EAGLE3 3 steps is not distinguishable: no winner declared."
        rec.verdict({"verdict": {"best_steps": 2, "separated": False, "sentence": sentence}})
        ingest.close()
    data = load_report(path)
    assert data.sentence == sentence
    md = render_report(data, "markdown")
    words = " ".join(md.split())  # paragraphs wrap within 80 columns
    assert f"**{sentence}**" in words and "repeated looks" in words
    assert "## Restarts" in md and md.count("— ready") == 4
    assert json.loads(render_report(data, "json"))["report"]["sweep_verdict"]["verdict"]["separated"] is False


def test_truncated_recording_still_reports(recording: Path, tmp_path: Path, capsys) -> None:
    cut = tmp_path / "cut.jsonl"
    data = recording.read_bytes()
    # Halfway through the entry that spans the file's middle: a fixed offset could land just
    # after an entry's closing brace (its recorded times vary in length), a whole entry then.
    start = data.rfind(b"\n", 0, len(data) // 2) + 1
    cut.write_bytes(data[: (start + data.index(b"\n", start)) // 2])
    code, out, err = run_cli(["report", str(cut)], capsys)
    assert code == 0 and "ends mid-line" in err and "ends mid-line" in out


def test_report_errors(tmp_path: Path, capsys) -> None:
    code, _, err = run_cli(["report", str(tmp_path / "nope.jsonl")], capsys)
    assert code == 2 and "no such file" in err
    plain = tmp_path / "server.log"
    plain.write_text(CAMPAIGN[0].read_text()[:2000])
    code, _, err = run_cli(["report", str(plain)], capsys)
    assert code == 2 and "not a specmon recording" in err


def test_text_chart_of_an_empty_recording(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    write_lines_recording(path, [("x.log", ["nothing to see"])])
    data = load_report(path)
    assert text_chart(data) == ["(no throughput samples)"]
    for fmt in ("markdown", "html", "json", "csv"):
        assert render_report(data, fmt)
    with pytest.raises(ValueError):
        render_report(data, "pdf")
