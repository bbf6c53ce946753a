"""A sweep's verdict on its objective (``--objective``) and its deployed configurations, as text.

Read from the JSON document the sweep prints and records (``objective_verdicts``,
``schedule_check``), so that the sweep's own output and ``specmon report`` of its recording
say the same thing. Every line fits its width (80 columns by default) with every word whole, as the
sweep's table does (:mod:`specmon.output.textfit`); labels are data (``plain``).
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.text import Text

from specmon.literal import plain
from specmon.model.verdict import answer_from_json
from specmon.output.tables import marked
from specmon.output.textfit import fitted_table

__all__ = ["deployed_lines", "objective_lines"]


def _num(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, (int, float)) and math.isfinite(v) else "n/a"


def _count(v: object) -> str:
    return str(v) if isinstance(v, int) and 0 <= v < 10**8 else "n/a"


#: The objective table's columns other than the setting's, and the order a narrow width drops them in
#: (the value in the objective's unit stays).
_DROP = ("requests", "launches", "95% CI (launch)", "vs best")


def objective_lines(doc: Mapping[str, Any], width: int = 80) -> list[str]:
    """One objective verdict (``ObjectiveVerdict.to_json()``): its heading and its table, within ``width``
    columns as the sweep's own table is (:func:`specmon.output.textfit.fitted_table`): a setting's name
    wraps between words, never cut; columns that do not fit are dropped from the right, and a printed
    note names them. Its sentence is the caller's (a paragraph of its own)."""
    lower = bool(doc.get("lower_is_better"))
    unit = plain(str(doc.get("unit") or "value"))
    on = f", {plain(str(doc['workload']))} prompts" if doc.get("workload") else ""
    head = f"{plain(str(doc.get('name') or doc.get('objective')))} at concurrency {doc.get('concurrency')}{on}"
    # The leader's mark is the verdict's: ★ a declared winner, ☆ leads, undecided (as in every table).
    made = answer_from_json(doc)
    rows = []
    for i, r in enumerate(doc.get("rows") or []):
        ci = r.get("ci95")
        ci_text = f"{_num(ci[0])}–{_num(ci[1])}" if isinstance(ci, list) and len(ci) == 2 else "n/a"
        vs = r.get("vs_best_pct")
        if vs is None:
            vs_text = "best"
        elif not isinstance(vs, (int, float)) or not math.isfinite(vs) or abs(vs) >= 1000:
            vs_text = ">+999%" if isinstance(vs, (int, float)) and vs > 0 else "<-999%"
        else:
            vs_text = f"{vs:+.1f}%"
        label = marked(made.mark if made is not None and i == 0 else "", plain(str(r.get("label"))))
        rows.append([label, _count(r.get("launches")), _count(r.get("requests")), _num(r.get("value")), ci_text,
                     vs_text])
    table, note = fitted_table(["setting", "launches", "requests", unit, "95% CI (launch)", "vs best"], rows, width=width,
                               drop_order=_DROP)
    console = Console(width=width, file=io.StringIO(), record=True, color_system=None, force_terminal=False,
                      highlight=False, emoji=False, markup=False)
    console.print(Text(f"{head} ({'lower' if lower else 'higher'} is better)"))
    console.print(table)
    if note:
        console.print(Text(note))
    return [line.rstrip() for line in console.export_text(styles=False).splitlines()]


def deployed_lines(checks: Sequence[Mapping[str, Any]]) -> list[str]:
    """The deployed configurations (schedule, adaptive mode) against the best fixed setting at each load."""
    if not checks:
        return []
    return ["Deployed against the best fixed setting at each load:",
            *(f"  {plain(str(c.get('sentence', '')))}" for c in checks)]
