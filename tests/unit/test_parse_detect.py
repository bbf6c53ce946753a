"""Whole-file checks over every real log: engine detection, and no stats line ever lost.

For each file in ``tests/data/real_logs`` (and ``vllm_cpu_kit/``, ``sglang_cpu_kit/``):

- ``detect_engine`` names the engine that wrote it (UNKNOWN for TGI);
- every line carrying a stats marker yields exactly one Decode/Spec/EngineStats or
  Unparsed record (never None, never an exception), with per-file counts counted by
  hand from the files;
- no other line yields a stats record or an Unparsed record.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from specmon.parsing import detect_engine, parse_lines
from specmon.records import Decode, Engine, EngineStats, Spec, Unparsed
from tests.support.realdata import DATA, read_lines

ALL_FILES = sorted(str(p.relative_to(DATA)) for p in DATA.rglob("*.log"))

STATS_MARKERS = ("Decode batch", "SpecDecoding metrics", "Speculative metrics", "Avg prompt throughput",
                 "draft acceptance", "elapsed_time = ", "Avg thr (in/out)")


def test_corpus_is_complete() -> None:
    """All 56 shared excerpts (LMDeploy's one since), the 4 + 6 CPU-kit runs and the dynamic-schedule run are
    here, with their attribution."""
    assert len(ALL_FILES) == 67
    assert sum(1 for f in ALL_FILES if f.startswith("vllm_cpu_kit/")) == 4
    assert sum(1 for f in ALL_FILES if f.startswith("sglang_cpu_kit/")) == 6
    sources = (DATA / "SOURCES.md").read_text(encoding="utf-8")
    for f in ALL_FILES:
        assert f"`{f}`" in sources, f"{f} has no attribution row in SOURCES.md"
    assert (DATA / "vllm_cpu_kit" / "README.md").is_file()
    assert (DATA / "sglang_cpu_kit" / "README.md").is_file()


# --------------------------------------------------------------------------------------
# Engine detection
# --------------------------------------------------------------------------------------
# Files whose engine cannot honestly be told from their few lines: a traceback tail with
# a sigquit message, Mooncake glog lines around one access line, the Rust router's log.
AMBIGUOUS_SGLANG = {
    "sglang_logging_error_sigquit_1.log", "sglang_pd_decode_mooncake_glog_1.log", "sglang_router_rust_1.log",
}


def expected_engine(name: str) -> Engine | None:
    """The engine a file's name says wrote it (None: ambiguous, see AMBIGUOUS_SGLANG)."""
    base = name.rsplit("/", 1)[-1]
    if base in AMBIGUOUS_SGLANG:
        return None
    if name.startswith("vllm"):
        return Engine.VLLM
    if name.startswith("sglang"):  # sglang_cpu_kit/: the real SGLang 0.5.23 kit's runs
        return Engine.SGLANG
    if base.startswith("sglang"):
        return Engine.SGLANG
    if base.startswith("llamacpp"):
        return Engine.LLAMACPP
    if base.startswith("trtllm"):
        return Engine.TRTLLM
    if base.startswith("lmdeploy"):
        return Engine("lmdeploy")
    return Engine.UNKNOWN  # tgi_*


@pytest.mark.parametrize("name", ALL_FILES)
def test_detect_engine_on_whole_file(name: str) -> None:
    """Each real file is recognised as written by its engine."""
    got = detect_engine(read_lines(name))
    want = expected_engine(name)
    if want is None:
        assert got in (Engine.SGLANG, Engine.UNKNOWN), got
    else:
        assert got is want


def test_detect_engine_empty_and_noise() -> None:
    """No lines, or lines from no known engine, give UNKNOWN."""
    assert detect_engine([]) is Engine.UNKNOWN
    assert detect_engine(["hello", "", "   ", "\x00\x01", "INFO: nothing to see"]) is Engine.UNKNOWN


def test_detect_engine_accepts_an_iterator() -> None:
    """A generator (a file being read) works as well as a list."""
    lines = read_lines("sglang_eagle3_accept_rate_1.log")
    assert detect_engine(iter(lines)) is Engine.SGLANG
    assert detect_engine(line for line in read_lines("vllm_v1_mtp_waiting_1.log")) is Engine.VLLM


def test_detect_engine_in_a_noisy_vllm_start() -> None:
    """The CPU kit's failed start (banner, tracebacks, no stats) is still vLLM."""
    assert detect_engine(read_lines("vllm_cpu_kit/failed_start_mem_check.log")) is Engine.VLLM


# --------------------------------------------------------------------------------------
# Every stats line of every file: a record, never lost
# --------------------------------------------------------------------------------------
# Per file, the kinds the stats-marker lines must give (counted by hand from the files).
EXPECTED_KINDS: dict[str, dict[str, int]] = {
    "llamacpp_mtp_print_timing_multiline_1.log": {"spec": 3},
    "sglang_cpu_kit/drain_after_sigint.log": {"decode": 19},
    "sglang_cpu_kit/eagle3_k3.log": {"decode": 68},
    "sglang_cpu_kit/ngram_k3.log": {"decode": 154},
    "sglang_cpu_kit/nospec.log": {"decode": 197},
    "sglang_cpu_kit/ready_after_decode.log": {"decode": 19},
    "sglang_cuda_graph_toggle_2025_11.log": {"decode": 8},
    "sglang_cuda_graph_trailing_comma_0_5_1.log": {"decode": 4},
    "sglang_eagle3_accept_rate_1.log": {"decode": 5},
    "sglang_hisparse_2026_1.log": {"decode": 8},
    "sglang_jax_cache_miss_1.log": {"decode": 9},
    "sglang_noprefix_prefill_graph_1.log": {"decode": 1},
    "sglang_npu_truncated_lines_1.log": {"unparsed": 1},
    "sglang_v0_2_bare_decode_1.log": {"decode": 1},
    "vllm_cpu_kit/ngram_k3.log": {"engine_stats": 9, "spec": 8},
    "vllm_cpu_kit/ngram_k3_restart.log": {"engine_stats": 3, "spec": 3},
    "vllm_cpu_kit/nospec.log": {"engine_stats": 9},
    "vllm_v0_engine_stats_0_5_4.log": {"engine_stats": 5},
    "vllm_v0_medusa_tokens_tokens_typo_1.log": {"engine_stats": 2, "spec": 2},
    "vllm_v1_dflash_15pos_2026_1.log": {"spec": 1},
    "vllm_v1_dynamic_sd_schedule_cpu_0_32.log": {"engine_stats": 11, "spec": 10},
    "vllm_v1_dflash_access_interleaved_1.log": {"engine_stats": 2, "spec": 2},
    "vllm_v1_mtp_waiting_1.log": {"engine_stats": 2, "spec": 2},
    "vllm_v1_spec_full_accept_loop_1.log": {"engine_stats": 3, "spec": 2},
    "vllm_v1_spec_mm_cache_1.log": {"engine_stats": 2, "spec": 1},
    "vllm_v1_specdecode_early_2025_04.log": {"engine_stats": 1, "spec": 2},
    "vllm_v1_specdecode_pr_dev_format_1.log": {"spec": 1},
    "trtllm_iter_log_2025_04.log": {"engine_stats": 2},
    "lmdeploy_metrics_log_pr4297_2026_02.log": {"decode": 1},
}
# Unparsed records per file, all lines (the npu file also has five glued Prefill lines).
EXPECTED_UNPARSED = {"sglang_npu_truncated_lines_1.log": 6}


def _by_line(name: str) -> dict[int, list[Any]]:
    out: dict[int, list[Any]] = {}
    for rec in parse_lines(read_lines(name), year=2025):
        out.setdefault(rec.line, []).append(rec)
    return out


@pytest.mark.parametrize("name", ALL_FILES)
def test_every_stats_line_gives_a_record(name: str) -> None:
    """Each marker line -> exactly one Decode/Spec/EngineStats/Unparsed; counts as counted by hand."""
    lines = read_lines(name)
    recs = _by_line(name)
    kinds: Counter[str] = Counter()
    for n, text in enumerate(lines, 1):
        if not any(m in text for m in STATS_MARKERS):
            continue
        got = recs.get(n, [])
        assert len(got) == 1, f"{name}:{n}: {got!r} for {text[:120]!r}"
        assert isinstance(got[0], (Decode, Spec, EngineStats, Unparsed)), got[0]
        assert got[0].line == n
        kinds[got[0].kind] += 1
    assert dict(kinds) == EXPECTED_KINDS.get(name, {})


@pytest.mark.parametrize("name", ALL_FILES)
def test_no_stats_or_unparsed_record_from_other_lines(name: str) -> None:
    """Stats records come only from stats lines; Unparsed only where a file has damaged lines.

    llama.cpp's ``eval time = ... tokens per second`` line of a print_timing block is a
    legitimate per-request throughput source, so EngineStats from it is allowed.
    """
    lines = read_lines(name)
    unparsed = 0
    for n, recs in _by_line(name).items():
        text = lines[n - 1]
        for r in recs:
            if isinstance(r, Unparsed):
                unparsed += 1
            if isinstance(r, (Decode, Spec, EngineStats)) and not any(m in text for m in STATS_MARKERS):
                assert isinstance(r, EngineStats) and "eval time =" in text, f"{name}:{n}: {r!r} from {text[:120]!r}"
    assert unparsed == EXPECTED_UNPARSED.get(name, 0)


@pytest.mark.parametrize("name", ALL_FILES)
def test_line_numbers_are_the_input_positions(name: str) -> None:
    """Records come out in input order with 1-based line numbers within the file."""
    lines = read_lines(name)
    numbers = [r.line for r in parse_lines(lines, year=2025)]
    assert numbers == sorted(numbers)
    assert all(1 <= n <= len(lines) for n in numbers)
