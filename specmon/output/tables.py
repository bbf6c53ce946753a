"""The per-configuration table in every output format: rich table, JSON, CSV, Markdown.

The summarize command and the dashboard's export both render through here,
so a table exported from the UI is the table ``specmon summarize`` prints.
"""

from __future__ import annotations

import csv
import io
import json
import math
from typing import Any

from rich.table import Table

from specmon.model.analysis import Analysis, ConfigRow
from specmon.model.session import Session
from specmon.model.stats import Summary
from specmon.records import Engine, iso_timestamp

FORMATS = ("table", "json", "csv", "markdown")


def _num(x: float | None, nd: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _mean_ci(s: Summary | None, nd: int = 1) -> str:
    if s is None:
        return "—"
    if s.ci_half_width is None:
        return f"{s.mean:.{nd}f}"
    return f"{s.mean:.{nd}f} ± {s.ci_half_width:.{nd}f}"


def _vs(row: ConfigRow) -> str:
    if row.is_baseline:
        return "baseline"
    r = row.vs_baseline
    if r is None:
        return "—"
    if r.ci95_low is None or r.ci95_high is None:
        return f"{r.pct:+.1f}%"
    return f"{r.pct:+.1f}% ({r.ci95_low:+.1f}…{r.ci95_high:+.1f})"


def row_cells(row: ConfigRow) -> list[str]:
    """The human cells of a row, shared by the rich table, Markdown and the dashboard."""
    return [
        ("★ " if row.best else "") + row.label,
        str(row.samples),
        _mean_ci(row.throughput),
        _vs(row),
        _mean_ci(row.accept_len, 2),
        _mean_ci(row.accept_rate, 2),
    ]


#: Steps and draft tokens are in the label ("EAGLE3 2 steps draft 4"); JSON/CSV carry them apart.
HEADERS = ["configuration", "n", "tok/s ± 95% CI", "vs baseline (95% CI)", "accept len", "accept rate"]


def _row_engine(row: ConfigRow, session: Session) -> Engine:
    """The engine of a row: its configuration's, else its runs' stats lines', else the session's."""
    if row.config is not None:
        return row.config.engine
    for run in row.runs:
        if run.config is not None:
            return run.config.engine
    for run in row.runs:
        if run.engine is not Engine.UNKNOWN:
            return run.engine
    return session.engine


def to_json(session: Session, analysis: Analysis) -> dict[str, Any]:
    """The stable JSON document of ``summarize --format json``."""
    counts = {k: session.counts.get(k, 0) for k in
              ("decode", "prefill", "engine_stats", "spec", "lifecycle", "config", "unparsed")}
    runs = []
    for row in analysis.rows:
        cfg = row.config
        vs = row.vs_baseline
        runs.append({
            "label": row.label,
            "engine": _row_engine(row, session).value,
            "algorithm": cfg.algorithm if cfg else None,
            "steps": cfg.steps if cfg else None,
            "topk": cfg.topk if cfg else None,
            "draft_tokens": cfg.draft_tokens if cfg else None,
            "samples": row.samples,
            "launches": len(row.runs),
            "sources": sorted({r.source for r in row.runs}),
            "throughput": row.throughput.to_json() if row.throughput else None,
            "accept_len": row.accept_len.to_json() if row.accept_len else None,
            "accept_rate": row.accept_rate.to_json() if row.accept_rate else None,
            "per_position": [round(v, 4) for v in row.per_position] if row.per_position else None,
            "by_concurrency": {str(c): s.to_json() for c, s in row.concurrency.items()},
            "vs_baseline_pct": round(vs.pct, 2) if vs else None,
            "vs_baseline_ci95": [None if vs.ci95_low is None else round(vs.ci95_low, 2),
                                 None if vs.ci95_high is None else round(vs.ci95_high, 2)] if vs else None,
            "is_baseline": row.is_baseline,
            "best": row.best,
            "excluded_warmup": sum(r.excluded_warmup for r in row.runs),
            "excluded_idle": sum(r.excluded_idle for r in row.runs),
            "crashed": any(r.crash_detail for r in row.runs),
            "crash": next((c.to_json() for c in reversed(analysis.crashes) if c.run in {r.id for r in row.runs}),
                          None),
        })
    b = analysis.baseline
    v = analysis.verdict
    return {
        "lines": session.lines,
        "engine": session.engine.value,
        "counts": counts,
        "runs": runs,
        "baseline": None if b is None else {
            "source": b.source, "label": b.label,
            "mean": None if b.mean is None else round(b.mean, 4),
            "throughput": b.throughput.to_json() if b.throughput else None,
        },
        "verdict": {
            "best": v.best.label if v.best else None,
            "best_steps": v.best.steps if v.best else None,
            "runner_up": v.runner_up.label if v.runner_up else None,
            "runner_up_steps": v.runner_up.steps if v.runner_up else None,
            "speedup_pct": round(v.speedup.pct, 2) if v.speedup else None,
            "speedup_ci95": None if v.speedup is None else [
                None if v.speedup.ci95_low is None else round(v.speedup.ci95_low, 2),
                None if v.speedup.ci95_high is None else round(v.speedup.ci95_high, 2)],
            "separated": v.separated,
            "sentence": v.sentence,
            "concurrency_note": v.concurrency_note,
        },
        "crashes": [c.to_json() for c in analysis.crashes],
        "unparsed_examples": [{"line": u.line, "reason": u.reason, "text": u.text[:300]}
                              for u in list(session.unparsed)[:20]],
    }


def to_csv(analysis: Analysis) -> str:
    """One CSV row per configuration, numbers unformatted for spreadsheets."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(["label", "steps", "draft_tokens", "topk", "samples", "tps_mean", "tps_ci95_low",
                "tps_ci95_high", "tps_median", "tps_p10", "tps_p90", "vs_baseline_pct",
                "vs_baseline_ci95_low", "vs_baseline_ci95_high", "accept_len_mean", "accept_rate_mean",
                "is_baseline", "best", "crashed", "crash_run", "crash_time", "crash_line", "crash_error"])
    shown: set[int] = set()
    for row in analysis.rows:
        cfg, t, vs = row.config, row.throughput, row.vs_baseline

        def f(x: float | None) -> str:
            return "" if x is None else f"{x:.4f}"

        w.writerow([row.label, "" if not cfg or cfg.steps is None else cfg.steps,
                    "" if not cfg or cfg.draft_tokens is None else cfg.draft_tokens,
                    "" if not cfg or cfg.topk is None else cfg.topk, row.samples,
                    f(t.mean if t else None), f(t.ci95_low if t else None), f(t.ci95_high if t else None),
                    f(t.median if t else None), f(t.p10 if t else None), f(t.p90 if t else None),
                    f(vs.pct if vs else None), f(vs.ci95_low if vs else None), f(vs.ci95_high if vs else None),
                    f(row.accept_len.mean if row.accept_len else None),
                    f(row.accept_rate.mean if row.accept_rate else None),
                    int(row.is_baseline), int(row.best), *_crash_cells(analysis, {r.id for r in row.runs})])
        shown.update(r.id for r in row.runs)
    # A run that crashed before its first sample has no row of its own: one row says so.
    for c in analysis.crashes:
        if c.run not in shown:
            w.writerow([c.label, *[""] * 3, 0, *[""] * 11, 0, 0, *_crash_cells(analysis, {c.run})])
    return out.getvalue()


def _crash_cells(analysis: Analysis, run_ids: set[int]) -> list[str | int]:
    crash = next((c for c in reversed(analysis.crashes) if c.run in run_ids), None)
    if crash is None:
        return [0, "", "", "", ""]
    return [1, crash.run, iso_timestamp(crash.at) or "", "" if crash.line is None else crash.line, crash.error]


def crash_lines(analysis: Analysis) -> list[str]:
    """One sentence per crashed run (empty when none crashed)."""
    return [c.sentence for c in analysis.crashes]


def to_markdown(analysis: Analysis) -> str:
    """A GitHub-flavoured Markdown table and the verdict underneath."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for row in analysis.rows:
        cells = [c.replace("|", "\\|") for c in row_cells(row)]
        if row.best:
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"**Verdict:** {analysis.verdict.sentence}")
    if analysis.crashes:
        lines.append("")
        lines.append("**Crashes:**")
        lines.append("")
        lines.extend(f"- {t}" for t in crash_lines(analysis))
    if analysis.verdict.concurrency_note:
        lines.append("")
        lines.append(f"_Note:_ {analysis.verdict.concurrency_note}")
    return "\n".join(lines) + "\n"


def to_rich(analysis: Analysis, title: str | None = None) -> Table:
    """A rich Table for the terminal."""
    table = Table(title=title, caption=analysis.verdict.sentence, caption_justify="left")
    for i, h in enumerate(HEADERS):
        # The label may wrap; numbers never do (a wrapped number reads as two).
        table.add_column(h, justify="left" if i == 0 else "right", no_wrap=i != 0,
                         min_width=16 if i == 0 else None)
    for row in analysis.rows:
        style = "bold" if row.best else ("dim" if row.samples == 0 else None)
        table.add_row(*row_cells(row), style=style)
    return table


def render(fmt: str, session: Session, analysis: Analysis) -> str:
    """Render as text in a named format (``table`` falls back to Markdown-free plain text)."""
    if fmt == "json":
        return json.dumps(to_json(session, analysis), indent=2) + "\n"
    if fmt == "csv":
        return to_csv(analysis)
    if fmt == "markdown":
        return to_markdown(analysis)
    raise ValueError(f"unknown format {fmt!r}")
