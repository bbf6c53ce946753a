"""Tables of a reference run (bench/reference_run.py): counters, log and client side by side.

    python bench/reference_analyze.py /tmp/ref [--format json|markdown]

For each setting: counter-based tok/s (specmon.sources.metrics on the recorded
scrapes), log-based tok/s (specmon's parser and session on the server log),
client decode tok/s (specmon.control.load's definition on the recorded
chunks), accept length from counters and from the log; then the verdict the
sweep's rule gives on the counter samples.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from specmon.control.load import RequestResult
from specmon.experiment.sweep_result import analyses_from_cells
from specmon.experiment.sweep_state import CellState, Segment
from specmon.ingest.files import ingest_file
from specmon.model.session import Session
from specmon.model.stats import summarize
from specmon.model.stopping import StoppingRule, sweep_verdict
from specmon.sources.metrics import difference, parse_snapshot


def counters(folder: Path, t_from: float, t_to: float) -> list[Any]:
    out, prev = [], None
    for line in (folder / "metrics.jsonl").read_text().splitlines():
        d = json.loads(line)
        snap = parse_snapshot("\n".join(d["lines"]) + "\n", d["t"])
        if prev is not None and t_from <= d["t"] <= t_to:
            s = difference(prev, snap)
            if s is not None:
                out.append(s)
        prev = snap
    return out


def client(folder: Path) -> tuple[list[float], int, float]:
    tps, untimed, tokens = [], 0, 0
    for line in (folder / "requests.jsonl").read_text().splitlines():
        d = json.loads(line)
        if not d.get("ok") or not d.get("chunks"):
            continue
        ch = d["chunks"]
        usage = (d.get("usage") or {}).get("completion_tokens") or 0
        tokens += usage
        r = RequestResult(d["i"], 0, True, d["t0"], d["t_end"] - d["t0"], output_tokens=usage, chunks=len(ch),
                          first_token_s=ch[0][0] - d["t0"], last_token_s=ch[-1][0] - d["t0"], first_tokens=ch[0][1])
        v = r.decode_tps()
        if v is None:
            untimed += 1
        else:
            tps.append(v)
    return tps, untimed, tokens


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("folder")
    ap.add_argument("--format", choices=("json", "markdown"), default="markdown")
    ap.add_argument("--settle", type=int, default=2)
    args = ap.parse_args()
    rows, cells = [], []
    for sub in sorted(Path(args.folder).glob("k*")):
        meta = json.loads((sub / "meta.json").read_text())
        steps = int(meta["steps"])
        cs = counters(sub, meta["load_started"], meta["load_ended"])[args.settle:]
        sess = Session()
        ingest_file(sess, str(sub / "server.log"))
        run = sess.runs[-1]
        log_tp = list(run.throughput)
        log_al = list(run.accept_len)
        ctp, untimed, tokens = client(sub)
        c_tp = [s.throughput for s in cs]
        c_al = [s.accept_len for s in cs if s.accept_len is not None]
        c_ar = [s.accept_rate for s in cs if s.accept_rate is not None]
        # One cell per setting, one segment (a launch) per folder of it.
        cell = next((c for c in cells if c.steps == steps), None)
        if cell is None:
            cell = CellState(steps, 1, status="done")
            cells.append(cell)
        cell.segments.append(Segment(sub.name, None, None, throughput=c_tp, accept_len=c_al, accept_rate=c_ar))
        s_c, s_l, s_cl = summarize(c_tp), summarize(log_tp), summarize(ctp)
        rows.append({
            "steps": steps, "launch": meta.get("launch", 1), "minutes": round((meta["load_ended"] - meta["load_started"]) / 60, 1),
            "loadavg": [round(x, 1) for x in meta.get("loadavg_end", [])],
            "counters_tps": s_c.to_json() if s_c else None, "log_tps": s_l.to_json() if s_l else None,
            "client_decode_tps": s_cl.to_json() if s_cl else None, "client_untimed": untimed,
            "client_output_tps": round(tokens / (meta["load_ended"] - meta["load_started"]), 1),
            "counters_accept_len": round(statistics.mean(c_al), 3) if c_al else None,
            "log_accept_len": round(statistics.mean(log_al), 3) if log_al else None,
            "counters_accept_rate": round(statistics.mean(c_ar), 3) if c_ar else None,
        })
    analysis = analyses_from_cells(cells, 1)
    verdict = sweep_verdict(analysis, StoppingRule(), 1)
    # Each setting over its launches, with the two-level model (what the sweep's intervals are).
    settings = [{"label": r.label, "launches": len(r.launches), "covers": r.covers,
                 "tps": r.throughput.to_json() if r.throughput else None} for r in analysis.rows]
    doc = {"rows": rows, "settings": settings, "verdict": verdict.to_json()}
    if args.format == "json":
        print(json.dumps(doc, indent=1))
        return

    def m(x: dict[str, Any] | None) -> str:
        if not x:
            return "—"
        lo, hi = x.get("ci95_low"), x.get("ci95_high")
        half = f" ± {(hi - lo) / 2:.1f}" if lo is not None and hi is not None else ""
        return f"{x['mean']:.1f}{half} (n={x['n']})"

    print("| steps | min | counters tok/s | log tok/s | client decode tok/s | client output tok/s | untimed "
          "| accept len (counters / log) | load avg |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['steps']} (launch {r['launch']}) | {r['minutes']} | {m(r['counters_tps'])} | {m(r['log_tps'])} | "
              f"{m(r['client_decode_tps'])} | {r['client_output_tps']} | {r['client_untimed']} | "
              f"{r['counters_accept_len'] or '—'} / {r['log_accept_len'] or '—'} | {r['loadavg'][:1]} |")
    print("\n| setting | launches | counters tok/s, mean of launch means (95% CI) | covers |")
    print("|---|---|---|---|")
    for st in settings:
        t = st["tps"] or {}
        ci = (f"{t['mean']:.1f} ({t['ci95_low']:.1f}–{t['ci95_high']:.1f})"
              if t.get("ci95_low") is not None else f"{t.get('mean', 0):.1f}")
        print(f"| {st['label']} | {st['launches']} | {ci} | {st['covers']} |")
    print(f"\nVerdict (counters): {verdict.sentence}")


if __name__ == "__main__":
    main()
