"""Every stats line of the real excerpts reads the same on both parse paths, with the right values.

The line parser and the bulk path (:func:`specmon.ingest.bulk.piece_records`, the
templates learned from the shared grammar) must give identical records on every
file of ``tests/data/real_logs`` (copies of ``../shared/real_logs``), and every
SGLang decode/prefill line the line parser reads must be read by a template — the
fast path — not handed back to the line parser. Values are checked by hand on a
sample of lines (numbers copied from the files).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.engines import KINDS
from specmon.ingest.bulk import piece_records
from specmon.parsing import parse_lines
from specmon.records import Decode, EngineStats, Prefill, Spec
from tests.support.realdata import DATA, read_lines

YEAR = 2025
LOGS = sorted(DATA.glob("*.log")) + sorted(DATA.glob("*/*.log"))
_SLOW = {k.engine for k in KINDS if k.body is None} - {k.engine for k in KINDS if k.body is not None}


def _both(path: Path) -> tuple[list[dict], list[dict], int, int]:
    line = list(parse_lines(read_lines(str(path.relative_to(DATA))), year=YEAR))
    bulk, by_template = piece_records(path.read_bytes(), year=YEAR)
    # Stats lines of a kind with a bulk grammar (TensorRT-LLM's iteration lines have none: the
    # bulk path hands them to the line parser, which the first assertion below still checks).
    stats = sum(isinstance(r, Decode | Prefill | EngineStats | Spec) and getattr(r, "engine", None) not in _SLOW
                for r in line)
    return [r.to_json() for r in line], [r.to_json() for r in bulk], by_template, stats


def test_there_are_real_logs() -> None:
    assert len(LOGS) > 40


@pytest.mark.parametrize("path", LOGS, ids=lambda p: p.name)
def test_both_paths_agree_and_sglang_stats_take_the_fast_path(path: Path) -> None:
    line, bulk, by_template, stats = _both(path)
    assert bulk == line
    assert by_template == stats


def _record(name: str, lineno: int) -> dict:
    line, bulk, _, _ = _both(DATA / name)
    recs = [r for r in bulk if r["line"] == lineno]
    assert len(recs) == 1 and [r for r in line if r["line"] == lineno] == recs
    return recs[0]


def test_values_by_hand_eagle3_decode() -> None:
    # [2025-10-22 10:27:57 TP0] Decode batch. #running-req: 1, #token: 108, token usage: 0.00,
    # accept len: 2.17, accept rate: 0.54, cuda graph: True, gen throughput (token/s): 0.39, #queue-req: 0,
    r = _record("sglang_eagle3_accept_rate_1.log", 2)
    assert r["kind"] == "decode" and r["timestamp"] == "2025-10-22T10:27:57" and r["rank"] == "TP0"
    assert (r["running_req"], r["tokens"], r["token_usage"], r["accept_len"], r["accept_rate"]) == (1, 108, 0.0, 2.17, 0.54)
    assert (r["graph"], r["gen_throughput"], r["queue_req"]) == (True, 0.39, 0)


def test_values_by_hand_bare_v0_2_decode() -> None:
    # Decode batch. #running-req: 1010, #token: 55006, token usage: 0.93, gen throughput (token/s): 1397.13, #queue-req: 12279
    r = _record("sglang_v0_2_bare_decode_1.log", 1)
    assert r["timestamp"] is None and r["rank"] is None
    assert (r["running_req"], r["tokens"], r["token_usage"], r["gen_throughput"], r["queue_req"]) == (1010, 55006, 0.93, 1397.13, 12279)


def test_values_by_hand_dp_attention_prefill() -> None:
    # [2025-06-10 14:09:47 DP3 TP3] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, ...
    line, _, _, _ = _both(DATA / "sglang_dp_attention_startup_1.log")
    ranks = [r["rank"] for r in line if r["kind"] == "prefill"]
    assert "DP3 TP3" in ranks and "DP0 TP0" in ranks
    r = next(r for r in line if r["kind"] == "prefill" and r["rank"] == "DP3 TP3")
    assert (r["new_seq"], r["new_token"], r["cached_token"], r["running_req"], r["queue_req"]) == (1, 7, 0, 0, 0)
    assert r["timestamp"] == "2025-06-10T14:09:47"


def test_rank_tags_are_kept_whole() -> None:
    text = ("[2026-03-01 10:00:00 PP0 ATTN_CP7 TP7] Decode batch, #running-req: 2, #token: 10, token usage: 0.01, "
            "cuda graph: True, gen throughput (token/s): 50.00, #queue-req: 0")
    line = list(parse_lines([text, text]))
    bulk, n = piece_records((text + "\n" + text + "\n").encode())
    assert [r.rank for r in line] == ["PP0 ATTN_CP7 TP7"] * 2
    assert [r.to_json() for r in bulk] == [r.to_json() for r in line] and n == 2


def test_year_less_stamps_take_the_year_of_a_dated_line_not_the_mtime(tmp_path: Path) -> None:
    import os

    from specmon.ingest.summarize import ingest_files
    from specmon.sources.logfiles import log_year

    log = tmp_path / "vllm.log"
    lines = ["2024-12-30T10:00:00.000000000Z INFO 12-30 10:00:00 [api_server.py:1] vLLM API server version 0.8.5"]
    lines += [f"INFO 12-30 10:00:{i:02d} [loggers.py:1] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
              f"Avg generation throughput: {50 + i}.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs" for i in range(10)]
    log.write_text("\n".join(lines) + "\n")
    os.utime(log, (1_800_000_000, 1_800_000_000))  # mtime in 2027: a copied file
    assert log_year(log) == 2024
    from datetime import UTC, datetime

    session = ingest_files([str(log)], jobs=1)
    last = session.runs[-1].last_at
    assert last is not None
    assert datetime.fromtimestamp(last, tz=UTC).strftime("%Y-%m-%d %H:%M:%S") == "2024-12-30 10:00:09"


def test_values_by_hand_vllm_v1_engine_and_spec() -> None:
    # (APIServer pid=1) INFO 05-07 04:56:17 [loggers.py:271] Engine 000: Avg prompt throughput: 2.5 tokens/s,
    # Avg generation throughput: 123.8 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 17.5%, ...
    r = _record("vllm_v1_dflash_access_interleaved_1.log", 2)
    assert r["kind"] == "engine_stats" and r["timestamp"] == "2025-05-07T04:56:17" and r["engine"] == "vllm"
    assert (r["prompt_throughput"], r["gen_throughput"], r["running"], r["waiting"]) == (2.5, 123.8, 1, 0)
    assert (r["kv_cache_usage"], r["prefix_cache_hit_rate"], r["engine_index"]) == (17.5, 0.0, 0)
    # ... SpecDecoding metrics: Mean acceptance length: 4.00, Accepted throughput: 26.40 tokens/s, Drafted
    # throughput: 26.40 tokens/s, Accepted: 264 tokens, Drafted: 264 tokens, Per-position acceptance rate:
    # 1.000, 1.000, 1.000, Avg Draft acceptance rate: 100.0%
    s = _record("vllm_v1_spec_full_accept_loop_1.log", 2)
    assert s["kind"] == "spec" and s["mean_acceptance_length"] == 4.0 and s["draft_acceptance_rate"] == 1.0
    assert (s["accepted"], s["drafted"], s["accepted_throughput"], s["drafted_throughput"]) == (264, 264, 26.4, 26.4)
    assert s["per_position"] == [1.0, 1.0, 1.0]


def test_values_by_hand_vllm_v0_and_llamacpp() -> None:
    # INFO 08-20 02:39:37 metrics.py:411] Avg prompt throughput: 871.4 tokens/s, Avg generation throughput:
    # 88.1 tokens/s, Running: 1 reqs, Swapped: 0 reqs, Pending: 0 reqs, GPU KV cache usage: 0.2%, CPU KV ...: 0.0%.
    r = _record("vllm_v0_engine_stats_0_5_4.log", 1)
    assert (r["prompt_throughput"], r["gen_throughput"], r["running"], r["waiting"], r["kv_cache_usage"]) == (
        871.4, 88.1, 1, 0, 0.2)
    assert r["engine_index"] is None and r["timestamp"] == "2025-08-20T02:39:37"
    # 2026-05-14 22:40:29.046 | draft acceptance rate = 0.98260 ( 1186 accepted /  1207 generated)
    s = _record("llamacpp_mtp_print_timing_multiline_1.log", 31)
    assert s["engine"] == "llamacpp" and (s["draft_acceptance_rate"], s["accepted"], s["drafted"]) == (0.9826, 1186, 1207)
    assert s["timestamp"] == "2026-05-14T22:40:29.046000"
