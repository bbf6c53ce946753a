"""Recordings are untrusted input (issue 43, item 3): every field of every entry is checked where
``report`` and the replay read it, and a bad entry is skipped and counted, never raised.

One corrupted entry made ``report`` crash with a traceback (``"n":"NaN"`` a ValueError,
``"n":1e999`` an OverflowError). The recordings corrupted here are real ones: the recorder's own
output for the bundled campaign's logs (raw lines, parsed records, runs), with the restarts and
the document of a whole sweep run in the simulated world. Hypothesis corrupts them: types swapped,
NaN and infinities, huge numbers, deep nesting, keys dropped, lines cut; the report must come out
in every format, and say how many entries it skipped.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.model.session import Session
from specmon.model.stopping import StoppingRule
from specmon.output import recording_replay as recmod
from specmon.output.recording import RecordedIngest, Recorder
from specmon.output.report import REPORT_FORMATS, load_report, render_report
from specmon.recording_format import RecordingError, entry_problem, record_problem
from tests.support.sweepsim import run_sweep

ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = [ROOT / "sample_logs" / f"sim_eagle3_{n}.log" for n in ("nospec", "1step", "2step", "3step")]


def _record(path: Path, lines_each: int = 150) -> None:
    """A real recording: the recorder fed as a sweep feeds it (restarts, lines, records, runs, verdict)."""
    result = run_sweep(4, steps=(0, 1, 2, 3), rule=StoppingRule(looks=2, min_samples=20, max_samples=120))
    session = Session()
    with Recorder(path, meta={"command": "sweep"}) as rec:
        ingest = RecordedIngest(session, rec)
        for i, p in enumerate(CAMPAIGN):
            rec.restart(steps=i, phase="started")
            ingest.begin_source(str(p), year=2026)
            lines = p.read_text().splitlines()
            ingest.feed(lines[:lines_each // 2] + lines[-lines_each:])  # the start, and the serving
            rec.restart(steps=i, phase="finished", ok=True, detail="")
            rec.meta("sweep", note=f"setting {i} measured", progress=[i + 1, 4])
        rec.verdict(result.to_json())
        ingest.close()


class Lines(list[bytes]):
    """A recording's lines (a short repr: hypothesis prints the arguments of a failing example)."""

    def __repr__(self) -> str:
        return f"<a real recording of {len(self)} lines>"


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory) -> Lines:
    path = tmp_path_factory.mktemp("real") / "sweep.jsonl"
    _record(path)
    lines = Lines(path.read_bytes().splitlines(keepends=True))
    kinds = {json.loads(line)["type"] for line in lines}
    assert kinds == {"meta", "line", "record", "run", "restart", "verdict"}  # every kind, for real
    return lines


# --------------------------------------------------------------------------- corruptions

#: Values no entry may hold anywhere: the entry holding one is skipped, whatever the field.
#: (Raw JSON text: json writes NaN and Infinity; 1e999 reads as inf; 5,000 digits are past
#: Python's int-from-text limit; 2,000 levels past json's recursion.)
ALWAYS_BAD = {"NaN": "NaN", "inf": "Infinity", "-inf": "-Infinity", "1e999": "1e999", "-1e999": "-1e999",
              "10**30": str(10**30), "5000 digits": "9" * 5000, "40 deep": "[" * 40 + "]" * 40,
              "2000 deep": "[" * 2000 + "]" * 2000, "50 deep objects": '{"a":' * 50 + "0" + "}" * 50}
#: Values of another type: bad where the field is checked, fine in free text (a verdict's label).
SWAPS = ['"NaN"', '"x"', "[]", "{}", "true", "null", "3", "-2", "2.5", '"1e999"']


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every place in a decoded entry (dict keys and list indexes), the entry itself excluded."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*at, k))
            out += _paths(v, (*at, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*at, i))
            out += _paths(v, (*at, i))
    return out


_MARK = "\x00corrupt\x00"


def _replaced(entry: dict[str, Any], path: tuple[Any, ...], raw: str | None) -> bytes:
    """The entry as a recording line with the value at ``path`` replaced by raw JSON text, or
    removed (``raw`` None)."""
    parent: Any = entry
    for key in path[:-1]:
        parent = parent[key]
    if raw is None:
        del parent[path[-1]]
        return json.dumps(entry, separators=(",", ":")).encode() + b"\n"
    parent[path[-1]] = _MARK
    return json.dumps(entry, separators=(",", ":")).replace(json.dumps(_MARK), raw).encode() + b"\n"


#: One corruption: (entry index, what, where in it, the value's name or the cut's length).
Corruption = tuple[int, str, tuple[Any, ...], Any]


@st.composite
def corruptions(draw: st.DrawFn, lines: list[bytes]) -> tuple[list[Corruption], int | None]:
    """Corruptions of some entries (never the header, nor the last: it may be cut short), and where
    the last line is cut (None: not)."""
    out: list[Corruption] = []
    for i in draw(st.lists(st.integers(1, len(lines) - 2), min_size=1, max_size=5, unique=True)):
        what = draw(st.sampled_from(["always", "always", "swap", "drop", "cut"]))
        if what == "cut":  # (the closing brace is always cut off)
            out.append((i, what, (), draw(st.integers(1, len(lines[i]) - 2))))
            continue
        path = draw(st.sampled_from(_paths(json.loads(lines[i]))))
        value = {"always": st.sampled_from(sorted(ALWAYS_BAD)), "swap": st.sampled_from(SWAPS),
                 "drop": st.none()}[what]
        out.append((i, what, path, draw(value)))
    tail = draw(st.none() | st.integers(1, len(lines[-1]) - 2))  # as a killed recorder leaves it
    return out, tail


def _corrupt(lines: list[bytes], corrupted: list[Corruption], tail: int | None) -> tuple[list[bytes], int, int]:
    """The lines corrupted, how many entries surely became bad and how many more may have."""
    out = list(lines)
    sure = maybe = 0
    for i, what, path, value in corrupted:
        if what == "cut":
            out[i] = lines[i][:value] + b"\n"
            sure += 1
        elif what == "always":
            out[i] = _replaced(json.loads(lines[i]), path, ALWAYS_BAD[value])
            sure += 1
        else:
            out[i] = _replaced(json.loads(lines[i]), path, value)
            maybe += 1
    if tail is not None:
        out[-1] = out[-1][:tail]
    return out, sure, maybe


def _check_reports(path: Path, formats: tuple[str, ...] = ("markdown", "json", "csv")) -> Any:
    """The report of ``path`` in these formats: no exception, and the JSON one strict JSON.
    (HTML, its charts' layout 1-4 s on a loaded machine, is rendered by the CLI test.)"""
    data = load_report(path)
    for fmt in formats:
        text = render_report(data, fmt)
        if fmt == "json":
            doc = json.loads(text, parse_constant=lambda c: pytest.fail(f"{c} in the JSON report"))
            assert doc["report"]["skipped_entries"] == data.read.skipped
        if fmt == "markdown" and data.read.bad_lines:
            assert f"{data.read.bad_lines} damaged entr" in text
        if fmt == "html" and data.read.bad_lines:
            assert f"{data.read.bad_lines} damaged entr" in text
    return data


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_corrupted_entries_of_a_real_recording_are_skipped_and_counted(real: Lines, tmp_path: Path,
                                                                       data: st.DataObject) -> None:
    corrupted, tail = data.draw(corruptions(real))
    lines, sure, maybe = _corrupt(real, corrupted, tail)
    path = tmp_path / "corrupted.jsonl"
    path.write_bytes(b"".join(lines))
    report = _check_reports(path)
    assert sure <= report.read.bad_lines <= sure + maybe
    assert report.read.truncated_tail == (tail is not None)
    assert report.read.skipped == report.read.bad_lines + (tail is not None)


_BAD_RAW = ['"NaN"', "1e999", "-1", "NaN", "Infinity", str(2**64), '"12"', "1.5", "true", "null",
            "[" * 3000 + "]" * 3000]


def _invalid_for(field: str, bad: str) -> bool:
    """Whether ``bad`` is invalid in ``field``: a receive time may be null (unknown) or 1.5 (a hand-made
    clock 1.5 s after 1970), and a source or a text may be any string."""
    if field == "t":
        return bad not in ("null", "1.5")
    if field in ("src", "text"):
        return not bad.startswith('"')
    return True


@pytest.mark.parametrize(("field", "bad"), [(f, b) for f in ("n", "t", "src", "text") for b in _BAD_RAW
                                            if _invalid_for(f, b)])
def test_the_named_cases_of_a_raw_line(real: Lines, tmp_path: Path, field: str, bad: str) -> None:
    """``"n":"NaN"`` and ``"n":1e999`` (the issue's), and their kin in each field of a raw line,
    read by the C reader's path and the decoder's alike."""
    at = next(i for i, line in enumerate(real) if line.startswith(b'{"type":"line"') and b"Decode batch" in line)
    entry = json.loads(real[at])
    lines = list(real)
    lines[at] = _replaced(entry, (field,), bad)
    path = tmp_path / "one.jsonl"
    path.write_bytes(b"".join(lines))
    report = _check_reports(path)
    assert report.read.bad_lines == 1
    assert report.session.lines == sum(line.startswith(b'{"type":"line"') for line in real) - 1


def test_the_count_is_the_same_read_in_spans_by_worker_processes(real: Lines, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A big recording is read in spans by forked processes: they skip and count alike."""
    lines = list(real)
    bad = 0
    for i in range(5, len(lines) - 1, 97):
        entry = json.loads(lines[i])
        key = "n" if entry["type"] == "line" else "t"
        lines[i] = _replaced(entry, (key,), ["NaN", "1e999", '"7"', "[" * 40 + "]" * 40][bad % 4])
        bad += 1
    path = tmp_path / "spans.jsonl"
    path.write_bytes(b"".join(lines))
    whole = load_report(path)
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 0)
    monkeypatch.setattr(recmod, "READ_SPAN", 16 << 10)
    spans = load_report(path)
    assert whole.read.bad_lines == spans.read.bad_lines == bad
    assert spans.session.lines == whole.session.lines


@pytest.mark.parametrize(("field", "bad"), [("warmup", '"NaN"'), ("warmup", "1e999"), ("version", "NaN"),
                                            ("t", "Infinity"), ("format", "7"), ("version", '"1"')])
def test_a_damaged_header_is_refused_in_one_sentence(real: Lines, tmp_path: Path, field: str,
                                                     bad: str) -> None:
    """Without its header nothing can be read: refused (exit 2, one sentence), not skipped."""
    lines = list(real)
    lines[0] = _replaced(json.loads(real[0]), (field,), bad)
    path = tmp_path / "head.jsonl"
    path.write_bytes(b"".join(lines))
    with pytest.raises(RecordingError) as err:
        load_report(path)
    assert "\n" not in str(err.value) and str(path) in str(err.value)


def test_the_real_cli_says_what_it_skipped_and_never_tracebacks(real: Lines, tmp_path: Path) -> None:
    lines = list(real)
    first_line = next(i for i, line in enumerate(real) if line.startswith(b'{"type":"line"'))
    verdict = next(i for i, line in enumerate(real) if line.startswith(b'{"type":"verdict"'))
    lines[first_line] = _replaced(json.loads(real[first_line]), ("n",), '"NaN"')
    lines[first_line + 1] = _replaced(json.loads(real[first_line + 1]), ("n",), "1e999")
    lines[verdict] = _replaced(json.loads(real[verdict]), ("verdict",), "[" * 5000 + "]" * 5000)
    lines[-1] = lines[-1][:10]
    path = tmp_path / "cli.jsonl"
    path.write_bytes(b"".join(lines))
    for fmt in REPORT_FORMATS:
        proc = subprocess.run([sys.executable, "-m", "specmon", "report", str(path), "--format", fmt],
                              capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
        assert "3 damaged entries skipped" in proc.stderr and "ends mid-line" in proc.stderr
        assert "recorder was killed" not in proc.stderr + proc.stdout
        if fmt == "json":
            assert json.loads(proc.stdout)["report"]["skipped_entries"] == 4
    head = tmp_path / "head.jsonl"
    head.write_bytes(_replaced(json.loads(real[0]), ("version",), "1e999") + b"".join(real[1:]))
    proc = subprocess.run([sys.executable, "-m", "specmon", "report", str(head)], capture_output=True, text=True,
                          timeout=120, cwd=ROOT)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1, proc.stderr


# --------------------------------------------------------------------------- the checks themselves

finite = st.floats(allow_nan=False, allow_infinity=False)


@given(st.one_of(st.integers(), finite, st.text(), st.none(), st.booleans(), st.just(math.nan),
                 st.just(math.inf), st.lists(st.integers(), max_size=3)))
def test_a_line_number_is_kept_only_as_a_line_number(n: object) -> None:
    entry = {"type": "line", "src": "a", "n": n, "text": "x", "t": 1.0}
    ok = type(n) is int and 0 <= n < 10**18
    assert (entry_problem(entry) is None) == ok


@given(st.one_of(finite, st.integers(), st.just(math.nan), st.just(math.inf), st.text()))
def test_a_records_numbers_are_finite_and_in_range(value: object) -> None:
    rec = {"kind": "decode", "line": 3, "timestamp": "2026-01-02T03:04:05", "rank": "TP0", "gen_throughput": value}
    ok = type(value) in (int, float) and 0 <= value <= 1e15  # type: ignore[operator]
    assert (record_problem(rec) is None) == ok


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(data=st.data())
def test_type_swaps_inside_a_sweeps_document_never_break_the_report(real: Lines, tmp_path: Path,
                                                                     data: st.DataObject) -> None:
    """The sweep's document is read field by field by the report (found: ``"verdicts": true``
    raised in its rendering): a swap there is rendered, or the verdict entry skipped and counted."""
    at = next(i for i, line in enumerate(real) if line.startswith(b'{"type":"verdict"'))
    lines = list(real)
    for _ in range(data.draw(st.integers(1, 3))):
        entry = json.loads(lines[at])
        path = data.draw(st.sampled_from(_paths(entry)))
        lines[at] = _replaced(entry, path, data.draw(st.sampled_from([*SWAPS, None])))
    path = tmp_path / "verdict.jsonl"
    path.write_bytes(b"".join(lines))
    report = _check_reports(path)
    assert report.read.bad_lines in (0, 1)
    assert (report.sweep_verdict is None) == (report.read.bad_lines == 1)


@pytest.mark.parametrize(("key", "bad"), [("verdicts", "true"), ("checks", "3"), ("samples", '"x"'),
                                          ("runs", "{}"), ("plan", "[]")])
def test_the_named_swaps_inside_a_sweeps_document(real: Lines, tmp_path: Path, key: str, bad: str) -> None:
    at = next(i for i, line in enumerate(real) if line.startswith(b'{"type":"verdict"'))
    entry = json.loads(real[at])
    where = next(p for p in _paths(entry) if p[-1] == key)
    lines = list(real)
    lines[at] = _replaced(entry, where, bad)
    path = tmp_path / "named.jsonl"
    path.write_bytes(b"".join(lines))
    report = _check_reports(path)
    assert report.read.bad_lines == 1 and report.sweep_verdict is None
