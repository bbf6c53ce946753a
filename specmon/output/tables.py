"""The per-configuration table in every output format: rich table, JSON, CSV, Markdown.

The summarize command and the dashboard's export both render through here,
so a table exported from the UI is the table ``specmon summarize`` prints.
"""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from specmon.literal import csv_cell, markdown_cell, markdown_text, plain
from specmon.model.analysis import Analysis, ConfigRow
from specmon.model.session import Session
from specmon.model.stats import Summary
from specmon.model.verdict import LEADER_MARK, WINNER_MARK, Answer, Kind, answer_from_json, claim_of, pct_bound
from specmon.records import Engine, iso_timestamp

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

FORMATS = ("table", "json", "csv", "markdown")


def _num(x: float | None, nd: int = 2) -> str:
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.{nd}f}"


def _mean_ci(s: Summary | None, nd: int = 1) -> str:
    if s is None:
        return "—"
    return _mean_half_text(s.mean, s.ci_half_width, nd)


def _half_text(half: float, nd: int) -> str:
    """A half width in the table's decimals; past 10^5 in three digits (``1.33e+44``): an interval on one
    degree of freedom can be that wide, and all its digits took the table's whole width."""
    return f"{half:.{nd}f}" if half < 1e5 else f"{half:.3g}"


def _vs(row: ConfigRow) -> str:
    if row.is_baseline:
        return "baseline"
    r = row.vs_baseline
    if r is None:
        return "—"
    return pct_interval_text(r.pct, r.ci95_low, r.ci95_high, closing_pct=False)


def marked(mark: str, label: str) -> str:
    """``★ EAGLE3 2 steps``: a row's label behind the verdict's mark (★ winner, ☆ leads, undecided)."""
    return f"{mark} {label}" if mark else label


def row_cells(row: ConfigRow) -> list[str]:
    """The human cells of a row, shared by the rich table, Markdown and the dashboard."""
    return [
        marked(row.mark, row.label),
        str(row.samples),
        _mean_ci(row.throughput),
        _vs(row),
        _mean_ci(row.accept_len, 2),
        _mean_ci(row.accept_rate, 2),
    ]


#: What an interval covers, by the suffix of its header: every interval on
#: screen says it (``tok/s ± CI (launch)``), so the dashboard's 85.1 ± 8.4 and the fleet's 85.1 ± 0.6
#: can stand side by side.
COVERS = {
    "launch": "95% interval over launches: each server start is one unit, with the launch spread "
              "measured (two or more starts of a setting) or assumed (--launch-cv)",
    "sample": "95% interval over one run's samples (batch means): how precisely that one launch is known",
    "replica": "95% interval over replicas: each replica is one launch of the setting",
}


def tps_header(covers: str) -> str:
    """``tok/s ± CI (launch)``: the throughput column's header, naming what its interval covers."""
    return f"tok/s ± CI ({covers})"


#: Steps and draft tokens are in the label ("EAGLE3 2 steps draft 4"); JSON/CSV carry them apart.
HEADERS = ["configuration", "n", tps_header("launch"), "vs baseline (95% CI)", "accept len", "accept rate"]
#: Columns a narrow terminal drops, first to last (a printed note names them); the rest always stay.
DROP_ORDER = ("accept rate", "accept len", "n")


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


def _launch_model_json(analysis: Analysis) -> dict[str, Any] | None:
    """The between-launch part every interval includes (None before an analysis has one)."""
    b = analysis.between
    if b is None:
        return None
    return {"launch_cv_pct": round(100 * b.cv, 3), "estimated": b.estimated,
            "df": None if b.df == float("inf") else round(b.df, 2), "replicated_settings": b.replicated,
            "assumed_launch_cv_pct": round(100 * b.assumed_cv, 3), "text": b.describe()}


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
            # What the throughput interval covers: "3 launches", "1 launch + assumed launch CV 5%".
            "interval_covers": row.covers,
            "within_launch": row.within.to_json() if row.within is not None and row.estimate is not None else None,
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
            "mark": row.mark,
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
            "answer": v.answer.to_json(),
        },
        "launch_model": _launch_model_json(analysis),
        "crashes": [c.to_json() for c in analysis.crashes],
        "unparsed_examples": [{"line": u.line, "reason": u.reason, "text": u.text[:300]}
                              for u in list(session.unparsed)[:20]],
    }


def to_csv(analysis: Analysis) -> str:
    """One CSV row per configuration, numbers unformatted for spreadsheets."""
    out = io.StringIO()
    w = _SafeWriter(csv.writer(out, lineterminator="\n"))
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


class _SafeWriter:
    """A csv writer whose every cell goes through :func:`~specmon.literal.csv_cell`.

    Labels and crash lines come from the log: a spreadsheet must show ``=HYPERLINK(…)`` as
    text, never run it, and no control character reaches the file.
    """

    def __init__(self, writer: Any) -> None:
        self._writer = writer

    def writerow(self, row: list[Any]) -> None:
        self._writer.writerow([csv_cell(c) for c in row])


def _crash_cells(analysis: Analysis, run_ids: set[int]) -> list[str | int]:
    crash = next((c for c in reversed(analysis.crashes) if c.run in run_ids), None)
    if crash is None:
        return [0, "", "", "", ""]
    return [1, crash.run, iso_timestamp(crash.at) or "", "" if crash.line is None else crash.line, crash.error]


def crash_lines(analysis: Analysis) -> list[str]:
    """One sentence per crashed run (empty when none crashed)."""
    return [c.sentence for c in analysis.crashes]


def verdict_tag(a: Answer) -> str:
    """``☆ leads, undecided``, ``★ winner``: the verdict's mark and its words."""
    return a.tag


def context_cells(row: ConfigRow, context: bool) -> list[str]:
    """A row's cells; for ``context`` (tok/s where an objective decides) its label without a mark:
    a mark means the declared verdict, and this comparison declares none."""
    cells = row_cells(row)
    if context:
        cells[0] = row.label
    return cells


def context_line(a: Answer) -> str:
    """``tok/s, for context (not a verdict): EAGLE3 2 steps: +6.6% (…) over no speculation``: the tok/s
    comparison where an objective decides, on its leader alone, without a mark or a verdict's words."""
    return f"{a.measure}, for context (not a verdict): {a.head}"


def to_markdown(analysis: Analysis, *, verdict: Answer | None = None, lead: str = "Verdict",
                context: bool = False) -> str:
    """A GitHub-flavoured Markdown table and the verdict underneath (``verdict``: another than the
    analysis' own, the sweep's; ``lead``: the words before it; ``context``: another verdict decides, so
    the rows carry no mark and the line under them is :func:`context_line`)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for row in analysis.rows:
        # Labels come from the log: literal Markdown (no HTML, no pipes, no code spans).
        cells = [markdown_cell(c) for c in context_cells(row, context)]
        if row.mark and not context:
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    a = verdict or analysis.verdict.answer
    lines.append(markdown_text(context_line(a)) if context else
                 f"**{lead} ({verdict_tag(a)}):** {markdown_text(a.sentence)}")
    if analysis.crashes:
        lines.append("")
        lines.append("**Crashes:**")
        lines.append("")
        lines.extend(f"- {markdown_text(t)}" for t in crash_lines(analysis))
    if analysis.verdict.concurrency_note:
        lines.append("")
        lines.append(f"_Note:_ {markdown_text(analysis.verdict.concurrency_note)}")
    return "\n".join(lines) + "\n"


def to_rich(analysis: Analysis, title: str | None = None, width: int = 10_000,
            context: bool = False) -> tuple[Table, str | None]:
    """A rich Table for the terminal that fits ``width``, and the note naming any column left out
    (``context``: no mark, see :func:`context_cells`)."""
    from specmon.output.textfit import fitted_table

    styles = ["bold" if row.mark and not context else ("dim" if row.samples == 0 else None) for row in analysis.rows]
    return fitted_table(HEADERS, [context_cells(row, context) for row in analysis.rows], width=width,
                        drop_order=DROP_ORDER, title=title, styles=styles)


def print_analysis(console: Console, analysis: Analysis, *, title: str | None = None,
                   verdict: Answer | None = None, lead: str = "Verdict", context: bool = False) -> None:
    """The table and, under it, the verdict as a paragraph: whole at the console's width (80 columns too).

    Args:
        verdict: The answer to print (the sweep's, adjusted for its looks); default the analysis' own.
        lead: The word before it.
        context: Another verdict decides (``--objective``): the rows carry no mark, and the line under
            them is the comparison's :func:`context_line`, not a verdict.
    """
    from specmon.output.textfit import verdict_text

    table, note = to_rich(analysis, title=title, width=console.width, context=context)
    console.print(table)
    if note:
        console.print(note, markup=False, highlight=False)
    a = verdict or analysis.verdict.answer
    if context:  # a plain paragraph (the label is log text: literal, no markup), wrapped at words
        console.print(plain(context_line(a)), markup=False, highlight=False)
    else:
        console.print(verdict_text(a, lead=lead))


def render(fmt: str, session: Session, analysis: Analysis) -> str:
    """Render as text in a named format (``table`` falls back to Markdown-free plain text)."""
    if fmt == "json":
        return json.dumps(to_json(session, analysis), indent=2) + "\n"
    if fmt == "csv":
        return to_csv(analysis)
    if fmt == "markdown":
        return to_markdown(analysis)
    raise ValueError(f"unknown format {fmt!r}")


# -- the one verdict of a sweep ------------------------------------------------------------------

def pct_interval_text(pct: float, low: float | None, high: float | None, *, closing_pct: bool = True) -> str:
    """``+6.6% (+5.9…+7.4%)``: a relative difference and its interval, one decimal.

    Every place that prints a sweep's speed-up (the verdict panel, the run table after a
    sweep, the sweep report's verdict and its table) formats it here, from the same numbers:
    the 2 decimals the sweep's JSON keeps (the sweep's own sentence rounds to those first too).
    ``closing_pct=False`` drops the second ``%`` (table cells, where the header says it).
    """
    if low is None or high is None:
        return f"{pct:+.1f}%"
    return f"{pct:+.1f}% ({pct_bound(low)}…{pct_bound(high)}{'%' if closing_pct else ''})"


#: What each source of a sweep's numbers is, in words.
SOURCE_WORDS = {"log": "the server log", "counters": "the engine's counters (/metrics)",
                "counters+log": "the engine's counters and, where they were missing, the log",
                "client": "the load driver's own timings"}


def _f(x: Any) -> float | None:
    return float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) else None


def _half(summary: Any) -> tuple[float | None, float | None]:
    """(mean, half width of the 95% interval) of a ``Summary.to_json()`` dict."""
    if not isinstance(summary, dict):
        return None, None
    mean, lo, hi = _f(summary.get("mean")), _f(summary.get("ci95_low")), _f(summary.get("ci95_high"))
    return mean, (None if lo is None or hi is None else (hi - lo) / 2)


def _mean_half_text(mean: float | None, half: float | None, nd: int) -> str:
    if mean is None:
        return "—"
    return f"{mean:.{nd}f}" if half is None else f"{mean:.{nd}f} ± {_half_text(half, nd)}"


@dataclass(frozen=True, slots=True)
class OutcomeRow:
    """One setting of a sweep, as its verdict saw it (the samples of its measurement windows)."""

    label: str
    steps: int | None
    samples: int
    status: str
    tps_mean: float | None
    tps_half: float | None
    vs_pct: float | None
    vs_low: float | None
    vs_high: float | None
    accept_len_mean: float | None
    accept_len_half: float | None
    accept_rate_mean: float | None
    accept_rate_half: float | None
    is_baseline: bool
    best: bool
    source: str | None
    #: The verdict's mark: ★ a declared winner, ☆ the leader not separated, "" the others.
    mark: str = ""

    @property
    def vs_text(self) -> str:
        """``baseline``, ``+6.6% (+5.9…+7.4)`` or ``—``."""
        if self.is_baseline:
            return "baseline"
        if self.vs_pct is None:
            return "—"
        return pct_interval_text(self.vs_pct, self.vs_low, self.vs_high, closing_pct=False)

    def cells(self) -> list[str]:
        """The row in :data:`HEADERS` order."""
        return [marked(self.mark, self.label), str(self.samples),
                _mean_half_text(self.tps_mean, self.tps_half, 1), self.vs_text,
                _mean_half_text(self.accept_len_mean, self.accept_len_half, 2),
                _mean_half_text(self.accept_rate_mean, self.accept_rate_half, 2)]


@dataclass(frozen=True, slots=True)
class SweepOutcome:
    """A sweep's one verdict: what the verdict panel, the run table and the sweep report all show.

    Built by :func:`sweep_outcome` from the sweep's JSON document (``SweepResult.to_json()``,
    which is also what the recording keeps), so the dashboard and a report written later
    from the recording print the same numbers, formatted by the same functions. Where the sweep
    decided on an objective (``--objective itl-p50``), the verdict is the objective's (its answer,
    leader, mark and sentence) and the tok/s comparison is ``context``, never a second verdict.
    """

    rows: tuple[OutcomeRow, ...]
    best: OutcomeRow | None
    runner_up: OutcomeRow | None
    baseline: OutcomeRow | None
    separated: bool
    equivalent: bool
    concurrency: int | None
    source: str
    sources_agree: bool | None
    checks: tuple[dict[str, Any], ...]
    detail: str
    finished: bool
    #: The named prompt set of this verdict's group (a sweep over several workloads); None: one only.
    workload: str | None = None
    #: The one verdict object (:mod:`specmon.model.verdict`): its mark and words are what is drawn.
    answer: Answer | None = None
    #: What would decide an undecided verdict (the sweep's ``needs_more`` for these two settings).
    advice: tuple[str, ...] = ()
    #: The tok/s verdict when the sweep decided on an objective (``--objective``): ``answer`` is then the
    #: objective's, and this is drawn as context only, without its mark (:func:`context_line`).
    context: Answer | None = None

    @property
    def context_text(self) -> str | None:
        """``tok/s, for context (not a verdict): ...`` where an objective decides; None where tok/s does."""
        return None if self.context is None else context_line(self.context)

    @property
    def tag(self) -> str:
        """``☆ leads, undecided``, ``★ winner``: the mark and its words, as every surface shows them."""
        a = self.answer
        return "nothing measured" if a is None else verdict_tag(a)

    @property
    def group_text(self) -> str:
        """Which group of a sweep this verdict is for: `` at concurrency 4 on the chat prompts`` (or empty)."""
        text = f" at concurrency {self.concurrency}" if self.concurrency else ""
        if self.workload:
            text += f" on the {self.workload} prompts"
        return text

    @property
    def speedup_text(self) -> str | None:
        """The best setting against the baseline: ``+6.6% (+5.9…+7.4%)`` (None without one)."""
        b = self.best
        if b is None or b.is_baseline or b.vs_pct is None or self.baseline is None:
            return None
        return pct_interval_text(b.vs_pct, b.vs_low, b.vs_high)

    @property
    def headline(self) -> str:
        """``EAGLE3 2 steps: +6.6% (+5.9…+7.4%) over no speculation``; on an objective, the first clause of
        its sentence (``EAGLE3 2 steps has the lowest ITL p50 at concurrency 1: 12.3 ms (...)``)."""
        b = self.best
        at = self.group_text
        if self.context is not None and self.answer is not None:
            return self.answer.head  # the objective's: its leader and its figure (the rest is ``detail``)
        if b is None or b.tps_mean is None:
            return "no verdict: nothing was measured"
        if b.is_baseline:
            return f"{b.label} is fastest{at} ({b.tps_mean:.1f} tok/s)"
        sp = self.speedup_text
        if sp is not None and self.baseline is not None:
            return f"{b.label}: {sp} over {self.baseline.label}{at}"
        return f"{b.label}: {b.tps_mean:.1f} tok/s{at} (no baseline measured)"

    @property
    def sentence(self) -> str:
        """The headline and what the sweep said about the runner-up and the sources."""
        return self.headline + self.detail

    @property
    def claim(self) -> str:
        """The sentence without its `` Rests on ...`` part (see :attr:`specmon.model.verdict.Answer.claim`)."""
        if self.context is not None and self.answer is not None:
            return self.answer.claim  # the objective's
        return claim_of(self.sentence, (self.best.label if self.best else None,
                                        self.runner_up.label if self.runner_up else None))

    @property
    def verdict_line(self) -> str:
        """``☆ leads, undecided: <the sentence>``: the tag and the whole sentence, for one line of text."""
        return f"{self.tag}: {self.sentence}"

    @property
    def source_text(self) -> str:
        """Where the numbers come from, and whether the other sources agree."""
        what = "" if self.context is None else "the tok/s "  # an objective decides: these are its context's
        text = f"{what}numbers from {SOURCE_WORDS.get(self.source, self.source)}"
        for c in self.checks:
            phrase = c.get("phrase")  # the verdict's own words (documents written before it: the flag)
            if not isinstance(phrase, str):
                phrase = f"{c.get('name', '?')} {'agrees' if c.get('agrees') else 'disagrees'}"
            text += f"; {phrase}"
        return text

    @property
    def winner_steps(self) -> int | None:
        """The step count to restart on: the best, when it is not the setting without speculation."""
        b = self.best
        return None if b is None or b.steps is None else b.steps


def sweep_outcome(doc: Any) -> SweepOutcome | None:
    """The headline verdict of a sweep document (``SweepResult.to_json()``); None if ``doc`` is not one.

    The speed-up is the best row's own ``vs baseline`` figure, so the headline and the
    table cannot disagree; the rest of the sentence (runner-up, sources) is the sweep's.
    A sweep over several concurrencies or workloads has one verdict per group:
    :func:`sweep_outcomes` gives them all.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("verdict"), dict) or not isinstance(doc.get("runs"), list):
        return None
    return _outcome(doc, doc["verdict"])


def sweep_outcomes(doc: Any) -> list[SweepOutcome]:
    """Every verdict of a sweep document, one per group (concurrency × workload), in the sweep's order.

    A sweep over two workloads kept only its last group's verdict in the report, with the rows
    of both groups under it (each setting twice, two stars): each group now has its own.
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("verdict"), dict) or not isinstance(doc.get("runs"), list):
        return []
    groups = [v for v in doc.get("verdicts") or () if isinstance(v, dict)]
    if len(groups) < 2:
        return [_outcome(doc, doc["verdict"])]
    return [_outcome(doc, v) for v in groups]


def _outcome(doc: dict[str, Any], v: dict[str, Any]) -> SweepOutcome:
    """The group's outcome: the tok/s verdict's, or, where the sweep decided on an objective, the objective's."""
    tps = _tps_outcome(doc, v)
    on = _objective_of(doc, v)
    decided = answer_from_json(on) if on is not None else None
    return tps if decided is None else _decided_on(doc, tps, decided)


def _objective_of(doc: dict[str, Any], v: dict[str, Any]) -> dict[str, Any] | None:
    """The objective's verdict of the tok/s verdict ``v``'s group (``--objective``), None for a tok/s sweep."""
    group = (v.get("concurrency"), v.get("workload") or None)
    found = [o for o in doc.get("objective_verdicts") or () if isinstance(o, dict)]
    one = doc.get("objective_verdict")
    if not found and isinstance(one, dict):
        found = [one]
    return next((o for o in found if (o.get("concurrency"), o.get("workload") or None) == group), None)


def _named(rows: tuple[OutcomeRow, ...], label: str | None, steps: int | None) -> OutcomeRow | None:
    """The row of a setting the objective's verdict names: by its label, else by its step count where
    that is one setting's only."""
    if label is None:
        return None
    row = next((r for r in rows if r.label == label), None)
    by_steps = [r for r in rows if steps is not None and r.steps == steps]
    return row if row is not None else (by_steps[0] if len(by_steps) == 1 else None)


def _decided_on(doc: dict[str, Any], tps: SweepOutcome, a: Answer) -> SweepOutcome:
    """The outcome where the objective decides: its answer, leader and runner-up, its mark beside its leader
    only, its sentence (``headline`` its first clause) and what would decide it; tok/s kept as ``context``."""
    leader = _named(tps.rows, a.leader, a.leader_steps)
    runner = _named(tps.rows, a.runner_up, a.runner_up_steps)
    rows = tuple(replace(r, mark=a.mark if r is leader else "", best=r is leader) for r in tps.rows)
    best = next((new for old, new in zip(tps.rows, rows, strict=True) if old is leader), None)
    runner_up = next((new for old, new in zip(tps.rows, rows, strict=True) if old is runner), None)
    return replace(tps, rows=rows, best=best, runner_up=runner_up,
                   baseline=next((r for r in rows if r.is_baseline), None), separated=a.kind is Kind.WINNER,
                   equivalent=a.kind is Kind.EQUIVALENT, detail=a.sentence[len(a.head):], answer=a,
                   advice=_advice(doc, (a.leader, a.runner_up), a.kind is Kind.WINNER), context=tps.answer)


def _advice(doc: dict[str, Any], pair: tuple[str | None, str | None], separated: bool) -> tuple[str, ...]:
    """What would decide an undecided verdict (model/design.py's NeedsMore): the entries for its two settings."""
    return tuple(n["text"] for n in doc.get("needs_more") or ()
                 if isinstance(n, dict) and isinstance(n.get("text"), str) and (n.get("a"), n.get("b")) == pair
                 and not separated)


def _tps_outcome(doc: dict[str, Any], v: dict[str, Any]) -> SweepOutcome:
    conc = v.get("concurrency")
    workload = v.get("workload") if isinstance(v.get("workload"), str) else None
    made = answer_from_json(v)
    rows = []
    for r in doc["runs"]:
        if not isinstance(r, dict) or (conc is not None and r.get("concurrency") not in (None, conc)):
            continue
        if workload is not None and r.get("workload") != workload:
            continue
        tm, th = _half(r.get("throughput"))
        am, ah = _half(r.get("accept_len"))
        rm, rh = _half(r.get("accept_rate"))
        raw_ci = r.get("vs_baseline_ci95")
        ci: list[Any] = raw_ci if isinstance(raw_ci, list) and len(raw_ci) == 2 else [None, None]
        steps = r.get("steps")
        raw_mark = r.get("mark")
        mark = raw_mark if raw_mark in (WINNER_MARK, LEADER_MARK, "") else (made.mark if made is not None and r.get("best") else "")
        rows.append(OutcomeRow(str(r.get("label") or f"{steps} steps"), steps if isinstance(steps, int) else None,
                               int(r.get("samples") or 0), str(r.get("status", "")), tm, th,
                               _f(r.get("vs_baseline_pct")), _f(ci[0]), _f(ci[1]), am, ah, rm, rh,
                               bool(r.get("is_baseline")), bool(r.get("best")),
                               r.get("source") if isinstance(r.get("source"), str) else None, mark))
    best = next((r for r in rows if r.best), None)
    if best is None and v.get("best_steps") is not None:
        best = next((r for r in rows if r.steps == v.get("best_steps")), None)
    runner = next((r for r in rows if r.steps == v.get("runner_up_steps") and r is not best), None) \
        if v.get("runner_up_steps") is not None else None
    baseline = next((r for r in rows if r.is_baseline), None)
    sentence = str(v.get("sentence") or "")
    # The sweep's own sentence: "<best>: <speed-up> over <baseline>; <runner-up> ... Rests on ...".
    detail = ""
    if ";" in sentence:
        detail = ";" + sentence.split(";", 1)[1]
    elif ". Rests on" in sentence:
        detail = sentence[sentence.index(". Rests on"):]
    checks = tuple(c for c in v.get("checks") or () if isinstance(c, dict))
    advice = _advice(doc, (best.label if best else None, runner.label if runner else None), bool(v.get("separated")))
    return SweepOutcome(tuple(rows), best, runner, baseline, bool(v.get("separated")), bool(v.get("equivalent")),
                        conc if isinstance(conc, int) else None, str(v.get("source") or "log"),
                        v.get("sources_agree") if isinstance(v.get("sources_agree"), bool) else None, checks,
                        detail, bool(doc.get("finished")), workload, made, advice)


def outcome_markdown(outcome: SweepOutcome) -> list[str]:
    """The sweep's table as Markdown lines (the numbers of its verdict)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for row in outcome.rows:
        cells = [markdown_cell(c) for c in row.cells()]
        if row.mark:
            cells[0] = f"**{cells[0]}**"
        lines.append("| " + " | ".join(cells) + " |")
    return lines
