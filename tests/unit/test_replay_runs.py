"""The replay reads raw lines a run at a time: the same blocks, in the same order, as one entry at a time.

``report`` spent most of its time in a loop turn per recorded line; it now takes each
run of consecutive lines of one source within a read chunk with a comprehension per
field. Generated recordings (sources interleaved, source entries between lines, names
that are not strings, chunks and blocks small enough that runs cross both) must give
exactly the operations of the plain rule, written here one entry at a time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.output import recording_reader, recording_replay
from specmon.output.recording_reader import ReadStats
from specmon.recording_format import FORMAT, VERSION, entry_problem

HEADER = {"type": "meta", "event": "start", "format": FORMAT, "version": VERSION}

src_names = st.sampled_from(["a.log", "b.log", "", 7])  # 7: a name that is not a string: a damaged entry, skipped
line = st.builds(lambda src, text, t: {"type": "line", "src": src, "text": text, "t": t},
                 src_names, st.text(st.characters(codec="utf-8", exclude_characters="\n\r"), max_size=30),
                 st.one_of(st.none(), st.floats(0, 1e9)))
source = st.builds(lambda name, year: {"type": "meta", "event": "source", "source": name, "year": year},
                   st.sampled_from(["a.log", "b.log", ""]), st.one_of(st.none(), st.integers(2024, 2027)))
other = st.sampled_from([{"type": "verdict", "verdict": {"sentence": "x"}}, {"type": "restart", "steps": 2}])
entries = st.lists(st.one_of(line, line, line, source, other), max_size=80)


def plain_rule(entries: list[dict[str, Any]], block_size: int) -> list[tuple[Any, ...]]:
    """The operations by the rule, one entry at a time (no bulk parse)."""
    ops: list[tuple[Any, ...]] = []
    years: set[str] = set()
    seen: set[str] = set()
    block: list[dict[str, Any]] = []
    block_src: str | None = None

    def flush() -> None:
        if block and block_src is not None:
            ops.append(("block", block_src, [e["n"] for e in block], [e["text"] for e in block],
                        [e["t"] for e in block]))
        block.clear()

    for e in entries:
        if entry_problem(e) is not None:  # skipped and counted (issue 43)
            continue
        if e["type"] == "line":
            src = str(e["src"])
            if src != block_src or len(block) >= block_size:
                flush()
                block_src = src
                if src not in years:
                    years.add(src)
                    ops.append(("implicit", src))
                if src not in seen:
                    seen.add(src)
                    ops.append(("has_lines", src))
            block.append(e)
            continue
        flush()
        if e["type"] == "meta" and e.get("event") == "source":
            years.add(e["source"])
            seen.discard(e["source"])
            block_src = None
        ops.append(("entry", e))
    flush()
    return ops


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=entries, block_size=st.integers(1, 6), chunk=st.sampled_from([64, 300, 1 << 21]))
def test_runs_of_lines_give_the_blocks_of_the_plain_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         body: list[dict[str, Any]], block_size: int,
                                                         chunk: int) -> None:
    for n, e in enumerate(body, 1):
        if e["type"] == "line":
            e["n"] = n
    path = tmp_path / "rec.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in [HEADER, *body]), encoding="utf-8")
    monkeypatch.setattr(recording_replay, "REPLAY_BLOCK", block_size)
    monkeypatch.setattr(recording_reader, "_CHUNK_BYTES", chunk)
    got = []
    stats = ReadStats()
    for op in recording_replay._replay_ops(path, stats, bulk=False):
        if op[0] == "block":
            _, src, block, *_ = op
            got.append(("block", src, block.ns, block.texts, block.ts))
        elif op[0] in ("implicit", "has_lines", "entry"):
            got.append(op)
        elif op[0] == "stats":
            stats = op[1]
    assert got == plain_rule([HEADER, *body], block_size)
    assert stats.bad_lines == sum(entry_problem(e) is not None for e in body)
