"""The writer and the replay's line source share one format module: whatever a line's text holds
(quotes, the very bytes that mark an entry's type, control characters, non-ASCII), the replay
gives each input back its own lines, split where the writer began each input."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.ingest.live import recording_inputs
from specmon.output.recording import Recorder
from specmon.recording_format import LINE_HEAD, LINE_MARK, SOURCE_MARK, line_text, source_entry
from specmon.redact import redact_line
from specmon.sources.replay import ReplayClock

#: Texts that look like the format's own marks, besides any text at all.
_TRICKY = st.sampled_from([
    LINE_MARK.decode(), SOURCE_MARK.decode(), LINE_HEAD, '{"type":"meta","event":"source","source":"x"}',
    '"}\n{"type":"line"', "\\", '\\"', "\x00", "\u2028", "\ud800",
])
_TEXTS = st.lists(st.one_of(st.text(max_size=40), _TRICKY).map(lambda t: t.replace("\n", " ").replace("\r", " ")),
                  max_size=6)


async def _replayed(path: Path) -> list[tuple[str, list[str]]]:
    out = []
    for feed in recording_inputs(path, ReplayClock(None)):
        source = feed.source
        lines = [line async for batch in source.batches() for line in batch]
        out.append((str(getattr(source, "name", "")), lines))
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(inputs=st.lists(_TEXTS, min_size=1, max_size=4))
def test_each_input_gets_back_its_own_lines(tmp_path_factory, inputs: list[list[str]]) -> None:  # type: ignore[no-untyped-def]
    path = tmp_path_factory.mktemp("marks") / "session.jsonl"
    with Recorder(path) as recorder:
        for i, texts in enumerate(inputs):
            recorder.source(f"in{i}.log")
            for n, text in enumerate(texts, 1):
                recorder.line(f"in{i}.log", n, text)
    if not any(inputs):
        assert not path.exists()  # a session that saw no line leaves no file
        return
    got = asyncio.run(_replayed(path))
    # (a lone surrogate cannot be written in UTF-8: it is kept as "?", as str.encode replaces it)
    assert got == [(f"in{i}.log", [redact_line(t).encode("utf-8", "replace").decode() for t in texts])
                   for i, texts in enumerate(inputs)]


def test_the_marks_tell_entries_apart_without_decoding() -> None:
    line = (LINE_HEAD + '"a.log","n":1,"text":"\\"event\\":\\"source\\"","t":1.0}\n').encode()
    assert line_text(line) == '"event":"source"' and source_entry(line) is None
    source = b'{"type":"meta","event":"source","source":"b.log","t":2.0}\n'
    assert source_entry(source) == {"type": "meta", "event": "source", "source": "b.log", "t": 2.0}
    assert line_text(source) is None
    assert source_entry(b'{"type":"meta","event":"source"') is None  # cut by a killed recorder
