"""One grammar of a stats line, shared by the line parser and the bulk path.

A stats line is: outer wrappers (``docker logs -t`` / k8s stamps, Ray and process
tags, ANSI) → an optional prefix (a date/time in any of the real forms, rank tags)
→ the engine's marker → ``key: value`` fields, in any order, each key with its own
value pattern, unknown keys tolerated.

Each engine module registers its line kinds here (:func:`register`): the marker,
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
from typing import Any

from specmon.parsing.prefix import RANK_RUN
from specmon.records import Engine, ParsedRecord

#: Value patterns. Bounded digit runs: ``float`` of 400 digits is inf, which the
#: line parser rejects, so the bulk path must not read it either.
INT = r"\d{1,18}"
FLOAT = r"\d{1,18}(?:\.\d{1,18})?"
BOOL = r"True|False"
#: A value the line parser keeps without reading it. Narrow on purpose (word characters,
#: ``.%+-/``): it can hold no marker, no quote and no ", ", so a line it admits is
#: classified by the line parser exactly as by its template.
ANY = r"[\w.%+\-/]+"


_TRAIL = re.compile(r"[\s,|]*$")


def split_trailing(body: str) -> tuple[str, str]:
    """A body without its trailing punctuation (``", "``, ``","``, ``" |"``, spaces), and that punctuation."""
    m = _TRAIL.search(body)
    at = m.start() if m is not None else len(body)
    return body[:at], body[at:]


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
    by_key: dict[str, FieldSpec] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        for spec in self.fields:
            for k in spec.keys:
                self.by_key.setdefault(k, spec)


#: The registered kinds, in the order the line parser tests their markers.
KINDS: list[LineKind] = []


def register(kind: LineKind) -> LineKind:
    """Add a line kind (engine modules call this at import)."""
    KINDS.append(kind)
    return kind


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
    if kind.body is None or not kind.fields or "\n" in raw:
        return None
    at_raw = raw.find(kind.marker)
    at_msg = message.find(kind.marker)
    if at_raw < 0 or at_msg < 0:
        return None
    groups: dict[str, int] = {}
    counter = [0]
    # Which timestamp token is the record's: the first in the inner prefix, else the wrapper's.
    tokens = list(_TOKEN.finditer(raw, 0, at_raw))
    ts_tokens = [t for t in tokens if t.lastgroup == "ts"]
    inner_ts = sum(1 for t in _TOKEN.finditer(message, 0, at_msg) if t.lastgroup == "ts")
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
    # The marker, what sits between it and the fields (".", ",", " [12],"), then the fields.
    start = kind.body(message)
    if start < at_msg:
        return None
    parts.append(re.escape(kind.marker))
    parts.append(_digits_general(message[at_msg + len(kind.marker):start]))
    body, trail = split_trailing(message[start:])
    if raw[at_raw:] != message[at_msg:]:
        return None  # ANSI inside the message part: leave such lines to the line parser
    segs = body.split(", ")
    while segs and not segs[-1].strip():
        segs.pop()  # a trailing ", " (0.5.x): no field
    seg_parts: list[str] = []
    seen_attr: dict[str, int] = {}
    for seg in segs:
        key, sep, value = seg.partition(": ")
        if not sep or not value.strip():
            return None  # damaged or cut: such lines stay with the line parser
        spec = kind.by_key.get(key.strip())
        lead = value[: len(value) - len(value.lstrip())]
        tail = value[len(value.rstrip()):]
        if spec is None:
            pattern = f"(?:{ANY})"
        else:
            counter[0] += 1
            seen_attr[key.strip()] = counter[0]
            pattern = f"({spec.pattern})"
        seg_parts.append(re.escape(key + ": " + lead) + pattern + re.escape(tail))
    parts.append(re.escape(", ").join(seg_parts))
    parts.append(re.escape(body[len(", ".join(segs)):] + trail))  # trailing punctuation, as printed
    converters: dict[str, Callable[[bytes], Any]] = {}
    for spec in kind.fields:
        for k in spec.keys:
            if k in seen_attr:
                groups[spec.attr] = seen_attr[k]
                converters[spec.attr] = spec.convert
                break
    src = "".join(parts).encode("utf-8")
    tpl = Template(kind, src, groups, counter[0], converters)
    # The proof: the sample read through the template is the line parser's record.
    m = re.fullmatch(src, raw.encode("utf-8"))
    if m is None:
        return None
    values = read(tpl, m.groups(), prefix_ts)
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
        out[spec.attr] = spec.convert(g[i - 1]) if i else None
    return out
