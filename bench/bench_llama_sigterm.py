"""Benchmark: how often llama-server hangs on a SIGTERM that arrives under load.

Not a test (it measures the engine, not specmon). llama-server's SIGINT/SIGTERM handler calls
``server_queue::terminate()``, which takes the task queue's mutex; a signal that lands on a
thread holding that mutex (the main loop taking a task, an HTTP thread posting one) deadlocks
the server: it neither exits nor writes another line. CI met it once, in the four-replica fleet
test (session 26): 60 s after SIGTERM the server had written nothing and was still running.

Each trial starts the kit's llama-server (no draft model, ``-lv 4``), puts the kit's load on it,
sends SIGTERM after a random delay, and waits ``--wait`` seconds for it to exit. A server that
does not is a hang: its threads' stacks are taken with gdb (when there is one) and it is
killed. Prints the count, and the first hang's main-thread frames.

Usage: SPECMON_SHARED=../shared python bench/bench_llama_sigterm.py [--trials 30] [--wait 15] [--concurrency 2] [--idle]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.support.realkits import free_port, llama_prefix, shared_dir  # noqa: E402


def tail(log: Path, size: int = 65536) -> bytes:
    """The log's last ``size`` bytes (a -lv 4 log grows by megabytes a second)."""
    with open(log, "rb") as f:
        f.seek(max(0, log.stat().st_size - size))
        return f.read()


def trial(folder: Path, rng: random.Random, wait_s: float, concurrency: int, idle: bool
          ) -> tuple[bool, float, str]:
    """One start, load and SIGTERM: (hung, seconds to exit or the wait, gdb's stacks when hung)."""
    prefix = llama_prefix()
    port = free_port()
    log = folder / f"llama-{port}.log"
    argv = [str(prefix / "bin" / "llama-server"), "-m", str(prefix / "models" / "tiny-f16.gguf"),
            "--host", "127.0.0.1", "--port", str(port), "-c", "2048", "-np", "2", "-t", "1", "-tb", "1",
            "--no-webui", "--log-colors", "off", "--log-prefix", "--log-timestamps", "-lv", "4"]
    with open(log, "wb") as sink:
        server = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                  start_new_session=True)
    kit = shared_dir() / "real_server_llamacpp"
    load = subprocess.Popen([sys.executable, str(kit / "load_gen.py"), "--port", str(port), "--requests", "100000",
                             "--duration", "120", "--concurrency", str(concurrency), "--wait-ready", "60"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while b"print_timing" not in tail(log) and time.monotonic() < deadline:  # answering requests
            time.sleep(0.1)
        time.sleep(rng.uniform(0.5, 3.0))
        if idle:  # the load stopped and the last request answered first
            os.killpg(load.pid, signal.SIGKILL)
            load.wait(10)
            time.sleep(1.0)
        os.kill(server.pid, signal.SIGTERM)
        sent = time.monotonic()
        try:
            server.wait(wait_s)
            return False, time.monotonic() - sent, ""
        except subprocess.TimeoutExpired:
            stacks = ""
            if shutil.which("gdb"):
                stacks = subprocess.run(["gdb", "-p", str(server.pid), "-batch", "-ex", "thread apply all bt"],
                                        capture_output=True, text=True, timeout=120).stdout
            said = "cleaning up before exit" in tail(log).decode(errors="replace")
            return True, wait_s, f"('cleaning up before exit' {'logged' if said else 'not logged'})\n{stacks}"
    finally:
        for proc in (load, server):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trials", type=int, default=30)
    ap.add_argument("--wait", type=float, default=15.0, help="seconds a server may take to exit")
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--idle", action="store_true", help="stop the load (and let the server go idle) before SIGTERM")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    hangs, exits, first = 0, [], ""
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.trials):
            hung, took, stacks = trial(Path(tmp), rng, args.wait, args.concurrency, args.idle)
            hangs += hung
            if hung:
                first = first or stacks
            else:
                exits.append(took)
            print(f"trial {i + 1}: {'HUNG' if hung else f'exited in {took:.2f} s'}", flush=True)
    exits.sort()
    median = f"{exits[len(exits) // 2]:.2f} s" if exits else "-"
    print(f"{hangs} of {args.trials} llama-servers hung on SIGTERM {'idle' if args.idle else 'under load'} (concurrency {args.concurrency}, "
          f"{args.wait:g} s allowed); the others exited in a median {median}")
    if first:
        print("first hang's stacks (gdb):")
        print("\n".join(line for line in first.splitlines() if line.startswith(("Thread", "#", "("))))


if __name__ == "__main__":
    main()
