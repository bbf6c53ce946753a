"""Benchmark: reading a llama-server log at ``-lv 4``, where most lines hold a new pointer.

Not a test (machines are shared and noisy): it prints figures. At ``-lv 4`` llama-server lists
its whole prompt cache at every request (``srv update: - prompt 0x7fde84005f80: 122 tokens,
...``), 42% of the lines of the kit's log, and the list grows with every request. Each such line
has a new pointer, so a new quiet shape: the bulk reader learns one at every line and turns its
list of 48 over. Four real replicas at ``-lv 4`` over SSH fell 1.1 MB behind their logs on the
2-core CI machine and a stopped one was not seen stopped within 60 s (session 20).

This writes such a log (the lines' shapes are the kit's llama-server's; pointers, counts and
times drawn at random), then reads it the way a fleet replica does (the local follower and the
feeder, from the start) and prints lines a second, best of ``--repeat``.

Usage: python bench/bench_verbose_llama.py [--lines 400000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specmon.ingest.live import Feeder, FeedInput  # noqa: E402
from specmon.sources.local import LocalTailSource  # noqa: E402

HEADER = (
    "0.00.001.000 I srv    load_model: loading model '/models/tiny-f16.gguf'\n"
    "0.00.900.000 I srv  llama_server: listening on http://127.0.0.1:8080\n"
)


def request(rng: random.Random, task: int, cached: int, t: float) -> str:
    """One request's lines at -lv 4: the cache listing (``cached`` entries), the slot's lines, its timing."""
    stamp = f"0.{int(t) // 60:02d}.{int(t) % 60:02d}.{rng.randrange(1000):03d}"
    lines = [f"{stamp} I srv        update:  - cache state: {cached} prompts, 2.255 MiB (limits: 8192.000 MiB)"]
    for _ in range(cached):
        lines.append(f"{stamp} I srv        update:    - prompt 0x{rng.getrandbits(47):012x}:"
                     f"     {rng.randrange(60, 140)} tokens, checkpoints:  0,     0.061 MiB")
    n = rng.randrange(20, 40)
    lines += [
        f"{stamp} I slot   operator(): id  1 | task {task} | new prompt, n_ctx_slot = 1024, n_keep = 0, task.n_tokens = {n}",
        f"{stamp} I slot   operator(): id  1 | task {task} | cached n_tokens = 1, memory_seq_rm [1, end)",
        f"{stamp} I slot init_sampler: id  1 | task {task} | init sampler, took 0.00 ms, tokens: text = {n}, total = {n}",
        f"{stamp} I slot print_timing: id  1 | task {task} | ",
        f"prompt eval time =       3.10 ms /    {n} tokens (    0.10 ms per token, 10000.00 tokens per second)",
        "       eval time =      60.00 ms /    96 tokens (    0.62 ms per token,  1600.00 tokens per second)",
        f"      total time =      63.10 ms /   {n + 96} tokens",
        f"{stamp} I slot      release: id  1 | task {task} | stop processing: n_tokens = {n + 96}, truncated = 0",
        f"{stamp} I srv  update_slots: all slots are idle",
        f"{stamp} I srv  log_server_r: done request: POST /completion 127.0.0.1 200",
    ]
    return "\n".join(lines) + "\n"


def write_log(path: Path, n_lines: int, seed: int = 1) -> int:
    rng = random.Random(seed)
    written, task, t = 0, 0, 1.0
    with path.open("w") as f:
        f.write(HEADER)
        while written < n_lines:
            text = request(rng, task, min(task, 400), t)
            f.write(text)
            written += text.count("\n")
            task += 1
            t += 0.07
    return written + 2


async def read_all(path: Path, total: int) -> float:
    source = LocalTailSource(str(path), lines=None, poll_interval=0.05)
    feeder = Feeder([FeedInput(source)])
    t0 = time.perf_counter()
    task = asyncio.create_task(feeder.run())
    while source.status.lines < total - 1:
        await asyncio.sleep(0.01)
    elapsed = time.perf_counter() - t0
    await source.close()
    task.cancel()
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--lines", type=int, default=400_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "llama-lv4.log"
        total = write_log(log, args.lines)
        best = min(asyncio.run(read_all(log, total)) for _ in range(args.repeat))
        print(f"{total:,} lines ({log.stat().st_size / 1e6:.1f} MB) of a llama-server log at -lv 4: "
              f"read in {best:.2f} s, {total / best:,.0f} lines/s (best of {args.repeat})")


if __name__ == "__main__":
    main()
