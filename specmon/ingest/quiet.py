"""Lines of a log that give nothing, taken out of a piece before the line parser sees it.

Two kinds: HTTP access lines (uvicorn's; the line parser's first test gives them None) and
*quiet* shapes, learned from a line the line parser read as nothing and that holds none of the
texts that make it give something (stats, configuration and lifecycle markers, ANSI): every line
of that shape, whatever its digits and spacing, gives nothing too. Outside a traceback such
lines are skipped (:func:`specmon.ingest.bulk.bulk_piece`); the shapes are kept by the
process's learner (:mod:`specmon.ingest.templates`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from specmon.engines import ADAPTERS, KINDS
from specmon.parsing import FRAME_WORD
from specmon.parsing.lifecycle import CAPTURE_WORDS, MARKERS, SHAPES

# uvicorn access lines: None for the line parser (its first test), skipped here (_drop_access).
_ACCESS_TEXTS = (b' - "', b"HTTP/")
_ACCESS = re.compile(rb"\n(?=[^\n]*%s)(?=[^\n]*%s)[^\n]*(?=\n)" % tuple(map(re.escape, _ACCESS_TEXTS)))
_drop_lines: Callable[[bytes, bytes, bytes], bytes] | None
_quiet_lines: Callable[[bytes, list[bytes], bytes], tuple[bytes, int]] | None
try:
    from specmon._native import drop_lines as _drop_lines
    from specmon._native import quiet_lines as _quiet_lines
except ImportError:  # (no compiler: the regex)
    _drop_lines = _quiet_lines = None


def _drop_access(rest: bytes) -> bytes:
    """``rest`` with the text of each access line removed (its newline kept).

    The regex tries its look-aheads at every line left (1.4 ms a 4 MB SGLang piece); the C
    one jumps between the lines that hold ``HTTP/``.
    """
    if _drop_lines is None:
        return _ACCESS.sub(b"\n", rest)
    return _drop_lines(rest, *_ACCESS_TEXTS)


# The atoms of a quiet shape's regex (as _general writes them): digit runs, space runs, escaped text.
_ATOMS = re.compile(rb"\\d\+| \+|(?:\\.|[^\\ ])+?(?=\\d\+| \+|$)", re.S)


_UNESCAPE = re.compile(rb"\\(.)", re.S)


def _skeleton(atoms: list[bytes]) -> bytes:
    """A quiet shape's skeleton as _native.quiet_lines writes a line's: each digit run "\\0d", each
    space run "\\0s", the text between them as it is with a NUL byte doubled."""
    return b"".join(b"\0d" if a == rb"\d+" else b"\0s" if a == b" +" else
                    _UNESCAPE.sub(rb"\1", a).replace(b"\0", b"\0\0") for a in atoms)


class _Shapes:
    """The quiet pass by shape (see _native.quiet_lines): each line read once and looked up,
    where the regex trie backtracked through the shapes (4.6 ms of a 4 MB llama.cpp piece)."""

    groups = 0

    def __init__(self, skeletons: list[bytes]) -> None:
        self.skeletons = skeletons

    def scan(self, text: bytes, token: bytes, kinds: bytes, convs: tuple[Any, ...], /
             ) -> tuple[bytes, int, list[list[Any]], list[int]]:
        assert _quiet_lines is not None and not kinds and not convs  # (a pass without groups)
        rest, n = _quiet_lines(text, self.skeletons, token)
        return rest, n, [], [n]

    def reads(self, line: bytes, /) -> bool:
        assert _quiet_lines is not None
        return b"\n" not in line and _quiet_lines(b"\n" + line + b"\n", self.skeletons, b"")[1] == 1


def _trie(seqs: list[list[bytes]]) -> bytes:
    """An alternation of atom sequences with shared starts factored out (same language, fewer retries)."""
    groups: dict[bytes, list[list[bytes]]] = {}
    ends = False
    for seq in seqs:
        if not seq:
            ends = True
            continue
        groups.setdefault(seq[0], []).append(seq[1:])
    alts = [head + _trie(rest) for head, rest in groups.items()]
    if ends:
        alts.append(b"")
    if len(alts) == 1:
        return alts[0]
    return b"(?:" + b"|".join(alts) + b")"


# What the line parser reads besides stats lines: a line holding none of these texts (with
# digits and runs of spaces as they may vary) is given nothing outside a traceback.
def _general(text: str) -> str:
    """``text`` as a regex where every digit run is ``\\d+`` and every run of spaces `` +``."""
    return _RUNS.sub(lambda m: r"\d+" if m.group(1) else " +" if m.group(2) else re.escape(m.group()), text)


_RUNS = re.compile(r"(\d+)|( +)|[^\d ]+")


def _interesting() -> re.Pattern[str]:

    # The lifecycle phrases themselves, not match_lifecycle's cheap gate: the gate's fragments
    # ("erver", "oad", "rror") are in many lines that give nothing, such as llama.cpp's
    # "srv  log_server_r: done request: ..." (one line in four of a busy llama-server log),
    # which then went to the line parser one by one.
    words = [*(w for a in ADAPTERS for w in a.config_words),
             *(phrase for phrase, _event, _engines in MARKERS), *CAPTURE_WORDS, FRAME_WORD,
             *(k.marker for k in KINDS if not k.vetoes)]
    # A fatal shape (lifecycle.SHAPES) names a line by a regex, after a cheap gate: a line holding
    # a gate's text may be one ("cmd.Wait() returned error: nil>" is llama-swap's report of a
    # death), so it is never quiet. A literal gate is generalised like the words; a regex gate
    # gets its spaces free (its digits are \d+ already: see _gate_pattern).
    gates = [gate for gate, _rx, _event in SHAPES]
    words += [g for gate in gates if isinstance(gate, tuple) for g in gate]
    alts = [_general(w) for w in words]
    alts += [_gate_pattern(gate.pattern) for gate in gates if not isinstance(gate, tuple)]
    # A marker whose kind a veto turns away is harmless beside that veto.
    for k in KINDS:
        if k.vetoes:
            none_of = "".join(f"(?!.*{_general(v)})" for v in k.vetoes)
            alts.append(f"^{none_of}.*{_general(k.marker)}")
    return re.compile("|".join(f"(?:{a})" for a in alts) + r"|\x1b|\[[\d;]+m|\r", re.S)


def _gate_pattern(pattern: str) -> str:
    """A fatal shape's regex gate with each literal space a run of spaces, so that every line of a
    quiet shape (space runs of any length) misses it. A gate that fixes a digit or a space count
    could not be made so, and is refused: a shape must gate on text and ``\\d+``."""
    if re.search(r"\\d|\d|\\ | [*+?{]|\\s", pattern.replace(r"\d+", "")):  # (any \d left is not \d+)
        raise ValueError(f"a fatal shape's gate must fix no digit nor space count: {pattern!r}")
    return pattern.replace(" ", " +")


_INTERESTING: re.Pattern[str] | None = None


def _quiet_source(raw: bytes) -> bytes | None:
    """The regex of lines shaped like ``raw`` (digits and space runs free), if no such line gives a record.

    ``raw`` gave no record and holds none of the texts that make the line parser give one
    (stats markers, configuration and lifecycle markers, ANSI): neither does any line of
    the same shape, since those texts hold no digits and the generalised test is blind to
    the length of digit and space runs. Outside a traceback such lines are skipped.
    """
    global _INTERESTING
    if _INTERESTING is None:
        _INTERESTING = _interesting()
    text = raw.decode("utf-8", errors="replace")
    if "\ufffd" in text or len(raw) > 2000 or _INTERESTING.search(text):
        return None
    return _general(text).encode()


_QUIET = b"\x00\x01\x03"


class _QuietTexts:
    """The texts of a piece's quiet lines in order, made only when the line parser needs one (a
    quiet line inside a traceback, where it may say something): the quiet pass replaces each
    line it reads by one token line, so line ``i`` of the text after it is the token exactly
    where line ``i`` of the text before it was a quiet line."""

    def __init__(self, before: bytes, after: bytes) -> None:
        self._sides: tuple[bytes, bytes] | None = (before, after)
        self._texts: list[bytes] = []

    def __getitem__(self, i: int) -> bytes:
        if self._sides is not None:
            before, after = self._sides
            self._texts = [b for b, a in zip(before.split(b"\n"), after.split(b"\n"), strict=True) if a == _QUIET]
            self._sides = None
        return self._texts[i]
