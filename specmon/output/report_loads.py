"""A report's figures per load: a sweep over several concurrencies or workloads is never pooled.

Throughput at 4 requests in flight is about four times that at 1, and a drafter accepts more
of code than of chat; a figure over the samples of several loads describes none of them (the
report of a sweep over concurrency 1 and 4 said "no speculation 203.7 ± 36.7 tok/s", and built
its "concurrency 1" cost model from those pooled numbers: 4.9 ms a plain step where the sweep's
own concurrency-1 figures gave 11.4 ms; issue 42, item 5). So every figure of such a report
belongs to one group of the sweep (one concurrency and workload):

* the cost model of each group, from that group's settings as the sweep measured them
  (:func:`load_costs`, the sweep's own numbers, so the report's model at concurrency 1 is the
  one the sweep printed);
* no whole-recording table: :func:`pooled_note` says why, and the JSON and CSV reports carry each
  group's rows instead of pooled ones (:func:`unpooled_json`, :func:`groups_csv`);
* the marks beside a setting: ★ a declared winner only; the leader of an undecided group is ☆,
  "leads, undecided" (:func:`group_cells`, :func:`marks_legend`).

A sweep that decided on an objective (``--objective``) has the objective's verdict in every group
(:class:`~specmon.output.tables.SweepOutcome`); its tok/s comparison is context, in a section of its
own and without a mark (:func:`context_lines`, :func:`context_json`).
"""

from __future__ import annotations

import csv
import html
import io
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from specmon.literal import csv_cell, markdown_cell, plain
from specmon.model.analysis import Analysis
from specmon.model.costmodel import CostModelView, Measured, cost_model_of
from specmon.model.verdict import LEADER_MARK, MARK_WORDS, WINNER_MARK
from specmon.output.report_text import wrap
from specmon.output.tables import OutcomeRow, SweepOutcome

# The marks and their words are the verdict's own (model/verdict.py), the same in every legend.
__all__ = ["LEADER_MARK", "MARK_WORDS", "WINNER_MARK", "LoadCost", "context_html", "context_json", "context_lines",
           "context_markdown", "group_cells", "groups_csv", "load_costs", "marks_legend", "pooled_note", "unmarked",
           "unpooled_json"]


@dataclass(frozen=True, slots=True)
class LoadCost:
    """The cost model of one load of a sweep (or of the whole recording, without a sweep)."""

    #: `` at concurrency 4 on the chat prompts``; empty when the report has one load only.
    group_text: str
    concurrency: int | None
    workload: str | None
    view: CostModelView


def declared(group: SweepOutcome) -> bool:
    """Whether the group's verdict declares a winner (its leader separated from the runner-up)."""
    return group.separated and group.best is not None


def mark(group: SweepOutcome, row: OutcomeRow) -> str:
    """The mark beside a setting of a group's table: ★ the declared winner, ☆ the undecided leader, or none."""
    if not row.best and row is not group.best:
        return ""
    return WINNER_MARK if declared(group) else LEADER_MARK


def group_cells(group: SweepOutcome, row: OutcomeRow) -> list[str]:
    """A row of a group's table, marked by :func:`mark` (whatever mark the table's own cells carry)."""
    cells = row.cells()
    label = cells[0]
    for m in (WINNER_MARK, LEADER_MARK):
        label = label.removeprefix(m + " ")
    sign = mark(group, row)
    cells[0] = f"{sign} {label}" if sign else label
    return cells


def unmarked(label: str) -> str:
    """A label without a leading mark (the whole-recording table of a sweep marks nothing: the sweep decides)."""
    for m in (WINNER_MARK, LEADER_MARK):
        label = label.removeprefix(m + " ")
    return label


def marks_legend(group: SweepOutcome) -> str | None:
    """What the marks of a group's table mean (only the marks it shows), or None when it shows none."""
    shown = {mark(group, r) for r in group.rows} - {""}
    if not shown:
        return None
    return "; ".join(f"{m} {MARK_WORDS[m]}" for m in (WINNER_MARK, LEADER_MARK) if m in shown)


def context_lines(groups: Sequence[SweepOutcome]) -> list[str]:
    """The tok/s comparison of each group where the sweep decided on an objective, and where its numbers
    come from: context, not a verdict (no mark, no verdict's words); [] where tok/s decided."""
    out = []
    for g in groups:
        if g.context_text is not None:
            out += [g.context_text, f"{g.source_text[0].upper()}{g.source_text[1:]}: the samples of the sweep's "
                    "measurement windows (the table below)"]
    return out


def context_markdown(groups: Sequence[SweepOutcome]) -> list[str]:
    """The report's ``## tok/s, for context`` section (its lines, a blank one first), [] where tok/s decided."""
    out = []
    for text in context_lines(groups):
        out += ["", *wrap(markdown_cell(text))]
    return ["", "## tok/s, for context", *out] if out else []


def context_html(groups: Sequence[SweepOutcome]) -> str:
    """The HTML report's ``tok/s, for context`` section, "" where tok/s decided."""
    paragraphs = "".join(f"<p>{html.escape(plain(t, newlines=True))}</p>" for t in context_lines(groups))
    return f"\n<h2>tok/s, for context</h2>\n{paragraphs}" if paragraphs else ""


def context_json(groups: Sequence[SweepOutcome]) -> dict[str, Any]:
    """For the JSON report: what its verdict is on (``decided_on``: the objective's name where the sweep
    decided on one, else ``tok/s``), and each group's tok/s comparison as ``context``, without a mark
    ([] where tok/s decided)."""
    a = groups[0].answer if groups else None
    return {"decided_on": a.measure if a is not None else "tok/s",
            "context": [{"concurrency": g.concurrency, "workload": g.workload, "measure": g.context.measure,
                         "leader": g.context.leader, "text": g.context_text, "source": g.source_text}
                        for g in groups if g.context is not None]}


def by_load(groups: Sequence[SweepOutcome]) -> bool:
    """Whether the sweep measured more than one load (concurrency or workload)."""
    return len(groups) > 1


def _loads_text(groups: Sequence[SweepOutcome]) -> str:
    concs = sorted({g.concurrency for g in groups if g.concurrency})
    loads = [g.workload for g in groups if g.workload]
    parts = []
    if len(concs) > 1:
        parts.append("concurrency " + ", ".join(map(str, concs)))
    if len(set(loads)) > 1:
        parts.append("the " + ", ".join(dict.fromkeys(loads)) + " prompts")
    return " and ".join(parts) or f"{len(groups)} groups"


def pooled_note(groups: Sequence[SweepOutcome]) -> str | None:
    """Why a report of a sweep over several loads has no table of the whole recording (None: it has one)."""
    if not by_load(groups):
        return None
    return (f"Not pooled: the sweep measured {len(groups)} loads ({_loads_text(groups)}), and a figure over "
            "the samples of several loads describes none of them. Each load's figures are its own table above.")


def load_costs(groups: Sequence[SweepOutcome], whole: CostModelView | None, *, parallel: bool) -> list[LoadCost]:
    """The cost model of each load of a sweep, from that load's settings as the sweep measured them.

    Without a sweep (or for a parallel sweep, whose table is over replicas), the whole recording's
    model ``whole``. A group whose settings repeat a step count (a grid over more than the steps)
    has none: the model is a line over step counts.
    """
    if not groups or parallel:
        return [LoadCost("", None, None, whole)] if whole is not None else []
    out = []
    for g in groups:
        rows = [r for r in g.rows if r.steps is not None and r.tps_mean is not None]
        steps = [r.steps for r in rows]
        if len(steps) != len(set(steps)):
            continue
        conc = g.concurrency or 1
        view = cost_model_of([Measured(r.steps, r.label, r.tps_mean, r.tps_half, r.accept_len_mean, None, conc)
                              for r in rows if r.steps is not None and r.tps_mean is not None])
        if view is not None:
            out.append(LoadCost(g.group_text if by_load(groups) else "", g.concurrency, g.workload, view))
    return out


#: The fields of ``summarize --format json``'s rows that pool every sample of a configuration.
_POOLED_ROW_FIELDS = ("throughput", "accept_len", "accept_rate", "per_position", "within_launch",
                      "interval_covers", "vs_baseline_pct", "vs_baseline_ci95", "by_concurrency")


def unpooled_json(doc: dict[str, Any], groups: Sequence[SweepOutcome], sentence: str) -> dict[str, Any]:
    """The JSON report's table document without figures pooled across loads (each is null, and ``pooled``
    says why), the sweep's verdict in place of the pooled one, and every group's rows in ``groups``."""
    note = pooled_note(groups)
    if note is None:
        return doc
    for row in doc.get("runs", []):
        for k in _POOLED_ROW_FIELDS:
            row[k] = None
        row["best"] = False
    doc["baseline"] = None
    doc["verdict"] = {"sentence": sentence, "pooled": False}
    doc["pooled"] = {"pooled": False, "why": note}
    doc["groups"] = [group_json(g) for g in groups]
    return doc


def group_json(group: SweepOutcome) -> dict[str, Any]:
    """One load's verdict and rows as the sweep measured them."""
    return {
        "concurrency": group.concurrency, "workload": group.workload, "sentence": group.sentence,
        "declared": declared(group),
        "rows": [{"label": r.label, "steps": r.steps, "samples": r.samples, "tps_mean": r.tps_mean,
                  "tps_ci95_half": r.tps_half, "vs_baseline_pct": r.vs_pct, "vs_baseline_ci95": [r.vs_low, r.vs_high],
                  "accept_len_mean": r.accept_len_mean, "accept_rate_mean": r.accept_rate_mean,
                  "is_baseline": r.is_baseline, "mark": mark(group, r) or None} for r in group.rows],
    }


def groups_csv(groups: Sequence[SweepOutcome], analysis: Analysis) -> str:
    """One CSV row per load and setting, as the sweep measured them, with the crash of a run of that
    setting (by label) where the log holds one."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")

    def f(x: float | None) -> str:
        return "" if x is None else f"{x:.4f}"

    w.writerow(["concurrency", "workload", "label", "steps", "samples", "tps_mean", "tps_ci95_low", "tps_ci95_high",
                "vs_baseline_pct", "vs_baseline_ci95_low", "vs_baseline_ci95_high", "accept_len_mean",
                "accept_rate_mean", "is_baseline", "mark", "crashed", "crash_line", "crash_error"])
    crashes = {c.label: c for c in analysis.crashes}
    for g in groups:
        for r in g.rows:
            half = r.tps_half
            lo = None if r.tps_mean is None or half is None else r.tps_mean - half
            hi = None if r.tps_mean is None or half is None else r.tps_mean + half
            crash = crashes.get(r.label)
            w.writerow([csv_cell(c) for c in [
                "" if g.concurrency is None else g.concurrency, g.workload or "", r.label,
                "" if r.steps is None else r.steps, r.samples, f(r.tps_mean), f(lo), f(hi), f(r.vs_pct),
                f(r.vs_low), f(r.vs_high), f(r.accept_len_mean), f(r.accept_rate_mean), int(r.is_baseline),
                mark(g, r), int(crash is not None), "" if crash is None or crash.line is None else crash.line,
                "" if crash is None else crash.error]])
    # A crash of a setting no group measured (it died before its first sample) still has a row.
    measured = {r.label for g in groups for r in g.rows}
    for c in analysis.crashes:
        if c.label not in measured:
            w.writerow([csv_cell(x) for x in ["", "", c.label, "", 0, "", "", "", "", "", "", "", "", 0, "", 1,
                                              "" if c.line is None else c.line, c.error]])
    return out.getvalue()
