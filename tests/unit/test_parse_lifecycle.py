"""Lifecycle events and server configuration, from real startup, crash and shutdown logs.

Real lines come from ``tests/data/real_logs`` (SGLang/vLLM excerpts and the CPU kit's own
runs in ``vllm_cpu_kit/``); vLLM files are parsed with ``year=2025``. Lines marked
SYNTHETIC were written from FORMATS.md §1.5-1.6 / §2.4 because no real excerpt in the
corpus shows them (e.g. SGLang's ``server_args=ServerArgs(...)`` and ready line).

A launch line that carries the configuration (SGLang ``server_args=``, vLLM
``non-default args:`` / ``Initializing a V1 LLM engine``) gives one record, a Config:
``parse`` returns one record per line, and the Config is what marks the server start.
"""

from __future__ import annotations

import re
from calendar import timegm
from functools import cache
from typing import Any

import pytest

from specmon.parsing import LineParser, parse_lines
from specmon.records import FATAL_EVENTS, Config, Engine, Event, Lifecycle
from tests.support.realdata import read_lines

YEAR = 2025


def ts(text: str) -> float:
    """``YYYY-MM-DD HH:MM:SS[.fff]`` (or vLLM ``MM-DD HH:MM:SS`` in 2025) read as UTC."""
    if text[2] == "-":
        text = f"{YEAR}-{text}"
    date, _, clock = text.partition(" ")
    hms, _, frac = clock.partition(".")
    y, mo, d = (int(x) for x in date.split("-"))
    h, mi, s = (int(x) for x in hms.split(":"))
    return timegm((y, mo, d, h, mi, s, 0, 0, 0)) + (int(frac) / 10 ** len(frac) if frac else 0.0)


@cache
def file_records(name: str) -> dict[int, list[Any]]:
    """All records of a whole file, parsed in order with year=2025, by line number."""
    out: dict[int, list[Any]] = {}
    for rec in parse_lines(read_lines(name), year=YEAR):
        out.setdefault(rec.line, []).append(rec)
    return out


def events_of(name: str) -> dict[int, Lifecycle]:
    """The lifecycle records of a file, by line (at most one per line)."""
    out: dict[int, Lifecycle] = {}
    for n, recs in file_records(name).items():
        life = [r for r in recs if isinstance(r, Lifecycle)]
        assert len(life) <= 1, (name, n, recs)
        if life:
            out[n] = life[0]
    return out


# --------------------------------------------------------------------------------------
# Real lifecycle lines: (file, line, event, progress, rank, time text or None)
# --------------------------------------------------------------------------------------
K3 = "vllm_cpu_kit/ngram_k3.log"
K3R = "vllm_cpu_kit/ngram_k3_restart.log"
NOSPEC = "vllm_cpu_kit/nospec.log"
FAILED = "vllm_cpu_kit/failed_start_mem_check.log"
RETRACT_RANKS = ["TP13", "TP12", "TP10", "TP9", "TP11", "TP8", "TP12", "TP14", "TP13", "TP15", "TP10"]

REAL_EVENTS: list[tuple[str, int, Event, tuple[int, int] | None, str | None, str | None]] = [
    # SGLang startup without rank prefix (tp=1), tqdm shard progress without any prefix.
    ("sglang_startup_noprefix_2025_12.log", 10, Event.LOAD_BEGIN, None, None, "2025-12-23 14:18:01"),
    ("sglang_startup_noprefix_2025_12.log", 12, Event.LOAD_PROGRESS, (0, 4), None, None),
    ("sglang_startup_noprefix_2025_12.log", 13, Event.LOAD_PROGRESS, (1, 4), None, None),
    # Missing leading "[" and a line cut by the excerpt.
    ("sglang_missing_bracket_load_weight_1.log", 1, Event.LOAD_END, None, "TP0", "2025-01-13 12:42:03"),
    # KV line with terminal-pager junk "[386/1830]" after long whitespace.
    ("sglang_dp_attention_startup_1.log", 1, Event.KV_CACHE, None, "DP7 TP7", "2025-06-10 14:09:44"),
    ("sglang_capture_graph_end_draft_1.log", 1, Event.GRAPH_END, None, "TP0", "2025-09-05 20:48:29"),
    # Retraction (pressure, not fatal) from 11 TP ranks of a second node, out of order.
    *[("sglang_decode_oom_retract_tp16_1.log", i + 1, Event.RETRACT, None, r,
       "2025-03-07 21:49:33" if i < 3 else "2025-03-07 21:49:45") for i, r in enumerate(RETRACT_RANKS)],
    # Crashes.
    ("sglang_dp_traceback_caret_1.log", 1, Event.CRASH, None, "DP1 TP1", "2025-12-15 00:02:05"),
    ("sglang_eagle_verify_traceback_ci_1.log", 1, Event.CRASH, None, "TP0", "2025-04-27 05:08:35"),
    ("sglang_lora_illegal_mem_sigquit_1.log", 1, Event.CRASH, None, "TP0", "2025-02-21 22:59:28"),
    ("sglang_lora_illegal_mem_sigquit_1.log", 19, Event.CRASH, None, None, "2025-02-21 22:59:28"),
    ("sglang_nextn_init_traceback_tp2.log", 1, Event.CRASH, None, "TP2", "2025-02-20 19:25:34"),
    ("sglang_noprefix_spec_traceback_1.log", 1, Event.CRASH, None, None, "2025-08-22 21:41:04"),
    # The sigquit message seen only inside a "--- Logging error ---" block.
    ("sglang_logging_error_sigquit_1.log", 4, Event.CRASH, None, None, None),
    # vLLM V0 spec-decode startup.
    ("vllm_v0_medusa_startup_1.log", 5, Event.LOAD_END, None, None, "07-24 03:57:31"),
    ("vllm_v0_medusa_startup_1.log", 6, Event.LOAD_END, None, None, "07-24 03:57:33"),
    ("vllm_v0_medusa_startup_1.log", 7, Event.KV_CACHE, None, None, "07-24 03:57:34"),
    ("vllm_v0_medusa_startup_1.log", 8, Event.GRAPH_BEGIN, None, None, "07-24 03:57:37"),
    ("vllm_v0_medusa_startup_1.log", 10, Event.GRAPH_END, None, None, "07-24 03:57:44"),
    # vLLM V1 startup tail, no process prefix.
    ("vllm_v1_startup_ready_0_9.log", 3, Event.KV_CACHE, None, None, "06-02 11:03:18"),
    ("vllm_v1_startup_ready_0_9.log", 5, Event.GRAPH_END, None, None, "06-02 11:03:55"),
    # Target + drafter loading; tqdm lines unprefixed; "(EngineCore_DP0 pid=N)" is not a rank.
    ("vllm_v1_eagle_drafter_loading_1.log", 1, Event.LOAD_PROGRESS, (4, 4), None, None),
    ("vllm_v1_eagle_drafter_loading_1.log", 3, Event.LOAD_END, None, None, "10-30 14:19:30"),
    ("vllm_v1_eagle_drafter_loading_1.log", 6, Event.LOAD_PROGRESS, (0, 1), None, None),
    ("vllm_v1_eagle_drafter_loading_1.log", 8, Event.LOAD_PROGRESS, (1, 1), None, None),
    ("vllm_v1_eagle_drafter_loading_1.log", 10, Event.LOAD_END, None, None, "10-30 14:19:31"),
    ("vllm_v1_eagle_drafter_loading_1.log", 13, Event.LOAD_END, None, None, "10-30 14:19:31"),
    ("vllm_v1_enginecore0_loading_1.log", 2, Event.LOAD_PROGRESS, (0, 3), None, None),
    ("vllm_v1_enginecore0_loading_1.log", 3, Event.LOAD_PROGRESS, (2, 3), None, None),
    ("vllm_v1_enginecore0_loading_1.log", 4, Event.LOAD_PROGRESS, (3, 3), None, None),
    ("vllm_v1_enginecore0_loading_1.log", 5, Event.LOAD_PROGRESS, (3, 3), None, None),
    ("vllm_v1_enginecore0_loading_1.log", 7, Event.LOAD_END, None, None, "10-26 21:47:45"),
    ("vllm_v1_enginecore0_loading_1.log", 8, Event.LOAD_END, None, None, "10-26 21:47:46"),
    ("vllm_v1_enginecore_dp0_gloo_1.log", 5, Event.LOAD_BEGIN, None, None, "09-21 12:29:22"),
    ("vllm_v1_enginecore_dp0_gloo_1.log", 8, Event.LOAD_END, None, None, "09-21 12:30:37"),
    ("vllm_v1_mrv2_loading_1.log", 1, Event.LOAD_PROGRESS, (3, 3), None, None),
    ("vllm_v1_mrv2_loading_1.log", 3, Event.LOAD_END, None, None, "06-02 00:51:39"),
    ("vllm_v1_mrv2_loading_1.log", 4, Event.LOAD_END, None, None, "06-02 00:51:40"),
    # "(Worker_TP0 pid=N)" is a process tag, not a rank.
    *[("vllm_v1_worker_tp0_loading_1.log", n, Event.LOAD_PROGRESS, p, None, None)
      for n, p in ((1, (5, 9)), (2, (6, 9)), (3, (7, 9)), (4, (8, 9)), (5, (9, 9)), (6, (9, 9)))],
    ("vllm_v1_worker_tp0_loading_1.log", 8, Event.LOAD_END, None, None, "05-06 20:59:57"),
    ("vllm_v1_worker_tp0_loading_1.log", 9, Event.LOAD_END, None, None, "05-06 20:59:59"),
    # vLLM crashes.
    ("vllm_v1_drafter_worker_start_fail_1.log", 4, Event.CRASH, None, None, "10-06 18:54:30"),
    ("vllm_v1_enginecore0_fatal_spec_1.log", 1, Event.CRASH, None, None, "09-01 03:23:11"),
    ("vllm_v1_fatal_padded_0_8_5.log", 4, Event.CRASH, None, None, "04-28 02:37:03"),
    ("vllm_v1_fatal_padded_0_8_5.log", 5, Event.CRASH, None, None, "04-28 02:37:03"),
    ("vllm_v1_spec_dump_fatal_0_9_1.log", 2, Event.CRASH, None, None, "08-08 14:05:34"),
    ("vllm_v1_spec_dump_fatal_0_9_1.log", 3, Event.CRASH, None, None, "08-08 14:05:34"),
    # The CPU kit (vllm-cpu 0.32.0): whole real runs; several lines carry a CR.
    (K3, 39, Event.LOAD_BEGIN, None, None, "11-29 07:47:30"),
    (K3, 43, Event.LOAD_PROGRESS, (0, 1), None, None),
    (K3, 44, Event.LOAD_PROGRESS, (1, 1), None, None),
    (K3, 46, Event.LOAD_END, None, None, "11-29 07:47:30"),
    (K3, 55, Event.KV_CACHE, None, None, "11-29 07:47:51"),  # "CPU KV cache size" on the CPU build
    (K3, 105, Event.READY, None, None, None),
    (K3, 2490, Event.SHUTDOWN, None, None, None),
    (K3, 2492, Event.SHUTDOWN, None, None, None),
    (K3R, 39, Event.LOAD_BEGIN, None, None, "11-29 07:56:27"),
    (K3R, 46, Event.LOAD_END, None, None, "11-29 07:56:27"),
    (K3R, 56, Event.KV_CACHE, None, None, "11-29 07:56:34"),
    (K3R, 106, Event.READY, None, None, None),
    (K3R, 785, Event.SHUTDOWN, None, None, None),
    (K3R, 787, Event.SHUTDOWN, None, None, None),
    (NOSPEC, 35, Event.LOAD_BEGIN, None, None, "11-29 07:54:01"),
    (NOSPEC, 39, Event.LOAD_PROGRESS, (0, 1), None, None),
    (NOSPEC, 40, Event.LOAD_PROGRESS, (1, 1), None, None),
    (NOSPEC, 42, Event.LOAD_END, None, None, "11-29 07:54:02"),
    (NOSPEC, 50, Event.KV_CACHE, None, None, "11-29 07:54:17"),
    (NOSPEC, 99, Event.READY, None, None, None),
    (NOSPEC, 2089, Event.SHUTDOWN, None, None, None),
    (NOSPEC, 2091, Event.SHUTDOWN, None, None, None),
    (FAILED, 32, Event.CRASH, None, None, "11-29 07:46:33"),
    (FAILED, 33, Event.CRASH, None, None, "11-29 07:46:33"),
    (FAILED, 54, Event.CRASH, None, None, "11-29 07:46:35"),
    (FAILED, 80, Event.CRASH, None, None, None),
    (FAILED, 111, Event.CRASH, None, None, None),
    (FAILED, 169, Event.CRASH, None, None, None),
]


@pytest.mark.parametrize(("name", "lineno", "event", "progress", "rank", "when"), REAL_EVENTS,
                         ids=[f"{r[0]}:{r[1]}" for r in REAL_EVENTS])
def test_real_lifecycle_line(name: str, lineno: int, event: Event, progress: tuple[int, int] | None,
                             rank: str | None, when: str | None) -> None:
    """Each real lifecycle line gives its event, progress, rank and time."""
    rec = events_of(name).get(lineno)
    assert rec is not None, f"{name}:{lineno}: no lifecycle record, got {file_records(name).get(lineno)!r}"
    assert rec.event is event
    assert rec.progress == progress
    assert rec.rank == rank
    assert rec.timestamp == (None if when is None else ts(when))
    assert rec.detail  # a human-readable detail for the event log


def test_draft_graph_end_is_a_graph_end_or_nothing() -> None:
    """``Capture draft cuda graph end`` from TP6: never a crash, load or ready."""
    rec = events_of("sglang_capture_graph_end_draft_1.log").get(2)
    assert rec is None or (rec.event is Event.GRAPH_END and rec.rank == "TP6")


# A traceback's frame, code and caret lines are no events; only its header (and, if the
# parser tracks the traceback, its final ``SomeError: ...`` line) may be.
_EXCEPTION_TAIL = re.compile(r"^(?:[A-Za-z_][\w.]*)?(?:Error|Exception|Interrupt|Exit)\b")


def _message(text: str) -> str:
    """The text after a vLLM/SGLang logger prefix, if there is one."""
    m = re.match(r"^.{0,120}?\] ", text)
    return (text[m.end():] if m else text).strip()


CRASH_FILES = [
    # (file, crash lines required, crash lines also acceptable besides exception tails)
    ("sglang_dp_traceback_caret_1.log", {1}, set()),
    ("sglang_eagle_verify_traceback_ci_1.log", {1}, set()),
    ("sglang_lora_illegal_mem_sigquit_1.log", {1, 19}, set()),
    ("sglang_nextn_init_traceback_tp2.log", {1}, set()),
    ("sglang_noprefix_spec_traceback_1.log", {1}, set()),
    ("sglang_logging_error_sigquit_1.log", {4}, set()),
    ("vllm_v1_drafter_worker_start_fail_1.log", {4}, set()),
    ("vllm_v1_eagle_blackwell_traceback_1.log", set(), set()),
    ("vllm_v1_enginecore0_fatal_spec_1.log", {1}, set()),
    ("vllm_v1_fatal_padded_0_8_5.log", {4, 5}, set()),
    ("vllm_v1_spec_dump_fatal_0_9_1.log", {2, 3}, set()),
    (FAILED, {32, 33, 54, 80, 111, 169}, {53}),  # 53: "EngineCore failed to start."
]


@pytest.mark.parametrize(("name", "required", "allowed"), CRASH_FILES, ids=[c[0] for c in CRASH_FILES])
def test_tracebacks_give_their_crash_and_no_noise(name: str, required: set[int], allowed: set[int]) -> None:
    """Crash headers are CRASH; frame/code/caret lines of the traceback are no events at all."""
    lines = read_lines(name)
    events = events_of(name)
    crash = {n for n, r in events.items() if r.event is Event.CRASH}
    assert required <= crash, f"missing CRASH at {sorted(required - crash)}"
    for n in crash - required - allowed:
        assert _EXCEPTION_TAIL.match(_message(lines[n - 1])), f"CRASH on a non-crash line {n}: {lines[n - 1]!r}"
    for n, text in enumerate(lines, 1):
        msg = _message(text)
        frame = msg.startswith("File ") or (msg and set(msg) <= set("^~ ")) or text[:1] in (" ", "\t")
        if frame:
            assert n not in events, f"event {events[n].event} on traceback frame line {n}: {text!r}"


def test_failed_start_never_looks_ready() -> None:
    """The real failed start has crashes and never a READY or a KV_CACHE."""
    kinds = {r.event for r in events_of(FAILED).values()}
    assert Event.CRASH in kinds
    assert Event.READY not in kinds
    assert Event.KV_CACHE not in kinds


HEALTHY = [
    K3, K3R,
    "sglang_startup_noprefix_2025_12.log", "sglang_dp_attention_startup_1.log",
    "sglang_cuda_graph_trailing_comma_0_5_1.log", "sglang_eagle3_accept_rate_1.log",
    "sglang_decode_oom_retract_tp16_1.log", "sglang_pd_decode_mooncake_glog_1.log", "sglang_router_rust_1.log",
    "vllm_v1_startup_ready_0_9.log", "vllm_v1_eagle_drafter_loading_1.log", "vllm_v1_worker_tp0_loading_1.log",
    "vllm_v0_medusa_startup_1.log", "vllm_v1_mtp_waiting_1.log", "llamacpp_mtp_print_timing_multiline_1.log",
]


@pytest.mark.parametrize("name", HEALTHY)
def test_healthy_logs_have_no_fatal_event(name: str) -> None:
    """Real logs of healthy runs (incl. HTTP 500s, glog errors, retractions) give no CRASH/OOM."""
    fatal = {n: r for n, r in events_of(name).items() if r.event in FATAL_EVENTS}
    assert not fatal, fatal


def test_cpu_kit_run_reads_as_a_healthy_launch_in_order() -> None:
    """ngram_k3.log: config, load, KV cache, ready, then shutdown; in that order."""
    recs = [r for rs in sorted(file_records(K3).items()) for r in rs[1]]
    firsts: dict[str, int] = {}
    for r in recs:
        key = "config" if isinstance(r, Config) else r.event.value if isinstance(r, Lifecycle) else None
        if key is not None and key not in firsts:
            firsts[key] = r.line
    order = [firsts.get(k) for k in ("config", "load_begin", "load_end", "kv_cache", "ready", "shutdown")]
    assert None not in order, firsts
    assert order == sorted(order)
    assert firsts["config"] == 8


@pytest.mark.parametrize("name,lines", [
    ("sglang_startup_noprefix_2025_12.log", (3, 4, 5, 6)),
    ("vllm_v1_enginecore_dp0_gloo_1.log", (1, 2)),
])
def test_gloo_lines_are_not_prefixed_records(name: str, lines: tuple[int, ...]) -> None:
    """``[Gloo] Rank 0 is connected ...`` looks like a prefix but carries nothing."""
    recs = file_records(name)
    for n in lines:
        assert n not in recs


def test_prefix_only_vllm_lines_are_nothing() -> None:
    """``(EngineCore_DP0 pid=771568) `` alone (and with a CR) gives no record."""
    recs = file_records("vllm_v1_eagle_drafter_loading_1.log")
    for n in (2, 5, 7, 9):
        assert n not in recs
    assert LineParser(year=YEAR).parse("(EngineCore_DP0 pid=771568) \r", 1) is None


# --------------------------------------------------------------------------------------
# SYNTHETIC lifecycle lines (FORMATS.md §1.5-1.6, §2.4): forms not in the real corpus.
# --------------------------------------------------------------------------------------
SYNTHETIC_EVENTS = [
    ("sglang-ready", "[2025-06-10 14:10:00] The server is fired up and ready to roll!",
     Event.READY, None, None, "2025-06-10 14:10:00"),
    ("graph-begin", "[2025-09-05 20:48:17 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=17.28 GB",
     Event.GRAPH_BEGIN, None, "TP0", "2025-09-05 20:48:17"),
    ("graph-begin-2026", "[2026-03-01 10:00:00 TP0] Capture target decode CUDA graph begin. bs=[1, 2, 4, 8], avail mem=0.64 GB",
     Event.GRAPH_BEGIN, None, "TP0", "2026-03-01 10:00:00"),
    ("graph-end-2026", "[2026-03-01 10:00:12 TP0] Capture target decode CUDA graph end. elapsed=12.11 s, mem usage=0.54 GB, avail mem=16.74 GB.",
     Event.GRAPH_END, None, "TP0", "2026-03-01 10:00:12"),
    ("graph-progress", "Capturing batches (bs=1 avail_mem=23.02 GB):  45%|████▌     | 9/20 [00:02<00:02,  4.50it/s]",
     Event.GRAPH_PROGRESS, (9, 20), None, None),
    ("load-end-2026", "[2026-03-01 09:59:00 TP0] Load weight end. elapsed=9.44 s, type=LlamaForCausalLM, avail mem=31.18 GB, mem usage=15.23 GB.",
     Event.LOAD_END, None, "TP0", "2026-03-01 09:59:00"),
    ("kv-2026", "[2026-03-01 09:59:30 TP0] KV Cache is allocated. dtype: torch.float8_e4m3fn, #tokens: 914573",
     Event.KV_CACHE, None, "TP0", "2026-03-01 09:59:30"),
    ("retract", "[2025-06-01 10:00:00 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_token_ratio: 0.3000 -> 0.5000",
     Event.RETRACT, None, "TP0", "2025-06-01 10:00:00"),
    ("decode-oom", "[2024-09-01 10:00:00 TP0] Decode out of memory. Try to lower your batch size.",
     Event.OOM, None, "TP0", "2024-09-01 10:00:00"),
    ("cuda-oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.11 GiB",
     Event.OOM, None, None, None),
    ("sigterm", "[2025-06-01 10:00:00] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
     Event.SHUTDOWN, None, None, "2025-06-01 10:00:00"),
    ("graceful", "[2025-06-01 10:00:01] Gracefully exiting... Remaining number of requests 0. Remaining requests remaining_rids=[].",
     Event.SHUTDOWN, None, None, "2025-06-01 10:00:01"),
    ("vllm-version", "INFO 06-02 10:00:00 [api_server.py:1090] vLLM API server version 0.9.0",
     Event.SERVER_START, None, None, "06-02 10:00:00"),
    ("vllm-ready", "(APIServer pid=1) INFO:     Application startup complete.",
     Event.READY, None, None, None),
    ("vllm-graph-progress", "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE):  45%|████▌     | 30/67 [00:05<00:06,  5.90it/s]",
     Event.GRAPH_PROGRESS, (30, 67), None, None),
    ("ray-ansi-crash", "[36m(WorkerDict pid=1216, ip=10.0.0.5)[0m [2025-05-26 15:54:41 TP1] Scheduler hit an exception: Traceback (most recent call last):",
     Event.CRASH, None, "TP1", "2025-05-26 15:54:41"),
]


@pytest.mark.parametrize(("name", "text", "event", "progress", "rank", "when"), SYNTHETIC_EVENTS,
                         ids=[s[0] for s in SYNTHETIC_EVENTS])
def test_synthetic_lifecycle(name: str, text: str, event: Event, progress: tuple[int, int] | None,
                             rank: str | None, when: str | None) -> None:
    """SYNTHETIC: documented lifecycle markers give their event, progress, rank and time."""
    rec = LineParser(year=YEAR).parse(text, 77)
    assert isinstance(rec, Lifecycle), rec
    assert rec.line == 77
    assert rec.event is event
    assert rec.progress == progress
    assert rec.rank == rank
    assert rec.timestamp == (None if when is None else ts(when))


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------
REAL_CONFIG = [
    # (file, line, time, algorithm, steps, model)
    (K3, 8, "11-29 07:47:19", "ngram", 3, "/tmp/tinyllama"),  # non-default args: {... 'speculative_config': {...}}
    (K3, 19, "11-29 07:47:24", "ngram", 3, "/tmp/tinyllama"),  # SpeculativeConfig(method='ngram', ..., num_spec_tokens=3)
    (K3R, 8, "11-29 07:56:17", "ngram", 3, "/tmp/tinyllama"),
    (K3R, 19, "11-29 07:56:21", "ngram", 3, "/tmp/tinyllama"),
    (FAILED, 8, "11-29 07:46:15", "ngram", 3, "/tmp/tinyllama"),
    (FAILED, 19, "11-29 07:46:27", "ngram", 3, "/tmp/tinyllama"),
    (NOSPEC, 8, "11-29 07:53:51", None, 0, "/tmp/tinyllama"),  # no speculative_config at all
    (NOSPEC, 17, "11-29 07:53:56", None, 0, "/tmp/tinyllama"),  # speculative_config=None
    ("vllm_v1_logo_banner_2026_03.log", 7, "03-17 11:33:58", None, 0, "Qwen/Qwen3.5-122B-A10B-GPTQ-Int4"),
]


@pytest.mark.parametrize(("name", "lineno", "when", "algorithm", "steps", "model"), REAL_CONFIG,
                         ids=[f"{c[0]}:{c[1]}" for c in REAL_CONFIG])
def test_real_vllm_config(name: str, lineno: int, when: str, algorithm: str | None, steps: int,
                          model: str) -> None:
    """The speculative method, step count and (target) model from real vLLM launch lines."""
    recs = [r for r in file_records(name).get(lineno, []) if isinstance(r, Config)]
    assert len(recs) == 1, file_records(name).get(lineno)
    cfg = recs[0]
    assert cfg.engine is Engine.VLLM
    assert cfg.algorithm == algorithm
    assert cfg.steps == steps
    assert cfg.model == model
    assert cfg.rank is None
    assert cfg.timestamp == ts(when)


def test_only_launch_lines_are_configs() -> None:
    """A whole CPU-kit run yields exactly its two launch lines as Config records."""
    for name, lines in ((K3, [8, 19]), (NOSPEC, [8, 17]), (FAILED, [8, 19])):
        got = sorted(n for n, rs in file_records(name).items() for r in rs if isinstance(r, Config))
        assert got == lines, name


_SGLANG_ARGS = (
    "server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tokenizer_path='meta-llama/Llama-3.1-8B-Instruct', "
    "tokenizer_mode='auto', skip_tokenizer_init=False, load_format='auto', trust_remote_code=False, dtype='auto', "
    "kv_cache_dtype='auto', quantization=None, context_length=None, device='cuda', "
    "served_model_name='meta-llama/Llama-3.1-8B-Instruct', chat_template=None, is_embedding=False, revision=None, "
    "host='127.0.0.1', port=30000, mem_fraction_static=0.7, max_running_requests=None, chunked_prefill_size=8192, "
    "max_prefill_tokens=16384, schedule_policy='fcfs', tp_size=1, stream_interval=1, random_seed=42, "
    "log_level='info', decode_log_interval=40, dp_size=1, ep_size=1, json_model_override_args='{{}}', "
    "attention_backend=None, sampling_backend='flashinfer', grammar_backend='xgrammar', "
    "speculative_algorithm={algo}, speculative_draft_model_path={draft}, speculative_num_steps={steps}, "
    "speculative_eagle_topk={topk}, speculative_num_draft_tokens={ntok}, speculative_accept_threshold_single=1.0, "
    "speculative_accept_threshold_acc=1.0, speculative_token_map=None, disable_radix_cache=False, "
    "cuda_graph_max_bs=None, cuda_graph_bs=None, disable_cuda_graph=False, enable_dp_attention=False, warmups=None)"
)


def test_synthetic_sglang_server_args_eagle3() -> None:
    """SYNTHETIC (FORMATS.md §1.6 ``server_args=ServerArgs(...)``): EAGLE3 3 steps, topk 1, 4 draft tokens."""
    text = "[2025-10-22 10:20:00] " + _SGLANG_ARGS.format(
        algo="'EAGLE3'", draft="'jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B'", steps=3, topk=1, ntok=4)
    cfg = LineParser().parse(text, 1)
    assert isinstance(cfg, Config), cfg
    assert cfg.engine is Engine.SGLANG
    assert (cfg.algorithm, cfg.steps, cfg.topk, cfg.draft_tokens) == ("EAGLE3", 3, 1, 4)
    assert cfg.model == "meta-llama/Llama-3.1-8B-Instruct"  # the target, not the drafter
    assert cfg.timestamp == ts("2025-10-22 10:20:00")
    assert cfg.rank is None


def test_synthetic_sglang_server_args_without_speculation() -> None:
    """SYNTHETIC: no speculative algorithm -> algorithm None, steps 0."""
    text = "[2025-10-22 10:20:00] " + _SGLANG_ARGS.format(algo="None", draft="None", steps="None", topk="None", ntok="None")
    cfg = LineParser().parse(text, 1)
    assert isinstance(cfg, Config), cfg
    assert cfg.engine is Engine.SGLANG
    assert cfg.algorithm is None
    assert cfg.steps == 0
    assert cfg.model == "meta-llama/Llama-3.1-8B-Instruct"


@pytest.mark.parametrize(("text", "algorithm", "steps", "model"), [
    # SYNTHETIC §2.4 non-default args with a drafter model inside speculative_config.
    ("(APIServer pid=1) INFO 10-30 14:18:00 [utils.py:233] non-default args: {'model_tag': 'meta-llama/Llama-3.1-8B-Instruct', "
     "'model': 'meta-llama/Llama-3.1-8B-Instruct', 'speculative_config': {'method': 'eagle3', "
     "'model': 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', 'num_speculative_tokens': 5}}",
     "eagle3", 5, "meta-llama/Llama-3.1-8B-Instruct"),
    # SYNTHETIC §2.4 engine-init line with a SpeculativeConfig(...) carrying a drafter model.
    ("(EngineCore_DP0 pid=7) INFO 10-30 14:18:05 [core.py:77] Initializing a V1 LLM engine (v0.11.0) with config: "
     "model='Qwen/Qwen3-8B', speculative_config=SpeculativeConfig(method='eagle3', model='AngelSlim/Qwen3-8B_eagle3', "
     "num_spec_tokens=4), tokenizer='Qwen/Qwen3-8B', skip_tokenizer_init=False, tokenizer_mode=auto",
     "eagle3", 4, "Qwen/Qwen3-8B"),
], ids=["non-default-args", "engine-init"])
def test_synthetic_vllm_config_with_drafter(text: str, algorithm: str, steps: int, model: str) -> None:
    """SYNTHETIC: the target model is reported, not the drafter's."""
    cfg = LineParser(year=YEAR).parse(text, 1)
    assert isinstance(cfg, Config), cfg
    assert cfg.engine is Engine.VLLM
    assert (cfg.algorithm, cfg.steps, cfg.model) == (algorithm, steps, model)
    assert cfg.timestamp == ts(text.split("INFO ")[1][:14])
