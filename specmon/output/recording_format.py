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
:mod:`~specmon.output.recording_replay`) take the header's name and version, and a record entry's
reading, from here: one place to change when the format changes.
"""

from __future__ import annotations

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


class RecordingError(Exception):
    """A file that is not a readable recording; the message says why."""


_KINDS: dict[str, type[ParsedRecord]] = {c.kind: c for c in (Decode, Prefill, EngineStats, Spec, Lifecycle, Config, Unparsed)}


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

