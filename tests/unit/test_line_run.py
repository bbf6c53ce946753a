"""Recorded raw lines read in place in C (``_native.line_run``) give what the JSON decoder gives.

``report`` read each recorded raw line through orjson (a dict and five objects a line, most of
the reading process's time). ``line_run`` reads a line in the Recorder's exact shape where it
lies and leaves every other line to the decoder. Generated recordings, written by the Recorder's
own ``json.dumps`` call and by others (ASCII escapes and surrogate pairs, spaces after the
separators), with damaged lines (cut short, bytes that are not UTF-8, control characters,
long numbers) must replay into exactly the operations and counts of the decoder alone.
"""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon import _native
from specmon.output import recording, recording_reader, recording_replay
from specmon.output.recording_reader import ReadStats
from specmon.recording_format import FORMAT, VERSION

HEADER = {"type": "meta", "event": "start", "format": FORMAT, "version": VERSION}

names = st.sampled_from(["a.log", "b.log", "", "dir/\u00e9t\u00e9.log", 'q"uote.log', "back\\slash.log"])
texts = st.one_of(
    st.text(max_size=40),  # any code point: controls, quotes, backslashes, newlines, lone surrogates
    st.text(st.characters(codec="utf-8", exclude_characters="\n"), max_size=40),
    st.sampled_from(["[2026-08-23 09:00:00 TP0] Decode batch, #running-req: 1, gen throughput (token/s): 85.87",
                     "\x1b[32mINFO\x1b[0m Decode batch, accept len: 1.86", 'say "hi" \\ back', "emoji \U0001f600 ok"]),
)
times = st.one_of(st.none(), st.floats(0, 2e9), st.integers(0, 2**40), st.just(1796237862.857707),
                  st.floats(allow_nan=False, allow_infinity=False))
numbers = st.one_of(st.integers(0, 10**6), st.integers(10**17, 10**20), st.integers(-5, -1))


@st.composite
def raw_line(draw: Any) -> bytes:
    entry = {"type": "line", "src": draw(names), "n": draw(numbers), "text": draw(texts), "t": draw(times)}
    style = draw(st.sampled_from(["recorder", "recorder", "recorder", "ascii", "spaced"]))
    if style == "recorder":  # Recorder.write's call and encoding
        text = json.dumps(entry, ensure_ascii=False, separators=(",", ":"))
    elif style == "ascii":
        text = json.dumps(entry, separators=(",", ":"))
    else:
        text = json.dumps(entry)
    data = (text + "\n").encode("utf-8", errors="replace")
    damage = draw(st.sampled_from(["none"] * 6 + ["cut", "byte", "control"]))
    if damage == "cut":
        data = data[:draw(st.integers(0, len(data) - 1))] + b"\n"
    elif damage == "byte":
        at = draw(st.integers(0, len(data) - 1))
        data = data[:at] + bytes([draw(st.sampled_from([0x80, 0xC0, 0xED, 0xF5, 0xFF, 0x00, 0x1F]))]) + data[at:]
    elif damage == "control":
        data = data.replace(b'"text":"', b'"text":"\x01', 1)
    return data


others = st.sampled_from([
    b'{"type":"meta","event":"source","source":"a.log","baseline":false,"year":2026,"t":1.5}\n',
    b'{"type":"verdict","verdict":{"sentence":"x"},"t":2.0}\n',
    b'{"type":"record","src":"a.log","run":1,"rec":{"kind":"decode"},"t":3.0}\n',
    b'not json at all\n',
])
bodies = st.lists(st.one_of(raw_line(), raw_line(), raw_line(), others), max_size=60)


def ops_of(path: Path, monkeypatch: pytest.MonkeyPatch, in_c: bool) -> tuple[list[Any], ReadStats]:
    with monkeypatch.context() as m:
        if not in_c:
            m.setattr(recording_replay, "_line_run", None)
        stats = ReadStats()
        got = []
        for op in recording_replay._replay_ops(path, stats, bulk=False):
            if op[0] == "block":
                _, src, block, piece, engine, detected, year, cut_at = op
                lines = block.lines()
                recv = block.recv if block.recv is not None else recording_replay._decode_recv(lines, block.ts)
                got.append(("block", src, block.ns, lines, [repr(t) for t in block.ts], [repr(t) for t in recv],
                            piece, engine, detected, year, cut_at))
            else:
                got.append(op)
    return got, stats


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=bodies, block_size=st.integers(1, 9), chunk=st.sampled_from([1, 97, 400, 1 << 21]),
       tail=st.booleans())
def test_lines_read_in_c_replay_as_the_decoder_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          body: list[bytes], block_size: int, chunk: int,
                                                          tail: bool) -> None:
    data = (json.dumps(HEADER) + "\n").encode() + b"".join(body)
    if tail and data.endswith(b"\n"):
        data = data[:-1]  # a last line without its newline (a kill mid-write, or a hand-made file)
    path = tmp_path / "rec.jsonl"
    path.write_bytes(data)
    monkeypatch.setattr(recording_replay, "REPLAY_BLOCK", block_size)
    monkeypatch.setattr(recording_reader, "_CHUNK_BYTES", chunk)
    got, stats = ops_of(path, monkeypatch, in_c=True)
    want, want_stats = ops_of(path, monkeypatch, in_c=False)
    assert got == want
    assert (stats.entries, stats.bad_lines, stats.truncated_tail) == (
        want_stats.entries, want_stats.bad_lines, want_stats.truncated_tail)


@settings(max_examples=300, deadline=None)
@given(src=names, n=st.integers(0, 10**18 - 1), text=texts, t=times)
def test_a_recorder_line_is_read_in_place_unless_it_cannot_be(src: str, n: int, text: str, t: Any) -> None:
    line = json.dumps({"type": "line", "src": src, "n": n, "text": text, "t": t}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8", errors="replace") + b"\n"
    count, end, got_src, ns, ts, data, recv = _native.line_run(line, 0, None, 0, 8)
    entry = json.loads(line.decode("utf-8", errors="replace"))
    readable = "\n" not in entry["text"] and "\\" not in src and '"' not in src
    assert count == (1 if readable else 0)
    assert end == len(line)
    if count:
        assert (got_src, ns, data.decode("utf-8")) == (entry["src"], [entry["n"]], entry["text"])
        assert repr(ts) == repr([entry["t"]])
        assert recv == ([entry["t"]] if "Decode batch" in entry["text"] else [])


def test_a_run_stops_at_its_room_at_another_source_and_at_a_line_it_cannot_read() -> None:
    def line(src: str, n: int, text: str = "x") -> bytes:
        return json.dumps({"type": "line", "src": src, "n": n, "text": text, "t": 1.5},
                          separators=(",", ":")).encode() + b"\n"

    buf = b"".join([line("a", 1), line("a", 2), line("a", 3), line("b", 4), line("b", 5, "new\nline"), line("b", 6)])
    count, end, src, ns, *_ = _native.line_run(buf, 0, "a", 2, 8)
    assert (count, src, ns) == (2, "a", [1, 2])  # the room left in the open block of "a"
    count, end, src, ns, *_ = _native.line_run(buf, end, "a", 5, 8)
    assert (count, src, ns) == (1, "a", [3])  # then "b" begins
    count, end, src, ns, *_ = _native.line_run(buf, end, "a", 4, 8)
    assert (count, src, ns) == (1, "b", [4])  # another source: up to the cap, its text read
    count, skip_to, *rest = _native.line_run(buf, end, "b", 4, 8)
    assert count == 0 and rest == [None] * 5 and buf[end:skip_to] == line("b", 5, "new\nline")
    assert _native.line_run(buf, skip_to, "b", 4, 8)[:4] == (1, len(buf), "b", [6])


def test_many_runs_of_a_big_recording_match_the_decoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recording the size of several chunks, written by the Recorder itself, with some damage."""
    rng = random.Random(7)
    path = tmp_path / "big.jsonl"
    with recording.Recorder(path, meta={"command": "watch"}) as rec:
        rec.source("a.log", year=2026)
        for batch in range(60):
            lines = [f"[2026-08-23 09:00:{i % 60:02d} TP0] Decode batch, #running-req: 1, accept len: 1.{i % 9}, "
                     f"gen throughput (token/s): {80 + i % 7}.5, #queue-req: 0" if i % 5 else f'say "{i}" \x1b[0m'
                     for i in range(rng.randint(1, 400))]
            rec.batch("a.log" if batch % 7 else "b.log", 1 + batch * 400, lines, t=1000.0 + batch)
    monkeypatch.setattr(recording_reader, "_CHUNK_BYTES", 1 << 14)
    got, stats = ops_of(path, monkeypatch, in_c=True)
    want, want_stats = ops_of(path, monkeypatch, in_c=False)
    assert got == want and stats.entries == want_stats.entries
    assert sum(len(op[2]) for op in got if op[0] == "block") > 10_000
