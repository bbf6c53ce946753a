"""Benchmark: ``specmon report`` on a 2,000,000-line recording against ``summarize`` on the same lines.

Not a test (the machines are shared and noisy): it prints figures. It writes the
log of ``bench_summarize.py``, records it the way ``--record`` does (the
dashboard's feeder: a ``source`` entry, then the raw lines in batches through
:class:`specmon.output.recording.Recorder`), then times, in the same run and
best of ``--repeat``, ``specmon summarize LOG --format json`` and ``specmon report
RECORDING --format json``, each in its own process, with that process's peak RSS
(``wait4``). It also checks that both give the same table. Targets (issue 10):
report RSS ≤ 150 MB, report time ≤ 2× summarize.

Usage: python bench/bench_report.py [--lines N] [--repeat N] [--src DIR | --python PY] [--keep DIR]
``--src`` runs another checkout's code (e.g. the commit before a change) on the same files;
where this Python has specmon installed in editable mode, its import hook finds its own
checkout before ``PYTHONPATH``: give ``--python`` the interpreter of the other checkout's
environment instead. Each command runs once untimed first, with the bytecode cache allowed
(``PYTHONDONTWRITEBYTECODE=1`` made every run compile every module again).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_summarize import write_log  # a sibling script, not a package

BATCH = 2000  # lines per recorded batch (the feeder records what one read delivered)


def record_log(log: Path, recording: Path) -> None:
    """Record a log file as the dashboard's ``--record`` does: source entry, then raw line batches."""
    from specmon.output.recording import Recorder
    from specmon.sources.logfiles import file_year

    with Recorder(recording, meta={"command": "watch"}) as rec:
        rec.source(str(log), baseline=False, year=file_year(log))
        with open(log, encoding="utf-8", errors="replace") as f:
            lineno, batch = 1, []
            for line in f:
                batch.append(line.rstrip("\n"))
                if len(batch) == BATCH:
                    rec.batch(str(log), lineno, batch)
                    lineno += len(batch)
                    batch = []
            if batch:
                rec.batch(str(log), lineno, batch)


def run_measured(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall time (s), peak RSS (MB) of the largest process of its tree (``wait4``), and its stdout.

    Run from the temporary directory: ``python -m`` puts the current directory first on the
    path, which would shadow ``--src``.
    """
    with tempfile.TemporaryFile() as out:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env, cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - t
        proc.returncode = os.waitstatus_to_exitcode(status)
        err = proc.stderr.read().decode() if proc.stderr else ""
        if proc.stderr:
            proc.stderr.close()
        if proc.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err}")
        out.seek(0)
        return elapsed, usage.ru_maxrss / 1024, out.read().decode()


def best(argv: list[str], env: dict[str, str], repeat: int) -> tuple[float, float, str]:
    results = [run_measured(argv, env) for _ in range(repeat)]
    return min(r[0] for r in results), max(r[1] for r in results), results[-1][2]


def table_of(doc: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(r["label"], r["samples"], r["throughput"] and r["throughput"]["mean"]) for r in doc["runs"]]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=2_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--src", type=Path, help="run the specmon package found in this directory")
    ap.add_argument("--keep", type=Path, help="write (or reuse) bench.log and bench.jsonl here")
    ap.add_argument("--python", help="the Python whose specmon runs (default: this one)")
    ap.add_argument("--write", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.write:
        write_log(args.write / "bench.log", args.lines)
        (args.write / "bench.jsonl").unlink(missing_ok=True)
        record_log(args.write / "bench.log", args.write / "bench.jsonl")
        return 0
    env = dict(os.environ)
    if args.src:
        env["PYTHONPATH"] = str(args.src.resolve())
    with tempfile.TemporaryDirectory() as tmp:
        where = args.keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        log, recording = where / "bench.log", where / "bench.jsonl"
        if not (log.exists() and recording.exists()):
            # In a child process: a child's peak RSS (wait4) starts from its parent's, and writing
            # the log here made every timed command's "peak" that of this process (160 MB).
            t = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--write", str(where), "--lines", str(args.lines)], check=True)
            print(f"wrote {args.lines:,} lines and their recording in {time.perf_counter() - t:.1f} s")
        print(f"log {log.stat().st_size / 1e6:.0f} MB, recording {recording.stat().st_size / 1e6:.0f} MB")
        subprocess.run(["cat", str(log), str(recording)], stdout=subprocess.DEVNULL, check=True)  # warm cache
        py = [args.python or sys.executable, "-m", "specmon"]
        cached = {k: v for k, v in env.items() if k != "PYTHONDONTWRITEBYTECODE"}
        run_measured([*py, "summarize", str(log), "--format", "json"], cached)  # (untimed: the bytecode cache)
        s_time, s_rss, s_out = best([*py, "summarize", str(log), "--format", "json"], env, args.repeat)
        r_time, r_rss, r_out = best([*py, "report", str(recording), "--format", "json"], env, args.repeat)
        same = table_of(json.loads(s_out)) == table_of(json.loads(r_out))
        print(f"{'':28s} {'time (best of ' + str(args.repeat) + ')':>20s} {'peak RSS (largest process)':>28s}")
        print(f"{'summarize LOG --format json':28s} {s_time:18.2f} s {s_rss:25.0f} MB")
        print(f"{'report REC --format json':28s} {r_time:18.2f} s {r_rss:25.0f} MB")
        print(f"report / summarize time: {r_time / s_time:.2f}  (target ≤ 2)   report RSS target ≤ 150 MB")
        print(f"same table from both: {same}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
