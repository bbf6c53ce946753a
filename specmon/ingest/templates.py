"""The templates of one process: stats-line shapes learned from lines the line parser has read.

The grammar (:mod:`specmon.grammar.kinds`) turns a stats line the line parser has read into a
*template* of its shape, accepted only if reading the line through it gives the line parser's
exact record. The learner keeps a few per line kind, with the C pass (:mod:`specmon.ingest.scan`)
of their alternation in each mode (every value, the session's columns, a count), and the quiet
shapes (:mod:`specmon.ingest.quiet`) as one pass. It lives as long as its process: a worker
forked after :func:`specmon.ingest.feeding._learn_from_head` starts with what was learnt there.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from specmon.grammar.common import _day_start
from specmon.grammar.kinds import LineKind, Template, learn
from specmon.grammar.prefix import stamp_value
from specmon.ingest.quiet import _ATOMS, _quiet_lines, _Shapes, _skeleton, _trie
from specmon.ingest.scan import (
    AS_BYTES,
    AS_DAY,
    AS_FLOAT,
    AS_FLOATS_C,
    AS_FLOATS_CS,
    AS_FRAC,
    AS_HMS,
    AS_INT,
    AS_STR,
    CONVERTERS,
    PACKABLE,
    PACKED,
    Pass,
    RePass,
    Unsupported,
    compile_pass,
)
from specmon.parsing import LineParser

#: Templates kept per line kind (a log prints few shapes; bulk.MAX_LEARN: samples tried per piece).
MAX_TEMPLATES = 16
#: Shapes of lines that give nothing kept per process (each one a regex alternative).
MAX_QUIET = 48

# What a template-read line becomes in the piece's text while the rest is sorted out:
# a token no line of a real log is (checked: a piece whose count disagrees is redone).
_TOKEN = b"\x00\x01\x02"  # the last byte says the line kind


class _Cache(dict[bytes, Any]):
    """A memo of one conversion (days, times of day, fractions: few distinct values)."""

    def __init__(self, fn: Callable[[bytes], Any]) -> None:
        super().__init__()
        self.fn = fn

    def __missing__(self, key: bytes) -> Any:
        value = self[key] = self.fn(key)
        return value


class _Learner:
    """The templates of one process, learned from the lines the line parser reads."""

    def __init__(self) -> None:
        self.templates: dict[str, list[Template]] = {}
        #: The line each template was learned from (the C pass is checked against re on them).
        self.samples: dict[str, list[bytes]] = {}
        self.refused: dict[str, set[bytes]] = {}
        self._regex: dict[str, Pass | None] = {}
        #: Per ``kind/mode``: what each group's column holds (``scan``'s ``kinds`` and ``convs``).
        self.kinds: dict[str, bytes] = {}
        self.convs: dict[str, tuple[Any, ...]] = {}
        #: Per ``kind/mode``: each template with the index of its first group and its group numbers.
        self.layouts: dict[str, list[tuple[Template, int, dict[str, int]]]] = {}
        #: Shapes of lines the line parser gives nothing for, whatever their digits (see _quiet_source).
        self.quiet: list[bytes] = []
        #: Each kept shape's atoms, skeleton and whether the atoms are the whole shape: a shape is
        #: parsed once, not again at every shape learned (a llama.cpp log at -lv 4 turned the whole
        #: list over: 60% of its reading).
        self._quiet_atoms: dict[bytes, tuple[list[bytes], bytes, bool]] = {}
        #: Their pass, without a group: it only counts (a bytes object per line was 40% of it on
        #: llama.cpp's progress lines); the texts are made when needed (see _QuietTexts).
        self.quiet_rx: Pass | None = None

    def regex(self, kind: LineKind, mode: str = "records") -> Pass | None:
        """The alternation of a kind's templates, as a pass that splits a piece (``re.split``).

        ``mode``: ``records`` (every value, one outer group per template), ``columns`` (only
        what the session takes: fewer groups, a faster pass; the first group of each
        template tells which matched) or ``count`` (no group at all).
        """
        key = f"{kind.name}/{mode}"
        if key not in self._regex:
            tpls = self.templates.get(kind.name, [])
            if not tpls:
                self._regex[key] = None
            elif mode == "records":
                self._regex[key] = self._pass(kind, [b"(" + t.source + b")" for t in tpls])
                self.kinds[key] = bytes(sum(1 + t.ngroups for t in tpls))
                self.convs[key] = (None,) * len(self.kinds[key])
            else:
                roles = _column_roles(kind) if mode == "columns" else frozenset()
                layout = []
                base = 0
                sources = []
                kinds = bytearray()
                for t in tpls:
                    src, groups = t.lean(roles)
                    layout.append((t, base, groups))
                    base += len(groups)
                    sources.append(src)
                    # Plain numbers are converted by the pass (in C, without a bytes object each).
                    by_group = {i: _as(t, r) for r, i in groups.items()}
                    kinds += bytes(by_group[i] for i in range(1, len(groups) + 1))
                self.layouts[key] = layout
                self.convs[key] = tuple(CONVERTERS.get(k) for k in kinds)
                # Numbers packed as they are read: no float object per value (see _columns).
                self.kinds[key] = bytes(k | PACKED if k in PACKABLE else k for k in kinds)
                self._regex[key] = self._pass(kind, sources)
        return self._regex[key]

    def _pass(self, kind: LineKind, sources: list[bytes]) -> Pass:
        """The C pass of these template regexes where it runs them, else ``re``'s.

        The C pass is kept only if it reads the templates' own sample lines as ``re`` does.
        """
        rx = RePass(sources)
        try:
            fast = compile_pass(sources)
        except Unsupported:
            return rx
        probe = b"\n" + b"\n".join(self.samples.get(kind.name, [])) + b"\n"
        raw = bytes(rx.groups), (None,) * rx.groups  # the groups' texts, unconverted
        return fast if fast.scan(probe, _TOKEN, *raw) == rx.scan(probe, _TOKEN, *raw) else rx

    def add(self, tpl: Template, sample: bytes = b"") -> None:
        tpls = self.templates.setdefault(tpl.kind.name, [])
        samples = self.samples.setdefault(tpl.kind.name, [])
        if len(tpls) >= MAX_TEMPLATES:
            tpls.pop(0)
            samples.pop(0)
        tpls.append(tpl)
        samples.append(sample)
        for mode in ("records", "columns", "count"):
            self._regex.pop(f"{tpl.kind.name}/{mode}", None)

    def add_quiet(self, source: bytes) -> None:
        if source in self._quiet_atoms:
            return
        if len(self.quiet) >= MAX_QUIET:
            self._quiet_atoms.pop(self.quiet.pop(0), None)
        self.quiet.append(source)
        atoms = _ATOMS.findall(source)
        self._quiet_atoms[source] = atoms, _skeleton(atoms), b"".join(atoms) == source
        # One trie of the shapes: a shared start (a wrapper, a prefix) is matched once per line.
        seqs = [self._quiet_atoms[q][0] for q in self.quiet]
        whole = all(self._quiet_atoms[q][2] for q in self.quiet)  # each shape split into atoms whole
        if whole and _quiet_lines is not None:
            self.quiet_rx = _Shapes([self._quiet_atoms[q][1] for q in self.quiet])
            return
        body = _trie(seqs) if whole else b"|".join(self.quiet)
        sources = [b"(?:" + body + b")"]
        try:
            self.quiet_rx = compile_pass(sources)
        except Unsupported:
            self.quiet_rx = RePass(sources)


_LEARNER = _Learner()
# Memos of the prefix arithmetic (few distinct days, at most 86,400 times of day, 1,000 ms).
_MD_DAYS: dict[int, _Cache] = {}


def _md_days(year: int) -> _Cache:
    memo = _MD_DAYS.get(year)
    if memo is None:
        memo = _MD_DAYS[year] = _Cache(lambda b: _day_start(f"{year:04d}-{b.decode()}"))
    return memo


def _stamp_fn(year: int, day: float) -> Callable[[dict[str, str]], float | None]:
    def fn(t: dict[str, str]) -> float | None:
        return stamp_value(t.get("date"), t.get("md"), t["hms"], t.get("frac", ""), year, day)
    return fn


def _try_learn(kind: LineKind, raw: bytes, probe: LineParser, year: int) -> Template | None:
    """A template from one line the bulk path could not read, if its shape allows one."""
    refused = _LEARNER.refused.setdefault(kind.name, set())
    if raw in refused:
        return None
    text = raw.decode("utf-8", errors="replace")
    rec = probe.parse(text, 1)
    tpl = None
    if rec is not None and isinstance(rec, kind.record):
        message, outer_ts = probe._clean(text)
        tpl = learn(kind, text, message, outer_ts, rec, _stamp_fn(year, probe.day))
    if tpl is None:
        if len(refused) >= 4096:
            refused.clear()
        refused.add(raw)
        return None
    _LEARNER.add(tpl, raw)
    return tpl


#: What the pass makes of the prefix's parts (the converters the line parser's arithmetic uses).
_ROLE_AS = {"rank": AS_STR, "hms": AS_HMS, "date": AS_DAY, "frac": AS_FRAC}
#: Lists of floats the pass makes itself, by their separator.
_ITEMS_AS = {(float, b", "): AS_FLOATS_CS, (float, b","): AS_FLOATS_C}


def _as(t: Template, role: str) -> int:
    """What the pass makes of a role's text: a prefix part, a plain number, or bytes (other converters)."""
    if role in _ROLE_AS:
        return _ROLE_AS[role]
    conv = t.converters.get(role)
    items = getattr(conv, "items", None)
    if items is not None:
        return _ITEMS_AS.get(items, AS_BYTES)
    return AS_FLOAT if conv is float else AS_INT if conv is int else AS_BYTES


_TS_ROLES = ("rank", "date", "md", "hms", "frac")


def _column_roles(kind: LineKind) -> frozenset[str]:
    return frozenset((*_TS_ROLES, *(kind.columns or ())))
