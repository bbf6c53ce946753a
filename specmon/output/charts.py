"""The HTML report's charts, each a standalone inline SVG string: no script, nothing fetched at view time.

Four charts (:func:`report_charts`), each None when it has nothing to draw:

* **tok/s per setting** — each setting's mean throughput with its 95% interval as an error
  bar, ordered by step count, the baseline marked (a square, and a dashed line with its
  interval shaded) and the winner starred; one small panel per concurrency and workload
  when a sweep measured several groups (the sweep's own numbers), else one panel of the
  whole recording's table;
* **acceptance per draft position** — one line per configuration, when the engine logged
  per-position acceptance (vLLM);
* **cost model** — measured tok/s (with its interval) against what the cost model
  (:mod:`specmon.model.costmodel`) predicts at each step count;
* **throughput over time** — every decode line's tok/s, one line per run, one colour per
  configuration (the same colour for every run of it), the axes in seconds and tok/s.

One colour map keyed by the configuration's label (:func:`colour_map`) colours all four,
so a configuration has one colour across the page.

Drawn with matplotlib through a :class:`~matplotlib.figure.Figure` and the SVG canvas
directly, never pyplot or ``matplotlib.use`` (both change global state): the settings live
in an ``rc_context`` for the length of one drawing — text stays ``<text>`` (``svg.fonttype``
none), ids are hashed with a fixed salt (the same recording gives the same bytes), and
mathtext is off (``text.parse_math``): a label from the log such as ``$x^2$`` is shown as
written, and matplotlib's SVG writer escapes ``<``/``&`` in it. matplotlib is imported
inside the functions: the dashboard, which imports the output package, never pays for it.
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from specmon.literal import plain
from specmon.output.report_loads import MARK_WORDS
from specmon.output.report_series import LAID_APART, series_arrays, spread_indices

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D
    from matplotlib.typing import LineStyleType, MarkerType, RcKeyType

    from specmon.model.analysis import Analysis, ConfigRow
    from specmon.model.costmodel import CostModelView
    from specmon.output.tables import SweepOutcome


# What the charts read of the report (:class:`specmon.output.report.ReportData`, ``SeriesPoint``),
# spelled here: the report draws its charts with this module, so importing it back (even for type
# checkers only) made the two modules a circle.


class SeriesPoint(Protocol):
    """One throughput sample in time order (seconds since the first sample, tok/s, run id)."""

    @property
    def t(self) -> float: ...

    @property
    def tps(self) -> float: ...

    @property
    def run(self) -> int: ...


class ReportData(Protocol):
    """The parts of a report the charts draw."""

    @property
    def analysis(self) -> Analysis: ...

    @property
    def outcomes(self) -> list[SweepOutcome]: ...

    @property
    def run_labels(self) -> dict[int, str]: ...

    @property
    def series(self) -> Sequence[SeriesPoint]: ...

    @property
    def time_basis(self) -> str: ...

    @property
    def costs(self) -> Sequence[LoadCost]: ...


class LoadCost(Protocol):
    """One load's cost model (:class:`specmon.output.report_loads.LoadCost`)."""

    @property
    def concurrency(self) -> int | None: ...

    @property
    def workload(self) -> str | None: ...

    @property
    def view(self) -> CostModelView: ...

#: One colour per configuration, in the order configurations are first seen (Tableau 10 and 20).
PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
           "#a0cbe8", "#ffbe7d", "#8cd17d", "#86bcb6", "#f1ce63", "#d4a6c8", "#d7b5a6")
#: The baseline's line and band, and the model's prediction: not a configuration's colour.
NEUTRAL = "#444444"
#: Most points of the time chart (more cannot be seen at this size, and make the page heavy).
TIME_POINTS = 2000
#: Longest label drawn (a tick label or legend entry); longer ones end in an ellipsis.
LABEL_CHARS = 48
#: The settings chart's y label: its intervals are the tables', over launches, in their words (``CI (launch)``).
Y_LABEL = "throughput: mean tok/s ± 95% CI (launch)"

#: matplotlib settings of every drawing (on top of its defaults: a user's matplotlibrc does not apply).
_RC: dict[RcKeyType, Any] = {
    "svg.fonttype": "none",  # text as <text> elements: selectable, searchable, checkable
    "svg.hashsalt": "specmon-report",  # clip-path and marker ids from a fixed salt: deterministic output
    "text.parse_math": False,  # labels come from logs: "$x^2$" is shown literally, never typeset
    "text.usetex": False,
    "font.family": "sans-serif",
    "font.size": 9.0,
    "axes.grid": True,
    "grid.color": "#dddddd",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
    "axes.spines.top": False,
    "axes.spines.right": False,
    "legend.frameon": False,
}
#: No creator, date or format URL in the SVG: the bytes depend on the data only, and name no URL.
_METADATA: dict[str, Any] = {"Date": None, "Creator": None, "Format": None, "Type": None}
_TAG = re.compile(r"<[^>]*>")
_ID_REF = re.compile(r'(\bid="|url\(#|href="#)([^")]*)')


@dataclass(frozen=True, slots=True)
class Chart:
    """One chart of the report: its SVG and what the page says about it."""

    key: str  # "settings", "acceptance", "cost", "time"; also the prefix of every id in ``svg``
    title: str
    caption: str
    svg: str


@dataclass(frozen=True, slots=True)
class Setting:
    """One point of the settings chart."""

    label: str
    steps: int | None
    mean: float
    half: float | None  # half width of the 95% interval (None: too few samples for one)
    baseline: bool
    best: bool
    #: The best is a declared winner (★); else it leads, undecided (☆).
    declared: bool = False


@dataclass(frozen=True, slots=True)
class Panel:
    """One group of settings (a concurrency and a workload of a sweep, or the whole recording)."""

    concurrency: int | None
    workload: str | None
    settings: tuple[Setting, ...]

    @property
    def title(self) -> str:
        parts = [f"concurrency {self.concurrency}"] if self.concurrency else []
        if self.workload:
            parts.append(f"{self.workload} prompts")
        return ", ".join(parts)


# --------------------------------------------------------------------------- colours and text


def colour_map(labels: Iterable[str]) -> dict[str, str]:
    """A colour per configuration label, in the order first seen (the palette repeats past 16)."""
    out: dict[str, str] = {}
    for label in labels:
        if label not in out:
            out[label] = PALETTE[len(out) % len(PALETTE)]
    return out


def report_colours(data: ReportData) -> dict[str, str]:
    """The page's one colour map: the recording's configurations in table order (by steps), then
    any the sweep or the runs name that the table does not."""
    labels = [r.label for r in data.analysis.rows]
    for group in data.outcomes:
        labels += [r.label for r in sorted(group.rows, key=_steps_order)]
    labels += [data.run_labels[r] for r in sorted(data.run_labels)]
    return colour_map(labels)


def _steps_order(row: Any) -> tuple[int, int]:
    steps = row.steps
    return (1, 0) if steps is None else (0, steps)


def label_text(text: object, limit: int = LABEL_CHARS) -> str:
    """Text from a recording as drawn: controls made visible (:func:`plain`), at most ``limit`` characters."""
    s = plain(text)
    return s if len(s) <= limit else s[: limit - 1] + "…"


# --------------------------------------------------------------------------- drawing


@contextmanager
def _drawing() -> Iterator[None]:
    """matplotlib's defaults and :data:`_RC` for one drawing, the caller's settings restored after."""
    import matplotlib

    with matplotlib.rc_context():
        matplotlib.rcdefaults()
        with matplotlib.rc_context(_RC):
            yield


def _figure(width: float, height: float) -> Figure:
    from matplotlib.backends.backend_svg import FigureCanvasSVG
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasSVG(fig)
    return fig


def _svg(fig: Figure, key: str, title: str) -> str:
    """The figure as SVG for inlining in HTML: no XML prolog, every id prefixed with ``key`` (several
    charts share the page's id space), the title as the image's accessible name."""
    buf = io.StringIO()
    fig.savefig(buf, format="svg", metadata=_METADATA)
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    # Only inside tags: text content (labels from the log) has its "<" escaped, so no tag match
    # reaches into it, and matplotlib escapes "<" and ">" in attribute values too.
    text = _TAG.sub(lambda m: _ID_REF.sub(lambda r: f"{r.group(1)}{key}-{r.group(2)}", m.group(0)), text)
    head = f'<svg class="chart" role="img" aria-label="{_attr(title)}" '
    return head + text[len("<svg "):].rstrip() + "\n"


def _attr(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


def _legend_handle(colour: str, *, marker: MarkerType = "o", linestyle: LineStyleType = "none",
                   label: str = "") -> Line2D:
    from matplotlib.lines import Line2D

    return Line2D([], [], color=colour, marker=marker, linestyle=linestyle, label=label)


# --------------------------------------------------------------------------- a. tok/s per setting


def settings_panels(data: ReportData) -> list[Panel]:
    """The settings chart's panels: one per group of the sweep, else one of the whole recording's table."""
    groups: Sequence[SweepOutcome] = data.outcomes
    if groups:
        panels = []
        for g in groups:
            won = g.separated and g.best is not None
            settings = tuple(Setting(r.label, r.steps, mean, r.tps_half, r.is_baseline, r.best or r is g.best, won)
                             for r in sorted(g.rows, key=_steps_order)
                             if (mean := r.tps_mean) is not None and math.isfinite(mean))
            if settings:
                panels.append(Panel(g.concurrency, g.workload, settings))
        return panels
    won = data.analysis.verdict.separated
    settings = tuple(Setting(r.label, r.steps, r.throughput.mean, r.throughput.ci_half_width, r.is_baseline, r.best,
                             won) for r in data.analysis.rows if r.throughput is not None)
    return [Panel(None, None, settings)] if settings else []


def _grid(panels: Sequence[Panel]) -> tuple[int, int, list[tuple[int, int]], bool]:
    """Rows, columns, each panel's cell, and whether a row shares its y axis: concurrency down, workload
    across (the same load, one y scale) when the groups form that grid; else three across."""
    keys = [(p.concurrency, p.workload) for p in panels]
    concs = list(dict.fromkeys(k[0] for k in keys))
    loads = list(dict.fromkeys(k[1] for k in keys))
    if len(set(keys)) == len(keys) and len(loads) <= 4:
        return len(concs), len(loads), [(concs.index(c), loads.index(w)) for c, w in keys], True
    cols = min(3, len(panels))
    return math.ceil(len(panels) / cols), cols, [divmod(i, cols) for i in range(len(panels))], False


def settings_chart(panels: Sequence[Panel], colours: dict[str, str]) -> str | None:
    """tok/s ± 95% interval per setting, one panel per group; None without a setting.

    Each setting is drawn by its own ``errorbar`` call, its interval the group with id
    ``settings-ci-<panel>-<setting>`` (so a reader, or a test, can count them).
    """
    if not panels:
        return None
    nrows, ncols, cells, share = _grid(panels)
    widest = max(len(p.settings) for p in panels)
    with _drawing():
        width = min(10.0, max(6.0, 1.4 + ncols * max(2.6, 0.55 * widest + 1.0)))
        fig = _figure(width, 0.6 + nrows * 3.2)
        axes = fig.subplots(nrows, ncols, squeeze=False, sharey="row" if share else False)
        used = set()
        for p, (panel, (r, c)) in enumerate(zip(panels, cells, strict=True)):
            ax = axes[r][c]
            used.add((r, c))
            _settings_panel(ax, panel, p, colours)
            ax.set_ylabel(Y_LABEL if c == 0 or not share else "")
            if panel.title and len(panels) > 1:
                ax.set_title(label_text(panel.title, 60), fontsize=9)
        for r in range(nrows):
            for c in range(ncols):
                if (r, c) not in used:
                    axes[r][c].set_visible(False)
        fig.supxlabel("setting (configuration, by speculative steps)", fontsize=9)
        # Only what is drawn has a legend entry: a baseline, a declared winner (★), an undecided leader (☆).
        shown = [s for p in panels for s in p.settings]
        handles = []
        if any(s.baseline for s in shown):
            handles.append(_legend_handle(NEUTRAL, marker="s", label="baseline (dashed line: its mean, shaded: its interval)"))
        if any(s.best and s.declared for s in shown):
            handles.append(_legend_handle(NEUTRAL, marker="*", label=f"★ {MARK_WORDS['★']}"))
        if any(s.best and not s.declared for s in shown):
            handles.append(_legend_handle(NEUTRAL, marker="*", label=f"☆ {MARK_WORDS['☆']}"))
            handles[-1].set_markerfacecolor("none")
        if any(not s.best and not s.baseline for s in shown):
            handles.append(_legend_handle(NEUTRAL, marker="o", label="other settings (colour: configuration)"))
        # One entry a line: the winner's and the leader's words are long (a row of them overflowed).
        fig.legend(handles=handles, loc="outside upper center", ncols=1, fontsize=8)
        return _svg(fig, "settings", "throughput of each setting with its 95% interval")


def _settings_panel(ax: Axes, panel: Panel, p: int, colours: dict[str, str]) -> None:
    base = next((s for s in panel.settings if s.baseline), None)
    if base is not None:
        if base.half is not None:
            ax.axhspan(base.mean - base.half, base.mean + base.half, color=NEUTRAL, alpha=0.10, lw=0)
        ax.axhline(base.mean, color=NEUTRAL, lw=0.9, ls="--")
    for i, s in enumerate(panel.settings):
        marker = "*" if s.best else "s" if s.baseline else "o"
        colour = colours.get(s.label, NEUTRAL)
        bars = ax.errorbar([i], [s.mean], yerr=None if s.half is None else [[s.half], [s.half]], fmt=marker,
                           color=colour, markersize=13 if s.best else 7, capsize=5,
                           elinewidth=1.8, capthick=1.8, markeredgecolor=NEUTRAL if s.best else None, zorder=3)
        if s.best and not s.declared:  # ☆: the leader of an undecided verdict, hollow
            bars.lines[0].set_markerfacecolor("white")
            bars.lines[0].set_markeredgecolor(colour)
        bars.lines[0].set_gid(f"pt-{p}-{i}")
        if bars.lines[2]:
            bars.lines[2][0].set_gid(f"ci-{p}-{i}")
    ax.set_xticks(range(len(panel.settings)), [label_text(s.label) for s in panel.settings],
                  rotation=30, ha="right", rotation_mode="anchor")
    ax.set_xlim(-0.6, len(panel.settings) - 0.4)
    ax.grid(axis="x", visible=False)
    ax.margins(y=0.12)


# --------------------------------------------------------------------------- b. acceptance per position


def acceptance_chart(rows: Sequence[ConfigRow], colours: dict[str, str]) -> str | None:
    """Acceptance of each draft position per configuration, as the engine logged it; None when no row has it."""
    rows = [r for r in rows if r.per_position]
    if not rows:
        return None
    from matplotlib.ticker import MaxNLocator

    with _drawing():
        fig = _figure(7.5, 3.4)
        ax = fig.subplots()
        for i, row in enumerate(rows):
            values = [100.0 * v for v in row.per_position or ()]
            ax.plot(range(1, len(values) + 1), values, marker="o", color=colours.get(row.label, NEUTRAL),
                    label=label_text(row.label), gid=f"row-{i}")
        ax.set_ylim(0, 105)
        ax.set_xlabel("draft position (token k of the draft)")
        ax.set_ylabel("acceptance rate (%)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        fig.legend(loc="outside right upper", fontsize=8)
        return _svg(fig, "acceptance", "acceptance rate of each draft position, per configuration")


# --------------------------------------------------------------------------- c. cost model


def cost_chart(costs: Sequence[LoadCost], colours: dict[str, str]) -> str | None:
    """Measured tok/s (95% interval) and the cost model's prediction per step count, one panel per load
    (each load's own model, from its own settings); None without a prediction.

    A point's error bar is the group ``cost-pt-<panel>-<point>``; a panel's prediction ``cost-model-<panel>``.
    """
    drawn = [c for c in costs if any(p.model_tps is not None for p in c.view.points)]
    if not drawn:
        return None
    ncols = min(2, len(drawn))
    nrows = math.ceil(len(drawn) / ncols)
    with _drawing():
        fig = _figure(7.5 if ncols == 1 else 10.0, 0.8 + 3.0 * nrows)
        axes = fig.subplots(nrows, ncols, squeeze=False)
        handles: dict[str, Line2D] = {}
        for k, cost in enumerate(drawn):
            ax = axes[k // ncols][k % ncols]
            points = sorted(cost.view.points, key=lambda p: p.steps)
            predicted = [(p.steps, p.model_tps) for p in points if p.model_tps is not None]
            ax.plot([s for s, _ in predicted], [m for _, m in predicted], color=NEUTRAL, ls="--", lw=1,
                    marker="D", markerfacecolor="none", markersize=10, gid=f"model-{k}", zorder=5)
            for i, p in enumerate(points):
                colour = colours.get(p.label, NEUTRAL)
                half = p.tps_half_width
                bars = ax.errorbar([p.steps], [p.tps], yerr=None if half is None else [[half], [half]], fmt="o",
                                   color=colour, capsize=5, elinewidth=1.8, capthick=1.8, zorder=4)
                bars.lines[0].set_gid(f"pt-{k}-{i}")
                if p.disagrees:
                    ax.annotate("≠ model", (p.steps, p.tps), xytext=(8, 6), textcoords="offset points", fontsize=8,
                                color="#b00020")
                handles.setdefault(p.label, _legend_handle(colour, label=label_text(p.label)))
            ax.set_xticks(sorted({p.steps for p in points}))
            ax.set_xlabel("speculative steps (0 = no speculation)")
            ax.set_ylabel("throughput (tok/s)")
            ax.margins(x=0.08, y=0.15)
            where = f"concurrency {cost.view.concurrency}" + (f", {cost.workload} prompts" if cost.workload else "")
            ax.set_title(label_text(f"{where}: measured (95% interval) against predicted", 70), fontsize=9)
        for k in range(len(drawn), nrows * ncols):
            axes[k // ncols][k % ncols].set_visible(False)
        model = _legend_handle(NEUTRAL, marker="D", linestyle="--", label="the model's prediction")
        model.set_markerfacecolor("none")
        fig.legend(handles=[*handles.values(), model], loc="outside right upper", fontsize=8)
        return _svg(fig, "cost", "measured throughput against the cost model's prediction")


# --------------------------------------------------------------------------- d. throughput over time


def _series_arrays(series: Sequence[SeriesPoint], limit: int = TIME_POINTS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(time, tok/s, run) of at most ``limit`` evenly spaced samples (the report's arrays when it kept them)."""
    t, tps, run = series_arrays(series)
    idx = spread_indices(run, limit)  # every run keeps points of its own: each legend entry is drawn
    return t[idx], tps[idx], run[idx]


def time_chart(series: Sequence[SeriesPoint], run_labels: dict[int, str], time_basis: str,
               colours: dict[str, str]) -> str | None:
    """Throughput over time: a line per run, a colour per configuration, a legend by configuration.

    Thin: every (kept) decode line's tok/s; thick: its moving mean over 15 samples. A run with
    too few samples to smooth is one line with each sample marked.
    """
    if not len(series):
        return None
    t, tps, run = _series_arrays(series)
    window = 15
    with _drawing():
        fig = _figure(10.0, 3.8)
        ax = fig.subplots()
        seen: dict[str, str] = {}
        apart = LAID_APART in time_basis
        for r in sorted(set(run.tolist())):
            keep = run == r
            if apart and r != run[0]:  # where a run laid on its own span begins
                ax.axvline(float(t[keep].min()), color="#bbbbbb", lw=0.6, ls=":", gid=f"start-{r}")
            label = run_labels.get(r, "?")
            colour = colours.get(label, NEUTRAL)
            seen.setdefault(label, colour)
            if keep.sum() < 3 * window:  # too few samples to smooth: each one marked
                ax.plot(t[keep], tps[keep], color=colour, lw=1.2, marker=".", markersize=5, gid=f"run-{r}")
                continue
            ax.plot(t[keep], tps[keep], color=colour, lw=0.6, alpha=0.45, gid=f"run-{r}")
            smooth = np.convolve(tps[keep], np.ones(window) / window, mode="valid")
            ax.plot(t[keep][window // 2: window // 2 + len(smooth)], smooth, color=colour, lw=1.8, gid=f"mean-{r}")
        ax.set_xlabel(f"time (s since start, {label_text(time_basis)})")
        ax.set_ylabel("throughput (tok/s)")
        ax.set_xlim(left=0)
        ax.margins(x=0.01, y=0.08)
        handles = [_legend_handle(c, marker="none", linestyle="-", label=label_text(lb)) for lb, c in seen.items()]
        fig.legend(handles=handles, loc="outside lower center", ncols=min(4, len(handles)), fontsize=8)
        return _svg(fig, "time", "throughput over time, one colour per configuration")


# --------------------------------------------------------------------------- all of them


def report_charts(data: ReportData) -> list[Chart]:
    """The report's charts that have something to draw, in page order, with one colour map."""
    colours = report_colours(data)
    panels = settings_panels(data)
    out: list[Chart] = []
    svg = settings_chart(panels, colours)
    if svg is not None:
        where = ("the sweep's measurement windows, one panel per concurrency and workload" if len(panels) > 1
                 else "the sweep's measurement windows" if data.outcomes else "every counted sample of the recording")
        out.append(Chart("settings", "Throughput of each setting",
                         f"Mean tok/s of each setting with its 95% interval (error bar), from {where}; ordered by "
                         "speculative steps. Square and dashed line: the baseline (its interval shaded); filled star ★: "
                         f"{MARK_WORDS['★']}; hollow star ☆: {MARK_WORDS['☆']}. A setting with too few samples for an interval has no bar.", svg))
    svg = acceptance_chart(data.analysis.rows, colours)
    if svg is not None:
        out.append(Chart("acceptance", "Acceptance per draft position",
                         "The share of drafts whose k-th token was accepted, per configuration, as the engine "
                         "logged it (every counted sample).", svg))
    svg = cost_chart(data.costs, colours)
    if svg is not None:
        out.append(Chart("cost", "Cost model: measured against predicted",
                         "Measured tok/s of each step count (95% interval) and what the cost model predicts from "
                         "its accept length and the fitted cycle time (the table under Cost model); ≠ marks a "
                         "setting off the model by more than chance."
                         + (" One panel per load, each from that load's own settings." if len(data.costs) > 1
                            else ""), svg))
    svg = time_chart(data.series, data.run_labels, data.time_basis, colours)
    if svg is not None:
        out.append(Chart("time", "Throughput over time",
                         f"tok/s of every decode line ({data.time_basis}; at most {TIME_POINTS} evenly spaced "
                         "samples), one line per run, one colour per configuration; the thick line is a moving "
                         "mean over 15 samples (a short run: each sample marked)."
                         + (" The runs' log clocks overlapped: each run is on its own span of time, in the order "
                            "they ran (dotted: where one begins)." if LAID_APART in data.time_basis else ""), svg))
    return out
