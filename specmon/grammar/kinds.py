"""One grammar of a stats line, shared by the line parser and the bulk path.

A stats line is: outer wrappers (``docker logs -t`` / k8s stamps, Ray and process
tags, ANSI) → an optional prefix (a date/time in any of the real forms, rank tags)
→ the engine's marker → ``key: value`` fields, in any order, each key with its own
value pattern, unknown keys tolerated.

Each engine module (:mod:`specmon.engines`) declares its line kinds with these: the marker,
the fields with their value patterns and converters, and its line parser.
:class:`specmon.parsing.LineParser` dispatches on the registered markers; the bulk
path (:mod:`specmon.ingest.bulk`) learns, from a line the line parser has read,
a *template* — the same line with every value replaced by its field's value
pattern and every prefix number by a digit pattern — and applies it to whole
blocks of lines at C speed. A template is accepted only when reading the sample
through it gives exactly the line parser's record, so the two paths cannot drift:
a line that fits no template goes to the line parser.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from itertools import repeat
from operator import methodcaller, truediv
from typing import Any

from specmon.grammar.prefix import RANK_RUN
from specmon.records import Engine, ParsedRecord

#: Value patterns. Bounded digit runs: ``float`` of 400 digits is inf, which the
#: line parser rejects, so the bulk path must not read it either.
INT = r"\d{1,18}+"  # possessive: what follows a value is never a digit, and the pass is faster
FLOAT = r"\d{1,18}+(?:\.\d{1,18}+)?"
BOOL = r"True|False"
#: A value the line parser keeps without reading it. Narrow on purpose (word characters,
#: ``.%+-/``): it can hold no marker, no quote and no ", ", so a line it admits is
#: classified by the line parser exactly as by its template.
ANY = r"[\w.%+\-/]+"
#: An unknown field's value: ANY, or a number with one of the unit words engines print
#: (vLLM V0's ``Swapped: 0 reqs``) — a closed list, so no marker can form inside it.
UNKNOWN = ANY + r"(?: (?:reqs|tokens/s|tokens))?"


_TRAIL = re.compile(r"[\s,|]*$")


def split_trailing(body: str) -> tuple[str, str]:
    """A body without its trailing punctuation (``", "``, ``","``, ``" |"``, spaces), and that punctuation."""
    m = _TRAIL.search(body)
    at = m.start() if m is not None else len(body)
    return body[:at], body[at:]


def items_converter(item: Callable[[bytes], Any], sep: bytes) -> Callable[[bytes], Any]:
    """``b"0.8, 0.6"`` → ``(0.8, 0.6)``; with a ``column`` attribute doing a whole column in C."""

    def one(text: bytes) -> tuple[Any, ...]:
        return tuple(map(item, text.split(sep)))

    split = methodcaller("split", sep)
    one.column = lambda col: list(map(tuple, map(map, repeat(item), map(split, col))))  # type: ignore[attr-defined]
    one.items = (item, sep)  # type: ignore[attr-defined]  # what it is, for the bulk path's C pass
    return one


def scaled(base: Callable[[bytes], float], by: float) -> Callable[[bytes], float]:
    """``base(text) / by`` (a percentage as a fraction); with a ``column`` attribute doing a column in C."""

    def one(text: bytes) -> float:
        return base(text) / by

    one.column = lambda col: list(map(truediv, map(base, col), repeat(by)))  # type: ignore[attr-defined]
    return one


def to_bool_bytes(text: bytes) -> bool:
    """``b"True"`` → True (the pattern admits only True/False)."""
    return text == b"True"


@dataclass(frozen=True)
class FieldSpec:
    """One field a line kind reads.

    Attributes:
        attr: the record attribute it fills.
        keys: the keys that carry it, the first present winning.
        pattern: the regex a value must match to be read by the bulk path; every
            text it matches the line parser reads to the same value.
        convert: text (bytes) → value, for the bulk path.
    """

    attr: str
    keys: tuple[str, ...]
    pattern: str
    convert: Callable[[bytes], Any]
    #: Text printed after the value (``" tokens/s"``, ``"%"``), each with the converter of a
    #: value printed with it (``"%"`` → a fraction). Empty: the value is the pattern alone.
    units: tuple[tuple[str, Callable[[bytes], Any]], ...] = ()
    #: The value is a ``", "``-separated list of items of ``pattern`` (vLLM's per-position rates).
    items: bool = False
    #: Further keys that carry it, as a regex a whole key must match (SGLang's ``<device> graph``
    #: for devices not yet listed in ``keys``); ``keys`` win, then the first such key in the line.
    key_pattern: str | None = None

    def takes(self, key: str) -> bool:
        """Whether ``key`` carries this field (one of ``keys``, or matching ``key_pattern``)."""
        return key in self.keys or (self.key_pattern is not None and re.fullmatch(self.key_pattern, key) is not None)


@dataclass(frozen=True)
class LineKind:
    """A registered kind of stats line.

    Attributes:
        name: ``"sglang.decode"``.
        engine: the engine that prints it.
        marker: the substring that announces it (searched anywhere in the line).
        parse: the line parser: ``(message, line, ts, rank) -> record``.
        record: the record class a well-formed line gives.
        fields: the fields read, with their value patterns.
        body: the offset in the message where the ``key: value`` fields begin.
        gate: an extra cheap test on the raw line (None: the marker alone).
        columns: the attributes the session takes in bulk (None: records only).
        lead: variants of the text right before the marker that carry values
            (vLLM's ``Engine 000: ``), as regexes whose named groups are attributes.
        shapes: for a body that is not ``key: value`` fields (llama.cpp), variants of the
            whole text from the marker on, as regexes whose named groups are attributes.
        strip_end: characters the line parser drops from the end of the body besides
            spaces, commas and ``|`` (vLLM drops a final ``.``).
        vetoes: texts whose presence stops the line parser from reading a line as this
            kind (its ``gate`` fails whatever else the line holds).
        requires: attributes a template must read (the line parser computes them from
            other values when absent, so a shape without them reads differently per line).
    """

    name: str
    engine: Engine
    marker: str
    parse: Callable[[str, int, float | None, str | None], ParsedRecord | None]
    record: type
    fields: tuple[FieldSpec, ...] = ()
    body: Callable[[str], int] | None = None
    gate: Callable[[str], bool] | None = None
    columns: tuple[str, ...] | None = None
    lead: tuple[str, ...] = ()
    shapes: tuple[str, ...] = ()
    strip_end: str = ""
    vetoes: tuple[str, ...] = ()
    requires: tuple[str, ...] = ()
    by_key: dict[str, FieldSpec] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for spec in self.fields:
            for k in spec.keys:
                self.by_key.setdefault(k, spec)

    def spec_for(self, key: str) -> FieldSpec | None:
        """The field a key carries: a listed key, else the first field whose key pattern it matches."""
        spec = self.by_key.get(key)
        if spec is None:
            spec = next((f for f in self.fields if f.key_pattern is not None and f.takes(key)), None)
        return spec


# -- templates ------------------------------------------------------------------------------

_TOKEN = re.compile(
    r"(?P<ansi>\x1b\[[0-9;]*[A-Za-z]|\x1b|(?<![\w\]])\[[0-9;]{1,8}m)"
    r"|(?P<ts>(?:(?P<date>\d{4}-\d{2}-\d{2})(?P<dsep>[ T])|(?<![\d\-:.])(?P<md>\d{2}-\d{2}) )?"
    r"(?P<hms>\d{2}:\d{2}:\d{2})(?P<frac>[.,]\d{1,9})?(?!\d)(?P<z>Z?))"
    r"|(?P<rank>" + RANK_RUN + r")"
    r"|(?P<digits>\d+)"
    r"|(?P<ch>.)",
    re.S,
)


def _digits_general(text: str) -> str:
    return re.sub(r"\\?\d+", lambda m: r"\d+" if m.group()[0] != "\\" else m.group(), re.escape(text))


@dataclass
class Template:
    """A learned line shape: a bytes regex with the groups that carry values.

    ``groups`` maps a role (``date``, ``md``, ``hms``, ``frac``, ``rank``, or a
    record attribute) to its 1-based group number inside :attr:`source`.
    """

    kind: LineKind
    source: bytes
    groups: dict[str, int]
    ngroups: int
    converters: dict[str, Callable[[bytes], Any]]

    def lean(self, roles: frozenset[str]) -> tuple[bytes, dict[str, int]]:
        """The same regex capturing only ``roles`` (fewer groups: a faster pass), and their new numbers."""
        keep = {i for r, i in self.groups.items() if r in roles}
        out = bytearray()
        number = kept = 0
        new: dict[int, int] = {}
        src = self.source
        i = 0
        in_class = False
        while i < len(src):
            c = src[i:i + 1]
            if c == b"\\":
                out += src[i:i + 2]
                i += 2
                continue
            if in_class:
                in_class = c != b"]"
            elif c == b"[":
                in_class = True
            elif c == b"(" and src[i + 1:i + 2] != b"?":
                number += 1
                if number in keep:
                    kept += 1
                    new[number] = kept
                else:
                    c = b"(?:"
            out += c
            i += 1
        return bytes(out), {r: new[i] for r, i in self.groups.items() if i in new}


def _ts_piece(m: re.Match[str], capture: bool, groups: dict[str, int], counter: list[int]) -> str:
    """The regex of a timestamp token shaped like the sample's, capturing its parts if asked."""

    def grp(role: str, pattern: str) -> str:
        if not capture:
            return f"(?:{pattern})"
        counter[0] += 1
        groups[role] = counter[0]
        return f"({pattern})"

    out = ""
    if m.group("date"):
        out += grp("date", r"\d{4}-\d{2}-\d{2}") + re.escape(m.group("dsep"))
    elif m.group("md"):
        out += grp("md", r"\d{2}-\d{2}") + " "
    out += grp("hms", r"\d{2}:\d{2}:\d{2}")
    if m.group("frac"):
        out += grp("frac", "(?:" + re.escape(m.group("frac")[0]) + r"\d{1,9})?")
    out += r"(?!\d)" + re.escape(m.group("z"))
    return out


_NAMED = re.compile(r"\(\?P<(\w+)>")
_BOUNDED = re.compile(r"\\d\{1,\d+\}")


def _numbered(regex: str, groups: dict[str, int], counter: list[int]) -> str:
    """A variant regex with its named groups made numbered ones (their numbers noted in ``groups``)."""

    def sub(m: re.Match[str]) -> str:
        counter[0] += 1
        groups[m.group(1)] = counter[0]
        return "("

    return _NAMED.sub(sub, regex)


def _lead(kind: LineKind, message: str, at: int) -> tuple[str | None, int] | None:
    """The lead variant right before the marker and its length; None when the shape cannot have a template.

    The line parser searches its lead in the 40 characters before the marker; a lead's
    words elsewhere there (or with more digits than a variant admits) could read
    differently on another line of the same shape, so such samples get no template.
    """
    window = message[max(0, at - 40):at]
    for variant in kind.lead:
        m = re.search(f"(?:{variant})$", window)
        if m is not None:
            before = message[: at - len(m.group())]
            if before[-1:].isdigit():
                return None
            return variant, len(m.group())
    for variant in kind.lead:
        if re.search(_NAMED.sub("(?:", _BOUNDED.sub(r"\\d+", variant)), message[:at]):
            return None
    return None, 0


def _value_piece(spec: FieldSpec, value: str) -> tuple[str, Callable[[bytes], Any]] | None:
    """The regex of one field's value as printed (with its unit), and the converter of what it captures."""
    if spec.items:
        item = f"(?:{spec.pattern})"
        if re.fullmatch(f"{item}(?:, {item})*", value) is None:
            return None
        return f"({item}(?:, {item})*)", items_converter(spec.convert, b", ")
    if not spec.units:
        return f"({spec.pattern})", spec.convert
    m = re.match(f"(?:{spec.pattern})", value)
    if m is None:
        return None
    unit = value[m.end():]
    for u, conv in spec.units:
        if unit.rstrip(".") == u:
            return f"({spec.pattern})" + re.escape(unit), conv
    return None


def learn(kind: LineKind, raw: str, message: str, outer_ts: float | None, rec: ParsedRecord,
          prefix_ts: Callable[[dict[str, str]], float | None]) -> Template | None:
    """A template for lines shaped like ``raw``, or None when this shape cannot have one.

    Args:
        raw: the sample line as read from the file (ANSI and wrappers included).
        message: the line parser's cleaned line (wrappers stripped).
        outer_ts: the wrapper's timestamp the line parser found.
        rec: the record the line parser made of it (the template must reproduce it).
        prefix_ts: the timestamp of captured date/md/hms/frac texts (the line
            parser's own arithmetic, with its year).
    """
    if kind.body is None or not kind.fields or "\n" in raw or ' - "' in raw:
        return None
    at_raw = raw.find(kind.marker)
    at_msg = message.find(kind.marker)
    if at_raw < 0 or at_msg < 0:
        return None
    groups: dict[str, int] = {}
    counter = [0]
    lead = _lead(kind, message, at_msg) if kind.lead else (None, 0)
    if lead is None:
        return None
    lead_variant, lead_len = lead
    if lead_len and message[at_msg - lead_len:at_msg] != raw[at_raw - lead_len:at_raw]:
        return None
    # Which timestamp token is the record's: the first in the inner prefix, else the wrapper's.
    tokens = list(_TOKEN.finditer(raw, 0, at_raw - lead_len))
    ts_tokens = [t for t in tokens if t.lastgroup == "ts"]
    inner_ts = sum(1 for t in _TOKEN.finditer(message, 0, at_msg - lead_len) if t.lastgroup == "ts")
    chosen: int | None = None
    if inner_ts:
        chosen = len(ts_tokens) - inner_ts
    elif outer_ts is not None and ts_tokens:
        chosen = 0
    parts: list[str] = []
    rank_done = False
    ts_seen = -1
    for t in tokens:
        kind_ = t.lastgroup
        text = t.group()
        if kind_ == "ts":
            ts_seen += 1
            parts.append(_ts_piece(t, ts_seen == chosen, groups, counter))
        elif kind_ == "rank":
            # The rank is the first run after the record's timestamp (or anywhere, without one).
            if not rank_done and (chosen is None or ts_seen >= chosen):
                rank_done = True
                counter[0] += 1
                groups["rank"] = counter[0]
                parts.append("(" + _digits_general(text) + ")")
            else:
                parts.append(_digits_general(text))
        elif kind_ == "digits":
            parts.append(r"\d+")
        else:
            parts.append(re.escape(text))
    if lead_variant is not None:
        parts.append(_numbered(lead_variant, groups, counter))
    if raw[at_raw:] != message[at_msg:]:
        return None  # ANSI inside the message part: leave such lines to the line parser
    converters: dict[str, Callable[[bytes], Any]] = {}
    if kind.shapes:
        # A body of fixed words (llama.cpp): the first variant that reads it, then what follows, as is.
        for variant in kind.shapes:
            m = re.compile(variant).match(message, at_msg)
            if m is not None:
                parts.append(_numbered(variant, groups, counter))
                parts.append(re.escape(message[m.end():]))
                break
        else:
            return None
    else:
        # The marker, what sits between it and the fields (".", ",", " [12],"), then the fields.
        start = kind.body(message)
        if start < at_msg + len(kind.marker):
            if start != at_msg:
                return None
        else:
            parts.append(re.escape(kind.marker))
            parts.append(_digits_general(message[at_msg + len(kind.marker):start]))
        body, trail = split_trailing(message[start:])
        j = len(body)
        while j and body[j - 1] in kind.strip_end:
            j -= 1
        body, trail = body[:j], body[j:] + trail
        segs = body.split(", ")
        while segs and not segs[-1].strip():
            segs.pop()  # a trailing ", " (0.5.x): no field
        # Items of a list value (", "-separated) stay with their key.
        fields: list[list[str]] = []
        for seg in segs:
            key, sep, value = seg.partition(": ")
            prev = kind.by_key.get(fields[-1][0].strip()) if fields else None
            if not sep and prev is not None and prev.items:
                fields[-1][1] += ", " + seg
                continue
            if not sep or not value.strip():
                return None  # damaged or cut: such lines stay with the line parser
            fields.append([key, value])
        seg_parts: list[str] = []
        seen_attr: dict[str, tuple[int, Callable[[bytes], Any]]] = {}
        for key, value in fields:
            spec = kind.spec_for(key.strip())
            lead_ws = value[: len(value) - len(value.lstrip())]
            tail = value[len(value.rstrip()):]
            if spec is None:
                pattern = f"(?:{UNKNOWN})"
            else:
                piece = _value_piece(spec, value.strip())
                if piece is None:
                    return None
                counter[0] += 1
                seen_attr[key.strip()] = (counter[0], piece[1])
                pattern = piece[0]
            seg_parts.append(re.escape(key + ": " + lead_ws) + pattern + re.escape(tail))
        parts.append(re.escape(", ").join(seg_parts))
        printed = ", ".join(k + ": " + v for k, v in fields)
        parts.append(re.escape(body[len(printed):] + trail))  # trailing punctuation, as printed
        for spec in kind.fields:
            # Listed keys in their order, then keys matching the pattern in line order: the line
            # parser's rule for which key wins.
            order = [*spec.keys, *(k for k in seen_attr if k not in spec.keys and spec.takes(k))]
            for k in order:
                if k in seen_attr:
                    groups[spec.attr], converters[spec.attr] = seen_attr[k]
                    break
    for spec in kind.fields:
        if spec.attr in groups and spec.attr not in converters:
            converters[spec.attr] = spec.convert  # a lead's or a fixed body's value
    if any(a not in groups for a in kind.requires):
        return None
    src = "".join(parts).encode("utf-8")
    tpl = Template(kind, src, groups, counter[0], converters)
    # The proof: the sample read through the template is the line parser's record.
    m2 = re.fullmatch(src, raw.encode("utf-8"))
    if m2 is None:
        return None
    values = read(tpl, m2.groups(), prefix_ts)
    for attr in ("timestamp", "rank", *(s.attr for s in kind.fields)):
        if values.get(attr) != getattr(rec, attr, None):
            return None
    return tpl


def read(tpl: Template, g: tuple[Any, ...], prefix_ts: Callable[[dict[str, str]], float | None]) -> dict[str, Any]:
    """Every value of one matched line (groups numbered from 1 within the template)."""
    out: dict[str, Any] = {}
    texts = {r: (g[i - 1] or b"").decode() for r, i in tpl.groups.items() if r in ("date", "md", "hms", "frac")}
    out["timestamp"] = prefix_ts(texts) if texts else None
    ri = tpl.groups.get("rank")
    out["rank"] = g[ri - 1].decode() if ri else None
    for spec in tpl.kind.fields:
        i = tpl.groups.get(spec.attr)
        out[spec.attr] = tpl.converters[spec.attr](g[i - 1]) if i else None
    return out
