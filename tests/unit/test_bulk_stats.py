"""vLLM and llama.cpp logs on the bulk path give what the line path gives, in the awkward cases.

Stats lines right after a crash (the session must see which line comes first), a
piece mixing SGLang and vLLM lines, llama.cpp blocks with their unprefixed lines,
warm-up and idle intervals: the summary documents of both paths are equal.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from specmon.ingest import feeding, templates
from specmon.ingest.files import ingest_file
from specmon.model.analysis import analyze
from specmon.model.session import Session
from specmon.output.tables import to_json


def _doc(session: Session) -> dict:
    return json.loads(json.dumps(to_json(session, analyze(session.runs))))


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, piece: int) -> tuple[dict, dict]:
    slow = Session()
    ingest_file(slow, str(path))
    monkeypatch.setattr(feeding, "PIECE", piece)
    fast = Session()
    feeding.ingest_file_fast(fast, str(path), jobs=1)
    return _doc(slow), _doc(fast)


def _vllm(rng: random.Random, t: int, running: int | None = None) -> list[str]:
    stamp = f"INFO 03-01 10:{t // 60 % 60:02d}:{t % 60:02d}"
    run = rng.choice((0, 1, 2, 3)) if running is None else running
    return [f"(APIServer pid=1) {stamp} [loggers.py:271] Engine 000: Avg prompt throughput: 1.0 tokens/s, "
            f"Avg generation throughput: {rng.choice((0.0, 55.5, 61.2, 70.1))} tokens/s, Running: {run} reqs, "
            f"Waiting: 0 reqs, GPU KV cache usage: 1.5%, Prefix cache hit rate: 0.0%",
            f"(APIServer pid=1) {stamp} [metrics.py:101] SpecDecoding metrics: Mean acceptance length: "
            f"{rng.uniform(1, 4):.2f}, Accepted throughput: 2.00 tokens/s, Drafted throughput: 3.00 tokens/s, "
            f"Accepted: {rng.randint(0, 50)} tokens, Drafted: {rng.choice((0, 60, 90))} tokens, Per-position "
            f"acceptance rate: {rng.random():.3f}, {rng.random():.3f}, Avg Draft acceptance rate: 50.0%"]


@pytest.mark.parametrize("seed", range(4))
def test_stats_after_a_crash_and_mixed_pieces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    rng = random.Random(seed)
    lines: list[str] = ["(APIServer pid=1) INFO 03-01 10:00:00 [api_server.py:1] vLLM API server version 0.9.1"]
    for t in range(1, 400):
        r = rng.random()
        if r < 0.02:
            lines.append("(EngineCore_DP0 pid=7) ERROR 03-01 10:00:00 [core.py:1] EngineCore encountered a fatal error.")
        elif r < 0.03:
            lines.append("(APIServer pid=1) INFO 03-01 10:00:00 [launcher.py:1] Shutting down FastAPI HTTP server.")
        elif r < 0.035:
            lines.append("[2025-03-01 10:00:00 TP0] Decode batch, #running-req: 1, #token: 10, token usage: 0.01, "
                         "cuda graph: True, gen throughput (token/s): 50.00, #queue-req: 0")
        else:
            lines.extend(_vllm(rng, t))
        if r > 0.9:
            lines.append('(APIServer pid=1) INFO:     127.0.0.1:3766 - "POST /v1/completions HTTP/1.1" 200 OK')
    log = tmp_path / "vllm.log"
    log.write_text("\n".join(lines) + "\n")
    slow, fast = _both(log, monkeypatch, piece=rng.choice((900, 3000, 20000)))
    assert fast == slow


def test_llamacpp_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    lines = []
    for i in range(300):
        w = f"2026-05-14 22:{i // 60 % 60:02d}:{i % 60:02d}.046 | "
        lines += [w + f"slot print_timing: id  0 | task {i} | ",
                  w + "prompt eval time =     648.99 ms /   133 tokens (    4.88 ms per token,   204.94 tokens per second)",
                  w + f"       eval time =   30387.12 ms /  2048 tokens (   14.84 ms per token, {rng.uniform(30, 90):8.2f} tokens per second)",
                  w + "      total time =   31036.11 ms /  2181 tokens",
                  w + f"draft acceptance rate = 0.98260 ( {rng.randint(0, 1207):4d} accepted /  1207 generated)",
                  w + "srv  update_slots: all slots are idle"]
        if i == 150:
            lines += [w + "Traceback (most recent call last):", "  File \"x.py\", line 1", "RuntimeError: boom"]
    log = tmp_path / "llama.log"
    log.write_text("\n".join(lines) + "\n")
    for piece in (1500, 8000, 1 << 20):
        templates._LEARNER.__init__()  # type: ignore[misc]  # nothing learned yet: the first pieces walk
        slow, fast = _both(log, monkeypatch, piece)
        assert fast == slow


def test_live_batches_after_a_crash_match_the_line_path() -> None:
    from specmon.ingest.files import ingest_lines
    from specmon.ingest.live import ingest_batch
    from specmon.parsing import LineParser

    rng = random.Random(9)
    lines = ["(EngineCore_DP0 pid=7) ERROR 03-01 10:00:00 [core.py:1] EngineCore encountered a fatal error."]
    for t in range(1, 200):
        lines.extend(_vllm(rng, t, running=2))
    slow, fast = Session(), Session()
    ingest_lines(slow, LineParser(year=2025), lines)
    parser = LineParser(year=2025)
    n = 1
    for i in range(0, len(lines), 100):
        n = ingest_batch(fast, parser, lines[i:i + 100], n)
    assert _doc(fast) == _doc(slow)
