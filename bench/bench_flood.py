"""Benchmark: ``specmon watch`` under a flood of 50,000 lines/s (issue 34, item 9).

Not a test (machines are shared and noisy): it prints figures. What the issue asks, with
``specmon watch`` as a real process on a pty, its log written by a separate process:

* key latency while the flood is written and while specmon catches up: ``p`` (pause) is
  typed and the time until the header says ``paused`` is read from the terminal's output;
  p50 / p95 / max (target p95 ≤ 200 ms);
* RSS of the specmon process, sampled every 0.5 s: the peak (target ≤ 250 MB);
* exit: ``q`` at the end of the flood, and (a second run) the terminal closed during the
  flood: seconds until the process is gone (target ≤ 1 s each).

Usage: python bench/bench_flood.py [--rate 50000] [--seconds 60] [--hangup-seconds 15] [--record]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.hangup import HangupPty  # noqa: E402

LINE = ("[2026-02-12 10:{m:02d}:{s:02d} TP{tp}] Decode batch, #running-req: 16, #token: 41234, token usage: 0.12, "
        "accept len: 2.{a:02d}, accept rate: 0.{r:02d}, cuda graph: True, gen throughput (token/s): {tps:.2f}, "
        "#queue-req: 0\n")
HEAD = ("[2026-02-12 10:00:00] server_args=ServerArgs(model_path='moonshotai/Kimi-K2.5', tp_size=8, "
        "speculative_algorithm='EAGLE3', speculative_num_steps=2, speculative_eagle_topk=1, "
        "speculative_num_draft_tokens=3)\n"
        "[2026-02-12 10:00:01] The server is fired up and ready to roll!\n")


def write_flood(path: str, rate: int, seconds: float, done: mp.synchronize.Event) -> None:  # type: ignore[name-defined]
    """Append ``rate`` lines a second for ``seconds``, in 10 ms slices."""
    tick = 0.01
    per = max(1, int(rate * tick))
    start = time.monotonic()
    n = 0
    with open(path, "a", buffering=1 << 20) as f:
        while time.monotonic() - start < seconds:
            chunk = []
            for _ in range(per):
                s = n // 1000
                chunk.append(LINE.format(m=(s // 60) % 60, s=s % 60, tp=n % 8, a=n % 97, r=n % 89,
                                         tps=80 + (n % 200) / 10))
                n += 1
            f.write("".join(chunk))
            f.flush()
            ahead = start + n / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    print(f"writer: {n:,} lines in {time.monotonic() - start:.1f} s ({n / (time.monotonic() - start):,.0f}/s)",
          flush=True)
    done.set()


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def key_latency(p: HangupPty, bound_s: float = 10.0) -> float | None:
    """Type ``p``; seconds until the terminal shows ``paused``; type ``p`` again to resume."""
    assert p.master is not None
    before = len(p.output)
    t0 = time.monotonic()
    os.write(p.master, b"p")
    took = None
    while time.monotonic() - t0 < bound_s:
        if "paused" in p.output[before:]:
            took = time.monotonic() - t0
            break
        time.sleep(0.002)
    if p.master is not None:
        os.write(p.master, b"p")
    return took


def session(log: Path, env: dict[str, str], rate: int, seconds: float, *, ending: str,
            record: bool) -> dict[str, object]:
    log.write_text(HEAD)
    args = ["watch", str(log)] + ([] if record else ["--no-record"])
    p = HangupPty(args, env)
    p.wait_for("specmon", 60)
    # Spawned, not forked: a forked writer would hold the pty's master open, and closing the
    # terminal would only hang it up when the writer ends.
    ctx = mp.get_context("spawn")
    done = ctx.Event()
    writer = ctx.Process(target=write_flood, args=(str(log), rate, seconds, done), daemon=True)
    writer.start()
    writing: list[float] = []
    catching: list[float] = []
    peak = 0.0
    start = time.monotonic()
    try:
        # A key about every half second (RSS read between keys); 20 more once the writer stopped.
        while len(catching) < 20:
            peak = max(peak, rss_mb(p.proc.pid))
            took = key_latency(p)
            (catching if done.is_set() else writing).append(took if took is not None else float("inf"))
            time.sleep(0.25)
        peak = max(peak, rss_mb(p.proc.pid))
        if ending == "q":
            assert p.master is not None
            t0 = time.monotonic()
            os.write(p.master, b"q")
            gone = p.gone_after(t0, 30)
        else:
            gone = -1.0
        return {"writing": writing, "catching": catching, "peak_mb": peak, "exit_s": gone,
                "elapsed": time.monotonic() - start}
    finally:
        p.kill()
        writer.join(5)


def hangup_session(log: Path, env: dict[str, str], rate: int, seconds: float, record: bool) -> float:
    log.write_text(HEAD)
    p = HangupPty(["watch", str(log)] + ([] if record else ["--no-record"]), env)
    p.wait_for("specmon", 60)
    ctx = mp.get_context("spawn")
    done = ctx.Event()
    writer = ctx.Process(target=write_flood, args=(str(log), rate, seconds * 2, done), daemon=True)
    writer.start()
    try:
        time.sleep(seconds)
        return p.gone_after(p.close_terminal(), 30)
    finally:
        p.kill()
        writer.terminate()
        writer.join(5)


def summary(name: str, values: list[float]) -> str:
    if not values:
        return f"{name}: no samples"
    v = sorted(values)
    p95 = v[min(len(v) - 1, int(round(0.95 * (len(v) - 1))))]
    return (f"{name}: n={len(v)} p50={statistics.median(v) * 1000:.0f} ms p95={p95 * 1000:.0f} ms "
            f"max={v[-1] * 1000:.0f} ms")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=int, default=50_000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--hangup-seconds", type=float, default=15.0)
    ap.add_argument("--record", action="store_true", help="record the session (the default of watch)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="specmon-flood-") as tmp:
        folder = Path(tmp)
        env = {"XDG_DATA_HOME": str(folder / "data"), "XDG_CONFIG_HOME": str(folder / "config"),
               "HOME": str(folder / "home")}
        r = session(folder / "flood.log", env, args.rate, args.seconds, ending="q", record=args.record)
        print(summary("key latency while writing", r["writing"]))  # type: ignore[arg-type]
        print(summary("key latency catching up", r["catching"]))  # type: ignore[arg-type]
        print(f"RSS peak: {r['peak_mb']:.0f} MB")
        print(f"q -> gone: {r['exit_s']:.2f} s")
        gone = hangup_session(folder / "flood2.log", env, args.rate, args.hangup_seconds, args.record)
        print(f"terminal closed after {args.hangup_seconds:g} s of flood -> gone: {gone:.2f} s")
        print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
