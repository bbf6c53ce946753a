"""``summarize`` names crashes in every format, and ``parse`` always says which file a record is from.

A crash-only log exits 1 naming the crash (time, line, cause) instead of "no lines found";
a run that served and then crashed, or a launch that crashed before serving after other
runs did, is reported as such in table, JSON, CSV and Markdown. Tested on every
crash-bearing real log and on the dashboard's CUDA-OOM crash log.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from specmon.cli import main
from specmon.ingest.summarize import ingest_files
from specmon.literal import markdown_cell
from specmon.model.session import ServerState
from specmon.parsing import parse_lines
from specmon.records import Event, Lifecycle
from tests.support.realdata import DATA, read_lines

ROOT = Path(__file__).resolve().parents[2]
CRASH_3STEP = ROOT / "tests" / "data" / "dashboard" / "crash_3step.log"
SERVED = ROOT / "sample_logs" / "sim_eagle3_2step.log"
#: The served log without its closing SIGTERM: a traceback after an asked-for stop is no crash.
SERVING = "".join(ln for ln in SERVED.read_text().splitlines(keepends=True)
                  if "SIGTERM" not in ln and "Gracefully exiting" not in ln)


def _crash_bearing() -> list[str]:
    """Real logs with a crash line that is not a traceback printed while a stop was asked for."""
    names = []
    for p in sorted(DATA.rglob("*.log")):
        name = str(p.relative_to(DATA))
        recs = list(parse_lines(read_lines(name)))
        if not any(isinstance(r, Lifecycle) and r.event in (Event.CRASH, Event.OOM) for r in recs):
            continue
        if any(r.state is ServerState.CRASHED for r in ingest_files([str(p)], jobs=1).runs):
            names.append(name)
    return names


CRASH_LOGS = _crash_bearing()


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_corpus_has_crash_logs() -> None:
    """Tracebacks, fatal errors and sigquits of both engines are among the real logs."""
    assert len(CRASH_LOGS) >= 8
    assert any(n.startswith("vllm") for n in CRASH_LOGS) and any(n.startswith("sglang") for n in CRASH_LOGS)


def test_crash_only_log_names_the_crash(capsys: pytest.CaptureFixture[str]) -> None:
    """The dashboard's OOM log: exit 1, the time and the CUDA OOM message, not 'no lines found'."""
    code, out, err = run_cli(["summarize", str(CRASH_3STEP)], capsys)
    assert code == 1 and out == ""
    assert err.startswith("specmon: the server crashed at 11:19:18 (line 93 of ")
    assert "CUDA out of memory. Tried to allocate 7.00 GiB" in err
    assert "sigquit" not in err  # the parent's later words are not the cause
    assert "no speculative-decoding lines found" not in err and "Traceback" not in err


@pytest.mark.parametrize("name", CRASH_LOGS)
def test_every_crash_bearing_real_log_is_named(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Each crash-bearing real log alone: exit 1 (no samples) with the crash named; or, when
    it has samples, exit 0 with the crash in JSON."""
    code, out, err = run_cli(["summarize", str(DATA / name), "--format", "json"], capsys)
    if code == 1:
        assert err.startswith("specmon: the server crashed at "), err
        assert f"of {DATA / name}, run " in err
    else:
        assert code == 0
        assert json.loads(out)["crashes"]


@pytest.mark.parametrize("name", [*CRASH_LOGS, "../../data/dashboard/crash_3step.log"])
def test_a_crash_after_a_served_run_shows_in_every_format(name: str, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """A served campaign log followed by a crash excerpt: every format says which run died,
    when (where the log says) and of what."""
    crash_lines = (DATA / name).read_text(encoding="utf-8").splitlines()
    log = tmp_path / "served_then_crashed.log"
    log.write_text(SERVING + "\n".join(crash_lines) + "\n")

    code, out, _ = run_cli(["summarize", str(log), "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    crashes = doc["crashes"]
    assert crashes, "the crash was not reported"
    c = crashes[-1]
    assert c["source"] == str(log) and c["error"] and c["line"] > len(SERVING.splitlines())
    assert c["time"] is not None  # the crash line's time, else the last time the log showed
    error = c["error"]

    code, out, _ = run_cli(["summarize", str(log), "--format", "csv"], capsys)
    assert code == 0
    rows = list(csv.DictReader(io.StringIO(out)))
    crashed = [r for r in rows if r["crashed"] == "1"]
    assert crashed and crashed[-1]["crash_error"] == error and crashed[-1]["crash_time"] == c["time"]
    assert crashed[-1]["crash_run"] == str(c["run"]) and crashed[-1]["crash_line"] == str(c["line"])

    code, out, _ = run_cli(["summarize", str(log), "--format", "markdown"], capsys)
    assert code == 0 and "**Crashes:**" in out
    # Escaped for Markdown (a backtick in the error would open a code span): the text a reader sees is the error.
    assert f"run {c['run']} (" in out and markdown_cell(error) in out and c["time"].replace("T", " ") in out

    code, out, _ = run_cli(["summarize", str(log)], capsys)
    assert code == 0
    flat = " ".join(out.split())
    assert f"Crash: run {c['run']} (" in flat and c["time"].replace("T", " ") in flat
    assert " ".join(error.split())[:40] in flat


def test_a_run_that_crashed_while_serving_marks_its_row(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The crash belongs to the row of the run that served: JSON row and CSV row carry it."""
    oom = CRASH_3STEP.read_text().splitlines()
    start = next(i for i, ln in enumerate(oom) if "Scheduler hit an exception" in ln)
    log = tmp_path / "served_crash.log"
    log.write_text(SERVING + "\n".join(oom[start:]) + "\n")
    code, out, _ = run_cli(["summarize", str(log), "--format", "json"], capsys)
    assert code == 0
    doc = json.loads(out)
    assert len(doc["runs"]) == 1 and doc["runs"][0]["crash"]["served"] is True
    assert doc["runs"][0]["crashed"] and "CUDA out of memory" in doc["runs"][0]["crash"]["error"]
    code, out, _ = run_cli(["summarize", str(log), "--format", "csv"], capsys)
    rows = list(csv.DictReader(io.StringIO(out)))
    assert len(rows) == 1 and rows[0]["crashed"] == "1" and int(rows[0]["samples"]) > 0


def test_no_crash_no_crash_columns_filled(capsys: pytest.CaptureFixture[str]) -> None:
    """A healthy log reports no crash anywhere."""
    code, out, _ = run_cli(["summarize", str(SERVED), "--format", "json"], capsys)
    assert code == 0 and json.loads(out)["crashes"] == []
    code, out, _ = run_cli(["summarize", str(SERVED), "--format", "markdown"], capsys)
    assert "Crashes" not in out


@pytest.mark.parametrize("n_files", [1, 2])
def test_parse_always_adds_its_file_key(n_files: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One schema whether given one file or several: every record names its file."""
    files = [str(SERVED), str(CRASH_3STEP)][:n_files]
    code, out, _ = run_cli(["parse", *files], capsys)
    assert code == 0
    recs = [json.loads(ln) for ln in out.splitlines()]
    assert recs and all(r["file"] in files for r in recs)
    assert {r["file"] for r in recs} == set(files)
    # The same keys per kind as with several files.
    keys = {r["kind"]: set(r) for r in recs}
    assert all("file" in k for k in keys.values())
