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
"""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import datetime
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


_KINDS: dict[str, type[ParsedRecord]] = {c.kind: c for c in (Decode, Prefill, EngineStats, Spec, Lifecycle, Config, Unparsed)}


def line_text(raw: bytes) -> str | None:
    """The text of a ``line`` entry's raw bytes; None for another entry.

    Raises:
        ValueError: a line entry that is not JSON (damaged, or cut by a killed recorder).
    """
    if LINE_MARK not in raw:
        return None
    entry = json.loads(raw)
    if not isinstance(entry, dict) or entry.get("type") != "line":
        return None
    return str(entry.get("text", ""))


def source_entry(raw: bytes) -> dict[str, Any] | None:
    """The ``meta``/``source`` entry of raw bytes (an input of the recording begins), else None
    (another entry, or damaged bytes)."""
    if SOURCE_MARK not in raw:
        return None
    try:
        entry = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(entry, dict) or entry.get("type") != "meta" or entry.get("event") != "source":
        return None
    return entry


def record_from_json(data: dict[str, Any]) -> ParsedRecord:
    """Rebuild a record from its ``to_json()`` form (the inverse of :meth:`Record.to_json`).

    Raises:
        ValueError: an unknown kind or a malformed field.
    """
    cls = _KINDS.get(str(data.get("kind")))
    if cls is None:
        raise ValueError(f"unknown record kind {data.get('kind')!r}")
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

