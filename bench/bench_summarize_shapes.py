"""Benchmark: ``specmon summarize --format json`` against ``grep | awk`` on logs of many real shapes.

Not a test (the machines are shared and noisy): it prints figures. Every shape is
a 2,000,000-line log (``--lines``) written in one of the line shapes real servers
print (``../shared/real_logs/``, ``FORMATS.md``); for each, the reference is an
equivalent ``grep | awk`` pipeline (the mean generation throughput), measured in
the same run, on the same file, with a warm page cache, each side best of 3.
Ratios within one run are what counts. Target (issue 10): worst ratio ≤ 2.5,
peak RSS ≤ 150 MB.

Two things kept out of the figures that a user's runs do not have. The logs are
written by a child process: a child's peak RSS (``wait4``) starts from its parent's
at the fork, and a bench process that has built a 2M-line log in memory gave every
command it ran a "peak" of 1.2 GB. And specmon runs once, untimed, with Python's
bytecode cache allowed, before it is timed: an installed copy has its modules
compiled (pip compiles them at install; an editable install at its first run), but
with ``PYTHONDONTWRITEBYTECODE=1`` in the environment every run compiled them all
again from source (57 ms of each run).

Usage: python bench/bench_summarize_shapes.py [--lines N] [--only NAME,NAME] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

Writer = Callable[[random.Random, int], str]


def _awk_mean(sep: str) -> str:
    """awk: the mean of the number after ``sep`` (a regex, already shell-safe in single quotes)."""
    return f"awk -F'{sep}' 'NF>1 {{split($2,a,/[ ,|]/); s+=a[1]; n++}} END {{if (n) printf \"%.4f\\n\", s/n}}'"


def _sg_ts(i: int, ms: bool = False, date: bool = True) -> str:
    s = i // 12
    t = f"{9 + s // 3600 % 14:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
    if ms:
        t += f".{(i * 83) % 1000:03d}"
    return f"2026-08-23 {t}" if date else t


def _decode_body(rng: random.Random, sep: str = ", ", spec: bool = True, trail: str = "",
                 graph: str = "cuda graph: True, ") -> str:
    acc = (f"accept len: {rng.uniform(1.6, 2.6):.2f}, accept rate: {rng.uniform(0.5, 0.9):.2f}, "
           if spec else "")
    return (f"Decode batch{sep}#running-req: {rng.randint(1, 4)}, #token: {rng.randint(100, 9000)}, "
            f"token usage: 0.02, {acc}{graph}gen throughput (token/s): {rng.uniform(58, 120):.2f}, "
            f"#queue-req: 0{trail}")


def _prefill_body(rng: random.Random, sep: str = ", ", thr: bool = True, trail: str = "") -> str:
    tail = ", cuda graph: False, input throughput (token/s): 1234.56" if thr else ""
    return (f"Prefill batch{sep}#new-seq: 1, #new-token: {rng.randint(10, 900)}, #cached-token: 0, "
            f"token usage: 0.02, #running-req: 0, #queue-req: 0{tail}{trail}")


def _access(rng: random.Random) -> str:
    return f'INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK'


def _sglang(prefix: Callable[[int, random.Random], str], sep: str = ", ", spec: bool = True,
            trail: str = "", thr: bool = True, access_prefix: Callable[[int], str] | None = None) -> Writer:
    """60% decode, 20% prefill, 20% access lines, all with the given prefix and separators."""
    def line(rng: random.Random, i: int) -> str:
        x = rng.random()
        if x < 0.6:
            return prefix(i, rng) + _decode_body(rng, sep, spec, trail)
        if x < 0.8:
            return prefix(i, rng) + _prefill_body(rng, sep, thr, trail)
        ap = access_prefix(i) if access_prefix else f"[{_sg_ts(i)}] "
        return ap + _access(rng)
    return line


def _vllm_ts(i: int) -> str:
    s = i // 3
    return f"10-22 {9 + s // 3600 % 14:02d}:{s // 60 % 60:02d}:{s % 60:02d}"


def _vllm(wrapper: Callable[[int], str] = lambda i: "") -> Writer:
    """vLLM V1 with DP=2: Engine 000/001 stats lines, SpecDecoding lines, access lines."""
    def line(rng: random.Random, i: int) -> str:
        x = rng.random()
        head = wrapper(i) + f"INFO {_vllm_ts(i)} [loggers.py:123] "
        if x < 0.45:
            return (head + f"Engine {i % 2:03d}: Avg prompt throughput: {rng.uniform(0, 900):.1f} tokens/s, "
                    f"Avg generation throughput: {rng.uniform(58, 120):.1f} tokens/s, Running: "
                    f"{rng.randint(1, 8)} reqs, Waiting: 0 reqs, GPU KV cache usage: {rng.uniform(0, 30):.1f}%, "
                    f"Prefix cache hit rate: {rng.uniform(0, 90):.1f}%")
        if x < 0.8:
            a = rng.randint(100, 900)
            return (head.replace("loggers.py:123", "metrics.py:96")
                    + f"SpecDecoding metrics: Mean acceptance length: {rng.uniform(1.5, 3.5):.2f}, "
                    f"Accepted throughput: {rng.uniform(10, 90):.2f} tokens/s, Drafted throughput: "
                    f"{rng.uniform(90, 200):.2f} tokens/s, Accepted: {a} tokens, Drafted: {a * 2} tokens, "
                    f"Per-position acceptance rate: 0.812, 0.601, 0.420, Avg Draft acceptance rate: 50.0%")
        return wrapper(i) + f"INFO:     127.0.0.1:{rng.randint(30000, 60000)} - " \
                            f'"POST /v1/chat/completions HTTP/1.1" 200 OK'
    return line


def _llamacpp(rng: random.Random, i: int) -> str:
    """print_timing blocks (6 lines), behind a compose/collector ``ts | `` wrapper."""
    w = f"2026-05-14 {9 + i // 43200 % 14:02d}:{i // 720 % 60:02d}:{i // 12 % 60:02d}.{i % 1000:03d} | "
    k = i % 6
    if k == 0:
        return w + f"slot print_timing: id  0 | task {i // 6} | "
    if k == 1:
        return w + "prompt eval time =     648.99 ms /   133 tokens (    4.88 ms per token,   204.94 tokens per second)"
    if k == 2:
        tps = rng.uniform(40, 90)
        return (w + f"       eval time =   {2048 / tps * 1000:.2f} ms /  2048 tokens (   {1000 / tps:.2f} ms per "
                f"token,    {tps:.2f} tokens per second)")
    if k == 3:
        return w + "      total time =   31036.11 ms /  2181 tokens"
    if k == 4:
        a = rng.randint(500, 1200)
        return w + f"draft acceptance rate = {a / 1207:.5f} ( {a} accepted /  1207 generated)"
    return w + "srv  update_slots: all slots are idle"


def _vllm_v0(rng: random.Random, i: int) -> str:
    """vLLM V0 (0.5.x): ``INFO MM-DD HH:MM:SS metrics.py:N]`` (no ``[``), Swapped/Pending, a final ``.``,
    ``Speculative metrics`` with fractions and the ``tokens tokens`` typo; access lines between."""
    head = f"INFO {_vllm_ts(i)} metrics.py:411] "
    x = rng.random()
    if x < 0.45:
        return (head + f"Avg prompt throughput: {rng.uniform(0, 900):.1f} tokens/s, Avg generation throughput: "
                f"{rng.uniform(58, 120):.1f} tokens/s, Running: {rng.randint(1, 8)} reqs, Swapped: 0 reqs, "
                f"Pending: 0 reqs, GPU KV cache usage: {rng.uniform(0, 30):.1f}%, CPU KV cache usage: 0.0%.")
    if x < 0.8:
        a = rng.randint(100, 900)
        return (head.replace(":411", ":316") + f"Speculative metrics: Draft acceptance rate: {a / 1800:.3f}, "
                f"System efficiency: {rng.uniform(0.3, 0.9):.3f}, Number of speculative tokens: 4, Number of "
                f"accepted tokens: {a}, Number of draft tokens tokens: 1800, Number of emitted tokens tokens: {a + 400}.")
    return f'INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "POST /v1/completions HTTP/1.1" 200 OK'


def _llamacpp_2026(rng: random.Random, i: int) -> str:
    """2026 llama-server: ``M.SS.mmm.uuu L`` elapsed-time prefix, live ``n_gen`` lines, the one-line
    ``draft acceptance = ..., mean acceptance length = ..., acceptance rate per position = (...)``."""
    s = i // 10
    p = f"{s // 60}.{s % 60:02d}.{(i * 37) % 1000:03d}.{(i * 91) % 1000:03d} I "
    k = i % 10
    if k < 5:
        return p + f"slot print_timing: id  0 | task {i // 10} | n_gen = {k * 20 + 20:6d}, tg = {rng.uniform(25, 35):6.2f} t/s, tg_3s = {rng.uniform(25, 35):6.2f} t/s"
    if k == 5:
        return p + f"slot print_timing: id  0 | task {i // 10} | "
    if k == 6:
        return p + "prompt eval time =     648.99 ms /   133 tokens (    4.88 ms per token,   204.94 tokens per second)"
    if k == 7:
        tps = rng.uniform(40, 90)
        return (p + f"       eval time =   {2048 / tps * 1000:.2f} ms /  2048 tokens (   {1000 / tps:.2f} ms per "
                f"token,    {tps:.2f} tokens per second)")
    if k == 8:
        a = rng.randint(100, 250)
        return (p + f"slot print_timing: id  0 | task {i // 10} | draft acceptance = {a / 259:.5f} ({a:5d} accepted / "
                f"  259 generated), mean acceptance length = {1 + a / 86:5.2f}, acceptance rate per position = "
                f"({rng.uniform(0.7, 0.9):.3f}, {rng.uniform(0.5, 0.7):.3f}, {rng.uniform(0.3, 0.5):.3f})")
    return p + "srv  log_server_r: done request: POST /v1/chat/completions 172.18.0.1 200"


@dataclass(frozen=True)
class Shape:
    name: str
    what: str
    write: Writer
    grep: str  # the grep command (the file name follows) keeping the lines averaged
    awk_sep: str  # the awk field separator before the number averaged


def _docker(i: int) -> str:
    s = i // 12
    return f"2026-08-23T{9 + s // 3600 % 14:02d}:{s // 60 % 60:02d}:{s % 60:02d}.{i % 1000:03d}762854Z "


_DEC = ("grep 'Decode batch'", "gen throughput \\\\(token\\/s\\\\): ")
SHAPES = (
    Shape("sglang_standard", "[date time TP0] Decode batch, + accept fields; prefill with throughput",
          _sglang(lambda i, r: f"[{_sg_ts(i)} TP0] "), *_DEC),
    Shape("sglang_prefill_nothr", "0.5.x: `Decode batch.` with trailing `, `; prefill without throughput",
          _sglang(lambda i, r: f"[{_sg_ts(i)} TP0] ", sep=". ", trail=", ", thr=False), *_DEC),
    Shape("sglang_dp_attention", "[date DPn TPn EPn] 4 ranks, `.` separator, trailing `, `",
          _sglang(lambda i, r: f"[{_sg_ts(i)} DP{i % 4} TP{i % 4} EP{i % 4}] ", sep=". ", trail=", "), *_DEC),
    Shape("sglang_pre04_norank", "pre-0.4: [date time] no rank tag, no accept fields, `.` separator",
          _sglang(lambda i, r: f"[{_sg_ts(i)}] ", sep=". ", spec=False), *_DEC),
    Shape("sglang_docker_ms", "docker logs -t wrapper + SGLANG_LOG_MS [date time.mmm PP0 ATTN_CP7 TP7]",
          _sglang(lambda i, r: _docker(i) + f"[{_sg_ts(i, ms=True)} PP0 ATTN_CP7 TP7] ",
                  access_prefix=lambda i: _docker(i) + f"[{_sg_ts(i, ms=True)}] "), *_DEC),
    Shape("sglang_ray_timeonly", "Ray worker tag + v0.2.13 time-only [HH:MM:SS TP1] + ESC-less ANSI",
          _sglang(lambda i, r: f"\x1b[36m(WorkerDict pid=1216, ip=10.0.0.7)\x1b[0m [{_sg_ts(i, date=False)} TP1] ",
                  access_prefix=lambda i: f"(WorkerDict pid=1216, ip=10.0.0.7) [{_sg_ts(i, date=False)}] "),
          *_DEC),
    Shape("sglang_custom_logfmt", "SGLANG_LOGGING_CONFIG_PATH: `date time INFO pid [ DP15 TP15 EP15 file:N]`",
          _sglang(lambda i, r: f"{_sg_ts(i)} INFO 8900 [ DP{i % 2} TP{i % 2} EP{i % 2} scheduler_metrics_mixin.py:222] ",
                  sep=". ", trail=", "), *_DEC),
    Shape("vllm_v1_dp_spec", "vLLM V1 `INFO MM-DD` Engine 000/001 + SpecDecoding lines (year-less)",
          _vllm(), "grep 'Avg generation throughput'", "Avg generation throughput: "),
    Shape("vllm_k8s_ray", "k8s CRI `ts stdout F` + `(EngineCore_DP0 pid=123)` around vLLM V1",
          _vllm(lambda i: f"{_docker(i)}stdout F (EngineCore_DP0 pid=123) "),
          "grep 'Avg generation throughput'", "Avg generation throughput: "),
    Shape("llamacpp_print_timing", "llama.cpp print_timing blocks behind a `ts | ` collector wrapper",
          _llamacpp, "grep -v 'prompt eval' -- ", "tokens \\\\(.*ms per token, *"),
    Shape("vllm_v0_spec", "vLLM V0 0.5.x: `INFO MM-DD time metrics.py:N]`, Swapped/Pending, final `.`, "
          "`Speculative metrics` (fractions, `tokens tokens`)",
          _vllm_v0, "grep 'Avg generation throughput'", "Avg generation throughput: "),
    Shape("llamacpp_2026", "llama-server 2026: `M.SS.mmm.uuu I` prefix, n_gen progress lines, one-line "
          "`draft acceptance = …, mean acceptance length = …, acceptance rate per position = (…)`",
          _llamacpp_2026, "grep -v 'prompt eval' -- ", "tokens \\\\(.*ms per token, *"),
)


def write_log_apart(path: Path, shape: Shape, lines: int) -> None:
    """:func:`write_log` in a child process (this one stays small: see the module docstring)."""
    subprocess.run([sys.executable, __file__, "--write", shape.name, str(path), "--lines", str(lines)], check=True)


def write_log(path: Path, shape: Shape, lines: int, seed: int = 1) -> None:
    rng = random.Random(seed)
    w = shape.write
    with open(path, "w", buffering=1 << 20) as f:
        f.write("\n".join(w(rng, i) for i in range(lines)))
        f.write("\n")


def _child_cpu() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def best_of(cmd: str | list[str], n: int = 3, shell: bool = False) -> tuple[float, float, str, float]:
    """Best wall time, best CPU time (user+sys of the children), the output of the last run, and the
    peak RSS (MB) of the largest process of the command's tree (``wait4``; its workers included)."""
    best, best_cpu, out, rss = float("inf"), float("inf"), "", 0.0
    for _ in range(n):
        c = _child_cpu()
        t = time.perf_counter()
        with tempfile.TemporaryFile() as fout:
            proc = subprocess.Popen(cmd, shell=shell, stdout=fout, stderr=subprocess.DEVNULL)
            _, _, usage = os.wait4(proc.pid, 0)
            proc.returncode = 0
            best = min(best, time.perf_counter() - t)
            fout.seek(0)
            out = fout.read().decode()
        best_cpu = min(best_cpu, _child_cpu() - c)
        rss = max(rss, usage.ru_maxrss / 1024)
    return best, best_cpu, out, rss


def _specmon_mean(out: str) -> str:
    try:
        doc = json.loads(out)
        tp = [r["throughput"]["mean"] for r in doc["runs"] if r.get("throughput") and r["throughput"].get("mean")]
        return f"{tp[0]:.2f}" if tp else "-"
    except (ValueError, KeyError, IndexError, TypeError):
        return "error"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--only", help="comma-separated shape names")
    ap.add_argument("--keep", type=Path, help="write the logs in this folder and keep them")
    ap.add_argument("--repeat", type=int, default=3, help="best of N (default 3)")
    ap.add_argument("--specmon", help="the command to run (default: the specmon beside this Python)")
    ap.add_argument("--write", nargs=2, metavar=("SHAPE", "PATH"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write:
        write_log(Path(args.write[1]), next(s for s in SHAPES if s.name == args.write[0]), args.lines)
        return 0
    specmon = shlex.split(args.specmon) if args.specmon else [
        shutil.which("specmon") or str(Path(sys.executable).with_name("specmon"))]
    shapes = [s for s in SHAPES if not args.only or s.name in args.only.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        for shape in shapes:
            log = folder / f"{shape.name}.log"
            if not (args.keep and log.exists()):
                write_log_apart(log, shape, args.lines)
            subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
            if shape is shapes[0]:  # once: the bytecode cache a user's installed copy has
                env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
                subprocess.run([*specmon, "summarize", str(log), "--format", "json"], env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            ref, ref_cpu, ref_out, _ = best_of(f"{shape.grep} {log} | {_awk_mean(shape.awk_sep)}", args.repeat, True)
            ours, cpu, out, rss = best_of([*specmon, "summarize", str(log), "--format", "json", "--warmup", "0"],
                                          args.repeat)
            rows.append((shape, log.stat().st_size / 1e6, ref, ours, ref_cpu, cpu, ref_out.strip() or "-",
                         _specmon_mean(out), rss))
            print(f"  {shape.name}: grep|awk {ref:.2f} s, specmon {ours:.2f} s, ratio {ours / ref:.2f} "
                  f"(cpu {cpu / max(ref_cpu, 1e-3):.2f})", file=sys.stderr, flush=True)
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"\n{args.lines:,} lines per shape, best of {args.repeat}, warm cache\n")
    print("| shape | MB | grep\\|awk s | specmon s | ratio | CPU ratio | peak RSS MB | mean tok/s (awk / specmon) |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    for shape, mb, ref, ours, ref_cpu, cpu, ref_mean, our_mean, rss in rows:
        print(f"| {shape.name} | {mb:.0f} | {ref:.2f} | {ours:.2f} | {ours / ref:.2f}× | "
              f"{cpu / max(ref_cpu, 1e-3):.2f}× | {rss:.0f} | {ref_mean} / {our_mean} |")
    worst = max(rows, key=lambda r: r[3] / r[2])
    print(f"\nworst ratio: {worst[3] / worst[2]:.2f}× ({worst[0].name}); target ≤ 2.5×")
    print(f"peak RSS of the largest child process: {peak_mb:.0f} MB; target ≤ 150 MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
