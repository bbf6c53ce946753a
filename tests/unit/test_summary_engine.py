"""The engine a summary names, on every real log: per-line markers, the file's signature as tie-break.

The engine of a summary comes from the records (each stats line knows the engine whose
marker it carried: vLLM and llama.cpp both print spec metrics and throughput lines), the
majority of them deciding; the file's signature lines (``detect_engine``) decide only a
tie or a file without stats lines. TGI and TensorRT-LLM logs are not parsed and must not
be labelled as one of the three engines.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.cli import main
from specmon.ingest.files import ingest_file
from specmon.ingest.summarize import ingest_files
from specmon.model.session import Session
from specmon.parsing import LineParser, detect_engine, parse_lines
from specmon.parsing.detect import line_engine
from specmon.records import Engine, EngineStats, Spec
from tests.support.realdata import DATA, read_lines

ALL_FILES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.log"))
PREFIXES = {"sglang_": Engine.SGLANG, "vllm_": Engine.VLLM, "llamacpp_": Engine.LLAMACPP,
            "tgi_": Engine.UNKNOWN, "trtllm_": Engine.TRTLLM, "lmdeploy_": Engine("lmdeploy")}


def expected(name: str) -> Engine:
    """The engine the file's name says wrote it (the CPU-kit runs are vLLM's)."""
    if name.startswith("vllm_cpu_kit/"):
        return Engine.VLLM
    return next(e for p, e in PREFIXES.items() if name.startswith(p))


def test_every_prefix_is_covered() -> None:
    """The corpus holds files of each prefix, so the parametrised test below means something."""
    assert {next(p for p in PREFIXES if n.startswith(p) or n.startswith("vllm_cpu_kit/") and p == "vllm_")
            for n in ALL_FILES} == set(PREFIXES)


@pytest.mark.parametrize("name", ALL_FILES)
def test_summary_engine_on_every_real_log(name: str) -> None:
    """Bulk and line paths, the session's engine and every run's engine are the file's engine."""
    want = expected(name)
    assert detect_engine(read_lines(name)) is want
    fast = ingest_files([str(DATA / name)], jobs=1)
    slow = Session()
    ingest_file(slow, str(DATA / name))
    for session in (fast, slow):
        assert session.engine is want, session.engine_votes
        for run in session.runs:
            assert run.engine in (want, Engine.UNKNOWN)
            if run.config is not None:
                assert run.config.engine is want


@pytest.mark.parametrize("name", ["llamacpp_mtp_print_timing_multiline_1.log",
                                  "llamacpp_per_round_accepted_2025_12.log"])
def test_llamacpp_stats_records_carry_their_engine(name: str) -> None:
    """llama.cpp's eval and draft-acceptance lines are EngineStats / Spec records tagged llamacpp."""
    recs = [r for r in parse_lines(read_lines(name)) if isinstance(r, (Spec, EngineStats))]
    assert all(r.engine is Engine.LLAMACPP for r in recs)


def test_summarize_names_llamacpp(capsys: pytest.CaptureFixture[str]) -> None:
    """The reported case: this log was summarised as engine "vllm"."""
    path = str(DATA / "llamacpp_mtp_print_timing_multiline_1.log")
    assert main(["summarize", path, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["engine"] == "llamacpp"
    assert doc["runs"] and all(r["engine"] == "llamacpp" for r in doc["runs"])
    assert main(["summarize", path]) == 0
    assert "engine llamacpp" in capsys.readouterr().out


def _stats_lines(name: str) -> list[str]:
    parser = LineParser()
    return [ln for i, ln in enumerate(read_lines(name), 1)
            if isinstance(parser.parse(ln, i), (Spec, EngineStats))]


LLAMA = _stats_lines("llamacpp_mtp_print_timing_multiline_1.log")
VLLM = _stats_lines("vllm_v1_spec_full_accept_loop_1.log")


@settings(max_examples=60, deadline=None)
@given(llama=st.lists(st.sampled_from(LLAMA), min_size=1, max_size=12),
       vllm=st.lists(st.sampled_from(VLLM), max_size=12), data=st.data())
def test_majority_of_line_markers_decides(llama: list[str], vllm: list[str], data: st.DataObject) -> None:
    """Any mix of llama.cpp and vLLM stats lines: the engine with more stats records wins,
    whatever the order; a tie goes to the file's signature (the hint)."""
    lines = data.draw(st.permutations([*llama, *vllm]))
    hint = data.draw(st.sampled_from([Engine.UNKNOWN, Engine.VLLM, Engine.LLAMACPP]))
    session = Session()
    session.set_engine_hint(hint)
    for rec in parse_lines(lines):
        session.ingest(rec)
    n_llama = session.engine_votes[Engine.LLAMACPP]
    n_vllm = session.engine_votes[Engine.VLLM]
    assert n_llama + n_vllm == session.counts["spec"] + session.counts["engine_stats"]
    if n_llama != n_vllm:
        assert session.engine is (Engine.LLAMACPP if n_llama > n_vllm else Engine.VLLM)
    elif hint is not Engine.UNKNOWN:
        assert session.engine is hint


@pytest.mark.parametrize("line", [
    "2026-05-14 22:40:29.046 | draft acceptance rate = 0.98260 ( 1186 accepted /  1207 generated)",
    "slot print_timing: id  3 | task 0 | eval time = 30387.12 ms /  2048 tokens",
    "srv  update_slots: all slots are idle (vLLM-compatible API)",
])
def test_a_llamacpp_line_votes_llamacpp(line: str) -> None:
    """A line votes once, for the engine its markers favour — a stray "vLLM" word does not flip it."""
    assert line_engine(line)[0] is Engine.LLAMACPP


def test_unknown_engines_are_not_one_of_the_four(tmp_path: Path) -> None:
    """TGI lines, however many, never make a session SGLang, vLLM, llama.cpp or TensorRT-LLM."""
    names = [n for n in ALL_FILES if n.startswith("tgi_")]
    log = tmp_path / "mixed.log"
    log.write_text("\n".join(ln for n in names for ln in read_lines(n) * 50) + "\n")
    assert ingest_files([str(log)], jobs=1).engine is Engine.UNKNOWN
