"""Prompts paired across launches and settings: which prompts pay for speculation and which do not.

Every launch sends the load's prompts in the same order (:class:`specmon.control.load.BackgroundLoad`
starts each launch at the first), so a prompt's requests pair across launches and settings. Each
setting's cell keeps, per prompt, its completed requests, their decode speeds and the draft tokens
proposed and accepted where the engine's answer says (llama.cpp's ``timings``, vLLM's per-request
metrics: :meth:`specmon.engines.base.EngineAdapter.request_drafts`). Here they become one table per
load: for each prompt, no speculation's mean decode speed, the fastest speculative setting's on
that same prompt, the change, and that setting's draft acceptance.

Descriptive, not a verdict: a prompt's figures rest on few requests (each row says how many), and
the verdict (which rests on launches) stays the answer. What the table shows is *where* the
speed-up comes from: prompts whose drafts are accepted (code, repetition) against those whose
are not.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from specmon.experiment.sweep_state import CellState

__all__ = ["prompt_groups"]


def _figures(cell: CellState) -> dict[int, tuple[int, float | None, int, int]]:
    """Per prompt: (completed requests, mean decode tok/s, drafted, accepted)."""
    out = {}
    for key, row in (cell.client.get("prompts") or {}).items():
        try:
            idx = int(key)
            n, timed, tps_sum, drafted, accepted = (int(row[0]), int(row[1]), float(row[2]), int(row[3]),
                                                    int(row[4]))
        except (TypeError, ValueError, IndexError):
            continue  # (a state file edited by hand: that prompt is left out)
        out[idx] = (n, tps_sum / timed if timed else None, drafted, accepted)
    return out


def prompt_groups(cells: Sequence[CellState]) -> list[dict[str, Any]]:
    """One table per load (concurrency, workload) with a speculative setting and two prompts or more
    measured. Without no speculation in the sweep the change is unknown (None) and each row says the
    fastest speculative setting's acceptance only. ``settings`` holds every setting's figures per
    prompt (``[requests, mean decode tok/s, drafted, accepted]``) under its cell key (``"2@1"``, as the
    runs' ``key``; ``labels`` names them), the pairing the rows draw on."""
    groups: dict[tuple[int, str | None], list[CellState]] = {}
    for cell in cells:
        groups.setdefault((cell.concurrency, cell.workload), []).append(cell)
    out = []
    for (concurrency, workload), group in groups.items():
        base = next((c for c in group if c.steps == 0), None)
        spec = [c for c in group if c.steps != 0]
        if not spec:
            continue
        base_fig = _figures(base) if base is not None else {}
        spec_fig = {c.key: _figures(c) for c in spec}
        labels = {c.key: c.label or c.setting_label for c in group}
        prompts = sorted(set(base_fig) | {i for f in spec_fig.values() for i in f})
        rows = []
        for i in prompts:
            b = base_fig.get(i)
            best_label, best = None, None
            for label, figs in spec_fig.items():
                f = figs.get(i)
                if f is not None and f[1] is not None and (best is None or best[1] is None or f[1] > best[1]):
                    best_label, best = label, f
            change = pays = None
            if b is not None and b[1] and best is not None and best[1] is not None:
                change, pays = round(100.0 * (best[1] / b[1] - 1.0), 2), best[1] > b[1]
            rows.append({
                "prompt": i,
                "nospec_requests": b[0] if b else 0,
                "nospec_tps": round(b[1], 3) if b and b[1] is not None else None,
                "best": labels[best_label] if best_label is not None else None,
                "best_key": best_label,
                "best_requests": best[0] if best else 0,
                "best_tps": round(best[1], 3) if best and best[1] is not None else None,
                "change_pct": change,
                "drafted": best[2] if best else 0,
                "accepted": best[3] if best else 0,
                "accept_rate": round(best[3] / best[2], 4) if best and best[2] else None,
                "pays": pays,
            })
        if sum(1 for r in rows if r["best"] is not None) >= 2:
            every = {**({base.key: base_fig} if base is not None else {}), **spec_fig}
            out.append({"concurrency": concurrency, "workload": workload, "baseline": base is not None,
                        "rows": rows, "labels": {k: labels[k] for k in every},
                        "settings": {label: {str(i): [n, None if t is None else round(t, 3), d, a]
                                             for i, (n, t, d, a) in figs.items()}
                                     for label, figs in every.items()}})
    return out
