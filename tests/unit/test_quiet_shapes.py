"""The quiet pass by shape (_native.quiet_lines) reads exactly the lines the shapes' regex reads (issue 10).

A quiet shape is a line that gave nothing with its digit runs and space runs free. The pass
tried each line through a regex trie of the shapes by backtracking; it now writes a line's
skeleton once and looks it up. Generated shapes and lines (digit and space runs of any
length, regex metacharacters, backslashes, NUL bytes, non-ASCII digits and text, bytes that
are not UTF-8) must give the same rest and count through both, and through the walk's test
of one line.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest import quiet, templates
from specmon.ingest.scan import RePass

_QUIET = quiet._QUIET
_PIECES = st.sampled_from(["0", "7", "123", "00", " ", "   ", "a", "slot", "|", ".", "\\", "\\d+", " +", "(", ")",
                           "[", "*", "+", "?", "^", "$", "{2}", "\x00", "\t", "é", "٣", "¹", ":", ",", "-", "_", "/"])
_LINE = st.lists(_PIECES, min_size=1, max_size=14).map("".join)


def _mutate(line: str, data: st.DataObject) -> bytes:
    """A line of the same shape (digit and space runs changed), or a near miss."""
    out = []
    for ch in line:
        if ch.isascii() and ch.isdigit():
            out.append(data.draw(st.sampled_from([ch, "9", "12", ""])))
        elif ch == " ":
            out.append(data.draw(st.sampled_from([" ", "  ", "", "\t"])))
        else:
            out.append(data.draw(st.sampled_from([ch, ch, ch, "", "x"])))
    raw = "".join(out).encode()
    if data.draw(st.booleans()):
        raw += data.draw(st.sampled_from([b"", b"\xff", b"\xc3", b"1", b" "]))
    return raw


def _sources(lines: list[str]) -> list[bytes]:
    return [quiet._general(x).encode() for x in lines]


@settings(max_examples=400, deadline=None)
@given(st.lists(_LINE, min_size=1, max_size=6), st.data())
def test_the_shape_pass_reads_what_the_regex_reads(shapes: list[str], data: st.DataObject) -> None:
    sources = _sources(shapes)
    seqs = [quiet._ATOMS.findall(q) for q in sources]
    if not all(b"".join(a) == q for a, q in zip(seqs, sources, strict=True)):
        return  # (the learner keeps the regex for these)
    fast = quiet._Shapes([quiet._skeleton(a) for a in seqs])
    regex = RePass([b"(?:" + quiet._trie(seqs) + b")"])
    lines = [_mutate(data.draw(st.sampled_from(shapes)), data) for _ in range(data.draw(st.integers(1, 12)))]
    lines += [x.encode() for x in shapes]
    text = b"\n" + b"\n".join(lines) + b"\n"
    rest, n, _, _ = regex.scan(text, _QUIET, b"", ())
    assert fast.scan(text, _QUIET, b"", ()) == (rest, n, [], [n])
    for line in lines:
        assert fast.reads(line) == regex.reads(line), line
    # A shape reads its own line (a digit other than ASCII's is \d+ in the shape, which reads
    # ASCII digits only: neither pass reads such a line, as before).
    assert all(fast.reads(x.encode()) for x in shapes if not any(c.isdigit() and not c.isascii() for c in x))


def test_a_learnt_quiet_shape_skips_its_lines_by_shape() -> None:
    templates._LEARNER.__init__()  # type: ignore[misc]
    source = quiet._quiet_source(b"0.00.037.091 I slot print_timing: id  0 | task 0 | n_gen =     40, tg =  32.64 t/s")
    assert source is not None
    templates._LEARNER.add_quiet(source)
    rx = templates._LEARNER.quiet_rx
    assert isinstance(rx, quiet._Shapes)
    text = (b"\n1.02.037.091 I slot print_timing: id  3 | task 17 | n_gen =   1040, tg =  2.5 t/s\n"
            b"1.02.037.091 I slot print_timing: id  3 | task 17 | n_gen = 1040, tg = 2.5 t/s!\n")
    rest, n, _, _ = rx.scan(text, _QUIET, b"", ())
    assert n == 1 and rest == b"\n" + _QUIET + b"\n" + text.split(b"\n")[2] + b"\n"
    templates._LEARNER.__init__()  # type: ignore[misc]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(0, 200), min_size=1, max_size=300))
def test_the_learner_keeps_the_last_shapes_whatever_their_turnover(picks: list[int]) -> None:
    """A log whose lines each hold a new pointer (llama.cpp at -lv 4: "prompt 0x7fde84005f80: 122
    tokens") brings a new shape at every line, and the learner turns its list over. Each shape is
    parsed once now (it was parsed again, all 48, at every shape learned: 60% of reading such a log);
    whatever the turnover, the pass is the one built from scratch from the shapes kept, the last
    MAX_QUIET distinct ones."""
    learner = templates._Learner()
    kept: list[bytes] = []
    for k in picks:
        source = quiet._general(f"0.00.037.091 I srv update: - prompt 0x7f{k:x}e: 12 tokens").encode()
        learner.add_quiet(source)
        if source not in kept:
            kept = [*kept, source][-templates.MAX_QUIET:]
    assert learner.quiet == kept
    seqs = [quiet._ATOMS.findall(q) for q in kept]
    assert isinstance(learner.quiet_rx, quiet._Shapes)
    assert learner.quiet_rx.skeletons == [quiet._skeleton(a) for a in seqs]
