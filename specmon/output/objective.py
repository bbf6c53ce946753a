"""A sweep's verdict on its objective (``--objective``) and its deployed configurations, as text.

Read from the JSON document the sweep prints and records (``objective_verdicts``,
``schedule_check``), so that the sweep's own output and ``specmon report`` of its recording
say the same thing. Every line fits 80 columns; labels are data (``plain``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from specmon.literal import plain
from specmon.model.verdict import answer_from_json

__all__ = ["deployed_lines", "objective_lines"]


def _num(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"


def _count(v: object) -> str:
    return str(v) if isinstance(v, int) and 0 <= v < 10**8 else "n/a"


def objective_lines(doc: Mapping[str, Any]) -> list[str]:
    """One objective verdict (``ObjectiveVerdict.to_json()``): its table, then its sentence."""
    lower = bool(doc.get("lower_is_better"))
    unit = str(doc.get("unit") or "")
    on = f", {plain(str(doc['workload']))} prompts" if doc.get("workload") else ""
    head = f"{plain(str(doc.get('name') or doc.get('objective')))} at concurrency {doc.get('concurrency')}{on}"
    # 2 + 18 + 1 + 8 + 1 + 8 + 1 + 9 + 2 + 19 + 1 + 7 = 77 columns at the widest numbers.
    out = [f"{head} ({'lower' if lower else 'higher'} is better)"[:80],
           f"  {'setting':<18} {'launches':>8} {'requests':>8} {unit[:9]:>9}  {'95% CI':<19} vs best"]
    # The leader's mark is the verdict's: ★ a declared winner, ☆ leads, undecided (as in every table).
    made = answer_from_json(doc)
    for i, r in enumerate(doc.get("rows") or []):
        mark = made.mark if made is not None and i == 0 else ""
        ci = r.get("ci95")
        ci_text = f"{_num(ci[0])}–{_num(ci[1])}" if isinstance(ci, list) and len(ci) == 2 else "n/a"
        vs = r.get("vs_best_pct")
        if vs is None:
            vs_text = "best"
        elif not isinstance(vs, (int, float)) or not math.isfinite(vs) or abs(vs) >= 1000:
            vs_text = ">+999%" if isinstance(vs, (int, float)) and vs > 0 else "<-999%"
        else:
            vs_text = f"{vs:+.1f}%"
        out.append(f"{mark or ' '} {plain(str(r.get('label')))[:18]:<18} {_count(r.get('launches')):>8} "
                   f"{_count(r.get('requests')):>8} {_num(r.get('value')):>9}  {ci_text:<19} {vs_text}")
    return out


def deployed_lines(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The deployed configurations (schedule, adaptive mode) against the best fixed setting at each load."""
    if not checks:
        return []
    return ["Deployed against the best fixed setting at each load:",
            *(f"  {plain(str(c.get('sentence', '')))}" for c in checks)]
