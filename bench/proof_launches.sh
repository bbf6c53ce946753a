#!/usr/bin/env bash
# Issue 28's proof on the real vLLM kit, unattended, on a QUIET machine (nothing else running:
# the sweep and the reference must see the same machine, or the comparison measures the load):
#   1. the launch-design sweep of 0,1,3,5 (bench/proof_sweep.sh, --resolve-pct P, server stopped at the end);
#   2. the reference: each setting in two launches of 5 minutes, in alternating order
#      (bench/reference_run.py --steps 0,1,3,5,5,3,1,0 --seconds 300);
#   3. both tables (bench/reference_analyze.py, and the sweep's JSON verdict).
# Usage: bash bench/proof_launches.sh OUTDIR [RESOLVE_PCT]   (about 1.5 h at RESOLVE_PCT 15)
set -euo pipefail
out=$(realpath -m "${1:?usage: proof_launches.sh OUTDIR [RESOLVE_PCT]}"); resolve=${2:-15}
here=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$out/conditions.txt"
bash "$here/bench/proof_sweep.sh" "$out/sweep" 18211 --resolve-pct "$resolve" --finish none
echo "load average after the sweep: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/conditions.txt"
"$here/.venv/bin/python" "$here/bench/reference_run.py" --out "$out/reference" --steps 0,1,3,5,5,3,1,0 \
  --seconds 300 --port 18201
echo "load average after the reference: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out/conditions.txt"
"$here/.venv/bin/python" "$here/bench/reference_analyze.py" "$out/reference" | tee "$out/reference.md"
"$here/.venv/bin/python" - "$out/sweep/sweep.json" <<'PY' | tee "$out/sweep.md"
import json, sys
doc = json.load(open(sys.argv[1]))
print("| setting | launches | sweep tok/s (95% CI) | covers |")
print("|---|---|---|---|")
for run in doc.get("runs", []):
    t = run.get("throughput") or {}
    ci = f"{t.get('mean', 0):.1f} ({t.get('ci95_low') or 0:.1f}-{t.get('ci95_high') or 0:.1f})"
    print(f"| {run.get('label')} | {run.get('launches')} | {ci} | {run.get('interval_covers')} |")
print()
print(doc.get("verdict", {}).get("sentence"))
PY
