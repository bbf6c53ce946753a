"""The fleet: several replicas of one deployment, each with its own session, side by side.

A replica is one server (one log). Each is parsed on its own (its own
:class:`~specmon.model.session.Session`, fed by the ingest layer); this module reads
those sessions and gives, a few times a second:

* one row per replica (:class:`ReplicaRow`): its current configuration, its state
  (live, quiet, no data yet, starting, crashed, stopped, its file missing or
  unreadable, its host unreachable), accept length and rate, tok/s as the recent window's mean and as the
  run's mean with its 95% interval (within that replica's run), and the outlier flags;
* one row per configuration (:class:`ConfigPool`), pooled across the replicas running
  it with the two-level launch model (:mod:`specmon.model.launches`): each replica is
  one launch, so the interval covers the spread *between replicas*, and says so
  ("3 replicas"). A configuration seen on one replica only keeps that replica's own
  interval and says it covers that one replica only;
* outliers (:data:`OUTLIER_K` robust deviations from the other replicas of the same
  configuration; acceptance that fell below :data:`ACCEPT_FALL_RATIO` of the run's mean).

Pure: no I/O, no clock of its own (``now`` is given), no Textual.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import Enum

import numpy as np

from specmon.model.fleet_rules import (
    ACCEPT_FALL_MIN_WINDOWS,
    ACCEPT_FALL_RATIO,
    NORMAL_MAD_SCALE,
    OUTLIER_K,
    OUTLIER_MIN_REPLICAS,
    OUTLIER_MIN_SAMPLES,
    OUTLIER_SCALE_FLOOR,
    acceptance_fell,
    mad_normal,
    robust_outliers,
)
from specmon.model.launches import DEFAULT_LAUNCH_CV, Between, Launch, fit, launch_of, whole_df
from specmon.model.pending import waiting
from specmon.model.session import Run, RunConfig, ServerState, Session
from specmon.model.stats import t_quantile
from specmon.records import Engine

__all__ = [
    "ACCEPT_FALL_MIN_WINDOWS", "ACCEPT_FALL_RATIO", "NORMAL_MAD_SCALE", "OUTLIER_K", "OUTLIER_MIN_REPLICAS", "OUTLIER_MIN_SAMPLES",
    "OUTLIER_SCALE_FLOOR", "QUIET_AFTER_S", "ConfigPool", "FleetModel", "FleetSnapshot", "RateInput", "ReplicaInput",
    "ReplicaRow", "ReplicaState", "acceptance_fell", "age_text", "mad_normal", "robust_outliers", "short_names",
]

#: A replica whose last new stats sample is older than this is called quiet (vLLM logs every 10 s).
QUIET_AFTER_S = 30.0
#: Scrapes in a row of a replica's own /metrics that found nothing answering before it is called
#: down (one refused scrape may be a restart of its HTTP server; scrapes are about a second apart).
DOWN_AFTER_REFUSED = 2


class ReplicaState(str, Enum):
    """Where a replica stands (the first that applies, in this order of the checks)."""

    UNREADABLE = "unreadable"  # the log cannot be opened or read (permissions, a directory, a reader error)
    UNREACHABLE = "unreachable"  # its host cannot be reached over SSH now (lost and retrying, or given up)
    DOWN = "down"  # nothing answers on its /metrics (its Prometheus: up = 0; its own URL: refused)
    MISSING = "missing"  # the log does not exist (yet, or any more)
    CRASHED = "crashed"
    STOPPED = "stopped"
    STARTING = "starting"  # its current launch has not served yet (loading weights, graphs, ready)
    NO_DATA = "no data yet"  # lines perhaps, but no stats sample
    QUIET = "quiet"
    LIVE = "live"


@dataclass(frozen=True, slots=True)
class RateInput:
    """A replica read from Prometheus instead of a log: its state and rates (the ingest layer fills it).

    Prometheus computes the rates over its window; the model keeps none of its own. The
    ``*_samples`` are the rates seen one window apart (windows that do not overlap, so that
    their mean has an honest interval), idle windows left out, since the replica's
    configuration was last seen to change.

    Attributes:
        version: Changes whenever anything below does (what the snapshot's cache compares).
        engine: ``vllm``, ``llamacpp`` or ``unknown``.
        config: The configuration as far as Prometheus tells it (``3 spec tokens (method unknown)``,
            ``unknown config``).
        config_key: What groups it with other replicas (None: its configuration is unknown, so it is
            pooled with none and compared with none).
        state: Its state (live, quiet, down, missing, unreadable, no data yet).
        state_text: The state in words.
        detail: More about the state.
        tps: Generated tok/s over the last window.
        accept_len: Accept length over the last window.
        accept_rate: Accept rate over the last window.
        tps_samples: Non-overlapping windows' tok/s.
        accept_len_samples: Non-overlapping windows' accept length.
    """

    version: int
    engine: str
    config: str
    config_key: Hashable | None
    state: ReplicaState
    state_text: str
    detail: str = ""
    tps: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    tps_samples: tuple[float, ...] = ()
    accept_len_samples: tuple[float, ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaInput:
    """What the fleet model reads of one replica (the ingest layer fills it).

    Attributes:
        name: The replica's short name (:func:`short_names`).
        path: Its log, as given.
        session: Its session (None: nothing read yet).
        lines: Lines read from its log.
        last_sample_at: Wall time a new stats sample was last seen, never later than the log's
            modification time (a log read from its start is not "live" because it was just read).
        problem: :attr:`ReplicaState.MISSING`, :attr:`ReplicaState.UNREADABLE` or
            :attr:`ReplicaState.UNREACHABLE` when its log cannot be read now (None: no problem).
        detail: The reader's sentence about it (``file not found: ... (waiting for it)``).
        source: Where the figures come from (``log``, ``prom``).
        rates: A replica read from Prometheus (then ``session`` is None and ``path`` is its instance).
        metrics_refused: Scrapes in a row of its own ``/metrics`` that found nothing answering.
        metrics_detail: Why its ``/metrics`` gives no counters (empty while it does, or without one).
    """

    name: str
    path: str
    session: Session | None
    lines: int = 0
    last_sample_at: float | None = None
    problem: ReplicaState | None = None
    detail: str = ""
    source: str = "log"
    rates: RateInput | None = None
    metrics_refused: int = 0
    metrics_detail: str = ""


@dataclass(frozen=True, slots=True)
class ReplicaRow:
    """One replica, as the fleet table shows it.

    Attributes:
        key: Stable identity (its index in the command line, as text).
        name: Short name.
        path: The log.
        engine: ``sglang``, ``vllm``, ``llamacpp`` or ``unknown``.
        config: The configuration label of its current run (``EAGLE3 2 steps``; ``—`` before any).
        config_key: What groups it with other replicas (None: no run yet).
        state: Its :class:`ReplicaState`.
        state_text: The state in words (``quiet 2m 05s``, ``loading weights``).
        detail: More about the state (the reader's sentence, a crash's cause).
        tps_recent: Mean tok/s over the last window of counted samples.
        tps_mean: The current run's mean tok/s.
        tps_half: Half-width of its 95% interval (within this replica's run: batch means).
        samples: Counted throughput samples of the run.
        accept_len: The run's mean accept length.
        accept_len_recent: Mean accept length over the last window.
        accept_rate: The run's mean accept rate.
        source: ``log``.
        flags: Short outlier marks: ``slow``, ``fast`` (tok/s), ``acc-low``, ``acc-high`` (accept
            length, against the other replicas), ``acc-fell`` (against its own run).
        reasons: One sentence per flag.
    """

    key: str
    name: str
    path: str
    engine: str
    config: str
    config_key: Hashable | None
    state: ReplicaState
    state_text: str
    detail: str = ""
    tps_recent: float | None = None
    tps_mean: float | None = None
    tps_half: float | None = None
    samples: int = 0
    accept_len: float | None = None
    accept_len_recent: float | None = None
    accept_rate: float | None = None
    source: str = "log"
    flags: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()

    @property
    def outlier(self) -> bool:
        """Whether any outlier rule flags it."""
        return bool(self.flags)


@dataclass(frozen=True, slots=True)
class ConfigPool:
    """One configuration, pooled across the replicas running it.

    Attributes:
        key: The configuration's grouping key.
        engine: Its engine.
        label: Its label.
        replicas: Replicas running it now.
        pooled: Replicas whose run has an interval (3+ counted samples): the launches pooled.
        tps_mean: Mean of those replicas' run means (each replica one unit).
        tps_low: Lower end of the 95% interval.
        tps_high: Upper end.
        covers: What the interval covers: ``3 replicas``, ``1 replica only (within its run)``.
        accept_len: Mean of the replicas' mean accept lengths.
        accept_rate: Mean of the replicas' mean accept rates.
        outliers: Its replicas with a flag.
    """

    key: Hashable
    engine: str
    label: str
    replicas: int
    pooled: int
    tps_mean: float | None = None
    tps_low: float | None = None
    tps_high: float | None = None
    covers: str = ""
    accept_len: float | None = None
    accept_rate: float | None = None
    outliers: int = 0

    @property
    def tps_half(self) -> float | None:
        """Half the interval's width."""
        if self.tps_low is None or self.tps_high is None:
            return None
        return (self.tps_high - self.tps_low) / 2


@dataclass(frozen=True, slots=True)
class FleetSnapshot:
    """Everything the fleet view shows at one refresh.

    Attributes:
        replicas: One row per replica, in command-line order.
        configs: One row per configuration running on some replica (by step count).
        between: The replica-to-replica variance the pooled intervals include, in words.
        source: Where the fleet is read from and how that goes, when it is not the replicas' own
            logs (``Prometheus http://...: answered 2s ago``).
    """

    replicas: tuple[ReplicaRow, ...] = ()
    configs: tuple[ConfigPool, ...] = ()
    between: str = ""
    source: str = ""

    @property
    def outliers(self) -> int:
        """Replicas with a flag."""
        return sum(1 for r in self.replicas if r.outlier)

    def count(self, state: ReplicaState) -> int:
        """Replicas in a state."""
        return sum(1 for r in self.replicas if r.state is state)


# -- names ----------------------------------------------------------------------------------------

def short_names(paths: Sequence[str]) -> list[str]:
    """Each path shortened to what differs between the paths.

    The directories every path starts with, and the trailing parts every path ends with, are
    left out (``/logs/r1/server.log`` and ``/logs/r2/server.log`` are ``r1`` and ``r2``;
    ``/logs/a.log`` and ``/logs/b.log`` are ``a.log`` and ``b.log``). Where leaving out the
    common end would leave a name empty or make two names equal, only the common start goes;
    where that is not enough either, the paths are shown whole.
    """
    if len(paths) < 2:
        return [os.path.basename(p) or p for p in paths]
    parts = [[q for q in p.replace("\\", "/").split("/")] for p in paths]
    shortest = min(len(p) for p in parts)
    head = 0
    # Never the last part of any path: a file name always stays.
    while head < shortest - 1 and all(p[head] == parts[0][head] for p in parts):
        head += 1
    tail = 0
    while tail < shortest - head - 1 and all(p[-1 - tail] == parts[0][-1 - tail] for p in parts):
        tail += 1
    for cut_tail in (tail, 0):
        names = ["/".join(p[head:len(p) - cut_tail]) for p in parts]
        if all(names) and len(set(names)) == len(names):
            return names
    return list(paths)


def age_text(seconds: float) -> str:
    """``45s``, ``4m 12s``, ``2h 03m``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


# -- one replica ------------------------------------------------------------------------------------

_STARTING = {ServerState.STARTING: "starting", ServerState.LOADING: "loading weights",
             ServerState.CAPTURING: "capturing graphs", ServerState.READY: "ready, no requests yet"}


def config_key(run: Run) -> Hashable:
    """What groups replicas: the run's configuration without the model path (one deployment)."""
    c = run.config
    if c is None:
        return ("unknown", run.engine.value)
    return RunConfig(c.engine, c.algorithm, c.steps, c.topk, c.draft_tokens, params=c.params)


def _engine(run: Run | None, session: Session) -> str:
    if run is not None and run.config is not None and run.config.engine is not Engine.UNKNOWN:
        return str(run.config.engine.value)
    if run is not None and run.engine is not Engine.UNKNOWN:
        return str(run.engine.value)
    return str(session.engine.value)


@dataclass(slots=True)
class _Figures:
    """A replica's numbers from its run (cached while the run has no new sample)."""

    tps_recent: float | None = None
    tps_mean: float | None = None
    tps_half: float | None = None
    samples: int = 0
    launch: Launch | None = None
    accept_len: float | None = None
    accept_len_recent: float | None = None
    accept_rate: float | None = None
    fell: tuple[float, float] | None = None


#: A replica without samples yet.
_NO_FIGURES = _Figures()


def _mean(x: np.ndarray) -> float | None:
    return float(x.mean()) if len(x) else None


def _figures(run: Run, window: int) -> _Figures:
    tp = np.frombuffer(run.throughput, dtype=np.float32).astype(np.float64)
    al = np.frombuffer(run.accept_len, dtype=np.float32).astype(np.float64)
    ar = np.frombuffer(run.accept_rate, dtype=np.float32).astype(np.float64)
    return _figures_of(tp, al, ar, window, f"run {run.id}")


def _rate_figures(rates: RateInput, window: int, name: str) -> _Figures:
    """A Prometheus replica's figures: the run's mean and interval from its non-overlapping windows,
    the recent tok/s and the acceptance from Prometheus's last window."""
    tp = np.asarray(rates.tps_samples, dtype=np.float64)
    al = np.asarray(rates.accept_len_samples, dtype=np.float64)
    f = _figures_of(tp, al, np.zeros(0), window, name)
    f.tps_recent = rates.tps
    f.accept_len_recent = rates.accept_len
    # Acceptance as Prometheus gives it now (the column says "over the last window" in the docs).
    f.accept_len, f.accept_rate = rates.accept_len, rates.accept_rate
    return f


def _figures_of(tp: np.ndarray, al: np.ndarray, ar: np.ndarray, window: int, name: str) -> _Figures:
    f = _Figures(samples=len(tp))
    launch = launch_of(tp, name) if len(tp) else None
    if launch is not None:
        f.launch = launch
        f.tps_mean = launch.mean
        f.tps_recent = _mean(tp[-window:])
        if launch.se is not None and launch.df:
            f.tps_half = t_quantile(0.975, whole_df(launch.df)) * launch.se
    f.accept_len = _mean(al)
    f.accept_len_recent = _mean(al[-window:])
    f.accept_rate = _mean(ar)
    f.fell = acceptance_fell(al, window)
    return f


def _shown_run(session: Session) -> Run | None:
    """The run whose numbers a replica shows: its latest run with samples, else its current one."""
    for run in reversed(session.runs):
        if run.used:
            return run
    return session.current


def _state(inp: ReplicaInput, run: Run | None, now: float) -> tuple[ReplicaState, str, str]:
    """(state, its words, more detail) for one replica."""
    session = inp.session
    current = session.current if session is not None else None
    has_samples = run is not None and run.used
    if inp.problem is ReplicaState.UNREADABLE:
        return ReplicaState.UNREADABLE, "unreadable", inp.detail
    if inp.problem is ReplicaState.UNREACHABLE:
        return ReplicaState.UNREACHABLE, "unreachable", inp.detail
    if inp.problem is ReplicaState.MISSING:
        return ReplicaState.MISSING, "file gone" if has_samples else "no file yet", inp.detail
    if current is not None and current.state is ServerState.CRASHED:
        cause = current.crash_cause or current.crash_detail or "the server crashed (no message)"
        if current.used and inp.metrics_refused < DOWN_AFTER_REFUSED and waiting(current, inp.last_sample_at, now):
            return ReplicaState.QUIET, "error (serving stopped?)", cause  # (it may be caught: pending.py)
        return ReplicaState.CRASHED, "crashed", cause
    if current is not None and current.state is ServerState.STOPPED:
        return ReplicaState.STOPPED, "stopped", "the server shut down"
    if current is not None and current.state in _STARTING and not current.used:
        return ReplicaState.STARTING, _STARTING[current.state], ""
    # Its engine stopped answering while the log said nothing of it (a kill, a host-side OOM): down
    # now, not quiet in 30 s. A stop or crash the log tells, or a launch still loading, says more.
    if inp.metrics_refused >= DOWN_AFTER_REFUSED:
        return ReplicaState.DOWN, "down", f"its /metrics does not answer: {inp.metrics_detail}"
    if not has_samples:
        unparsed = session.counts.get("unparsed", 0) if session is not None else 0
        detail = (f"{inp.lines:,} lines read, none with stats" if inp.lines else "nothing read yet")
        if unparsed:
            detail += f" ({unparsed:,} with a known marker could not be parsed)"
        return ReplicaState.NO_DATA, "no data yet", detail
    if inp.last_sample_at is not None and now - inp.last_sample_at > QUIET_AFTER_S:
        return ReplicaState.QUIET, f"quiet {age_text(now - inp.last_sample_at)}", "no new stats line"
    return ReplicaState.LIVE, "live", ""


# -- the fleet ------------------------------------------------------------------------------------------

@dataclass(slots=True)
class _Cached:
    sig: tuple[object, ...]
    figures: _Figures


@dataclass
class FleetModel:
    """Builds :class:`FleetSnapshot` objects from the replicas' sessions, reusing what did not change.

    Args:
        window: Counted samples in the recent means (``--window``).
        k: The outlier cut, in robust deviations (:data:`OUTLIER_K`).
        assumed_cv: The launch model's assumed launch CV, used only where it needs one.
    """

    window: int = 20
    k: float = OUTLIER_K
    assumed_cv: float = DEFAULT_LAUNCH_CV
    _cache: dict[str, _Cached] = field(default_factory=dict)
    _last: tuple[tuple[object, ...], FleetSnapshot] | None = None

    def _figures_for(self, key: str, run: Run) -> _Figures:
        sig = (id(run), len(run.throughput), len(run.accept_len), len(run.accept_rate), self.window)
        hit = self._cache.get(key)
        if hit is not None and hit.sig == sig:
            return hit.figures
        figures = _figures(run, max(1, self.window))
        self._cache[key] = _Cached(sig, figures)
        return figures

    def snapshot(self, replicas: Sequence[ReplicaInput], now: float, source: str = "") -> FleetSnapshot:
        """The fleet at ``now`` (wall time); the same object again while nothing read has changed.

        Nothing changes in a session but by lines read, so the lines each replica has read (with
        its reader's state) and the second of ``now`` (a quiet replica's age) say whether to start over;
        a Prometheus replica's figures change with its ``rates.version``.

        Args:
            replicas: What each replica's reader gives.
            now: Wall time.
            source: Where the fleet is read from, for the header (:attr:`FleetSnapshot.source`).
        """
        sig = (int(now), source, tuple((inp.name, id(inp.session), inp.lines, inp.problem, inp.detail,
                                        inp.last_sample_at, inp.rates.version if inp.rates is not None else None,
                                        inp.metrics_refused >= DOWN_AFTER_REFUSED, inp.metrics_detail)
                                       for inp in replicas))
        if self._last is not None and self._last[0] == sig:
            return self._last[1]
        snap = replace(self._snapshot(replicas, now), source=source)
        self._last = (sig, snap)
        return snap

    def _rate_row(self, key: str, inp: ReplicaInput, rates: RateInput) -> tuple[ReplicaRow, _Figures]:
        """A Prometheus replica's row (its state and configuration are the ingest layer's reading)."""
        sig = (rates.version, self.window)
        hit = self._cache.get(key)
        if hit is not None and hit.sig == sig:
            f = hit.figures
        else:
            f = _rate_figures(rates, max(1, self.window), inp.name)
            self._cache[key] = _Cached(sig, f)
        row = ReplicaRow(key=key, name=inp.name, path=inp.path, source=inp.source, state=rates.state,
                         state_text=rates.state_text, detail=rates.detail, engine=rates.engine, config=rates.config,
                         config_key=rates.config_key, tps_recent=f.tps_recent, tps_mean=f.tps_mean,
                         tps_half=f.tps_half, samples=f.samples, accept_len=f.accept_len,
                         accept_len_recent=f.accept_len_recent, accept_rate=f.accept_rate)
        return row, f

    def _snapshot(self, replicas: Sequence[ReplicaInput], now: float) -> FleetSnapshot:
        rows: list[ReplicaRow] = []
        launches: dict[str, Launch] = {}
        fell: dict[str, tuple[float, float]] = {}
        for i, inp in enumerate(replicas):
            key = str(i)
            if inp.rates is not None:
                row, f = self._rate_row(key, inp, inp.rates)
                if f.launch is not None:
                    launches[key] = f.launch
                if f.fell is not None:
                    fell[key] = f.fell
                rows.append(row)
                continue
            session = inp.session
            run = _shown_run(session) if session is not None else None
            state, text, detail = _state(inp, run, now)
            config, group = "—", None
            if run is not None and (run.config is not None or run.used):
                config = run.config.label if run.config is not None else "unknown config"
                group = config_key(run)
            f = self._figures_for(key, run) if run is not None and run.used else _NO_FIGURES
            if f.launch is not None:
                launches[key] = f.launch
            if f.fell is not None:
                fell[key] = f.fell
            row = ReplicaRow(key=key, name=inp.name, path=inp.path, source=inp.source, state=state,
                             state_text=text, detail=detail,
                             engine=_engine(run, session) if session is not None else Engine.UNKNOWN.value,
                             config=config, config_key=group, tps_recent=f.tps_recent, tps_mean=f.tps_mean,
                             tps_half=f.tps_half, samples=f.samples, accept_len=f.accept_len,
                             accept_len_recent=f.accept_len_recent, accept_rate=f.accept_rate)
            rows.append(row)
        for stale in set(self._cache) - {str(i) for i in range(len(replicas))}:
            del self._cache[stale]
        flags = self._flag(rows, fell)
        rows = [replace(r, flags=tuple(f for f, _ in flags[r.key]), reasons=tuple(t for _, t in flags[r.key]))
                if r.key in flags else r for r in rows]
        configs, between = self._pool(rows, launches)
        return FleetSnapshot(tuple(rows), configs, between)

    def _flag(self, rows: Sequence[ReplicaRow], fell: Mapping[str, tuple[float, float]]
              ) -> dict[str, list[tuple[str, str]]]:
        """Outlier flags per replica key: (mark, sentence)."""
        flags: dict[str, list[tuple[str, str]]] = {}
        groups: dict[Hashable, list[ReplicaRow]] = {}
        for row in rows:
            if row.config_key is not None and row.samples >= OUTLIER_MIN_SAMPLES:
                groups.setdefault(row.config_key, []).append(row)
        for members in groups.values():
            for what, low, high, fmt, attr in (("tok/s", "slow", "fast", ".1f", "tps_mean"),
                                               ("accept length", "acc-low", "acc-high", ".2f", "accept_len")):
                values: dict[Hashable, float] = {r.key: float(v) for r in members
                                                 if (v := getattr(r, attr)) is not None}
                for key, (z, rel) in robust_outliers(values, k=self.k).items():
                    others = len(values) - 1
                    flags.setdefault(str(key), []).append((low if z < 0 else high, (
                        f"{what} {values[key]:{fmt}} is {abs(rel) * 100:.0f}% {'below' if z < 0 else 'above'} the "
                        f"median of the {others} other replicas of its configuration "
                        f"({abs(z):.1f} robust deviations; the cut is {self.k:g})")))
        for key, (recent, mean) in fell.items():
            flags.setdefault(key, []).append(("acc-fell", (
                f"accept length fell: {recent:.2f} over the last {self.window} samples, "
                f"{recent / mean:.2f}× its run mean {mean:.2f} (the cut is {ACCEPT_FALL_RATIO:g}×)")))
        return flags

    def _pool(self, rows: Sequence[ReplicaRow], launches: Mapping[str, Launch]
              ) -> tuple[tuple[ConfigPool, ...], str]:
        """One row per configuration: replicas as launches of the two-level model."""
        members: dict[Hashable, list[ReplicaRow]] = {}
        for r in rows:
            if r.config_key is not None:
                members.setdefault(r.config_key, []).append(r)
        groups = {key: [launches[r.key] for r in rs if r.key in launches] for key, rs in members.items()}
        # Only configurations on two replicas or more inform the replica-to-replica variance.
        between, estimates = fit({k: ls for k, ls in groups.items() if len(ls) >= 2}, self.assumed_cv)
        out = []
        for key, rs in members.items():
            usable = [x for x in groups[key] if x.se is not None and x.mean > 0]
            n = len(usable)
            mean = low = high = None
            covers = ""
            est = estimates.get(key)
            if n >= 2 and est is not None:
                mean = est.mean
                iv = est.interval(0.95)
                if iv is not None:
                    low, high = iv
                covers = f"{n} replicas" if n == len(rs) else f"{n} of {len(rs)} replicas"
            elif n == 1:
                only = usable[0]
                mean = only.mean
                df = only.df
                if only.se is not None and df:
                    half = t_quantile(0.975, whole_df(df)) * only.se
                    low, high = mean - half, mean + half
                covers = "1 replica only (within its run)"
            elif rs:
                covers = "no interval yet"
            al = [r.accept_len for r in rs if r.accept_len is not None]
            ar = [r.accept_rate for r in rs if r.accept_rate is not None]
            first = rs[0]
            out.append(ConfigPool(
                key=key, engine=first.engine, label=first.config, replicas=len(rs), pooled=n,
                tps_mean=mean, tps_low=low, tps_high=high, covers=covers,
                accept_len=sum(al) / len(al) if al else None, accept_rate=sum(ar) / len(ar) if ar else None,
                outliers=sum(1 for r in rs if r.outlier)))
        out.sort(key=_pool_order)
        return tuple(out), _between_text(between)


def _pool_order(p: ConfigPool) -> tuple[int, int, int, str]:
    cfg = p.key if isinstance(p.key, RunConfig) else None
    if cfg is None or cfg.steps is None:
        return (1, 0, 0, p.label)
    return (0, cfg.steps, cfg.draft_tokens or 0, p.label)


def _between_text(between: Between) -> str:
    """``replica CV 3.1% (2 configurations on 2+ replicas, 14 df)``, or what the intervals lack."""
    if not between.estimated:
        # Whole at 80 columns (the header is one line a fact).
        return "no configuration on 2+ replicas: each interval is within one replica's run"
    return (f"replica CV {100 * between.cv:.1f}% from {between.replicated} "
            f"configuration{'s' if between.replicated != 1 else ''} on 2+ replicas ({between.df:g} df)")
