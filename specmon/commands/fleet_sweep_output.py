"""What a parallel sweep prints: the settings with their intervals, the allocation, the verdict.

Plain text fits 80 columns (the allocation table is cut into blocks of rounds that do), the
Markdown is a report's, and the JSON is :meth:`FleetSweepResult.to_json` with what the sweep
left running. Replica names come from the profile: printed through :func:`plain` /
:func:`markdown_text`, never as markup.
"""

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from specmon.literal import markdown_text, plain

if TYPE_CHECKING:
    from specmon.control.fleet_sweep import FleetSweepResult

WIDTH = 80
_NAME_W = 12
_CELL_W = 9


def settings_lines(result: FleetSweepResult) -> list[str]:
    """One line per setting: launches, tok/s, 95% interval, and how far the leader is ahead (adjusted)."""
    from specmon.control.fleet_sweep import steps_label

    ff, d = result.fit, result.decision
    level = f"{100 * d.level:.1f}%" if d is not None else "adjusted"
    lines = [f"{'setting':<17}{'launches':>8}{'tok/s':>9}  {'95% CI':<15}  leader ahead ({level})"]
    for s in result.plan.steps:
        name = steps_label(s) + (" *" if d is not None and s == d.leader else "")
        n = ff.launches.get(s, 0) if ff else 0
        if ff is None or s not in ff.means:
            lines.append(f"{name:<17}{n:>8}{'—':>9}")
            continue
        iv = ff.interval(s)
        ci = f"{iv[0]:.1f}–{iv[1]:.1f}" if iv else "—"
        ahead = ""
        if d is not None and s != d.leader:
            pct, lo, hi = ff.ratio_pct(d.leader, s, d.level)
            ahead = f"{pct:+.1f}% ({lo:+.1f}…{hi:+.1f})" if lo is not None and hi is not None else f"{pct:+.1f}%"
        lines.append(f"{name:<17}{n:>8}{ff.means[s]:>9.1f}  {ci:<15}  {ahead}")
    return lines


def allocation_lines(result: FleetSweepResult) -> list[str]:
    """Replicas × rounds: ``steps:tok/s`` per launch (``steps:failed``), in blocks that fit 80 columns."""
    rounds = max((r.round for r in result.records), default=0)
    per_block = max(1, (WIDTH - _NAME_W) // _CELL_W)
    cells = {(r.replica, r.round): r for r in result.records}
    out = ["allocation (steps:tok/s per launch; x = failed)"]
    for first in range(1, rounds + 1, per_block):
        block = range(first, min(rounds, first + per_block - 1) + 1)
        out.append(f"{'replica':<{_NAME_W}}" + "".join(f"{'round ' + str(k):>{_CELL_W}}" for k in block))
        for name in result.replicas:
            row = f"{plain(name)[:_NAME_W - 1]:<{_NAME_W}}"
            for k in block:
                rec = cells.get((name, k))
                if rec is None:
                    text = "·"
                elif rec.ok and rec.mean is not None:
                    text = f"{rec.steps}:{rec.mean:.1f}"
                else:
                    text = f"{rec.steps}:x"
                row += f"{text:>{_CELL_W}}"
            out.append(row)
    return out


def text_report(result: FleetSweepResult, left: list[str]) -> str:
    """The whole plain-text answer, 80 columns wide."""
    head = (f"specmon parallel sweep: {len(result.replicas)} replicas, concurrency {result.plan.concurrency}, "
            f"{result.rounds_run} of {result.plan.max_rounds} rounds, layout seed {result.seed}")
    parts = textwrap.wrap(head, WIDTH) + [""] + settings_lines(result) + [""] + allocation_lines(result) + [""]
    parts += textwrap.wrap("Verdict: " + plain(result.sentence()), WIDTH)
    for rec in result.records:
        if not rec.ok:
            parts += textwrap.wrap(f"failed: {plain(rec.replica)} round {rec.round} ({rec.steps} steps): "
                                   f"{plain(rec.text)}", WIDTH, subsequent_indent="  ")
    for line in left:
        parts += textwrap.wrap(plain(line), WIDTH, subsequent_indent="  ")
    return "\n".join(parts) + "\n"


def markdown_report(result: FleetSweepResult, left: list[str]) -> str:
    """The answer as Markdown: the settings and the allocation as tables, the verdict as text."""
    from specmon.control.fleet_sweep import steps_label

    ff, d = result.fit, result.decision
    out = [f"### Parallel sweep: {len(result.replicas)} replicas, concurrency {result.plan.concurrency}", "",
           "| setting | launches | tok/s | 95% CI | leader ahead (adjusted) |", "|---|---:|---:|---|---|"]
    for s in result.plan.steps:
        n = ff.launches.get(s, 0) if ff else 0
        if ff is None or s not in ff.means:
            out.append(f"| {steps_label(s)} | {n} | — | — | |")
            continue
        iv = ff.interval(s)
        ahead = ""
        if d is not None and s != d.leader:
            pct, lo, hi = ff.ratio_pct(d.leader, s, d.level)
            ahead = f"{pct:+.1f}% ({lo:+.1f}…{hi:+.1f})" if lo is not None and hi is not None else f"{pct:+.1f}%"
        ci = f"{iv[0]:.1f}–{iv[1]:.1f}" if iv else "—"
        out.append(f"| {steps_label(s)}{' (leader)' if d is not None and s == d.leader else ''} | {n} | "
                   f"{ff.means[s]:.1f} | {ci} | {ahead} |")
    rounds = max((r.round for r in result.records), default=0)
    out += ["", "| replica | " + " | ".join(f"round {k}" for k in range(1, rounds + 1)) + " |",
            "|---|" + "---|" * rounds]
    cells = {(r.replica, r.round): r for r in result.records}
    for name in result.replicas:
        row = []
        for k in range(1, rounds + 1):
            rec = cells.get((name, k))
            row.append("" if rec is None else (f"{steps_label(rec.steps)}: {rec.mean:.1f}" if rec.ok and rec.mean
                                               else f"{steps_label(rec.steps)}: failed"))
        out.append(f"| {markdown_text(name)} | " + " | ".join(row) + " |")
    out += ["", f"**Verdict:** {markdown_text(result.sentence())}", ""]
    out += [f"- failed: {markdown_text(r.replica)} round {r.round}: {markdown_text(r.text)}"
            for r in result.records if not r.ok]
    out += [f"- {markdown_text(line)}" for line in left]
    return "\n".join(out) + "\n"


def print_fleet_result(fmt: str, result: FleetSweepResult, extra: dict[str, Any], left: list[str]) -> None:
    """Write the result to stdout in ``fmt`` (table, markdown, json)."""
    import json
    import sys

    if fmt == "json":
        doc = result.to_json()
        doc.update(extra)
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    elif fmt == "markdown":
        sys.stdout.write(markdown_report(result, left))
    else:
        sys.stdout.write(text_report(result, left))
