"""A big recording is read in spans by one process per core: the report is the one reading it
whole in one process gives, whatever the spans cut (a source's first lines, a block, a
traceback), however the sources begin (declared, re-declared with another year, never declared)
and whatever their engines."""

from __future__ import annotations

import json
import multiprocessing as mp
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.output import recording_replay as recmod
from specmon.output.report import load_report
from specmon.output.tables import to_json
from specmon.recording_format import FORMAT, VERSION, RecordingError

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "data" / "real_logs"


def _pool(name: str) -> list[str]:
    return (REAL / name).read_text(encoding="utf-8", errors="replace").splitlines()


#: Line pools by engine (a recording's sources are of one engine: the session's engine is the
#: majority of its lines', and where two engines' lines tie the bulk path, like summarize's, may
#: warm up another number of samples than the line path): simulated SGLang and real excerpts,
#: vLLM's stamps without a year.
FAMILIES = [
    [(ROOT / "sample_logs" / "sim_eagle3_2step.log").read_text().splitlines()[:400],
     _pool("sglang_eagle3_accept_rate_1.log"), _pool("sglang_dp_traceback_caret_1.log"),
     _pool("sglang_cuda_graph_toggle_2025_11.log")],
    [_pool(p.name) for p in sorted(REAL.glob("vllm_*.log"))],
    [_pool(p.name) for p in sorted(REAL.glob("llamacpp_*.log"))],
]


def _entry(**fields: object) -> bytes:
    return json.dumps(fields, separators=(",", ":")).encode() + b"\n"


@st.composite
def recordings(draw: st.DrawFn) -> bytes:
    """A recording: sources begun (or not) in any order, their lines interleaved, other entries."""
    out = [_entry(type="meta", event="start", format=FORMAT, version=VERSION, warmup=None, t=1.0)]
    numbers: dict[str, int] = {}
    pools = draw(st.sampled_from(FAMILIES))
    for _ in range(draw(st.integers(1, 12))):
        name = draw(st.sampled_from(["a.log", "b.log", "c.log"]))
        what = draw(st.sampled_from(["source", "lines", "lines", "lines", "other"]))
        if what == "source":
            out.append(_entry(type="meta", event="source", source=name, baseline=draw(st.booleans()),
                              year=draw(st.sampled_from([2024, 2025, 2026, None])), t=2.0))
        elif what == "other":
            out.append(draw(st.sampled_from([
                _entry(type="verdict", verdict={"sentence": "x"}, t=3.0),
                _entry(type="record", src=name, run=1, rec={"kind": "decode"}, t=3.0),
                _entry(type="restart", steps=2, phase="started", t=3.0)])))
        else:
            pool = draw(st.sampled_from(pools))
            start = draw(st.integers(0, len(pool) - 1))
            for text in pool[start:start + draw(st.integers(1, 300))]:
                numbers[name] = numbers.get(name, 0) + 1
                out.append(_entry(type="line", src=name, n=numbers[name], text=text, t=4.0 + numbers[name] / 8))
    return b"".join(out)


def _report(path: Path) -> tuple[object, ...]:
    try:
        data = load_report(path)
    except RecordingError as exc:  # (a cut into the header: both readings must refuse it alike)
        return ("refused", str(exc))
    return (to_json(data.session, data.analysis), data.session.lines, dict(data.session.counts),
            data.session.engine, [e.text for e in data.session.events],
            np.asarray(data.series.t).tolist(), np.asarray(data.series.tps).tolist(),
            np.asarray(data.series.run).tolist(),
            (data.read.entries, data.read.bad_lines, data.read.truncated_tail))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(body=recordings(), span=st.integers(1, 40_000), block=st.sampled_from([1, 7, 64, 8192]),
       cut=st.integers(0, 60))
def test_spans_read_apart_give_the_report_of_one_reading(tmp_path_factory: pytest.TempPathFactory,
                                                        monkeypatch: pytest.MonkeyPatch,
                                                        body: bytes, span: int, block: int, cut: int) -> None:
    path = tmp_path_factory.mktemp("spans") / "rec.jsonl"
    path.write_bytes(body[:len(body) - cut])  # (and a truncated last line, mostly)
    monkeypatch.setattr(recmod, "REPLAY_BLOCK", block)
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 1 << 60)
    whole = _report(path)
    monkeypatch.setattr(recmod, "PIPELINE_MIN_BYTES", 0)
    monkeypatch.setattr(recmod, "READ_SPAN", span)
    monkeypatch.setattr(recmod.os, "cpu_count", lambda: 3)  # (the pool, even on one core)
    assert _report(path) == whole
    assert not mp.active_children()
