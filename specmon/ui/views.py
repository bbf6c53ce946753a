"""Immutable views of the session: what the dashboard's widgets read.

Widgets never look at the session: on a timer the app builds these frozen
views and hands each widget its own. Equal views compare equal, so a widget
repaints only when what it shows changed. Nothing here imports Textual.

Three cadences (see the app): the *live* view (header, the three numbers,
per-position bars, events) is cheap and built a few times a second; the
*analysis* (pooled statistics, confidence intervals, verdict) sorts every
sample and is recomputed at most once a second, on frozen copies of the runs
so it can run off the event loop; the *plot* view is built once a second.

This module holds the builder; the frozen views are in :mod:`specmon.ui.views_data`,
the small texts they are made of in :mod:`specmon.ui.views_text`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from specmon.engines import adapter
from specmon.model.analysis import Analysis, Baseline, ConfigRow, assemble, build_rows, row_key, row_order
from specmon.model.session import Run, RunConfig, ServerState, Session, SessionEvent
from specmon.model.stats import Summary, difference
from specmon.model.verdict import LEADER_MARK, WINNER_MARK
from specmon.output.tables import row_cells
from specmon.records import Engine
from specmon.sources.base import SourceStatus
from specmon.ui.views_data import EMPTY_TABLE as EMPTY_TABLE
from specmon.ui.views_data import DashboardSnapshot as DashboardSnapshot
from specmon.ui.views_data import EventView as EventView
from specmon.ui.views_data import HeaderView as HeaderView
from specmon.ui.views_data import MetricView as MetricView
from specmon.ui.views_data import PlotSegment as PlotSegment
from specmon.ui.views_data import PlotView as PlotView
from specmon.ui.views_data import PositionsView as PositionsView
from specmon.ui.views_data import RowView as RowView
from specmon.ui.views_data import TableView as TableView
from specmon.ui.views_data import outcome_table as outcome_table
from specmon.ui.views_text import BUSY as BUSY
from specmon.ui.views_text import ERROR as ERROR
from specmon.ui.views_text import IDLE as IDLE
from specmon.ui.views_text import OK as OK
from specmon.ui.views_text import QUIET_AFTER_S as QUIET_AFTER_S
from specmon.ui.views_text import as_log_scale as as_log_scale
from specmon.ui.views_text import ceiling_of as ceiling_of
from specmon.ui.views_text import clock_text as clock_text
from specmon.ui.views_text import config_text as config_text
from specmon.ui.views_text import connection_text as connection_text
from specmon.ui.views_text import duration_text as duration_text
from specmon.ui.views_text import from_log_scale as from_log_scale
from specmon.ui.views_text import nice_ceiling as nice_ceiling
from specmon.ui.views_text import size_text as size_text
from specmon.ui.views_text import wall_clock_text as wall_clock_text

__all__ = [
    "DEFAULT_WINDOW", "DashboardSnapshot", "EventView", "HeaderView", "MetricView", "PlotSegment",
    "PlotView", "PositionsView", "RowView", "SnapshotBuilder", "TableView", "analyze_live",
    "connection_text", "duration_text", "freeze_runs",
]

#: Batches in the rolling mean of the metric panels.
DEFAULT_WINDOW = 20
#: Points a sparkline gets (it buckets them to its width).
SPARK_POINTS = 120
#: Most runs the throughput plot shows (the latest).
PLOT_RUNS = 8
#: Events handed to the event log (it shows the newest that fit).
EVENTS_SHOWN = 200


# -- analysis with a baseline chosen on screen ------------------------------------------------------

def freeze_runs(runs: Iterable[Run]) -> list[Run]:
    """Copies of runs whose sample arrays will not grow: safe to analyse off the event loop.

    Copying an ``array`` is a memory copy (milliseconds for millions of samples);
    the live deques are shared, the analysis does not read them.
    """
    out = []
    for run in runs:
        c = copy.copy(run)
        c.throughput = run.throughput[:]
        c.concurrency = run.concurrency[:]
        c.accept_len = run.accept_len[:]
        c.accept_rate = run.accept_rate[:]
        c.per_position_sum = list(run.per_position_sum)
        c._ranks = dict(run._ranks)
        out.append(c)
    return out


def _signature(runs: Sequence[Run]) -> tuple[tuple[int, ...], ...]:
    """What a row's statistics depend on: which runs, and how many samples each holds."""
    return tuple((r.id, len(r.throughput), len(r.concurrency), len(r.accept_len), len(r.accept_rate),
                  r.per_position_n) for r in runs)


@dataclass
class AnalysisJob:
    """One refresh of the run table: rows to recompute (on frozen runs) and rows reused.

    Built on the event loop by :meth:`SnapshotBuilder.prepare`; :meth:`compute` may run
    in a thread (it touches only the frozen copies); :meth:`SnapshotBuilder.finish`
    assembles the result back on the event loop.
    """

    keys: list[RunConfig | str]
    reused: dict[RunConfig | str, ConfigRow]
    todo: dict[RunConfig | str, tuple[tuple[tuple[int, ...], ...], list[Run], list[Run]]]
    baseline_tps: float | None
    baseline_key: RunConfig | str | None
    computed: dict[RunConfig | str, ConfigRow] | None = None

    def release(self) -> None:
        """Drop the frozen copies now.

        A finished worker and its task reference each other: only the cycle collector
        would free them, and with them every sample copied for this job. Releasing the
        job keeps memory flat during a long replay.
        """
        self.todo = {}
        self.computed = None
        self.reused = {}

    def compute(self) -> None:
        """Statistics of the rows whose runs changed (sorts their samples: the expensive part)."""
        self.computed = {key: build_rows(frozen)[0] for key, (_, frozen, _) in self.todo.items()}


def analyze_live(runs: Sequence[Run], *, baseline_tps: float | None = None,
                 baseline_key: RunConfig | str | None = None) -> Analysis:
    """:func:`specmon.model.analysis.analyze`, with an optional baseline row chosen by the user."""
    rows = build_rows(runs)
    return assemble(rows, baseline_tps=baseline_tps, baseline_key=baseline_key)


def _crash_cause(session: Session, run: Run) -> str | None:
    """What killed the run: an OOM reported in its events beats the parent's generic last words."""
    for event in reversed(session.events):
        if event.run_id is None:
            continue  # a source message
        if event.run_id != run.id:
            break
        if event.level == "error" and event.text.startswith("oom:"):
            return "OOM — " + event.text[4:].strip()
    return run.crash_detail


# -- the builder ---------------------------------------------------------------------------------------

def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _tail(d: Sequence[float], n: int) -> tuple[float, ...]:
    if len(d) <= n:
        return tuple(d)
    return tuple(list(d)[-n:])


class SnapshotBuilder:
    """Builds views from a session; remembers what views need across refreshes.

    Args:
        window: Batches in the rolling means.
        baseline_tps: ``--baseline-tps``, if given.
    """

    def __init__(self, *, window: int = DEFAULT_WINDOW, baseline_tps: float | None = None) -> None:
        self.window = max(1, window)
        self.baseline_tps = baseline_tps
        #: The row the user marked as baseline (``b``), by row key.
        self.baseline_key: RunConfig | str | None = None
        self.analysis: Analysis | None = None
        self._row_of_run: dict[int, ConfigRow] = {}
        self._y_max = 0.0
        self._events_key: tuple[object, ...] | None = None
        self._events_held: tuple[object, object] = (None, None)
        self._events: tuple[EventView, ...] = ()
        self._rows: dict[RunConfig | str, tuple[tuple[tuple[int, ...], ...], ConfigRow]] = {}
        #: A sweep's verdict table shown instead of the live one while the run it ended on lasts.
        self.pinned: tuple[TableView, int | None] | None = None
        #: A sweep is running: its verdict, judged at its looks and adjusted for them, is the one to come.
        self.sweeping = False

    # -- analysis ---------------------------------------------------------------------------

    def prepare(self, runs: Sequence[Run], *, freeze: bool = True) -> AnalysisJob:
        """Split a refresh into rows that must be recomputed and rows that can be reused.

        A finished run never changes: in a sweep only the current configuration's row is
        recomputed, and only its runs are copied (``freeze``) for a thread to read.
        """
        groups: dict[RunConfig | str, list[Run]] = {}
        for run in runs:
            if run.used:
                groups.setdefault(row_key(run), []).append(run)
        reused, todo = {}, {}
        for key, group in groups.items():
            sig = _signature(group)
            hit = self._rows.get(key)
            if hit is not None and hit[0] == sig:
                reused[key] = hit[1]
            else:
                todo[key] = (sig, freeze_runs(group) if freeze else list(group), group)
        return AnalysisJob(list(groups), reused, todo, self.baseline_tps, self.baseline_key)

    def finish(self, job: AnalysisJob) -> Analysis:
        """Assemble a computed job: cache its new rows, set baseline and verdict."""
        if job.computed is None:
            job.compute()
        assert job.computed is not None
        for key, row in job.computed.items():
            sig, _, live = job.todo[key]
            # Point the row at the live runs: the frozen copies (every sample) can go now.
            row.runs = live
            self._rows[key] = (sig, row)
        rows = []
        for key in job.keys:
            row = job.computed.get(key) or job.reused[key]
            # A fresh copy: assemble() sets flags that belong to this result only.
            rows.append(replace(row, vs_baseline=None, is_baseline=False, best=False, runs=list(row.runs)))
        rows.sort(key=row_order)
        return assemble(rows, baseline_tps=job.baseline_tps, baseline_key=job.baseline_key)

    def analyze(self, runs: Sequence[Run]) -> Analysis:
        """Analyse runs now, on this thread, reusing unchanged rows."""
        return self.finish(self.prepare(runs, freeze=False))

    def apply(self, analysis: Analysis, live_runs: Sequence[Run] = ()) -> None:
        """Make an analysis the one views are built from.

        Args:
            analysis: The result (perhaps computed on frozen copies of the runs).
            live_runs: The session's runs: rows are pointed back at them, so the frozen
                copies (every sample, copied) are freed instead of living as long as the view.
        """
        live = {run.id: run for run in live_runs}
        for row in analysis.rows:
            row.runs = [live.get(run.id, run) for run in row.runs]
        self.analysis = analysis
        self._row_of_run = {run.id: row for row in analysis.rows for run in row.runs}

    def reset(self) -> None:
        """Forget everything derived from a session (a looped replay starts a new one)."""
        self.analysis = None
        self._row_of_run = {}
        self._rows = {}
        self._y_max = 0.0
        self._events_key, self._events_held = None, (None, None)
        self._events = ()
        self.pinned = None

    def row_for(self, run: Run | None) -> ConfigRow | None:
        """The table row a run belongs to, in the latest analysis."""
        return None if run is None else self._row_of_run.get(run.id)

    # -- fast views -------------------------------------------------------------------------

    def live(self, session: Session, *, source: str, status: SourceStatus, now: float,
             log_now: float | None, mode: str, paused: bool, lines: int, replay: bool = False,
             ended: bool = False, state_since: float | None = None,
             restart: tuple[str, str] | None = None) -> DashboardSnapshot:
        """Header, metric panels, per-position bars and events.

        Args:
            session: The model.
            source: The source's display name.
            status: The source's status.
            now: Wall time, for countdowns.
            log_now: How far the log has got, in log time, for "time in this state".
            mode: "live", "replay 10×", ...
            paused: Whether the display or the replay is paused.
            lines: Lines ingested.
            replay: The source is a replay of saved logs (the header says so, not "live").
            ended: The replay has read everything: its last state is history, not now.
            state_since: Wall time the current state began, when specmon saw it begin: the
                header's "time in this state" is then on the wall clock, not the log's.
            restart: While a restart runs, its phase and time in it, exactly as the restart
                panel shows them (``("restart → 2 steps: loading weights 3/64", "4s")``).
        """
        run = session.current
        row = self.row_for(run)
        baseline = self.analysis.baseline if self.analysis else None
        base_row = next((r for r in self.analysis.rows if r.is_baseline), None) if self.analysis else None
        cfg = run.config if run is not None else None
        return DashboardSnapshot(
            header=self._header(session, run, source, status, now, log_now, mode, paused, lines, replay, ended,
                                state_since, restart),
            throughput=self._throughput(run, row, baseline),
            accept_len=self._accept(run, row, base_row, "accept_len", "accept length", "tokens/step", 2,
                                    ceiling_of(cfg)),
            accept_rate=self._accept(run, row, base_row, "accept_rate", "accept rate", "", 2, None),
            positions=self._positions(session, run, row),
            events=self._event_views(session),
        )

    def _header(self, session: Session, run: Run | None, source: str, status: SourceStatus, now: float,
                log_now: float | None, mode: str, paused: bool, lines: int, replay: bool = False,
                ended: bool = False, state_since: float | None = None,
                restart: tuple[str, str] | None = None) -> HeaderView:
        state = run.state if run is not None else session.state
        if state is ServerState.UNKNOWN and run is not None and run.used:
            state = ServerState.SERVING
        text = {
            ServerState.UNKNOWN: "no server seen yet",
            ServerState.STARTING: "starting",
            ServerState.LOADING: "loading weights",
            ServerState.CAPTURING: "capturing CUDA graphs",
            ServerState.READY: "ready",
            ServerState.SERVING: "serving",
            ServerState.CRASHED: "crashed",
            ServerState.STOPPED: "down",
        }[state]
        level = {ServerState.CRASHED: ERROR, ServerState.READY: OK, ServerState.SERVING: OK,
                 ServerState.STOPPED: IDLE, ServerState.UNKNOWN: IDLE}.get(state, BUSY)
        if state is ServerState.CRASHED and run is not None and run.crash_pending and not ended:
            # Only an exception so far (a traceback, an OOM): a server also logs those for a
            # request it fails and goes on serving. The next request or sample says which; the
            # end of the input (a replay that ended) confirms the crash.
            text, level = "error (serving stopped?)", BUSY
        since_ts: float | None = None
        if run is not None:
            if state is ServerState.LOADING and run.load_progress is not None:
                done, total = run.load_progress
                text += f" {done}/{total}"
            if state is ServerState.CRASHED:
                detail = _crash_cause(session, run)
                if detail:
                    text += f": {detail}"
            if state is ServerState.SERVING and run.guard.collapsed and run.guard.state is not None:
                # The drafter stopped paying while the server serves on: the worst silent failure.
                text += f" · acceptance collapsed ({run.guard.state.drop_pct:+.0f}%)"
                level = BUSY
            if state in (ServerState.READY, ServerState.SERVING):
                since_ts = run.ready_at or run.started_at
            elif state in (ServerState.CRASHED, ServerState.STOPPED):
                since_ts = run.last_at
            else:
                since_ts = run.started_at
        since = ""
        elapsed: float | None = None
        if state_since is not None:
            elapsed = max(0.0, now - state_since)  # specmon saw it begin: the wall clock
        elif log_now is not None and since_ts is not None:
            elapsed = log_now - since_ts
        # "down · 0s" at the end of a log says nothing: only show time that has passed.
        if elapsed is not None and (elapsed >= 1 or state not in (ServerState.STOPPED, ServerState.CRASHED)):
            since = duration_text(elapsed)
        if restart is not None:
            # The restart panel's own view: header and panel cannot disagree.
            text, since = restart
            level = BUSY
        conn, conn_level = connection_text(status, now)
        if replay:
            # A replay reads saved logs: nothing is live, and its last state is not the server's now.
            conn, conn_level = "replay", IDLE if ended else OK
            if ended:
                # A crash stays red: it is what the log is about.
                text, since = f"log ended (last state: {text})", ""
                level = level if level == ERROR else IDLE
        return HeaderView(
            source=source, engine=session.engine.value, config=config_text(run.config if run else None),
            config_short=run.label if run is not None and run.config is not None else "configuration unknown",
            run_id=run.id if run else None, runs=max(sum(1 for r in session.runs if r.used), run.id if run else 0),
            state=state.value, state_text=text, state_level=level, since=since,
            connection=conn, connection_level=conn_level, mode=mode, paused=paused, lines=lines,
            unparsed=session.counts.get("unparsed", 0),
        )

    def _throughput(self, run: Run | None, row: ConfigRow | None, baseline: Baseline | None) -> MetricView:
        live = run.live_throughput if run is not None else ()
        recent = _tail(live, self.window)
        base = baseline.mean if baseline is not None else None
        delta = significant = None
        is_base = bool(row is not None and row.is_baseline)
        note = ""
        if row is not None and row.vs_baseline is not None:
            delta = row.vs_baseline.pct
            lo, hi = row.vs_baseline.ci95_low, row.vs_baseline.ci95_high
            significant = row.vs_baseline.excludes_zero if lo is not None and hi is not None else None
        elif base and recent and not is_base:
            # No counted samples yet (warm-up): compare the rolling mean, honestly marked unknown.
            delta = (_mean(recent) / base - 1) * 100  # type: ignore[operator]
        pinned = self.pinned
        if pinned is not None and run is not None and pinned[1] == run.id:
            # After a sweep the run table shows the sweep's numbers: so does this panel.
            mine = next((r for r in pinned[0].rows if r.current), None)
            if mine is not None:
                base, is_base = pinned[0].baseline_mean, mine.is_baseline
                delta = mine.vs_pct
                significant = None if mine.vs_level == "" else mine.vs_level != "same"
        if not live:
            note = "no batches yet"  # fits a panel at 60 columns (18 characters inside)
        return MetricView("throughput", "generation throughput", "tok/s", 1,
                          live[-1] if live else None, _mean(recent), len(recent), _tail(live, SPARK_POINTS),
                          baseline=base, delta=delta, delta_is_pct=True, significant=significant,
                          is_baseline=is_base, note=note)

    def _accept(self, run: Run | None, row: ConfigRow | None, base_row: ConfigRow | None, attr: str,
                title: str, unit: str, decimals: int, ceiling: float | None) -> MetricView:
        live = getattr(run, f"live_{attr}") if run is not None else ()
        recent = _tail(live, self.window)
        base = delta = significant = None
        is_base = bool(row is not None and row.is_baseline)
        base_summary: Summary | None = getattr(base_row, attr) if base_row is not None else None
        mine: Summary | None = getattr(row, attr) if row is not None else None
        if base_summary is not None and not is_base:
            base = base_summary.mean
            if mine is not None:
                d, lo, hi = difference(mine, base_summary)
                delta = d
                significant = (lo > 0 or hi < 0) if lo is not None and hi is not None else None
        note = ""
        if not live:
            cfg = run.config if run is not None else None
            note = "no speculation" if cfg is not None and cfg.is_nospec else "not logged yet"
        without = base_row.label if base_row is not None and base_summary is None and not is_base else ""
        return MetricView(attr, title, unit, decimals, live[-1] if live else None, _mean(recent), len(recent),
                          _tail(live, SPARK_POINTS), ceiling=ceiling, baseline=base, delta=delta,
                          significant=significant, is_baseline=is_base, note=note, baseline_without=without)

    def _positions(self, session: Session, run: Run | None, row: ConfigRow | None) -> PositionsView:
        values = run.per_position if run is not None else None
        if values is None and row is not None:
            values = row.per_position
        label = run.label if run is not None else ""
        if values is not None:
            return PositionsView(tuple(round(v, 4) for v in values), label, "")
        engine = session.engine
        note = adapter(engine).per_position_note  # the engine's own word when its log gives none
        if note is None:
            note = "no data yet" if engine is Engine.UNKNOWN else "not logged yet"
        return PositionsView(None, label, note)

    def _event_views(self, session: Session) -> tuple[EventView, ...]:
        events = session.events
        key = (id(session), len(events), id(events[-1]) if events else None)
        if key != self._events_key:
            # The keyed objects are held: an id names one object only while that object lives.
            self._events_key, self._events_held = key, (session, events[-1] if events else None)
            self._events = fold_events(list(events)[-EVENTS_SHOWN * 4:])[-EVENTS_SHOWN:]
        return self._events

    # -- slow views ---------------------------------------------------------------------------

    def table(self, session: Session) -> TableView:
        """The run table from the latest analysis."""
        current = session.current.id if session.current is not None else None
        if self.pinned is not None:
            if self.pinned[1] == current:
                return self.pinned[0]
            self.pinned = None  # a new run began: the live table again
        a = self.analysis
        if a is None:
            return EMPTY_TABLE
        rows = tuple(self._row_view(r, current) for r in a.rows)
        b = a.baseline
        # The mark, its words and the comparison: whole in three lines at 80 columns (what it rests on is
        # in the run details and the help); the marks in the rows are the same verdict's.
        v = a.verdict.answer
        line = f"{v.tag}: {v.claim}" if v.leader is not None else v.sentence
        if self.sweeping and v.leader is not None:
            # While a sweep runs, these runs' own comparison (one look at 95%) is not its verdict: a ★
            # here beside a sweep that ends "no winner declared" is a winner users would deploy. The
            # leader keeps ☆ and its figures, and the line says whose verdict is to come.
            line = f"{LEADER_MARK} leads; the sweep's verdict comes at its end: {v.head}"
            rows = tuple(replace(r, mark=LEADER_MARK) if r.mark == WINNER_MARK else r for r in rows)
        return TableView(rows, line, b.label if b else None, b.mean if b else None)

    @staticmethod
    def _row_view(row: ConfigRow, current: int | None) -> RowView:
        cells = row_cells(row)
        cfg = row.config
        if cfg is None:
            algorithm = str(row.key)
        elif cfg.is_nospec:
            algorithm = "no spec"
        else:
            algorithm = cfg.algorithm or "spec"
        vs = row.vs_baseline
        level = ""
        if vs is not None:
            if vs.excludes_zero:
                level = "better" if vs.pct > 0 else "worse"
            else:
                level = "same"
        return RowView(
            key=row.label, label=row.label, algorithm=algorithm,
            steps=cfg.steps if cfg else None, draft_tokens=cfg.draft_tokens if cfg else None,
            samples=row.samples, tps=cells[2], vs=cells[3],
            vs_short="baseline" if row.is_baseline else ("—" if vs is None else f"{vs.pct:+.1f}%"),
            accept_len=cells[4], accept_rate=cells[5],
            tps_mean=row.throughput.mean if row.throughput else None,
            vs_pct=vs.pct if vs else None,
            accept_len_mean=row.accept_len.mean if row.accept_len else None,
            accept_rate_mean=row.accept_rate.mean if row.accept_rate else None,
            vs_level=level, best=row.best, is_baseline=row.is_baseline,
            current=current is not None and any(r.id == current for r in row.runs), mark=row.mark,
        )

    def plot(self, session: Session) -> PlotView:
        """Recent throughput of the latest runs, with a y-range that only grows."""
        segments = []
        for run in session.runs:
            if run.live_throughput:
                segments.append(PlotSegment(run.id, run.label, tuple(run.live_throughput)))
        segments = segments[-PLOT_RUNS:]
        baseline = self.analysis.baseline.mean if self.analysis and self.analysis.baseline else None
        top = max((max(s.values) for s in segments), default=0.0)
        top = max(top, baseline or 0.0)
        if top > self._y_max:
            self._y_max = nice_ceiling(top * 1.1)
        return PlotView(tuple(segments), baseline, self._y_max or 100.0)


#: Events of one kind this close in log time are one milestone printed by several ranks.
FOLD_WITHIN_S = 5.0
#: A log stamp further than this from the wall clock it was read at is shown beside it.
CLOCKS_DIFFER_S = 2.0



def fold_events(events: Sequence[SessionEvent], *, fold: bool = True) -> tuple[EventView, ...]:
    """Event views in the order they arrived, with runs of one kind of event (8 ranks finishing
    graph capture) folded.

    One clock, the wall clock: specmon's own events show when they happened; a log's event
    shows its own stamp where that is a possible wall time (not later than specmon read it,
    not earlier than the event before) — so a log read from its start keeps its history's
    times — else when it was read (a simulated clock running fast, a host whose clock is
    ahead). Never earlier than the event before it: the log reads in order. Where the shown
    time is not the log's stamp, the stamp is kept beside it (``log_time``). Events with no
    wall time (a replay) show the log's time, an unstamped line the time of the line before.
    The kind is the text before the first colon (``graph end``, ``load end``); the newest
    event of a run is kept, with the run's length (``fold=False``: every event on its own).
    """
    out: list[EventView] = []
    last_kind: tuple[str, str] | None = None
    last_ts: float | None = None
    last_wall: float | None = None
    for e in events:
        # Unstamped lines (a traceback's last line) happened when the line before them did.
        ts = e.timestamp if e.timestamp is not None else last_ts
        log_time = ""
        at: float | None
        fold_ts: float | None
        if e.received is not None:
            claimed = e.received if e.timestamp is None else min(e.received, from_log_scale(e.timestamp))
            wall = claimed if last_wall is None else max(last_wall, claimed)
            last_wall = wall
            shown, at = wall_clock_text(wall), wall
            if e.timestamp is not None and abs(from_log_scale(e.timestamp) - wall) > CLOCKS_DIFFER_S:
                log_time = clock_text(e.timestamp)
            fold_ts = e.timestamp if e.timestamp is not None else as_log_scale(wall)
        else:
            shown, at, fold_ts = clock_text(ts), ts, ts
        kind = (e.level, e.text.split(":", 1)[0])
        close = last_ts is None or fold_ts is None or abs(fold_ts - last_ts) <= FOLD_WITHIN_S
        if fold and out and kind == last_kind and close and ":" in e.text:
            out[-1] = EventView(shown, e.level, e.text, out[-1].count + 1, log_time, at, e.line)
        else:
            out.append(EventView(shown, e.level, e.text, 1, log_time, at, e.line))
        last_kind, last_ts = kind, fold_ts
    return tuple(out)
