"""A sweep document of an analysis' rows: the parts of ``SweepResult.to_json`` the sweep panel reads."""

from __future__ import annotations

from specmon.model.analysis import Analysis
from specmon.model.stopping import StoppingRule, sweep_verdict


def sweep_doc(analysis: Analysis, pending_below: int = 40, rule: StoppingRule | None = None) -> dict[str, object]:
    """A sweep document of these rows, as ``SweepResult.to_json`` writes the parts the panel reads
    (a setting with fewer than ``pending_below`` samples is still ``pending``; ``rule``: the sweep's)."""
    sv = sweep_verdict(analysis, rule or StoppingRule(), concurrency=1)
    runs = []
    for r in analysis.rows:
        t, vs = r.throughput, r.vs_baseline
        runs.append({"steps": r.steps, "concurrency": 1, "label": r.label, "status": "pending" if r.samples < pending_below
                     else "done", "samples": r.samples, "throughput": t.to_json() if t else None,
                     "vs_baseline_pct": round(vs.pct, 2) if vs else None,
                     "vs_baseline_ci95": [vs.ci95_low, vs.ci95_high] if vs else None,
                     "is_baseline": r.is_baseline, "best": r.best, "mark": r.mark})
    return {"verdict": sv.to_json(), "runs": runs, "finished": True}
