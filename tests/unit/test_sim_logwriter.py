"""Simulated log lines have SGLang's exact shapes (FORMATS.md §1), and the engine behaves like SGLang."""

from __future__ import annotations

import io
import random
import re

import pytest

from specmon.sim.engine import SimEngine, SimRequest
from specmon.sim.logwriter import (
    HTTP,
    RAW,
    LogWriter,
    access_message,
    capture_progress_line,
    crash_script,
    decode_message,
    format_line,
    prefill_message,
    server_args_message,
    shard_progress_line,
    shutdown_script,
    startup_script,
)
from specmon.sim.model import DEFAULT_MODEL, SpecConfig

# FORMATS.md §1.1 prefix regex, verbatim.
PREFIX = re.compile(
    r"^\[(?P<ts>\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d{3})?|\d{2}:\d{2}:\d{2})"
    r"(?P<ranks>(?: (?:DP|PP|TP|EP)\d+)*)\] (?P<msg>.*)$"
)
# FORMATS.md §1.3 body and key:value regexes, verbatim.
BODY = re.compile(r"(?P<kind>Decode|Prefill) batch(?: \[(?P<iter>\d+)\])?[.,] (?P<body>.*?)(?:, )?\s*$")
KV = re.compile(r"(?P<key>#?[A-Za-z][A-Za-z0-9 _\-+/()#.]*?): (?P<val>[^,]+)")

T = 1_770_887_643.0  # 2026-02-12 09:14:03 as naive seconds


def fields(line: str) -> tuple[str, str, dict[str, str]]:
    """(ranks, kind, key -> value) of a Decode/Prefill line, through the FORMATS.md regexes."""
    m = PREFIX.match(line)
    assert m, line
    b = BODY.search(m.group("msg"))
    assert b, line
    kv = {k.group("key"): k.group("val") for k in KV.finditer(b.group("body"))}
    return m.group("ranks").strip(), b.group("kind"), kv


def test_decode_line_with_speculation() -> None:
    line = format_line(T, decode_message(1, 1234, 0.002, 94.016, accept_len=2.171, accept_rate=0.5855))
    assert line == (
        "[2026-02-12 09:14:03 TP0] Decode batch, #running-req: 1, #token: 1234, token usage: 0.00, "
        "accept len: 2.17, accept rate: 0.59, cuda graph: True, gen throughput (token/s): 94.02, #queue-req: 0"
    )
    ranks, kind, kv = fields(line)
    assert (ranks, kind) == ("TP0", "Decode")
    assert list(kv) == [
        "#running-req", "#token", "token usage", "accept len", "accept rate", "cuda graph",
        "gen throughput (token/s)", "#queue-req",
    ]  # fmt: skip
    assert kv["gen throughput (token/s)"] == "94.02"


def test_decode_line_without_speculation_has_no_accept_fields() -> None:
    ranks, kind, kv = fields(format_line(T, decode_message(3, 900, 0.0, 88.8, cuda_graph=False, queue_req=2)))
    assert kind == "Decode"
    assert "accept len" not in kv and "accept rate" not in kv
    assert (kv["#running-req"], kv["cuda graph"], kv["#queue-req"]) == ("3", "False", "2")


def test_prefill_and_access_lines() -> None:
    ranks, kind, kv = fields(format_line(T, prefill_message(1, 512, 0, 0.0, 0, 0, 31.25)))
    assert (ranks, kind) == ("TP0", "Prefill")
    assert kv == {
        "#new-seq": "1", "#new-token": "512", "#cached-token": "0", "token usage": "0.00", "#running-req": "0",
        "#queue-req": "0", "cuda graph": "False", "input throughput (token/s)": "31.25",
    }  # fmt: skip
    line = format_line(T, access_message(51234, "POST", "/v1/completions"), HTTP)
    assert line == '[2026-02-12 09:14:03] INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK'
    assert PREFIX.match(line).group("ranks") == ""  # type: ignore[union-attr]
    assert format_line(T, "Loading", RAW) == "Loading"


def test_server_args_line() -> None:
    spec = format_line(T, server_args_message(SpecConfig.make(2), seed=3), HTTP)
    assert spec.startswith("[2026-02-12 09:14:03] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', ")
    assert spec.endswith(")")
    for part in (
        "speculative_algorithm='EAGLE3'",
        "speculative_draft_model_path='/data/models/Kimi-K2.5-EAGLE3'",
        "speculative_num_steps=2",
        "speculative_eagle_topk=1",
        "speculative_num_draft_tokens=3",
        "tp_size=8",
        "decode_log_interval=40",
        "random_seed=3",
    ):
        assert f", {part}," in spec
    plain = server_args_message(SpecConfig.make(0))
    for part in ("speculative_algorithm=None", "speculative_num_steps=None", "speculative_num_draft_tokens=None"):
        assert f", {part}," in plain


def test_progress_bars_look_like_tqdm() -> None:
    shards = "Loading safetensors checkpoint shards:"
    # 29 shards in 151 s: 5.21 s/it, 35 left -> 182 s.
    assert shard_progress_line(29, 64, 151.0) == f"{shards}  45% Completed | 29/64 [02:31<03:02,  5.21s/it]"
    assert shard_progress_line(0, 64, 0.0) == f"{shards}   0% Completed | 0/64 [00:00<?, ?it/s]"
    assert capture_progress_line(8, 21.3, 9, 12, 31.0) == (
        "Capturing batches (bs=8 avail_mem=21.30 GB):  75%|███████▌  | 9/12 [00:31<00:10,  3.44s/it]"
    )
    assert capture_progress_line(1, 20.0, 12, 12, 6.0) == (
        "Capturing batches (bs=1 avail_mem=20.00 GB): 100%|██████████| 12/12 [00:06<00:00,  2.00it/s]"
    )


LIFECYCLE = [
    r"server_args=ServerArgs\(model_path='moonshotai/Kimi-K2\.5', ",
    r"Init torch distributed begin\.",
    r"Load weight begin\. avail mem=\d+\.\d\d GB",
    r"Load weight end\. elapsed=\d+\.\d\d s, type=KimiK25ForConditionalGeneration, dtype=torch\.bfloat16, "
    r"avail mem=\d+\.\d\d GB, mem usage=\d+\.\d\d GB\.",
    r"KV Cache is allocated\. #tokens: \d+, KV size: \d+\.\d\d GB",
    r"Capture cuda graph begin\. This can take up to several minutes\. avail mem=\d+\.\d\d GB",
    r"Capture cuda graph end\. Time elapsed: \d+\.\d\d s\. mem usage=\d+\.\d\d GB\. avail mem=\d+\.\d\d GB\.",
    r"INFO:     Application startup complete\.",
    r"The server is fired up and ready to roll!",
]


@pytest.mark.parametrize("steps", [0, 2])
def test_startup_script_order_and_content(steps: int) -> None:
    script = startup_script(SpecConfig.make(steps), random.Random(1), 600.0, port=30123, pid=777)
    assert [s.at for s in script] == sorted(s.at for s in script)
    assert script[0].at == 0.0 and script[-1].at == 600.0
    text = [s.message for s in script]
    positions = []
    for pattern in LIFECYCLE:
        hits = [i for i, m in enumerate(text) if re.match(pattern, m)]
        assert hits, pattern
        positions.append(hits[0])
    assert positions == sorted(positions)
    shards = [m for m in text if m.startswith("Loading safetensors checkpoint shards:")]
    assert len(shards) == 65
    assert shards[-1].startswith("Loading safetensors checkpoint shards: 100% Completed | 64/64 [")
    # Scheduler lines from all 8 ranks; HTTP-process lines carry no rank; tqdm lines no prefix.
    assert {s.ranks for s in script if s.message.startswith("Load weight begin")} >= {f"TP{r}" for r in range(8)}
    assert all(s.ranks == HTTP for s in script if s.message.startswith("INFO:"))
    assert all(s.ranks is RAW for s in script if "Completed |" in s.message or s.message.startswith("Capturing"))
    assert "INFO:     Uvicorn running on http://127.0.0.1:30123 (Press CTRL+C to quit)" in text
    assert "INFO:     Started server process [777]" in text
    drafts = [m for m in text if m.startswith("Capture draft cuda graph end.")]
    assert len(drafts) == (8 if steps else 0)


def test_crash_script_is_a_traceback_not_a_start() -> None:
    script = startup_script(SpecConfig.make(3), random.Random(2), 100.0, crash_at=0.4)
    text = [s.message for s in script]
    assert not any("fired up" in m for m in text)
    head = next(i for i, m in enumerate(text) if m == "Scheduler hit an exception: Traceback (most recent call last):")
    assert script[head].ranks and script[head].ranks.startswith("TP")
    tail = script[head + 1 :]
    assert all(s.ranks is RAW for s in tail[:-1])
    assert tail[0].message.startswith('  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line ')
    assert any(s.message.startswith("torch.OutOfMemoryError: CUDA out of memory.") for s in tail)
    assert tail[-1].message == "Received sigquit from a child process. It usually means the child failed."
    assert tail[-1].ranks == HTTP
    assert crash_script(5.0, random.Random(0))[0].at == 5.0


def test_shutdown_lines() -> None:
    lines = [format_line(T, s.message, s.ranks) for s in shutdown_script()]
    assert lines == [
        "[2026-02-12 09:14:03] SIGTERM received. signum=None frame=None. Draining requests and shutting down...",
        "[2026-02-12 09:14:03] Gracefully exiting... Remaining number of requests 0. "
        "Remaining requests remaining_rids=[].",
    ]
    busy = shutdown_script(["3f2a", "9bc1"])[1].message
    assert busy == (
        "Gracefully exiting... Remaining number of requests 2. Remaining requests remaining_rids=['3f2a', '9bc1']."
    )


def run_engine(spec: SpecConfig, idle_s: float, max_tokens: int) -> tuple[list[str], SimEngine, SimRequest]:
    buf = io.StringIO()
    engine = SimEngine(spec, LogWriter(buf), T, random.Random(5))
    engine.advance_to(T + idle_s)
    req = SimRequest(500, max_tokens)
    engine.submit(req)
    while not engine.idle:
        engine.step()
    return buf.getvalue().splitlines(), engine, req


def test_engine_decode_lines_follow_sglang_rules() -> None:
    lines, engine, req = run_engine(SpecConfig.make(2), idle_s=10.0, max_tokens=2000)
    assert req.generated == 2000 and req.finished_at == engine.now and engine.finished == [req]
    assert fields(lines[0])[1] == "Prefill"
    decodes = [fields(x)[2] for x in lines if "Decode batch" in x]
    # One line per 40 cycles of ~2.1 tokens: about 2000 / 84 lines.
    assert 18 <= len(decodes) <= 30
    thr = [float(d["gen throughput (token/s)"]) for d in decodes]
    # The first line after 10 s idle is tiny (the stats gap includes the idle time), like real SGLang.
    assert thr[0] < 10
    assert 70 < sum(thr[1:]) / len(thr[1:]) < 115
    tokens = [int(d["#token"]) for d in decodes]
    assert tokens == sorted(tokens) and tokens[0] > 500 and tokens[-1] <= 2500
    for d in decodes:
        length, rate = float(d["accept len"]), float(d["accept rate"])
        assert 1.0 <= length <= 3.0
        assert rate == pytest.approx((length - 1) / 2, abs=0.011)
        assert d["#running-req"] == "1"
    # Idle: time passes, nothing is printed.
    before = engine.writer.lines_written
    engine.advance_to(engine.now + 30)
    engine.step()
    assert engine.writer.lines_written == before


def test_engine_stamps_are_its_simulated_clock() -> None:
    lines, engine, _ = run_engine(SpecConfig.make(0), idle_s=0.0, max_tokens=4000)
    stamps = [PREFIX.match(x).group("ts") for x in lines]  # type: ignore[union-attr]
    assert stamps == sorted(stamps)
    # 4000 tokens at ~88.8 tok/s: the run spans ~45 simulated seconds.
    assert 35 < engine.now - T < 60
    assert all("accept" not in x for x in lines)


def test_engine_batches_concurrent_requests() -> None:
    buf = io.StringIO()
    engine = SimEngine(SpecConfig.make(2), LogWriter(buf), T, random.Random(8))
    reqs = [SimRequest(100, 600) for _ in range(3)]
    for r in reqs:
        engine.submit(r)
    while not engine.idle:
        engine.step()
    running = [fields(x)[2]["#running-req"] for x in buf.getvalue().splitlines() if "Decode batch" in x]
    assert running and running[0] == "3"
    assert all(r.generated == 600 for r in reqs)
    prefill = [x for x in buf.getvalue().splitlines() if "Prefill batch" in x]
    assert len(prefill) == 1 and "#new-seq: 3, #new-token: 300," in prefill[0]


def test_default_model_interval_is_sglang_default() -> None:
    assert DEFAULT_MODEL.decode_log_interval == 40


@pytest.mark.parametrize("duration", [0.5, 6.0, 700.0])
def test_each_rank_keeps_its_own_order(duration: float) -> None:
    script = startup_script(SpecConfig.make(2), random.Random(4), duration)
    phases = ("Init torch distributed begin", "Init torch distributed ends", "Load weight begin", "Load weight end",
              "KV Cache is allocated", "Memory pool end", "Capture cuda graph begin", "Capture cuda graph end",
              "Load weight begin", "Load weight end", "KV Cache is allocated", "Capture draft cuda graph begin",
              "Capture draft cuda graph end", "Capture draft extend cuda graph begin",
              "Capture draft extend cuda graph end")  # fmt: skip
    for rank in range(8):
        mine = [s.message for s in script if s.ranks == f"TP{rank}"]
        order = [next(p for p in phases if m.startswith(p)) for m in mine if m.startswith(phases)]
        assert order == list(phases), rank
