"""Reports from a recording: the table, the verdict and throughput over time.

``specmon report RECORDING --format markdown|html|json|csv`` replays the
recording (:func:`specmon.output.recording.replay_recording`), analyses it the way
``summarize`` does, and renders:

* the per-configuration table (:mod:`specmon.output.tables`, so it is the table the
  dashboard and ``summarize`` show);
* the verdict — the sweep's own (adjusted for its repeated looks) when the
  recording holds one, else the analysis verdict;
* throughput over time, one series per run: a text chart in Markdown, the
  points themselves in JSON; HTML has charts instead (:mod:`specmon.output.charts`:
  tok/s per setting with its interval, acceptance per draft position, the cost
  model against the measurements, throughput over time), inline SVG in one
  self-contained file (no scripts, no external resources);
* the cost model behind the numbers (:mod:`specmon.model.costmodel`) and the restarts.

CSV carries the table only (one row per configuration, for spreadsheets);
the series are in the JSON report.
"""

from __future__ import annotations

import html
import json
import math
import os
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from typing import Any, overload

import numpy as np

from specmon.literal import markdown_cell, markdown_code_block, markdown_code_span, plain
from specmon.model.analysis import Analysis, analyze
from specmon.model.costmodel import CostModelView, build_cost_model
from specmon.model.launches import DEFAULT_LAUNCH_CV
from specmon.model.session import Session
from specmon.output.charts import report_charts
from specmon.output.parallel_sweep import is_parallel
from specmon.output.parallel_sweep import markdown_lines as parallel_markdown
from specmon.output.parallel_sweep import text_report as parallel_text
from specmon.output.prompt_table import prompt_html, prompt_markdown
from specmon.output.recording_reader import ReadStats
from specmon.output.recording_replay import replay_recording
from specmon.output.report_loads import (
    LoadCost,
    context_html,
    context_json,
    context_markdown,
    group_cells,
    groups_csv,
    load_costs,
    marks_legend,
    pooled_note,
    unmarked,
    unpooled_json,
)
from specmon.output.report_series import LAID_APART, lay_runs_apart, text_chart
from specmon.output.report_text import dropped_note, fit_table, table_row, wrap, wrap_block
from specmon.output.tables import (
    HEADERS,
    SweepOutcome,
    crash_lines,
    row_cells,
    sweep_outcome,
    sweep_outcomes,
    to_csv,
)
from specmon.output.tables import to_json as table_json
from specmon.records import Decode, EngineStats, ParsedRecord
from specmon.wording import counted

REPORT_FORMATS = ("markdown", "html", "json", "csv")
#: Most points a plot is given (more cannot be seen, and make the file heavy).
MAX_POINTS = 1500
__all__ = ["REPORT_FORMATS", "ReportData", "load_report", "render_report", "text_chart", "to_html", "to_markdown"]


@dataclass
class SeriesPoint:
    """One throughput sample in time order."""

    t: float  # seconds since the first sample
    tps: float
    run: int


class Series(Sequence[SeriesPoint]):
    """Throughput samples in time order, kept as three arrays (millions of points cost MB, not GB).

    Indexing and iteration give :class:`SeriesPoint` objects made on the fly.
    """

    def __init__(self, t: np.ndarray, tps: np.ndarray, run: np.ndarray) -> None:
        self.t, self.tps, self.run = t, tps, run

    def __len__(self) -> int:
        return len(self.t)

    @overload
    def __getitem__(self, i: int) -> SeriesPoint: ...
    @overload
    def __getitem__(self, i: slice) -> list[SeriesPoint]: ...

    def __getitem__(self, i: int | slice) -> SeriesPoint | list[SeriesPoint]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        return SeriesPoint(float(self.t[i]), float(self.tps[i]), int(self.run[i]))

    def __iter__(self) -> Iterator[SeriesPoint]:
        for t, v, r in zip(self.t.tolist(), self.tps.tolist(), self.run.tolist(), strict=True):
            yield SeriesPoint(t, v, r)


@dataclass
class ReportData:
    """Everything a report shows, independent of the format."""

    path: str
    session: Session
    analysis: Analysis
    series: Sequence[SeriesPoint]
    time_basis: str  # "log time" or "receive time"
    run_labels: dict[int, str]
    sweep_verdicts: list[dict[str, Any]] = field(default_factory=list)
    restarts: list[dict[str, Any]] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)
    cost: CostModelView | None = None
    read: ReadStats = field(default_factory=ReadStats)

    @property
    def sweep_verdict(self) -> dict[str, Any] | None:
        """The last verdict the recording holds (a sweep's), if any."""
        return self.sweep_verdicts[-1] if self.sweep_verdicts else None

    @property
    def outcome(self) -> SweepOutcome | None:
        """The sweep's one verdict (:func:`specmon.output.tables.sweep_outcome`), when a sweep ran."""
        return sweep_outcome(self.sweep_verdict)

    @property
    def outcomes(self) -> list[SweepOutcome]:
        """Every group's verdict of the sweep (one per concurrency and workload); empty without a sweep."""
        return sweep_outcomes(self.sweep_verdict)

    @property
    def costs(self) -> list[LoadCost]:
        """The cost model of each load the sweep measured, from that load's own settings (without a
        sweep: the whole recording's, :attr:`cost`)."""
        return load_costs(self.outcomes, self.cost, parallel=is_parallel(self.sweep_verdict))

    @property
    def pooled_note(self) -> str | None:
        """Why the report has no table of the whole recording (a sweep over several loads), else None."""
        return pooled_note(self.outcomes)

    @property
    def winners_differ(self) -> str | None:
        """The sweep's finding that the winner depends on the load or the workload (None when it does not)."""
        sv = self.sweep_verdict
        text = sv.get("winners_differ") if isinstance(sv, dict) else None
        return text if isinstance(text, str) and text else None

    @property
    def sentence(self) -> str:
        """The verdict sentence the report leads with."""
        outcomes = self.outcomes
        if len(outcomes) > 1:
            return self.winners_differ or outcomes[0].sentence
        outcome = self.outcome
        if outcome is not None:
            return outcome.sentence
        sv = self.sweep_verdict
        if sv is not None:
            v = sv.get("verdict") if isinstance(sv.get("verdict"), dict) else sv
            if isinstance(v, dict) and v.get("sentence"):
                return str(v["sentence"])
        return self.analysis.verdict.sentence


class _RunLength:
    """A column of floats kept as (value, repeat) pairs: receive times repeat per batch and run ids
    per run, so a million samples take a few entries (NaN repeats like any value)."""

    def __init__(self) -> None:
        self.values, self.counts = array("d"), array("q")

    def add(self, value: float, n: int = 1) -> None:
        if self.values:
            last = self.values[-1]
            if last == value or (last != last and value != value):
                self.counts[-1] += n
                return
        self.values.append(value)
        self.counts.append(n)

    def extend(self, values: Iterable[float]) -> None:
        # Runs found and counted in C (groupby, list): a batch's receive time repeats for its
        # whole batch (a generator counting them was 0.2 s of a 2M-line report).
        for v, same in groupby(values):
            self.add(v, len(list(same)))

    def expand(self, dtype: Any = np.float64) -> np.ndarray:
        return np.repeat(np.frombuffer(self.values, dtype=np.float64).astype(dtype),
                         np.frombuffer(self.counts, dtype=np.int64))


def load_report(path: str | os.PathLike[str], *, warmup: int | None = None, year: int | None = None,
                launch_cv: float = DEFAULT_LAUNCH_CV) -> ReportData:
    """Replay a recording and gather what a report needs.

    Raises:
        RecordingError: not a readable recording.
    """
    # Columns of (log time, receive time, tps, run); NaN for a missing time. Arrays, not tuples:
    # a 2M-line recording has a million samples.
    log_t, tps_col = array("d"), array("d")
    recv_t, run_col = _RunLength(), _RunLength()
    nan = math.nan
    verdicts: list[dict[str, Any]] = []
    restarts: list[dict[str, Any]] = []
    meta: dict[str, Any] = {}

    # When each run's samples were received (first, last): runs received one after another are laid
    # apart on the time axis where their log clocks overlap; runs received side by side are not.
    received: dict[int, tuple[float, float]] = {}

    def on_received(run: int, first: float | None, last: float | None) -> None:
        if first is None or last is None or first != first or last != last:
            return
        lo, hi = received.get(run, (first, last))
        received[run] = (min(lo, first), max(hi, last))

    def on_record(t: float | None, rec: ParsedRecord, session: Session) -> None:
        if isinstance(rec, (Decode, EngineStats)) and rec.gen_throughput is not None and session.current:
            log_t.append(nan if rec.timestamp is None else rec.timestamp)
            recv_t.add(nan if t is None else float(t))
            tps_col.append(float(rec.gen_throughput))
            run_col.add(session.current.id)
            on_received(session.current.id, t, t)

    def on_entry(entry: dict[str, Any]) -> None:
        kind = entry.get("type")
        if kind == "verdict" and isinstance(entry.get("verdict"), dict):
            verdicts.append(entry["verdict"])
        elif kind == "restart":
            restarts.append(entry)
        elif kind == "meta" and entry.get("event") in ("start", "end", "write-failed"):
            meta[str(entry["event"])] = entry

    stats = ReadStats()

    def on_samples(ts: Sequence[float | None], recv: Sequence[float | None], tps: Sequence[float],
                   run: int) -> None:
        # Whole columns in C when no time is missing (the usual case).
        # (an array of the bulk path holds no None, and searching it for one makes a float each)
        complete = isinstance(ts, array) or None not in ts
        log_t.extend(ts if complete else [nan if v is None else v for v in ts])  # type: ignore[arg-type]
        recv_t.extend(recv if set(map(type, recv)) <= {float} else [nan if v is None else float(v) for v in recv])  # type: ignore[arg-type]
        tps_col.extend(tps)
        run_col.add(run, len(tps))
        if len(recv):
            on_received(run, recv[0], recv[-1])

    session = replay_recording(path, warmup=warmup, year=year, stats=stats, on_record=on_record, on_entry=on_entry,
                               on_samples=on_samples)
    analysis = analyze(session.runs, launch_cv=launch_cv)
    # Log timestamps give the real pace (a replayed import was "received" all at once); fall
    # back to receive times when any sample lacks one.
    lt = np.frombuffer(log_t, dtype=np.float64)
    use_log = bool(len(lt)) and not bool(np.isnan(lt).any())
    basis = "log time" if use_log else "receive time"
    when = lt if use_log else recv_t.expand()
    tps = np.frombuffer(tps_col, dtype=np.float64)
    runs = run_col.expand(np.uint32)  # (not float64 first: 10 MB less at the peak on 1.2M samples)
    keep = ~np.isnan(when)
    if not keep.all():
        when, tps, runs = when[keep], tps[keep], runs[keep]
    when, spans = lay_runs_apart(when, runs, received)
    if any(sp.shift for sp in spans):
        basis += f", {LAID_APART}"
    t0 = float(when.min()) if len(when) else 0.0
    when -= t0  # in place: a view of log_t, or a fresh array (one column fewer at the peak)
    if len(when) > 1 and not bool((when[1:] >= when[:-1]).all()):
        order = np.argsort(when, kind="stable")  # the same order as a stable sort by time
        when, tps, runs = when[order], tps[order], runs[order]
    series = Series(when, tps, runs)
    labels = {r.id: r.label for r in session.runs}
    return ReportData(str(path), session, analysis, series, basis, labels, verdicts, restarts, meta,
                      build_cost_model(analysis), stats)


def _downsample(series: Sequence[SeriesPoint], limit: int = MAX_POINTS) -> list[SeriesPoint]:
    if len(series) <= limit:
        return list(series)
    step = len(series) / limit
    return [series[int(i * step)] for i in range(limit)]


def _when(entry: dict[str, Any] | None) -> str:
    if not entry or not isinstance(entry.get("t"), (int, float)):
        return "—"
    return datetime.fromtimestamp(entry["t"], tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


# --------------------------------------------------------------------------- formats


def _verdict_lines(data: ReportData) -> list[str]:
    """The verdict section, headline first: with several groups, the finding across them and then
    each group's own verdict (each names its concurrency and workload)."""
    out = [data.sentence]
    groups = data.outcomes
    if len(groups) > 1:
        out += [g.sentence for g in groups if g.sentence != data.sentence]
    sv = data.sweep_verdict
    if sv is not None:
        out.append("(the sweep's verdict: a winner is declared only when the difference holds up after "
                   "its repeated looks)")
    outcome = data.outcome
    if outcome is not None and outcome.context is None:  # on an objective, these are its context's
        out.append(f"{outcome.source_text[0].upper()}{outcome.source_text[1:]}: the samples of the sweep's "
                   "measurement windows (the table below)")
    note = data.analysis.verdict.concurrency_note
    if note:
        out.append(note)
    return out


def _prompt_groups(data: ReportData) -> list[dict[str, Any]]:
    """The recorded sweep's per-prompt tables (its verdict document's ``prompts``), [] without."""
    groups = (data.sweep_verdict or {}).get("prompts")
    return [g for g in groups if isinstance(g, dict)] if isinstance(groups, list) else []


def recorded_plan(data: ReportData) -> dict[str, Any] | None:
    """The plan the recording's sweep ran (``sweep --plan`` runs it again), None when it holds none."""
    start = data.meta.get("start")
    plan = start.get("plan") if isinstance(start, dict) else None
    return plan if isinstance(plan, dict) else None


def plan_sentence(data: ReportData) -> str | None:
    """The plan in one sentence: its fields as recorded, and the command that runs it again."""
    plan = recorded_plan(data)
    if plan is None:
        return None
    fields = "; ".join(f"{k} {json.dumps(v, ensure_ascii=False)}" for k, v in plan.items()) or "every default"
    return (f"plan: {fields} (run it again: specmon sweep --plan {os.path.basename(data.path)} --fresh)")


def to_markdown(data: ReportData) -> str:
    """The report as GitHub-flavoured Markdown.

    Everything that comes from the recording (file name, command, labels, crash and restart
    lines) is literal Markdown (:mod:`specmon.literal`): no HTML, no links, no table breaks.
    """
    s = data.session
    start = data.meta.get("start")
    command = start.get("command") if start else None
    lines = [f"# specmon report — {markdown_cell(os.path.basename(data.path))}", "",
             f"- recorded: {markdown_cell(_when(start))}" + (
                 f" by {markdown_code_span('specmon ' + str(command))}" if command else ""),
             f"- lines: {s.lines}, runs: {len(s.runs)}, engine: {markdown_cell(s.engine.value)}"]
    plan = plan_sentence(data)
    if plan:
        lines += wrap(f"- {markdown_cell(plan)}", rest="  ")
    failed = write_failure(data)
    if failed:
        lines.append(f"- {markdown_cell(failed)}")
    lines += [f"- {markdown_cell(note)}" for note in read_notes(data, failed is None)]
    lines += ["", "## Verdict", ""]
    for i, t in enumerate(_verdict_lines(data)):
        lines += [*([""] if i else []), *wrap(f"**{markdown_cell(t)}**" if i == 0 else f"_{markdown_cell(t)}_")]
    lines += context_markdown(data.outcomes)  # decided on an objective: its tok/s comparison, no mark
    if is_parallel(data.sweep_verdict):
        assert data.sweep_verdict is not None
        lines += ["", "## Settings across the replicas (parallel sweep)", "", *parallel_markdown(data.sweep_verdict)]
    outcome = data.outcome
    for group in data.outcomes:
        lines += ["", f"## Configurations measured by the sweep{markdown_cell(group.group_text)}", "",
                  *_md_table(HEADERS, [_md_cells(group_cells(group, r), r.best) for r in group.rows])]
        legend = marks_legend(group)
        if legend:
            lines += ["", *wrap(f"_{markdown_cell(legend)}_")]
    prompts = prompt_markdown(_prompt_groups(data))
    if prompts:
        lines += ["", *prompts]
    lines += ["", f"## {_session_heading(data)}", ""]
    pooled = data.pooled_note
    if pooled is not None:
        lines += wrap(f"_{markdown_cell(pooled)}_")
    else:
        if outcome is not None:
            lines += [*wrap("_Every counted sample of the recording, the sweep's settle time and the runs before and "
                            "after it included; the speed-up is the sweep's, above._"), ""]
        headers, keep = _session_columns(data)
        rows = []
        for row in data.analysis.rows:
            cells = [c for i, c in enumerate(row_cells(row)) if i in keep]
            if outcome is not None:
                cells[0] = unmarked(cells[0])
            rows.append(_md_cells(cells, row.best and outcome is None))
        lines += _md_table(headers, rows)
    if data.analysis.crashes:
        lines += ["", "## Crashes", ""]
        for t in crash_lines(data.analysis):
            lines += wrap(markdown_cell(t), first="- ", rest="  ")
    lines += ["", "## Throughput over time", "", *markdown_code_block(wrap_block(text_chart(data)))]
    for cost in data.costs:
        lines += ["", f"## Cost model{markdown_cell(_at(cost))}", "",
                  *markdown_code_block(wrap_block(cost.view.lines()))]
    decided = objective_report_lines(data)
    if decided:
        lines += ["", "## Decided on the objective", "", *markdown_code_block(wrap_block(decided))]
    schedules = schedule_lines(data)
    if schedules:
        lines += ["", "## Schedule per load", "", *markdown_code_block(wrap_block(schedules))]
    restarts = restart_lines(data)
    if restarts:
        lines += ["", "## Restarts", ""]
        for t in restarts:
            lines += wrap(markdown_cell(t), first="- ", rest="  ")
    return "\n".join(lines) + "\n"


def _session_heading(data: ReportData) -> str:
    return "All counted samples" if data.outcome is not None else "Configurations"


def _at(cost: LoadCost) -> str:
    return cost.group_text


def _md_cells(cells: Sequence[str], strong: bool) -> list[str]:
    """A table row's cells as literal Markdown, the first in bold when ``strong``."""
    out = [markdown_cell(c) for c in cells]
    if strong:
        out[0] = f"**{out[0]}**"
    return out


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table within 80 columns: its right-hand columns left out while too wide, and said."""
    kept, body, dropped = fit_table(list(headers), [list(r) for r in rows])
    out = [table_row(kept), "|" + "|".join("---" for _ in kept) + "|", *(table_row(r) for r in body)]
    note = dropped_note(dropped)
    return [*out, "", *wrap(note)] if note else out


def objective_report_lines(data: ReportData) -> list[str]:
    """The sweep's verdicts on its objective (``--objective``) and its deployed configurations, as recorded."""
    from specmon.output.objective import deployed_lines, objective_lines

    sv = data.sweep_verdict
    if not isinstance(sv, dict):
        return []
    out: list[str] = []
    for doc in sv.get("objective_verdicts") or []:
        if isinstance(doc, dict):
            out += ([""] if out else []) + objective_lines(doc) + [str(doc.get("sentence") or "")]
    checks = [c for c in (sv.get("schedule_check") or []) if isinstance(c, dict)]
    if checks:
        out += ([""] if out else []) + deployed_lines(checks)
    return out


def schedule_lines(data: ReportData) -> list[str]:
    """The sweep's schedules per load (:mod:`specmon.model.schedule`), as the sweep printed them."""
    from specmon.model.schedule import Schedule, decide_from

    sv = data.sweep_verdict
    out: list[str] = []
    decide = decide_from(sv.get("needs_more")) if isinstance(sv, dict) else {}  # what would decide a load
    for doc in (sv.get("schedules") or []) if isinstance(sv, dict) else []:
        schedule = Schedule.from_json(doc)
        if schedule is not None:
            out += ([""] if out else []) + schedule.describe(decide=decide)
    return out


#: What a recording that ends mid-line says of why: a killed recorder and a full disk look alike.
CUT_SHORT = "the recording ends mid-line (its writer stopped mid-entry: killed, or its disk full)"


def read_notes(data: ReportData, tail: bool = True) -> list[str]:
    """What reading the recording skipped, as sentences: the entries skipped as damaged (not JSON,
    a field of the wrong type or out of range) and, with ``tail``, a last line cut short."""
    out = []
    if tail and data.read.truncated_tail:
        out.append(f"{CUT_SHORT}: the last entry was skipped")
    if data.read.bad_lines:
        n = data.read.bad_lines
        out.append(f"{n} damaged {'entry' if n == 1 else 'entries'} skipped (not JSON, or a field of the wrong "
                   "type or out of range)")
    return out


def write_failure(data: ReportData) -> str | None:
    """Why the recording is incomplete when writing it failed (a full disk), as one sentence, or None.

    The recorder marks a failed write in the file once it takes bytes again; a recording that
    ends mid-line with no such mark was cut off (the recorder killed, or the disk still full).
    """
    entry = data.meta.get("write-failed")
    if not isinstance(entry, dict):
        return None
    lost = entry.get("lost")
    count = f"{lost:,} entries" if isinstance(lost, int) else "entries"
    return (f"writing the recording failed ({entry.get('error') or 'no reason given'}): {count} "
            "were lost there, the numbers miss them")


def _session_columns(data: ReportData) -> tuple[list[str], set[int]]:
    """The whole-recording table's columns: without its own speed-up when a sweep gave the verdict."""
    keep = set(range(len(HEADERS)))
    if data.outcome is not None:
        keep.discard(HEADERS.index("vs baseline (95% CI)"))
    return [h for i, h in enumerate(HEADERS) if i in keep], keep


def steps_text(steps: Any) -> str:
    """``no speculation``, ``1 step``, ``5 steps`` (``? steps`` when unknown)."""
    if not isinstance(steps, int) or isinstance(steps, bool):
        return "? steps"
    if steps == 0:
        return "no speculation"
    return counted(steps, "step")


#: How each kind of start is named in a report (entries written before kinds existed are a sweep's).
_RESTART_KINDS = {"first start": "first start", "restart": "restart", "go back": "go back", "sweep": "sweep restart"}


def restart_lines(data: ReportData) -> list[str]:
    """Every finished start and restart of the session, in time order: the first start, the ones made
    from the dashboard and the sweep's, each with how it ended."""
    done = [r for r in data.restarts if r.get("phase") == "finished"]
    done.sort(key=lambda r: r["t"] if isinstance(r.get("t"), (int, float)) else 0.0)
    out = []
    for r in done:
        ok = "ready" if r.get("ok") else f"failed: {r.get('detail', '')}"
        kind = _RESTART_KINDS.get(str(r.get("kind", "sweep")), str(r.get("kind")))
        out.append(f"{_when(r)}: {kind} → {steps_text(r.get('steps'))} — {ok}")
    return out


def _html_charts(data: ReportData) -> str:
    """The Charts section: one figure per chart (:func:`specmon.output.charts.report_charts`), each captioned."""
    figures = [f'<figure id="chart-{c.key}">\n{c.svg}<figcaption><b>{_html(c.title)}.</b> {_html(c.caption)}'
               "</figcaption></figure>" for c in report_charts(data)]
    if not data.series:
        figures.append("<p>(no throughput samples)</p>")
    return "<h2>Charts</h2>\n" + "\n".join(figures)


def _html(text: object) -> str:
    """Text from the recording in HTML: escaped, and no control or bidi character (:func:`plain`)."""
    return html.escape(plain(text, newlines=True))


def to_html(data: ReportData) -> str:
    """A self-contained HTML page (inline SVG charts, no scripts)."""
    esc = _html
    s = data.session
    rows = []
    headers, keep = _session_columns(data)
    outcome = data.outcome
    for row in data.analysis.rows:
        cells = [c for i, c in enumerate(row_cells(row)) if i in keep]
        if outcome is not None:
            cells[0] = unmarked(cells[0])
        tag = ' class="best"' if row.best and outcome is None else ""
        rows.append(f"<tr{tag}>" + "".join(f"<td>{esc(c)}</td>" for c in cells) + "</tr>")
    sweep_table = ""
    for group in data.outcomes:
        body = "".join(('<tr class="best">' if r.best else "<tr>")
                       + "".join(f"<td>{esc(c)}</td>" for c in group_cells(group, r)) + "</tr>" for r in group.rows)
        legend = marks_legend(group)
        sweep_table += (f"<h2>Configurations measured by the sweep{esc(group.group_text)}</h2>\n<table><thead><tr>"
                        + "".join(f"<th>{esc(h)}</th>" for h in HEADERS) + f"</tr></thead><tbody>{body}</tbody></table>\n"
                        + (f'<p class="legend">{esc(legend)}</p>\n' if legend else ""))
    sweep_table += prompt_html(_prompt_groups(data))
    verdict = "".join(('<p class="verdict">' if i == 0 else "<p>") + esc(t) + "</p>"
                      for i, t in enumerate(_verdict_lines(data)))
    verdict += context_html(data.outcomes)  # decided on an objective: its tok/s comparison, no mark
    if is_parallel(data.sweep_verdict):
        assert data.sweep_verdict is not None
        text = parallel_text(data.sweep_verdict).split("\n\n", 1)[-1]  # the heading is the page's
        sweep_table = "<h2>Settings across the replicas (parallel sweep)</h2>\n<pre>" + esc(text) + "</pre>\n" + sweep_table
    cost = "".join(f"<h2>Cost model{esc(c.group_text)}</h2>\n<pre>" + esc("\n".join(c.view.lines())) + "</pre>\n"
                   for c in data.costs)
    decided = objective_report_lines(data)
    if decided:
        cost += "\n<h2>Decided on the objective</h2>\n<pre>" + esc("\n".join(decided)) + "</pre>"
    schedules = schedule_lines(data)
    if schedules:
        cost += "\n<h2>Schedule per load</h2>\n<pre>" + esc("\n".join(schedules)) + "</pre>"
    restarts = ""
    finished = restart_lines(data)
    if finished:
        restarts = "<h2>Restarts</h2>\n<ul>" + "".join(f"<li>{esc(t)}</li>" for t in finished) + "</ul>"
    crashes = ""
    if data.analysis.crashes:
        crashes = "<h2>Crashes</h2>\n<ul>" + "".join(f"<li>{esc(t)}</li>" for t in crash_lines(data.analysis)) + "</ul>"
    pooled = data.pooled_note
    session_table = (f'<p class="note">{esc(pooled)}</p>' if pooled is not None else
                     f"<table><thead><tr>{''.join(f'<th>{esc(h)}</th>' for h in headers)}</tr></thead>"
                     f"<tbody>{''.join(rows)}</tbody></table>")
    title = esc(f"specmon report — {os.path.basename(data.path)}")
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font-family: system-ui, sans-serif; margin: 2em; max-width: 60em; }}
table {{ border-collapse: collapse; }} td, th {{ border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }}
td:first-child, th:first-child {{ text-align: left; }} tr.best {{ font-weight: bold; }}
p.verdict {{ font-size: 1.15em; font-weight: bold; }}
pre {{ background: #f6f6f6; padding: 0.8em; white-space: pre-wrap; overflow-wrap: anywhere; }}
p, li, td, th, h1, h2, figcaption {{ overflow-wrap: anywhere; }} p.legend, p.note {{ font-size: 0.9em; color: #333; }}
figure {{ margin: 1.5em 0; }} figure svg {{ max-width: 100%; height: auto; }}
figcaption {{ font-size: 0.9em; color: #333; max-width: 48em; }}
</style></head>
<body>
<h1>{title}</h1>
<p>Recorded {esc(_when(data.meta.get('start')))}; {s.lines} lines, {len(s.runs)} runs, engine {esc(s.engine.value)}.</p>
{''.join(f"<p>{esc(n)}.</p>" for n in [plan_sentence(data) or "", write_failure(data) or "", *read_notes(data, write_failure(data) is None)] if n)}
<h2>Verdict</h2>
{verdict}
{sweep_table}
<h2>{_session_heading(data)}</h2>
{session_table}
{crashes}
{_html_charts(data)}
{cost}
{restarts}
</body></html>
"""


def to_json_doc(data: ReportData) -> dict[str, Any]:
    """The report as one JSON document (the table as ``summarize --format json``, plus the rest)."""
    doc = unpooled_json(table_json(data.session, data.analysis), data.outcomes, data.sentence)
    series = _downsample(data.series)
    costs = data.costs
    doc["report"] = {
        "recording": data.path,
        "recorded_at": data.meta.get("start", {}).get("t"),
        "command": data.meta.get("start", {}).get("command"),
        "plan": recorded_plan(data),
        "truncated_tail": data.read.truncated_tail,
        "bad_lines": data.read.bad_lines,
        "skipped_entries": data.read.skipped,
        "sentence": data.sentence,
        **context_json(data.outcomes),  # what the verdict is on ("decided_on"); tok/s as "context"
        "sweep_verdict": data.sweep_verdict,
        "series": {"time_basis": data.time_basis, "t": [round(p.t, 3) for p in series],
                   "tps": [round(p.tps, 3) for p in series], "run": [p.run for p in series],
                   "runs": {str(k): v for k, v in data.run_labels.items()}},
        # The first load's model (the one a sweep prints), and every load's with its group.
        "cost_model": costs[0].view.to_json() if costs else None,
        "cost_models": [{"concurrency": c.concurrency, "workload": c.workload, **c.view.to_json()} for c in costs],
        "restarts": [r for r in data.restarts if r.get("phase") == "finished"],
    }
    return doc


def render_report(data: ReportData, fmt: str) -> str:
    """Render in one of :data:`REPORT_FORMATS`.

    Raises:
        ValueError: an unknown format.
    """
    if fmt == "markdown":
        return to_markdown(data)
    if fmt == "html":
        return to_html(data)
    if fmt == "json":
        return json.dumps(_finite(to_json_doc(data)), indent=2) + "\n"
    if fmt == "csv":
        # A sweep over several loads: one row per load and setting, as the sweep measured them (never pooled).
        return groups_csv(data.outcomes, data.analysis) if data.pooled_note is not None else to_csv(data.analysis)
    raise ValueError(f"unknown report format {fmt!r} (choose from {', '.join(REPORT_FORMATS)})")


def _finite(value: Any) -> Any:
    """The value with NaN/inf replaced by None: strict JSON readers reject them."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value
