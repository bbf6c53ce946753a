"""``report`` reads a recording in bounded memory and gives summarize's numbers for the same lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon import recording_format
from specmon.cli import main
from specmon.output import recording_reader
from specmon.output import recording_replay as recmod
from specmon.output.recording import Recorder, write_lines_recording
from specmon.output.recording_reader import ReadStats, read_recording
from specmon.output.report import load_report, text_chart
from specmon.sources.logfiles import file_year

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
    monkeypatch.setattr(recording_reader, "_CHUNK_BYTES", 1 << 12)
    small, s1 = list(read_recording(path, st1 := ReadStats())), st1
    monkeypatch.setattr(recording_reader, "_CHUNK_BYTES", 1)  # one line per chunk: the line-by-line path
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


def _big_log(path: Path, n: int, seed: int) -> None:
    """Long runs of plain decode/prefill/access lines (the bulk path), a restart with another
    configuration in the middle, a second rank, and a crash at the end."""
    import random

    rng = random.Random(seed)
    out = ["[2026-08-23 08:59:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
           "speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3, tp_size=1)",
           "[2026-08-23 08:59:59] The server is fired up and ready to roll!"]
    for i in range(n):
        s = i // 4
        ts = f"2026-08-23 {9 + s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        if i == n // 2:
            out.append(f"[{ts}] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
                       "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4)")
            out.append(f"[{ts}] The server is fired up and ready to roll!")
        x = rng.random()
        rank = "TP0" if rng.random() < 0.9 else "DP1 TP0"
        if x < 0.6:
            out.append(f"[{ts} {rank}] Decode batch, #running-req: {rng.randint(1, 4)}, #token: 900, token usage: "
                       f"0.02, accept len: {rng.uniform(1.6, 2.6):.2f}, accept rate: {rng.uniform(0.5, 0.9):.2f}, "
                       f"cuda graph: True, gen throughput (token/s): {rng.uniform(58, 120):.2f}, #queue-req: 0")
        elif x < 0.8:
            out.append(f"[{ts} {rank}] Prefill batch, #new-seq: 1, #new-token: 90, #cached-token: 0, token usage: "
                       "0.02, #running-req: 0, #queue-req: 0, cuda graph: False, input throughput (token/s): 12.5")
        else:
            out.append(f'[{ts}] INFO:     127.0.0.1:4000 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
    out += ["[2026-08-23 12:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "x.py", line 1, in f', "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1 GiB"]
    path.write_text("\n".join(out) + "\n")


@pytest.mark.parametrize("seed", [1, 2])
def test_report_equals_summarize_through_the_bulk_path(seed: int, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Blocks of plain stats lines take the bulk path in both commands: the numbers, the series
    and the crash are the ones the line-by-line replay gives."""
    log = tmp_path / "big.log"
    _big_log(log, 40_000, seed)
    rec = tmp_path / "r.jsonl"
    _recorded_as_feeder(log, rec, batch=500)
    summary = _json(["summarize", str(log), "--format", "json", "--jobs", "1"], capsys)
    report = _json(["report", str(rec), "--format", "json"], capsys)
    for key in ("lines", "engine", "counts", "runs", "verdict", "crashes"):
        assert report[key] == summary[key], key
    assert report["crashes"] and "CUDA out of memory" in report["crashes"][0]["error"]
    from specmon.ingest import bulk

    fast = load_report(rec)
    monkeypatch.setattr(bulk, "decode_columns", lambda *a: None)  # the line parser only
    single = load_report(rec)
    assert list(fast.series) == list(single.series)
    assert text_chart(fast) == text_chart(single)


def test_report_names_the_crash_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recording whose last run crashed: Markdown, HTML, JSON and CSV reports say so."""
    log = tmp_path / "big.log"
    _big_log(log, 3000, 3)
    rec = tmp_path / "r.jsonl"
    _recorded_as_feeder(log, rec)
    for fmt, needle in (("markdown", "## Crashes"), ("html", "<h2>Crashes</h2>"), ("json", '"crashes"'),
                        ("csv", "crash_error")):
        assert main(["report", str(rec), "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert needle in out and "CUDA out of memory" in out, fmt


def test_hand_made_recording_without_source_entries(tmp_path: Path) -> None:
    """Lines with no source entry (and no ``src``) form one implicit source, as before."""
    lines = LOGS[2].read_text().splitlines()
    path = tmp_path / "hand.jsonl"
    entries = [{"type": "meta", "event": "start", "format": recording_format.FORMAT, "version": 1}]
    entries += [{"type": "line", "n": i, "text": t} for i, t in enumerate(lines, 1)]
    path.write_text("\n".join(json.dumps(e) for e in entries) + "\n")
    data = load_report(path)
    assert data.session.lines == len(lines) and [r.source for r in data.session.runs] == [""]
    assert data.analysis.rows and data.analysis.rows[0].samples > 0


def test_the_reading_process_gives_the_same_report(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A big recording is read in spans by one process per core: same session, series and skip counts
    as in-process, and those processes are gone afterwards."""
    import multiprocessing as mp

    log = tmp_path / "big.log"
    _big_log(log, 20_000, 4)
    rec = tmp_path / "r.jsonl"
    _recorded_as_feeder(log, rec, batch=300)
    with rec.open("ab") as f:
        f.write(b'{"type": "line", "src": "x", "n": 1, "te')  # a truncated tail
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 1 << 60)
    local = load_report(rec)
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 0)
    monkeypatch.setattr(recmod, "READ_SPAN", 64 << 10)  # spans read by one process per core
    monkeypatch.setattr(recmod.os, "cpu_count", lambda: 2)
    piped = load_report(rec)
    assert not mp.active_children()
    assert list(piped.series) == list(local.series)
    assert piped.session.lines == local.session.lines and piped.session.counts == local.session.counts
    assert (piped.read.entries, piped.read.truncated_tail) == (local.read.entries, True)
    from specmon.output.tables import to_json

    assert to_json(piped.session, piped.analysis) == to_json(local.session, local.analysis)


def test_the_reading_process_reports_a_bad_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not a recording: the same one-sentence error through the reading processes."""
    from specmon.recording_format import RecordingError

    bad = tmp_path / "bad.jsonl"
    bad.write_text("hello\n" * 10)
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 0)
    monkeypatch.setattr(recmod, "READ_SPAN", 12)  # spans read by one process per core
    monkeypatch.setattr(recmod.os, "cpu_count", lambda: 2)
    with pytest.raises(RecordingError, match="not a specmon recording"):
        load_report(bad)


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text(st.characters(codec="utf-8"), max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.sampled_from(["src", "n", "text", "t", "x"]), _JSON_VALUES, max_size=5),
                min_size=1, max_size=30))
def test_chunks_read_what_json_reads(tmp_path: Path, entries: list[dict[str, object]]) -> None:
    """The chunk decoder (orjson) gives what the standard json module gives for the lines the
    Recorder writes, NaN, infinities, integers past 64 bits, quotes and non-ASCII text included
    (what orjson does not read sends the chunk to json, line by line)."""
    path = tmp_path / "odd.jsonl"
    head = {"type": "meta", "event": "start", "format": recording_format.FORMAT, "version": recording_format.VERSION}
    lines = [json.dumps(e, ensure_ascii=False, separators=(",", ":")) for e in
             [head, *({"type": "line", **e} for e in entries)]]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    stats = ReadStats()
    got = list(read_recording(path, stats))
    # (what json reads, but for the entries whose fields are not a line's: skipped and counted)
    want = [w for w in map(json.loads, lines) if recording_format.entry_problem(w) is None]
    # NaN is not equal to itself: compare the JSON texts of both (json writes NaN as NaN).
    assert [json.dumps(g, sort_keys=True) for g in got] == [json.dumps(w, sort_keys=True) for w in want]
    assert stats.bad_lines == len(lines) - len(want)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(), max_size=30), min_size=1, max_size=20))
def test_blocks_cross_over_packed_and_come_back_exactly(texts: list[str]) -> None:
    """The reading process sends a block's texts as one UTF-8 block when that round-trips exactly;
    a newline inside a text or a lone surrogate keeps them a list. Either way the feeding side
    reads the same texts."""
    data = recmod._packed(texts)
    if data is None:
        assert any("\n" in t for t in texts) or any(0xD800 <= ord(c) <= 0xDFFF for t in texts for c in t)
    block = recmod._Block(list(range(len(texts))), [] if data is not None else texts, [None] * len(texts),
                          None, data)
    assert block.lines() == texts


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({"type": st.sampled_from(["line", "record", "meta"])},
                                      optional={"src": st.one_of(st.text(max_size=3), st.integers()),
                                                "n": st.integers(), "t": st.floats(), "text": st.text()}),
                max_size=12))
def test_run_keys_and_fields_are_the_per_entry_rules(batch: list[dict[str, object]]) -> None:
    want_keys = [e["src"] if e["type"] == "line" and type(e.get("src")) is str else recmod._OTHER for e in batch]
    assert recmod._run_keys(batch) == want_keys
    for key, default in (("n", 0), ("text", ""), ("t", None)):
        assert recmod._field(batch, key, default) == [e.get(key, default) for e in batch]
    assert recording_reader._all_entries(batch)
    assert not recording_reader._all_entries([*batch, {"no": "type"}]) and not recording_reader._all_entries([*batch, ["x"]])


@given(st.binary(max_size=80), st.integers(1, 25))
def test_the_digit_run_test_in_c_is_the_python_one(data: bytes, n: int) -> None:
    # The test that sends a chunk to json instead of orjson (19 digits in a row): C and Python agree.
    from specmon import _native as _scan

    assert _scan.digit_run(data, n) == recording_reader._digit_run_py(data, n)
    assert _scan.digit_run(data + b"7" * n, n)


def _segment_lines(kind: str, count: int, start: int) -> list[str]:
    """``count`` lines of one kind, stamped from second ``start`` on."""
    out = []
    for i in range(count):
        s = start + i
        ts = f"2026-08-23 {9 + s // 3600 % 14:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
        rank = "TP0" if i % 5 else "DP1 TP0"
        if kind == "decode":
            out.append(f"[{ts} {rank}] Decode batch, #running-req: {1 + i % 4}, #token: 900, token usage: 0.02, "
                       f"accept len: {1.6 + (i * 7 % 10) / 10:.2f}, accept rate: 0.{50 + i % 40}, cuda graph: True, "
                       f"gen throughput (token/s): {58 + (i * 13) % 60}.25, #queue-req: 0")
        elif kind == "prefill":
            out.append(f"[{ts} {rank}] Prefill batch, #new-seq: 1, #new-token: 90, #cached-token: 0, token usage: "
                       "0.02, #running-req: 0, #queue-req: 0, cuda graph: False, input throughput (token/s): 12.5")
        elif kind == "access":
            out.append(f'[{ts}] INFO:     127.0.0.1:4000 - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        elif kind == "start":
            out += [f"[{ts}] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
                    f"speculative_num_steps={1 + start % 3}, speculative_eagle_topk=1, "
                    f"speculative_num_draft_tokens={2 + start % 3})",
                    f"[{ts}] The server is fired up and ready to roll!"][:count]
        elif kind == "traceback":
            out += [f"[{ts} TP0] Scheduler hit an exception: Traceback (most recent call last):",
                    '  File "x.py", line 1, in f', "    Decode batch HTTP/ inside a traceback",
                    "RuntimeError: boom"][:count]
        else:  # text the line parser passes over, and a decode line cut mid-field
            out.append(f"[{ts}] a warning without stats" if i % 2 else
                       f"[{ts} TP0] Decode batch, #running-req: 1, #token: 9")
    return out


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(segments=st.lists(st.tuples(st.sampled_from(["decode", "decode", "prefill", "access", "start", "traceback",
                                                    "other"]), st.integers(1, 120)), min_size=1, max_size=14),
       block=st.integers(40, 700), tail_min=st.integers(1, 64))
def test_a_block_read_line_by_line_up_to_its_last_record_gives_the_line_by_line_report(
        segments: list[tuple[str, int]], block: int, tail_min: int, tmp_path_factory: pytest.TempPathFactory,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Lines that give records of their own (a start, a restart, a traceback whose lines hold the
    bulk lines' texts, unknown text, a cut line) anywhere among plain stats lines, blocks cut
    anywhere: the lines after a block's last record taken in bulk give the numbers, events and
    series of the line parser alone."""
    from specmon.ingest import bulk

    lines: list[str] = []
    for kind, count in segments:
        lines += _segment_lines(kind, count, len(lines))
    where = tmp_path_factory.mktemp("tail")
    log, rec = where / "a.log", where / "r.jsonl"
    log.write_text("\n".join(lines) + "\n")
    _recorded_as_feeder(log, rec, batch=97)
    monkeypatch.setattr(recmod, "REPLAY_BLOCK", block)
    monkeypatch.setattr(recmod, "BULK_TAIL_MIN", tail_min)
    parts = []
    for columns in (bulk.decode_columns, lambda *a: None):  # the bulk tails, then the line parser only
        monkeypatch.setattr(bulk, "decode_columns", columns)
        data = load_report(rec)
        parts.append((data.session.lines, dict(data.session.counts), [e.text for e in data.session.events],
                      [(r.state, r.crash_detail, r.excluded_warmup, r.excluded_idle, list(r.throughput),
                        list(r.accept_len)) for r in data.session.runs],
                      list(data.series), text_chart(data)))
    assert parts[0] == parts[1]
