"""The recording format: what a specmon recording holds, one JSON object per line.

Each entry has a ``type``:

==========  ==================================================================
``meta``    ``event: "start"`` first (format, version, command, warm-up), then
            ``"source"`` whenever a new input begins (name, baseline, year),
            ``"sweep"`` progress notes, and ``"end"`` at a clean close
``line``    a raw log line: receive time ``t``, source ``src``, number ``n``, ``text``
``record``  the parsed record of that line (``rec``: the ``specmon parse`` JSON), with ``run``
``run``     a run began (``event: "begin"``) or the recording closed (``"end"``, with its numbers)
``restart`` a restart the control layer ran (steps, commands shown, outcome)
``verdict`` a verdict (the ``summarize``/``sweep`` JSON)
==========  ==================================================================

The writer (:mod:`specmon.output.recording`) and every reader (:mod:`~specmon.output.recording_reader`,
:mod:`~specmon.output.recording_replay`, the replay's line source :mod:`specmon.sources.recorded`)
take the header's name and version, the bytes that mark an entry's type without decoding it,
and a record entry's reading, from here: one place to change when the format changes. It sits
below every layer that reads or writes recordings (it knows records, nothing else).

A recording is untrusted input (a file anyone may have edited, or a disk cut short): every
entry a reader keeps passes :func:`entry_problem` first, so that what the report and the replay
read of it has the type and the range the writer gives it. An entry that does not is skipped and
counted by the reader, never raised (:func:`checked_entries`; the usual raw lines in bulk).
"""

from __future__ import annotations

import json
import math
import types
import typing
from collections.abc import Callable
from dataclasses import fields
from datetime import datetime
from enum import Enum
from itertools import groupby
from operator import itemgetter
from typing import Any

from specmon.records import (
    Config,
    Decode,
    Engine,
    EngineStats,
    Event,
    Lifecycle,
    ParsedRecord,
    Prefill,
    Serving,
    Spec,
    Unparsed,
)

FORMAT = "specmon-recording"
VERSION = 1

# The writer writes compact JSON (no spaces after ``:`` or ``,``) with ``type`` first, so that a
# reader can tell an entry's type from its bytes before it decodes the line: quotes inside a
# recorded line's text are escaped (``\"``), so these bytes never come from a line's text.
#: How every ``line`` entry begins, up to its source's name.
LINE_HEAD = '{"type":"line","src":'
#: Bytes that only a ``line`` entry holds.
LINE_MARK = b'"type":"line"'
#: Bytes that only a ``meta`` entry starting an input (``event: "source"``) holds.
SOURCE_MARK = b'"event":"source"'


class RecordingError(Exception):
    """A file that is not a readable recording; the message says why."""


_KINDS: dict[str, type[ParsedRecord]] = {c.kind: c for c in (Decode, Prefill, EngineStats, Spec, Lifecycle, Config, Unparsed,
                                                               Serving)}


def line_text(raw: bytes) -> str | None:
    """The text of a ``line`` entry's raw bytes; None for another entry.

    Raises:
        ValueError: a line entry that is not JSON (damaged, or cut by a killed recorder), or
            whose fields are not a line's (:func:`entry_problem`).
    """
    if LINE_MARK not in raw:
        return None
    try:
        entry = json.loads(raw)
    except RecursionError:  # (nested past the decoder's depth: damage too)
        raise ValueError("nested too deep") from None
    if not isinstance(entry, dict) or entry.get("type") != "line":
        return None
    problem = entry_problem(entry)
    if problem is not None:
        raise ValueError(problem)
    return str(entry["text"])


def source_entry(raw: bytes) -> dict[str, Any] | None:
    """The ``meta``/``source`` entry of raw bytes (an input of the recording begins), else None
    (another entry, or damaged bytes)."""
    if SOURCE_MARK not in raw:
        return None
    try:
        entry = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("type") != "meta" or entry.get("event") != "source":
        return None
    return entry if entry_problem(entry) is None else None


def record_from_json(data: dict[str, Any]) -> ParsedRecord:
    """Rebuild a record from its ``to_json()`` form (the inverse of :meth:`Record.to_json`).

    Every field is checked first (:func:`record_problem`): a record read back has the types and
    ranges a parsed one has.

    Raises:
        ValueError: an unknown kind or a malformed field.
    """
    problem = record_problem(data)
    if problem is not None:
        raise ValueError(problem)
    cls = _KINDS[data["kind"]]
    kwargs: dict[str, Any] = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        value = data[f.name]
        if f.name == "timestamp" and value is not None:
            # to_json writes the naive log time read as UTC; read it back the same way.
            value = datetime.fromisoformat(value).replace(tzinfo=None)
            value = (value - datetime(1970, 1, 1)).total_seconds()
        elif f.name == "event":
            value = Event(value)
        elif f.name == "engine":
            value = Engine(value)
        elif f.name in ("per_position", "progress") and value is not None:
            value = tuple(value)
        kwargs[f.name] = value
    rec: ParsedRecord = cls(**kwargs)
    return rec



# --------------------------------------------------------------------------- checking entries

#: Deepest nesting kept in an entry (the writer's deepest, a sweep's verdict, is 6): a deeper one
#: is damage, and would make every recursive reader of it (rendering, ``json.dumps``) recurse as deep.
MAX_DEPTH = 32
#: The largest receive time (seconds since 1970, the year 5138): what a date can still show.
MAX_TIME = 1e11
#: The largest line number (what the C reader of raw lines takes: 18 digits).
MAX_LINE = 10**18 - 1
#: The largest integer kept anywhere in an entry (a signed 64-bit one: numpy, C and SQLite take it).
MAX_INT = 2**63 - 1
#: The largest number a record's field may hold (counts, rates and speeds are far below it).
MAX_VALUE = 1e15
#: The years a source's year-less stamps may be read in (``--year``'s range).
YEARS = range(1970, 3000)


def _sound(value: Any, depth: int = 0) -> bool:
    """Whether a decoded JSON value nests at most MAX_DEPTH deep, its floats are finite and its
    integers fit 64 bits (json reads NaN, Infinity, 1e999 and 4,000-digit integers)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return bool(-MAX_INT - 1 <= value <= MAX_INT)
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        return all(_sound(v, depth + 1) for v in value.values())
    if kind is list:
        return all(_sound(v, depth + 1) for v in value)
    return False


def _time_ok(t: Any) -> bool:
    """A receive time: None, or a number of seconds since 1970 a date can show."""
    return t is None or (type(t) in (int, float) and bool(0 <= t <= MAX_TIME))


def _count_ok(n: Any, top: int = MAX_INT) -> bool:
    return type(n) is int and 0 <= n <= top


def _meta_problem(entry: dict[str, Any]) -> str | None:
    event = entry.get("event")
    if type(event) is not str:
        return "a meta entry without an event"
    if event == "start":
        if entry.get("format") != FORMAT:
            return f"no '{FORMAT}' format"
        if not _count_ok(entry.get("version"), 10**6):
            return "its version is not a whole number"
        if not (entry.get("warmup") is None or _count_ok(entry["warmup"], 10**9)):
            return "its warm-up is not a count"
        if not (entry.get("command") is None or type(entry["command"]) is str):
            return "its command is not text"
    elif event == "source":
        if type(entry.get("source")) is not str:
            return "a source entry without a source name"
        if not (entry.get("baseline") is None or type(entry["baseline"]) is bool):
            return "a source entry whose baseline is not true or false"
        if not (entry.get("year") is None or (type(entry["year"]) is int and entry["year"] in YEARS)):
            return "a source entry whose year is not a year"
    elif event == "write-failed":
        if not (entry.get("error") is None or type(entry["error"]) is str):
            return "a write failure whose error is not text"
        if not (entry.get("lost") is None or _count_ok(entry["lost"])):
            return "a write failure whose lost entries are not a count"
    return None


def _line_problem(entry: dict[str, Any]) -> str | None:
    # (no ``src`` at all: a hand-made file's lines, one implicit source, as they always were)
    if type(entry.get("src", "")) is not str:
        return "a line entry whose source is not text"
    if not _count_ok(entry.get("n"), MAX_LINE):
        return "a line entry whose number is not a line number"
    if type(entry.get("text")) is not str:
        return "a line entry whose text is not text"
    return None


def _record_entry_problem(entry: dict[str, Any]) -> str | None:
    if type(entry.get("src")) is not str:
        return "a record entry whose source is not text"
    if not (entry.get("run") is None or _count_ok(entry["run"])):
        return "a record entry whose run is not a run number"
    rec = entry.get("rec")
    if type(rec) is not dict:
        return "a record entry without its record"
    return record_problem(rec)


def _restart_problem(entry: dict[str, Any]) -> str | None:
    if not (entry.get("phase") is None or type(entry["phase"]) is str):
        return "a restart whose phase is not text"
    steps = entry.get("steps")
    if not (steps is None or _count_ok(steps, 10**6)):
        return "a restart whose steps are not a count"
    return None


def _run_problem(entry: dict[str, Any]) -> str | None:
    if type(entry.get("event")) is not str or not _count_ok(entry.get("id")):
        return "a run entry without its event and run number"
    return None


#: Keys of a sweep's document (``SweepResult.to_json``, its verdicts and rows) that its readers
#: iterate or count, with the one type every writer gives them (a key name some writer uses for
#: two types is not here): ``"verdicts": true`` made the report's ``doc.get("verdicts") or ()``
#: raise (found by hypothesis). A missing key or null stays allowed.
_DOC_LISTS = frozenset({"verdicts", "runs", "checks", "needs_more", "schedules", "dimensions", "skipped"})
_DOC_DICTS = frozenset({"verdict", "plan", "rule", "answer"})
_DOC_COUNTS = frozenset({"samples", "errors", "best_steps", "runner_up_steps", "leader_steps"})


def _doc_problem(value: Any, depth: int = 0) -> str | None:
    """The first key of a verdict document holding another type than its writers give it, or None."""
    if depth > MAX_DEPTH:
        return "it nests too deep"
    items = value.items() if type(value) is dict else enumerate(value) if type(value) is list else ()
    for key, v in items:
        if v is None:
            continue
        if type(key) is str and ((key in _DOC_LISTS and type(v) is not list)
                                 or (key in _DOC_DICTS and type(v) is not dict)
                                 or (key in _DOC_COUNTS and not _count_ok(v))):
            return f"a verdict whose {key} is of the wrong type"
        if type(v) in (dict, list):
            problem = _doc_problem(v, depth + 1)
            if problem is not None:
                return problem
    return None


def _verdict_problem(entry: dict[str, Any]) -> str | None:
    doc = entry.get("verdict")
    return _doc_problem(doc) if type(doc) is dict else "a verdict entry without its verdict"


_ENTRY_CHECKS: dict[str, Callable[[dict[str, Any]], str | None]] = {
    "meta": _meta_problem, "line": _line_problem, "record": _record_entry_problem, "run": _run_problem,
    "restart": _restart_problem, "verdict": _verdict_problem,
}


def entry_problem(entry: Any) -> str | None:
    """Why a decoded entry is not one a reader may keep (a phrase), or None when it is.

    Checked: it is an object with a known ``type``; its ``t`` is None or a receive time a date
    can show; every field a reader reads has its type and range (a line's ``src``, ``n`` and
    ``text``, a source's name and year, a record's fields, ...); and, for entries other than
    raw lines (whose fields are all flat), it nests at most :data:`MAX_DEPTH` deep with finite
    numbers and 64-bit integers throughout.
    """
    if type(entry) is not dict:
        return "not a JSON object"
    kind = entry.get("type")
    check = _ENTRY_CHECKS.get(kind) if type(kind) is str else None  # (a list is not even hashable)
    if check is None:
        return "no known entry type"
    if not _time_ok(entry.get("t")):
        return "its time is not a time"
    problem = check(entry)
    if problem is None and kind not in _FLAT and not _sound(entry):
        problem = "it holds a number out of range or nests too deep"
    return problem


#: Entries whose every field a reader reads is checked by its kind's check (a record's ``rec``
#: field by field): no walk of the whole entry (they are the bulk of a recording).
_FLAT = frozenset({"line", "record"})


def checked_entries(items: list[Any]) -> tuple[list[dict[str, Any]], int]:
    """The entries of ``items`` a reader may keep (:func:`entry_problem`), and how many were not.

    A run of raw lines, the bulk of a recording, is checked a field at a time over the whole run
    (a few passes in C): 40 ns a line, where one entry at a time took 0.5 µs.
    """
    if len(items) == 1:  # (a record between two runs of raw lines read in C: the usual call)
        return (items, 0) if entry_problem(items[0]) is None else ([], 1)
    try:
        kinds = list(map(itemgetter("type"), items))
        if set(kinds) == {"line"}:
            sound = _lines_sound(items)
        else:  # (lines in bulk, the others one at a time)
            sound = (_lines_sound([e for e, k in zip(items, kinds, strict=True) if k == "line"])
                     and all(entry_problem(e) is None for e, k in zip(items, kinds, strict=True) if k != "line"))
        if sound:
            return items, 0
    except (KeyError, TypeError):  # (a missing field, a non-object: one at a time says which)
        pass
    kept = [e for e in items if entry_problem(e) is None]
    return kept, len(items) - len(kept)


_LINE_FIELDS = itemgetter("type", "src", "n", "text")


def _lines_sound(items: list[Any]) -> bool:
    """Whether every item is a raw line entry whose fields are all sound (see :func:`entry_problem`).

    Raises:
        KeyError, TypeError: an item that is not an object, or lacks a field.
    """
    if not items:
        return True
    kinds, srcs, ns, texts = zip(*map(_LINE_FIELDS, items), strict=True)
    if set(kinds) != {"line"} or set(map(type, srcs)) != {str} or set(map(type, texts)) != {str}:
        return False
    if set(map(type, ns)) != {int} or min(ns) < 0 or max(ns) > MAX_LINE:
        return False
    return times_sound([e.get("t") for e in items])


def times_sound(ts: list[Any]) -> bool:
    """Whether every receive time of a run of raw lines is None or a time a date can show.

    Runs of lines received together share their time (the C reader gives them one object):
    each distinct run of times is looked at once.
    """
    return all(map(_time_ok, map(itemgetter(0), groupby(ts))))


# What a record's fields may hold, made once per kind from its dataclass's annotations: whether
# None is allowed, and a simple kind ("int", "float", "str", "bool": tested inline, a call per
# field was most of the time) or a check.
_FieldCheck = Callable[[Any], bool]
_Spec = tuple[bool, "str | _FieldCheck"]


def _field_spec(hint: Any) -> _Spec:
    """The check of one annotated field (``float | None``, ``tuple[float, ...]``, an enum, ...)."""
    origin = typing.get_origin(hint)
    if origin in (types.UnionType, typing.Union):
        inner = [arg for arg in typing.get_args(hint) if arg is not type(None)]
        if len(inner) != 1:  # pragma: no cover - records.py changed
            raise TypeError(f"no check for a record field of type {hint!r}")
        return True, _field_spec(inner[0])[1]
    if origin is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            item = _field_spec(args[0])[1]
            return False, lambda v: type(v) is list and len(v) <= 4096 and all(_simple_ok(item, x) for x in v)
        items = [_field_spec(a)[1] for a in args]
        return False, lambda v: (type(v) is list and len(v) == len(items)
                                 and all(_simple_ok(c, x) for c, x in zip(items, v, strict=True)))
    if origin is dict:
        return False, lambda v: type(v) is dict and _sound(v)
    if isinstance(hint, type) and issubclass(hint, Enum):
        values = frozenset(m.value for m in hint)
        return False, lambda v: type(v) is str and v in values
    if hint in (bool, int, float, str):
        return False, hint.__name__
    raise TypeError(f"no check for a record field of type {hint!r}")  # pragma: no cover - records.py changed


def _simple_ok(code: str | _FieldCheck, v: Any) -> bool:
    """Whether ``v`` (not None) passes a field's check: counts, numbers and speeds are never
    negative, and below :data:`MAX_VALUE` (a NaN fails both comparisons)."""
    if code == "float":
        return (type(v) is float or type(v) is int) and bool(0 <= v <= MAX_VALUE)
    if code == "int":
        return type(v) is int and bool(0 <= v <= MAX_INT)
    if code == "str":
        return type(v) is str
    if code == "bool":
        return type(v) is bool
    assert callable(code)
    return code(v)


def _timestamp_ok(v: Any) -> bool:
    if v is None:
        return True
    if type(v) is not str or len(v) > 40:
        return False
    try:
        when = datetime.fromisoformat(v)
    except ValueError:
        return False
    return when.tzinfo is None and when.year in YEARS


def _record_checks(cls: type[ParsedRecord]) -> tuple[dict[str, _Spec], frozenset[str]]:
    hints = typing.get_type_hints(cls)
    checks = {f.name: (True, _timestamp_ok) if f.name == "timestamp" else _field_spec(hints[f.name])
              for f in fields(cls)}
    required = frozenset(f.name for f in fields(cls) if f.name in ("line", "timestamp", "rank"))
    return checks, required


_RECORD_CHECKS = {kind: _record_checks(cls) for kind, cls in _KINDS.items()}


def record_problem(data: Any) -> str | None:
    """Why a record's JSON form (``rec`` of a record entry) cannot be read back, or None."""
    if type(data) is not dict:
        return "a record that is not an object"
    kind = data.get("kind")
    found = _RECORD_CHECKS.get(kind) if type(kind) is str else None
    if found is None:
        return f"unknown record kind {kind!r}"[:80]
    checks, required = found
    missing = required - data.keys()
    if missing:
        return f"a {kind} record without its {', '.join(sorted(missing))}"
    for name, value in data.items():
        spec = checks.get(name)
        if spec is None or (value is None and spec[0]):
            continue
        code = spec[1]
        # (the usual kinds inline: a call per field was most of the time)
        if code == "float":
            ok = (type(value) is float or type(value) is int) and 0 <= value <= MAX_VALUE
        elif code == "int":
            ok = type(value) is int and 0 <= value <= MAX_INT
        elif code == "str":
            ok = type(value) is str
        else:
            ok = value is not None and _simple_ok(code, value)
        if not ok:
            return f"a {kind} record whose {name} is out of range or of the wrong type"
    return None
