"""The frozen views the dashboard's widgets read: header, numbers, bars, events, table, plot.

Equal views compare equal, so a widget repaints only when what it shows changed. The
builder (:class:`specmon.ui.views.SnapshotBuilder`) makes them from the session; a
sweep's verdict makes its own table (:func:`outcome_table`). Nothing here imports Textual.
"""

from __future__ import annotations

from dataclasses import dataclass

from specmon.output.tables import SweepOutcome

# -- views ---------------------------------------------------------------------------------------

@dataclass(frozen=True, slots=True)
class HeaderView:
    """Source, engine, configuration, server state, connection, mode."""

    source: str
    engine: str
    config: str
    config_short: str  # "EAGLE3 2 steps", for narrow terminals
    run_id: int | None
    runs: int
    state: str  # a ServerState value
    state_text: str  # "loading weights 29/64"
    state_level: str
    since: str  # time in this state, "4m 12s"
    connection: str
    connection_level: str
    mode: str  # "live", "replay 10×", "replay finished"
    paused: bool
    lines: int
    unparsed: int
    alert: str = ""  # a write that failed (the recording, an export): said until specmon exits
    #: The engine's own controller (SGLang's adaptive tiers, from its counters): "" when fixed.
    controller: str = ""
    controller_level: str = "info"
    #: Latency percentiles from the engine's histograms (its counters): "" without them.
    latency: str = ""


@dataclass(frozen=True, slots=True)
class MetricView:
    """One metric panel: the value now, the rolling mean, the series, the baseline comparison."""

    key: str  # "throughput", "accept_len", "accept_rate"
    title: str
    unit: str
    decimals: int
    current: float | None
    mean: float | None
    window: int  # samples behind the rolling mean
    series: tuple[float, ...]
    ceiling: float | None = None
    baseline: float | None = None
    delta: float | None = None  # percent for throughput, absolute for the others
    delta_is_pct: bool = False
    significant: bool | None = None  # the difference's 95% interval excludes zero; None = unknown
    is_baseline: bool = False
    note: str = ""
    #: The baseline's label when there is one but it has no value of this metric (no speculation).
    baseline_without: str = ""
    #: Where the figures come from (``log``, ``counters``, ``counters · Δ log``); empty: say nothing (one source).
    source: str = ""


@dataclass(frozen=True, slots=True)
class PositionsView:
    """Per-position acceptance of the current configuration, where the engine logs it."""

    values: tuple[float, ...] | None
    label: str
    note: str
    #: Where the figures come from (``log``, ``counters``); empty: say nothing (one source).
    source: str = ""


@dataclass(frozen=True, slots=True)
class EventView:
    """One line of the event log.

    ``time`` is the wall clock when specmon saw the event (live) or the log's time (replay);
    ``log_time`` the log's own stamp when it differs from the wall clock by more than
    :data:`CLOCKS_DIFFER_S` (a simulated clock, a remote host set wrong), "" otherwise.
    """

    time: str
    level: str  # "info", "warning", "error"
    text: str
    count: int = 1  # consecutive events of one kind folded together (one per rank)
    log_time: str = ""
    at: float | None = None  # the time shown, as a number (never decreasing from one event to the next)
    line: int = 0  # the log line (0: specmon's own event)


@dataclass(frozen=True, slots=True)
class DashboardSnapshot:
    """Everything refreshed at the fast cadence."""

    header: HeaderView
    throughput: MetricView
    accept_len: MetricView
    accept_rate: MetricView
    positions: PositionsView
    events: tuple[EventView, ...]


@dataclass(frozen=True, slots=True)
class RowView:
    """One row of the run table."""

    key: str
    label: str
    algorithm: str
    steps: int | None
    draft_tokens: int | None
    samples: int
    tps: str
    vs: str
    vs_short: str
    accept_len: str
    accept_rate: str
    tps_mean: float | None
    vs_pct: float | None
    accept_len_mean: float | None
    accept_rate_mean: float | None
    vs_level: str  # "better", "worse", "same" (inside the noise), "" (no comparison)
    best: bool
    is_baseline: bool
    current: bool
    #: The verdict's mark: ★ a declared winner, ☆ the leader not separated ("leads, undecided"), "".
    mark: str = ""


@dataclass(frozen=True, slots=True)
class TableView:
    """The run table and the verdict under it."""

    rows: tuple[RowView, ...]
    verdict: str
    baseline_label: str | None
    baseline_mean: float | None


@dataclass(frozen=True, slots=True)
class PlotSegment:
    """The recent throughput of one run."""

    run_id: int
    label: str
    values: tuple[float, ...]


@dataclass(frozen=True, slots=True)
class PlotView:
    """Throughput over recent batches, run after run, with the baseline."""

    segments: tuple[PlotSegment, ...]
    baseline: float | None
    y_max: float


EMPTY_TABLE = TableView((), "Not enough data yet.", None, None)


def outcome_table(outcome: SweepOutcome, current_label: str | None = None,
                  drafts: dict[str, int | None] | None = None) -> TableView:
    """The run table of a sweep's verdict: the numbers the verdict panel and the sweep report show.

    Rows carry the cells :class:`~specmon.output.tables.OutcomeRow` formats, so the table
    cannot disagree with the panel; the line under it names the sweep as their source.
    ``drafts`` gives the draft tokens by label (the sweep's document does not carry them).
    """
    rows = []
    for r in outcome.rows:
        cells = r.cells()
        level = ""
        if r.vs_pct is not None and not r.is_baseline:
            if r.vs_low is not None and r.vs_high is not None and (r.vs_low > 0 or r.vs_high < 0):
                level = "better" if r.vs_pct > 0 else "worse"
            else:
                level = "same"
        algorithm = "no spec" if r.steps == 0 else (r.label.split(" ", 1)[0] if r.label else "spec")
        rows.append(RowView(
            key=r.label, label=r.label, algorithm=algorithm, steps=r.steps,
            draft_tokens=(drafts or {}).get(r.label), samples=r.samples,
            tps=cells[2], vs=cells[3],
            vs_short="baseline" if r.is_baseline else ("—" if r.vs_pct is None else f"{r.vs_pct:+.1f}%"),
            accept_len=cells[4], accept_rate=cells[5], tps_mean=r.tps_mean, vs_pct=r.vs_pct,
            accept_len_mean=r.accept_len_mean, accept_rate_mean=r.accept_rate_mean, vs_level=level, best=r.best,
            is_baseline=r.is_baseline, current=current_label is not None and r.label == current_label,
            mark=r.mark))
    base = outcome.baseline
    # The sweep's verdict words stay with its mark (☆ beside "no winner declared", never ★) while its
    # table does; what it rests on is in the panel and the report.
    verdict = f"sweep: {outcome.tag}: {outcome.claim} (the sweep's windows, until the next restart)"
    return TableView(tuple(rows), verdict, base.label if base else None, base.tps_mean if base else None)
