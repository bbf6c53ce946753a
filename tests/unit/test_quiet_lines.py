"""Lines the bulk path skips as *quiet* give nothing on the line path, whatever their digits and spaces.

A quiet shape is learned from one line the line parser gave nothing for, if the line
holds none of the texts that make it give a record (stats markers, configuration
markers, lifecycle phrases); every line of that shape, digit runs and space runs
free, is then skipped outside tracebacks. Tested here: lines built around each
lifecycle phrase (whole, or with a word changed), with random digits and spaces —
when such a line is learned as quiet, every variant of its shape gives no record.
And llama-server's per-request line, which holds the lifecycle gate's fragment
"erver" but no phrase, is quiet (it went to the line parser one by one, a quarter
of a busy llama-server log).
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest import bulk, quiet, templates
from specmon.parsing import LineParser
from specmon.parsing.lifecycle import CAPTURE_WORDS, MARKERS, SHAPES
from specmon.records import Engine

# Every lifecycle phrase, and every fatal shape's gate (its literals; a line its regex gate takes).
PHRASES = [p for p, _e, _g in MARKERS] + ["Capture cuda graph begin", "Capture target decode CUDA graph end"] + [
    g for gate, _rx, _e in SHAPES if isinstance(gate, tuple) for g in gate] + [
    "/src/ggml-cuda/ggml-cuda.cu:75: CUDA error", "ggml.c:1554: GGML_ASSERT(x) failed"]
_RUN = re.compile(rb"\d+| +")


def _variant(line: bytes, data: st.DataObject) -> bytes:
    """The same shape: each digit run and each space run replaced by another of its kind."""
    def sub(m: re.Match[bytes]) -> bytes:
        if m.group()[:1].isdigit():
            return data.draw(st.from_regex(rb"\A[0-9]{1,6}\Z"))
        return b" " * data.draw(st.integers(1, 4))
    return _RUN.sub(sub, line)


@st.composite
def around_a_phrase(draw: st.DrawFn) -> bytes:
    phrase = draw(st.sampled_from(PHRASES))
    words = phrase.split(" ")
    if draw(st.booleans()):  # a near miss: one word changed, one letter cut
        i = draw(st.integers(0, len(words) - 1))
        words[i] = words[i][1:] or "x"
    sep = [" " * draw(st.integers(1, 3)) for _ in words]
    body = "".join(w + s for w, s in zip(words, sep, strict=True)).rstrip()
    pre = draw(st.sampled_from(["", "[2026-08-23 09:00:00 TP0] ", "INFO 10-22 09:00:00 ", "0.03.412.123 I srv  "]))
    post = draw(st.sampled_from(["", " 12", ": 4/7 [00:01<00:02]", " (took 3.5 s)", "."]))
    return (pre + body + post).encode()


@settings(max_examples=400, deadline=None)
@given(around_a_phrase(), st.data())
def test_a_quiet_shape_gives_no_record_whatever_its_digits_and_spaces(line: bytes, data: st.DataObject) -> None:
    source = quiet._quiet_source(line)
    if source is None:
        return  # not quiet: the line parser reads every such line (nothing to check)
    rx = re.compile(source)
    for _ in range(5):
        other = _variant(line, data)
        assert rx.fullmatch(other), (source, other)  # the variant is of the shape skipped
        for engine in Engine:
            assert LineParser(engine=engine).parse(other.decode(), 1) is None, (line, other, engine)


def test_the_line_hypothesis_drew_a_death_from_is_not_quiet() -> None:
    # "<nil>" with a letter cut: llama-swap's report of a death the lifecycle phrases do not name
    # (its fatal shape does), once learned as quiet and skipped.
    for line in ("cmd.Wait() returned error: nil>", "[DEBUG] <m> cmd.Wait() returned error: exit status 1"):
        assert LineParser(engine=Engine.LLAMACPP).parse(line, 1) is not None
        assert quiet._quiet_source(line.encode()) is None, line


def test_a_fatal_shapes_gate_that_fixes_digits_or_spaces_is_refused() -> None:
    assert quiet._gate_pattern(r"\.cu:\d+: \S") == r"\.cu:\d+: +\S"
    for bad in (r"x:\d{3}: ", r"x:\d: ", r"error 12", r"a  *b", r"a\sb"):
        with pytest.raises(ValueError):
            quiet._gate_pattern(bad)


def test_every_lifecycle_phrase_keeps_its_lines_off_the_quiet_path() -> None:
    for phrase in [*PHRASES, *CAPTURE_WORDS]:
        for line in (phrase, f"[2026-08-23 09:00:00 TP0] {phrase} 3", f"x  {phrase.replace(' ', '   ')}"):
            assert quiet._quiet_source(line.encode()) is None, line
    # Near misses are quiet: the gate's fragments alone ("hut", "erver", "oad", "rror") prove nothing.
    for line in ("[2026-08-23 09:00:00] hutting down 3 workers", "srv  log_server_r: done request: GET /health",
                 "INFO 10-22 09:00:00 download 4/7 files", "0 errors in 12 batches"):
        assert quiet._quiet_source(line.encode()) is not None, line


def test_llama_server_request_lines_are_quiet_and_skip_the_line_parser(monkeypatch) -> None:
    request = "2026-05-14 22:40:{s:02d}.051 | srv  log_server_r: done request: POST /v1/chat/completions 172.18.0.{i} 200"
    spec = "2026-05-14 22:40:{s:02d}.051 | draft acceptance rate = 0.98260 ( {i:4d} accepted /  1207 generated)"
    lines = [f.format(s=i % 60, i=i) for i in range(200) for f in (request, spec)]
    text = ("\n".join(lines) + "\n").encode()
    templates._LEARNER.__init__()  # type: ignore[misc]
    first = bulk.bulk_piece(text, Engine.LLAMACPP, 2026)  # learns the template and the quiet shape
    calls = []
    original = LineParser.parse
    monkeypatch.setattr(LineParser, "parse", lambda self, t, n: calls.append(t) or original(self, t, n))
    again = bulk.bulk_piece(text, Engine.LLAMACPP, 2026)
    assert [c for c in calls if "log_server_r" in c] == []
    assert again.by_template == first.by_template == 200


def test_shapes_learned_in_a_piece_skip_the_line_parser_in_that_piece(monkeypatch) -> None:
    # A worker's first piece learns its quiet shapes as it walks it: the lines after must not go
    # to the line parser one by one (a llama.cpp piece sent 30,640 of its 45,841 lines there).
    shapes = ["2026-05-14 09:00:{s:02d}.{i:03d} | srv  update_slots: all slots are idle",
              "2026-05-14 09:00:{s:02d}.{i:03d} | slot print_timing: id  {s} | task {i} | ",
              "2026-05-14 09:00:{s:02d}.{i:03d} |       total time =   {i}.11 ms /  {s} tokens"]
    lines = [f.format(s=i % 60, i=i) for i in range(300) for f in shapes]
    text = ("\n".join(lines) + "\n").encode()
    templates._LEARNER.__init__()  # type: ignore[misc]
    calls: list[str] = []
    original = LineParser.parse
    monkeypatch.setattr(LineParser, "parse", lambda self, t, n: calls.append(t) or original(self, t, n))
    bulk.bulk_piece(text, Engine.LLAMACPP, 2026)
    assert 0 < len(calls) <= 2 * len(shapes)  # the first line or two of each shape, then none


_TRACEBACK = ["Traceback (most recent call last):", '  File "x.py", line 3, in <module>',
              "RuntimeError: CUDA out of memory"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["idle", "task", "total", "tb", "stats"]), min_size=1, max_size=40),
       st.data())
def test_a_walk_with_shapes_it_learns_gives_what_the_line_parser_gives(order: list[str],
                                                                        data: st.DataObject) -> None:
    # Quiet shapes learned mid-walk, tracebacks (where quiet lines are still parsed) and stats
    # lines in any order, on a fresh learner: the records are the line path's, line for line.
    def one(what: str, i: int) -> list[str]:
        p = f"2026-05-14 09:00:{i % 60:02d}.{i % 1000:03d} | "
        if what == "idle":
            return [p + "srv  update_slots: all slots are idle"]
        if what == "task":
            return [p + f"slot print_timing: id  {i % 4} | task {data.draw(st.integers(0, 99999))} | "]
        if what == "total":
            return [p + f"      total time =   {data.draw(st.integers(1, 9999))}.11 ms /  {i} tokens"]
        if what == "tb":
            return _TRACEBACK
        return [p + f"draft acceptance rate = 0.5{i % 10}000 ( {i} accepted /  1207 generated)"]
    lines = [ln for i, w in enumerate(order) for ln in one(w, i)]
    text = ("\n".join(lines) + "\n").encode()
    templates._LEARNER.__init__()  # type: ignore[misc]
    got, _ = bulk.piece_records(text, Engine.LLAMACPP, 2026)
    parser = LineParser(year=2026, engine=Engine.LLAMACPP)
    want = [r for n, ln in enumerate(lines, 1) if (r := parser.parse(ln, n)) is not None]
    assert got == want


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([b"n_gen = 1, tg = 2", b"n_gen =  33, tg = 4", b"done 200", b"Decode batch 7",
                                 b"", b"Traceback (most recent call last):", b"\x00\x01\x12", b"x = 5"]),
                max_size=40),
       st.booleans())
def test_the_quiet_texts_are_the_lines_the_count_only_pass_replaced(lines: list[bytes], in_c: bool) -> None:
    """The quiet pass has no group (it only counts): the texts are made by lining up the text
    before and after it, and are those a pass with a group around the shapes gives, in order."""
    from specmon.ingest.scan import RePass, compile_pass

    body = rb"n_gen = +\d+, tg = \d+|done \d+"
    counting = compile_pass([b"(?:" + body + b")"]) if in_c else RePass([b"(?:" + body + b")"])
    grouped = RePass([b"(" + body + b")"])
    before = b"\n" + b"\n".join(lines) + b"\n"
    after, n, cols, _ = counting.scan(before, quiet._QUIET, b"", ())
    assert cols == []
    expected = grouped.scan(before, quiet._QUIET, b"\0", (None,))[2][0]
    texts = quiet._QuietTexts(before, after)
    assert n == len(expected) and [texts[i] for i in range(n)] == expected
