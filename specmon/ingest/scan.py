"""The template pass of the bulk path: ``re.split`` at C speed for the regexes the grammar writes.

The bulk path runs, per line kind, ``re.split(b"\\n(?:T1|T2|...)(?=\\n)", piece)``
with the kind's learned templates ``T1, T2, ...``: the values of every line a
template reads, and the text between such lines. Python's ``re`` does that at
about 230 MB/s (1.2 µs for a 180-byte SGLang decode line) and it was the largest
part of ``summarize``'s time. Measured on a 4 MB piece of SGLang decode lines
(2026-12-02): ``re`` 17.9 ms; the ``pcre2`` package (PCRE2 with its JIT) 92 ms
for the same split, its results built in Python; polars' ``str.extract`` 0.3 s per
field over 1.2M lines, ``extract_groups`` 2.1 s for all of them. Hence a small
extension (``specmon/_native.c``) that runs a template as a program of literals, counted
classes, groups and alternatives.

:func:`compile_pass` turns a template's regex text into that program. It knows
the closed subset of syntax :mod:`specmon.grammar.kinds` writes and the engine
modules' variants use; anything else raises :class:`Unsupported`, and the caller
keeps ``re``. The extension backtracks as ``re`` does, trying the same paths in
the same order, so it reads the same lines with the same groups (tests compare
both on generated templates and mutated lines); a line whose match would nest past its
stack bound (a repeat of thousands of items) is left unread, for the line parser. Without a compiler at install
time the extension is absent and everything runs on ``re`` (same results, slower).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from specmon.grammar.common import _day_start, parse_fraction, parse_hms
from specmon.grammar.kinds import items_converter

try:
    from specmon._native import Scanner
except ImportError:  # built without a C compiler: the re path does everything
    Scanner = None  # type: ignore[assignment,misc,unused-ignore]

AVAILABLE = Scanner is not None

_LIT, _RUN, _ALT, _REP, _NLA, _END, _NOT, _GRP, _OPT = range(9)
_UNBOUNDED = -1


class Unsupported(ValueError):
    """A regex outside the subset the extension runs (the caller keeps ``re``)."""


class Pass(Protocol):
    """One kind's template pass over a piece (the C one, or :class:`RePass`): what ``re.split`` of
    the alternation gives, as the text left and columns."""

    @property
    def groups(self) -> int: ...

    def scan(self, text: bytes, token: bytes, kinds: bytes, convs: tuple[Any, ...], /
             ) -> tuple[bytes, int, list[list[Any]], list[int]]:
        """The text with each line read replaced by ``\\n`` + ``token``, the lines read, a column
        per group (None where another template read the line) made by ``kinds[j]`` and
        ``convs[j]`` (see :data:`CONVERTERS`), and the lines each template read."""
        ...

    def reads(self, line: bytes, /) -> bool:
        """Whether a template reads this one line (as ``scan`` would, were it in a text)."""
        ...


#: What a column's values become (one code per group in ``scan``'s ``kinds``), and the Python
#: converter that defines each: the C pass reads common forms itself, bit for bit the same,
#: and hands it every other text (``convs[j]``: that converter, or None for bytes).
AS_BYTES, AS_FLOAT, AS_INT, AS_STR, AS_HMS, AS_DAY, AS_FRAC, AS_FLOATS_CS, AS_FLOATS_C = range(9)
CONVERTERS: dict[int, Callable[[bytes], Any]] = {
    AS_FLOATS_CS: items_converter(float, b", "),  # vLLM's per-position rates: a tuple of floats
    AS_FLOATS_C: items_converter(float, b","),  # llama.cpp's
    AS_FLOAT: float,
    AS_INT: int,
    AS_STR: bytes.decode,
    AS_HMS: lambda b: parse_hms(b.decode()),
    AS_DAY: lambda b: _day_start(b.decode()),
    AS_FRAC: lambda b: parse_fraction(b.decode()),
}
#: A flag on a number's code (``kinds[j] | PACKED``): the C pass gives that column as an
#: ``array('d')`` (``array('I')`` for AS_INT) when every line has a value that fits, written as
#: it reads them with no object per value; else a list, as without it. On a list of floats, it
#: gives ``(width, array('d'))`` when every line has that many in the fast form, row after row
#: (bulk makes it a model.rows.Rows). RePass gives lists.
PACKED = 0x80
PACKABLE = frozenset((AS_FLOAT, AS_INT, AS_HMS, AS_DAY, AS_FRAC, AS_FLOATS_CS, AS_FLOATS_C))


class RePass:
    """The same pass on Python's ``re`` (no extension, or a regex outside the subset)."""

    def __init__(self, sources: Sequence[bytes]) -> None:
        self.rx = re.compile(b"\n(?:" + b"|".join(sources) + b")(?=\n)")
        self.groups = self.rx.groups
        # An empty group before each template says which one read a line.
        self._tagged = re.compile(b"\n(?:" + b"|".join(b"()(?:" + s + b")" for s in sources) + b")(?=\n)")
        self._sizes = [re.compile(s).groups for s in sources]

    def reads(self, line: bytes, /) -> bool:
        # As in a text: a newline before, and one after for the look-ahead that ends the line.
        return b"\n" not in line and self.rx.match(b"\n" + line + b"\n") is not None

    def scan(self, text: bytes, token: bytes, kinds: bytes, convs: tuple[Any, ...], /
             ) -> tuple[bytes, int, list[list[Any]], list[int]]:
        parts = self._tagged.split(text)
        g = self._tagged.groups
        n = (len(parts) - 1) // (g + 1)
        if not n:
            return text, 0, [[] for _ in range(self.groups)], [0] * len(self._sizes)
        rest = (b"\n" + token).join(parts[::g + 1])
        cols: list[list[Any]] = []
        hits: list[int] = []
        j = 1
        for size in self._sizes:
            hits.append(sum(1 for v in parts[j::g + 1] if v is not None))
            cols.extend(parts[j + k::g + 1] for k in range(1, size + 1))
            j += size + 1
        for c, conv in enumerate(convs):
            if conv is not None:
                cols[c] = [None if v is None else conv(v) for v in cols[c]]
        return rest, n, cols, hits


def _set(chars: set[int]) -> bytes:
    bits = bytearray(32)
    for c in chars:
        bits[c >> 3] |= 1 << (c & 7)
    return bytes(bits)


_DIGITS = set(b"0123456789")
_WORD = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_")
_SPACE = set(b" \t\n\r\f\v")
_ALL = set(range(256))
_CLASS_ESCAPES = {ord("d"): _DIGITS, ord("w"): _WORD, ord("s"): _SPACE,
                  ord("D"): _ALL - _DIGITS, ord("W"): _ALL - _WORD, ord("S"): _ALL - _SPACE}
_CHAR_ESCAPES = {ord("n"): 10, ord("t"): 9, ord("r"): 13, ord("f"): 12, ord("v"): 11}


class _Compiler:
    """A recursive-descent reader of one regex (bytes) into the extension's node tuples.

    Nodes: ``(LIT, bytes)``, ``(RUN, class, min, max, gives_back)``, ``(ALT, group, lo, hi,
    [seq, ...])``, ``(REP, min, max, lo, hi, seq)``, ``(NLA, class)``, ``(END, 0)``; a seq is a
    list of nodes and ``lo``/``hi`` the groups (0-based) inside the node.
    """

    def __init__(self, src: bytes) -> None:
        self.src = src
        self.i = 0
        self.groups = 0

    def error(self, what: str) -> Unsupported:
        return Unsupported(f"{what} at {self.i} in {self.src[:80]!r}")

    def peek(self) -> int | None:
        return self.src[self.i] if self.i < len(self.src) else None

    def compile(self) -> list[Any]:
        alts = self.alternation()
        if self.i != len(self.src):
            raise self.error("unbalanced ')'")
        seq = alts[0] if len(alts) == 1 else [(_ALT, -1, 0, self.groups, alts)]
        return [*seq, (_END, 0)]  # the template ends where the line does, as (?=\n) says

    def alternation(self) -> list[list[Any]]:
        alts = [self.sequence()]
        while self.peek() == ord("|"):
            self.i += 1
            alts.append(self.sequence())
        return alts

    def sequence(self) -> list[Any]:
        seq: list[Any] = []
        while (c := self.peek()) is not None and c not in b"|)":
            lo = self.groups
            atom = self.atom()
            count = self.quantifier()
            if count is not None:
                atom = self.repeat(atom, count, lo)
            if atom[0] == _ALT and atom[1] < 0 and len(atom[4]) == 1:
                nodes = atom[4][0]  # (?:...) of one alternative: its nodes here, so counts can give back
            else:
                nodes = [atom]
            for node in nodes:
                if node[0] == _LIT and seq and seq[-1][0] == _LIT:
                    seq[-1] = (_LIT, seq[-1][1] + node[1])  # one memcmp for a run of literal text
                else:
                    seq.append(node)
        return seq

    def repeat(self, atom: tuple[Any, ...], count: tuple[int, int, bool], lo: int) -> tuple[Any, ...]:
        mn, mx, possessive = count
        if atom[0] == _LIT and len(atom[1]) == 1:
            return (_RUN, _set({atom[1][0]}), mn, mx, not possessive)
        if atom[0] == _RUN and atom[2] == atom[3] == 1:
            return (_RUN, atom[1], mn, mx, not possessive)
        if atom[0] == _NLA:
            raise self.error("a count on a look-ahead")
        if possessive:
            raise self.error("a possessive count on a group")  # atomic: the extension backtracks
        if self.groups > lo and mx != 1:
            raise self.error("a group inside a repeat")  # re keeps the last repeat's: not done here
        body = atom[4][0] if atom[0] == _ALT and atom[1] < 0 and len(atom[4]) == 1 else [atom]
        return (_REP, mn, mx, lo, self.groups, body)

    def quantifier(self) -> tuple[int, int, bool] | None:
        c = self.peek()
        if c is None or c not in b"*+?{":
            return None
        if c == ord("{"):
            m = re.match(rb"\{(\d*)(,?)(\d*)\}", self.src[self.i:])
            if m is None or not (m.group(1) or m.group(3)):
                raise self.error("a '{' that is not a count")
            mn = int(m.group(1) or 0)
            mx = _UNBOUNDED if m.group(2) and not m.group(3) else int(m.group(3) or mn)
            self.i += m.end()
        else:
            self.i += 1
            mn, mx = {ord("*"): (0, _UNBOUNDED), ord("+"): (1, _UNBOUNDED), ord("?"): (0, 1)}[c]
        if self.peek() == ord("?"):
            raise self.error("a lazy count")
        possessive = self.peek() == ord("+")
        if possessive:
            self.i += 1
        if mx != _UNBOUNDED and mx < mn:
            raise self.error("a count with max < min")
        return mn, mx, possessive

    def atom(self) -> tuple[Any, ...]:
        src = self.src
        c = src[self.i]
        if c == ord("("):
            return self.group()
        if c == ord("["):
            return (_RUN, _set(self.klass()), 1, 1, False)
        if c == ord("."):
            self.i += 1
            return (_RUN, _set(_ALL - {10}), 1, 1, False)
        if c == ord("\\"):
            kind, value = self.escape()
            return (_RUN, _set(value), 1, 1, False) if kind == "class" else (_LIT, bytes([value]))
        if c in b"^$*+?{":
            raise self.error(f"{chr(c)!r}")
        self.i += 1
        return (_LIT, bytes([c]))

    def escape(self) -> tuple[str, Any]:
        """A backslash escape: ``("class", set)`` or ``("char", code)``."""
        if self.i + 1 >= len(self.src):
            raise self.error("a trailing backslash")
        e = self.src[self.i + 1]
        self.i += 2
        if e in _CLASS_ESCAPES:
            return "class", _CLASS_ESCAPES[e]
        if e in _CHAR_ESCAPES:
            return "char", _CHAR_ESCAPES[e]
        if e == ord("x"):
            m = re.match(rb"[0-9a-fA-F]{2}", self.src[self.i:])
            if m is None:
                raise self.error("a \\x escape")
            self.i += 2
            return "char", int(m.group(), 16)
        if chr(e).isalnum():
            raise self.error(f"the escape \\{chr(e)}")  # \b, \A, \1 ...: not in the subset
        return "char", e

    def klass(self) -> set[int]:
        self.i += 1
        negate = self.peek() == ord("^")
        if negate:
            self.i += 1
        chars: set[int] = set()
        first = True
        while True:
            c = self.peek()
            if c is None:
                raise self.error("an unclosed '['")
            if c == ord("]") and not first:
                self.i += 1
                break
            first = False
            if c == ord("\\"):
                kind, value = self.escape()
                if kind == "class":
                    chars |= value
                    continue
                lo = value
            else:
                if c == ord("[") and self.src[self.i + 1:self.i + 2] in (b":", b"=", b"."):
                    raise self.error("a POSIX class")
                self.i += 1
                lo = c
            if self.peek() == ord("-") and self.src[self.i + 1:self.i + 2] not in (b"]", b""):
                self.i += 1
                hc = self.peek()
                if hc == ord("\\"):
                    kind, value = self.escape()
                    if kind == "class":
                        raise self.error("a range to a class")
                    hi = value
                else:
                    assert hc is not None
                    self.i += 1
                    hi = hc
                if hi < lo:
                    raise self.error("a reversed range")
                chars |= set(range(lo, hi + 1))
            else:
                chars.add(lo)
        return _ALL - chars if negate else chars

    def group(self) -> tuple[Any, ...]:
        src = self.src
        self.i += 1
        capture = True
        if src[self.i:self.i + 1] == b"?":
            if src[self.i:self.i + 2] == b"?:":
                capture = False
                self.i += 2
            elif src[self.i:self.i + 2] == b"?!":
                self.i += 2
                return self.lookahead()
            else:
                m = re.match(rb"\?P<\w+>", src[self.i:])
                if m is None:
                    raise self.error("a group form")  # look-behind, flags, back-references
                self.i += m.end()
        lo = self.groups
        cap = -1
        if capture:
            cap = self.groups
            self.groups += 1
        alts = self.alternation()
        if self.peek() != ord(")"):
            raise self.error("an unclosed '('")
        self.i += 1
        return (_ALT, cap, lo, self.groups, alts)

    def lookahead(self) -> tuple[Any, ...]:
        """``(?!X)``: X does not match here (one character or class, or any sequence without groups)."""
        lo = self.groups
        alts = self.alternation()
        if self.peek() != ord(")"):
            raise self.error("an unclosed '(?!'")
        self.i += 1
        if self.groups > lo:
            raise self.error("a group inside a look-ahead")
        chars: set[int] = set()
        for seq in alts:
            node = seq[0] if len(seq) == 1 else None
            if node is not None and node[0] == _LIT and len(node[1]) == 1:
                chars.add(node[1][0])
            elif node is not None and node[0] == _RUN and node[2] == node[3] == 1:
                chars |= {c for c in range(256) if node[1][c >> 3] & (1 << (c & 7))}
            else:
                return (_NOT, alts)
        return (_NLA, _set(chars))


def _newline_free(nodes: list[Any]) -> bool:
    """Whether no node can read a newline (then a line's match cannot run into the next line)."""
    for node in nodes:
        kind = node[0]
        if kind == _LIT and b"\n" in node[1]:
            return False
        if kind == _RUN and node[1][10 >> 3] & (1 << (10 & 7)):
            return False
        if kind == _ALT and not all(_newline_free(s) for s in node[4]):
            return False
        if kind == _REP and not _newline_free(node[5]):
            return False
        if kind == _NOT and not all(_newline_free(s) for s in node[1]):
            return False
    return True


def _chars(bits: bytes) -> set[int]:
    return {c for c in range(256) if bits[c >> 3] & (1 << (c & 7))}


def _first(nodes: list[Any], after: set[int] | None) -> set[int] | None:
    """The bytes a match of ``nodes`` then ``after`` (what follows them: None, unknown) can start
    with; None when that is not known. A match that ends the line (END) starts with no byte."""
    chars: set[int] = set()
    for i, node in enumerate(nodes):
        kind = node[0]
        if kind == _LIT and node[1]:
            return chars | {node[1][0]}
        if kind == _RUN:
            chars |= _chars(node[1])
            if node[2] >= 1:
                return chars
        elif kind == _END:
            return chars
        elif kind == _ALT:
            rest = _first(nodes[i + 1:], after)
            for branch in node[4]:
                f = _first(branch, rest)
                if f is None:
                    return None
                chars |= f
            return chars
        elif kind == _REP:
            rest = _first(nodes[i + 1:], after)
            f = _first(node[5], rest)
            if f is None or (node[1] == 0 and rest is None):
                return None
            return chars | f | (rest if node[1] == 0 and rest is not None else set())
        # NLA, NOT: read nothing (and only narrow what follows)
    return None if after is None else chars | after


def _tighten(nodes: list[Any], after: set[int] | None) -> list[Any]:
    """The same program with a count that need not give back marked so (``gives_back`` False).

    A run of class C followed by something that cannot start with a byte of C (a literal, a
    digit after spaces, the end of the line) never matches with fewer bytes: what follows
    would meet a byte of C. The C pass then takes the run whole instead of trying every
    shorter one in turn, each a nested trial (a quarter of a quiet pass's time: every space
    and digit run of a quiet shape gave back).
    """
    out: list[Any] = []
    for i, node in enumerate(nodes):
        kind = node[0]
        if kind == _RUN and node[4]:
            f = _first(nodes[i + 1:], after)
            if f is not None and not f & _chars(node[1]):
                node = (_RUN, node[1], node[2], node[3], False)
        elif kind == _ALT:
            f = _first(nodes[i + 1:], after)
            node = (_ALT, node[1], node[2], node[3], [_tighten(b, f) for b in node[4]])
        elif kind == _REP:
            rest = _first(nodes[i + 1:], after)
            body_first = _first(node[5], set())
            follow = None if rest is None or body_first is None else rest | body_first
            node = (_REP, node[1], node[2], node[3], node[4], _tighten(node[5], follow))
        out.append(node)
    return out


def _det(nodes: list[Any], after: set[int] | None) -> list[Any] | None:
    """``nodes`` (then what starts with ``after``) as a sequence that matches one way, or None.

    Literals, look-aheads, the end, counts that never give back, groups made of such
    (``(GRP, group, lo, hi, [seq, ...])``: one alternative, or several that each begin with a
    byte the others cannot), and an optional part, ``(?:X)?``, whose
    X matches one way and cannot begin like what follows it (``(OPT, lo, hi, seq)``): when X
    matches, leaving it out would leave what follows at a byte it cannot begin with. The C pass
    matches these in place, with no nested trial or frame per group (a group was a trial, a
    decimal's optional part another: most of an SGLang decode line's time).
    """
    out: list[Any] = []
    for i, node in enumerate(nodes):
        kind = node[0]
        if kind in (_LIT, _NLA, _END) or (kind == _RUN and not node[4]):
            out.append(node)
        elif kind == _ALT and len(node[4]) == 1:
            inner = _det(node[4][0], _first(nodes[i + 1:], after))
            if inner is None:
                return None
            if node[1] >= 0:
                out.append((_GRP, node[1], node[2], node[3], [inner]))
            else:
                out.extend(inner)
        elif kind == _ALT:
            # Alternatives that each begin with a byte none of the others may begin with
            # ("True|False"): at most one can start anywhere, so trying it is trying them all.
            rest = _first(nodes[i + 1:], after)
            alts = [_det(branch, rest) for branch in node[4]]
            if any(a is None for a in alts):
                return None
            firsts = [_lead(a) for a in alts if a is not None]
            if any(f is None for f in firsts):
                return None
            seen: set[int] = set()
            for f in firsts:
                assert f is not None
                if f & seen:
                    return None
                seen |= f
            out.append((_GRP, node[1], node[2], node[3], alts))
        elif kind == _REP and node[1] == 0 and node[2] == 1:
            rest = _first(nodes[i + 1:], after)
            body_first = _first(node[5], None)  # (None: the body may match nothing)
            inner = _det(node[5], rest)
            if rest is None or body_first is None or body_first & rest or inner is None:
                return None
            out.append((_OPT, node[3], node[4], inner))
        else:
            return None
    return out


def _lead(seq: list[Any]) -> set[int] | None:
    """The bytes a sequence's first node must read one of (a literal, a count of at least one),
    as the C pass sees a sequence's start; None when it begins otherwise."""
    if not seq:
        return None
    node = seq[0]
    if node[0] == _LIT and node[1]:
        return {node[1][0]}
    if node[0] == _RUN and node[2] >= 1:
        return _chars(node[1])
    if node[0] == _GRP:
        leads = [_lead(branch) for branch in node[4]]
        return None if any(f is None for f in leads) else set().union(*leads)  # type: ignore[arg-type]
    return None


def _one_way(seq: list[Any]) -> list[Any]:
    """The template's own sequence with its one-way groups and options made GRP and OPT nodes.

    Only here, not inside an alternative or a repeat: every match of the template passes every
    node of this sequence, so a group set on a path that later failed is set again on the path
    that matches (a GRP restores nothing when what follows it fails).
    """
    out = []
    for i, node in enumerate(seq):
        if node[0] == _ALT or (node[0] == _REP and node[1] == 0 and node[2] == 1):
            one = _det([node], _first(seq[i + 1:], None))
            if one is not None:
                out.extend(one)
                continue
        out.append(node)
    return out


def program(source: bytes) -> tuple[int, list[Any]]:
    """One template's program: its group count (as ``re`` counts them) and node sequence.

    Raises:
        Unsupported: the regex is outside the subset.
    """
    c = _Compiler(source)
    seq = _tighten(c.compile(), None)
    if not _newline_free(seq):
        # re would let such a match run on into the next lines; the extension reads one line.
        raise Unsupported(f"a class or text that reads a newline in {source[:80]!r}")
    if c.groups != re.compile(source).groups:  # pragma: no cover - a reader bug, never a user's input
        raise Unsupported(f"group count {c.groups} != {re.compile(source).groups}")
    return c.groups, _one_way(seq)


def compile_pass(sources: Sequence[bytes]) -> Pass:
    """The pass of ``re.compile(b"\n(?:" + b"|".join(sources) + b")(?=\n)")`` at C speed.

    Raises:
        Unsupported: a template outside the subset, or the extension is not built.
    """
    if Scanner is None:
        raise Unsupported("the C extension specmon._native is not built")
    programs = [program(s) for s in sources]
    fast: Pass = Scanner(programs, needle(programs))
    return fast


def _mandatory(seq: list[Any]) -> list[bytes]:
    """The texts every match of a node sequence holds: its literals (adjacent ones joined), also
    inside a group of one alternative or a repeat done at least once."""
    out: list[bytes] = []
    run = b""
    for node in seq:
        if node[0] == _LIT:
            run += node[1]
            continue
        if node[0] == _NLA or node[0] == _NOT or node[0] == _END:
            continue  # read nothing: the texts on both sides are still adjacent
        if run:
            out.append(run)
            run = b""
        if node[0] in (_ALT, _GRP) and len(node[4]) == 1:  # (both keep their alternatives at 4)
            out.extend(_mandatory(node[4][0]))
        elif node[0] == _REP and node[1] >= 1:
            out.extend(_mandatory(node[5]))
    if run:
        out.append(run)
    return out


#: Shorter needles are found too often to pass over much; longer ones find no fewer lines.
_NEEDLE_MIN, _NEEDLE_MAX = 4, 48


def needle(programs: Sequence[tuple[int, list[Any]]]) -> bytes:
    """The longest text (up to 48 bytes) that every line any of these programs reads holds, or b"".

    The C pass then jumps from one line holding it to the next (``memmem``) instead of trying
    every line: a pass for a kind that is one line in six (llama.cpp's draft acceptance) spent
    most of its time failing on the other five (7.0 ms of a 4 MB piece; 1.9 ms with the jump).
    """
    texts = [_mandatory(seq) for _groups, seq in programs]
    if not all(texts):
        return b""
    best = b""
    for text in texts[0]:
        for i in range(len(text) - _NEEDLE_MIN + 1):
            for j in range(min(len(text), i + _NEEDLE_MAX), i + max(len(best), _NEEDLE_MIN - 1), -1):
                cand = text[i:j]
                if b"\n" not in cand and all(any(cand in t for t in other) for other in texts[1:]):
                    best = cand
                    break
    return best
