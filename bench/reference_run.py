"""A long reference run on the real vLLM kit: each speculative setting for a fixed time.

Not part of the product: it records raw data that specmon's sources then read
(the server log, /metrics scrapes once a second, every streamed request), so a
short ``specmon sweep`` can be checked against a long, fixed-length measurement
of the same workload (the load driver's bundled prompts, greedy, ``ignore_eos``).

    python bench/reference_run.py --out /tmp/ref --steps 0,1,3,5 --seconds 600 --port 18201
    python bench/reference_run.py --out /tmp/ref --steps 0,1,3,5,5,3,1,0 --seconds 300   # two launches each

Only 127.0.0.1. The server is started with the kit's ``serve.sh`` and stopped by
its PID (SIGINT) in a finally.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import httpx

from specmon.control.load import BUNDLED_PROMPTS

SERVE = "/work/shared/real_server/serve.sh"


async def wait_ready(client: httpx.AsyncClient, base: str, proc: subprocess.Popen[bytes], limit: float) -> None:
    end = time.monotonic() + limit
    while time.monotonic() < end:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        with contextlib.suppress(httpx.HTTPError):
            if (await client.get(base + "/health", timeout=2)).status_code == 200:
                return
        await asyncio.sleep(0.5)
    raise RuntimeError("server not ready")


async def scrape(client: httpx.AsyncClient, base: str, out: Path, stop: asyncio.Event) -> None:
    with out.open("a") as fh:
        while not stop.is_set():
            t = time.time()
            with contextlib.suppress(httpx.HTTPError):
                r = await client.get(base + "/metrics", timeout=5)
                keep = [ln for ln in r.text.splitlines()
                        if ln.startswith("vllm:") and "_bucket" not in ln and "_created" not in ln]
                fh.write(json.dumps({"t": t, "lines": keep}) + "\n")
                fh.flush()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 1.0)


async def load(client: httpx.AsyncClient, base: str, model: str, out: Path, seconds: float, max_tokens: int) -> None:
    end = time.monotonic() + seconds
    i = 0
    with out.open("a") as fh:
        while time.monotonic() < end:
            body = {"model": model, "prompt": BUNDLED_PROMPTS[i % len(BUNDLED_PROMPTS)], "max_tokens": max_tokens,
                    "temperature": 0.0, "stream": True, "ignore_eos": True,
                    "stream_options": {"include_usage": True, "continuous_usage_stats": True}}
            rec: dict[str, object] = {"i": i, "t0": time.time()}
            chunks: list[tuple[float, int | None]] = []
            usage = None
            try:
                async with client.stream("POST", base + "/v1/completions", json=body, timeout=300) as r:
                    async for line in r.aiter_lines():
                        if not line.startswith("data:") or line[5:].strip() == "[DONE]":
                            continue
                        data = json.loads(line[5:])
                        u = data.get("usage") or None
                        if u:
                            usage = u
                        if data.get("choices"):
                            chunks.append((time.time(), (u or {}).get("completion_tokens")))
                rec.update(ok=True, chunks=chunks, usage=usage)
            except (httpx.HTTPError, ValueError) as exc:
                rec.update(ok=False, error=repr(exc)[:200])
            rec["t_end"] = time.time()
            fh.write(json.dumps(rec) + "\n")
            fh.flush()
            i += 1


async def one_setting(steps: int, args: argparse.Namespace, launch: int = 1) -> None:
    # One folder per launch: k3 for the first launch of 3 steps, k3_l2 for its second.
    out = Path(args.out) / (f"k{steps}" if launch == 1 else f"k{steps}_l{launch}")
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, VLLM_LOG_STATS_INTERVAL=str(args.log_interval))
    base = f"http://127.0.0.1:{args.port}"
    meta = {"steps": steps, "launch": launch, "started": time.time(), "loadavg_start": os.getloadavg()}
    proc = subprocess.Popen(["bash", SERVE, str(steps), str(out / "server.log"), str(args.port)], env=env)
    try:
        async with httpx.AsyncClient() as client:
            await wait_ready(client, base, proc, 300)
            model = (await client.get(base + "/v1/models")).json()["data"][0]["id"]
            stop = asyncio.Event()
            scraper = asyncio.ensure_future(scrape(client, base, out / "metrics.jsonl", stop))
            meta["load_started"] = time.time()
            await load(client, base, model, out / "requests.jsonl", args.seconds, args.max_tokens)
            meta["load_ended"] = time.time()
            await asyncio.sleep(2)
            stop.set()
            await scraper
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        meta["loadavg_end"] = os.getloadavg()
        (out / "meta.json").write_text(json.dumps(meta))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", default="0,1,3,5")
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--port", type=int, default=18201)
    ap.add_argument("--max-tokens", type=int, default=512)
    ap.add_argument("--log-interval", type=float, default=10)
    args = ap.parse_args()
    # A setting listed twice is launched twice (``--steps 0,1,3,5,5,3,1,0``: each in two launches,
    # in alternating order, so slow drift favours none).
    launches: dict[int, int] = {}
    for s in args.steps.split(","):
        launches[int(s)] = launches.get(int(s), 0) + 1
        asyncio.run(one_setting(int(s), args, launches[int(s)]))


if __name__ == "__main__":
    main()
