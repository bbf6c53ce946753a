"""What a sweep found: :class:`SweepResult` (the document ``specmon sweep --format json`` prints),
the verdicts' analyses replayed from the stored samples, and the cross-check of their sources.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.control import dims as dimensions
from specmon.control.dims import Point
from specmon.engines import by_name
from specmon.experiment.prompts import prompt_groups
from specmon.experiment.stats.design import NeedsMore
from specmon.experiment.stats.design import summaries as design_summaries
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_state import SKIPPED, CellState, Segment, config_for
from specmon.model.analysis import Analysis, ConfigRow, analyze
from specmon.model.launches import DEFAULT_LAUNCH_CV
from specmon.model.objective import ObjectiveVerdict, objective_verdict
from specmon.model.schedule import Schedule, schedules_from
from specmon.model.session import RunConfig, Session
from specmon.model.stats import summarize
from specmon.model.stopping import StoppingRule, SweepVerdict, check_source
from specmon.records import Config, Decode, Spec
from specmon.wording import counted


@dataclass
class SweepResult:
    """What a sweep found: a verdict per concurrency and every setting's numbers."""

    plan: SweepPlan
    cells: list[CellState]
    verdicts: list[SweepVerdict]
    finished: bool
    state_path: str | None = None
    #: Server restarts this run of the sweep asked for (a resumed sweep counts its own only).
    restarts: int = 0
    #: The verdicts on the plan's objective when it is not tok/s (``--objective``): these decide.
    objective_verdicts: list[ObjectiveVerdict] = field(default_factory=list)
    #: What would decide each undecided verdict (:class:`~specmon.experiment.stats.design.NeedsMore`), at this
    #: sweep's measured restart cost: which two settings, how many more launches of each, how long.
    needs_more: list[NeedsMore] = field(default_factory=list)

    @property
    def deciding(self) -> list[SweepVerdict] | list[ObjectiveVerdict]:
        """The verdicts that decide: the objective's when it is not tok/s, else the throughput's."""
        return self.verdicts if self.plan.objective.is_tps else self.objective_verdicts

    def winner(self) -> tuple[int, Point] | None:
        """The setting the first deciding verdict separates as best (None when it names no winner)."""
        if self.plan.objective.is_tps:
            v = self.verdict
            cell = self.winner_cell(v) if v is not None and v.separated else None
            return cell.setting if cell is not None else None
        ov = self.objective_verdicts[0] if self.objective_verdicts else None
        if ov is None or not ov.separated or ov.best is None:
            return None
        cell = next((c for c in self.cells if c.key == ov.best.key), None)
        return cell.setting if cell is not None else None

    @property
    def restart_note(self) -> str:
        """``restarts: 5 (a grid restarts once per setting: 11; 6 saved)``."""
        settings = len({c.setting for c in self.cells})
        skipped = len({c.setting for c in self.cells if c.status == SKIPPED})
        text = f"restarts: {self.restarts} for {counted(settings, 'setting')}"
        if skipped:
            text += f" ({skipped} not measured: the cost model bounds them below the best)"
        return text

    @property
    def verdict(self) -> SweepVerdict | None:
        """The verdict at the first concurrency of the plan (1 by default: what a user feels)."""
        return self.verdicts[0] if self.verdicts else None

    def to_json(self) -> dict[str, Any]:
        """The document ``specmon sweep --format json`` prints."""
        runs = []
        for cell in self.cells:
            row = self.row_of(cell)
            tp = row.throughput if row else cell.summary()
            al = row.accept_len if row else None
            vs = row.vs_baseline if row else None
            client = cell.client
            dec = summarize(client.get("decode_tps") or [])
            ttft = summarize(client.get("ttft_s") or [])
            secs = client.get("seconds") or 0.0
            runs.append({
                "steps": cell.steps, "concurrency": cell.concurrency, "key": cell.key,
                **({"dims": dict(cell.point), "setting": cell.setting_label} if self.plan.points else {}),
                **({"workload": cell.workload} if cell.workload else {}),
                "label": row.label if row else (cell.label or cell.setting_label),
                "status": cell.status, "stop_reason": cell.reason, "stop_text": cell.text,
                "samples": cell.n, "launches": len(cell.launches()), "looks": cell.looks_done,
                # What the throughput interval covers ("3 launches", "1 launch + assumed launch CV 5%").
                "interval_covers": row.covers if row else None,
                "elapsed_s": round(cell.elapsed_s, 2),
                "throughput": tp.to_json() if tp else None,
                "accept_len": al.to_json() if al else None,
                "accept_rate": row.accept_rate.to_json() if row and row.accept_rate else None,
                "vs_baseline_pct": round(vs.pct, 2) if vs else None,
                "vs_baseline_ci95": None if vs is None else [
                    None if vs.ci95_low is None else round(vs.ci95_low, 2),
                    None if vs.ci95_high is None else round(vs.ci95_high, 2)],
                "is_baseline": bool(row and row.is_baseline), "best": bool(row and row.best),
                "mark": row.mark if row else "",
                "source": "+".join(sorted({s.kind for s in cell.segments if s.throughput})) or None,
                "tps_by_source": {k: round(v, 2) for k, v in source_means(cell).items()},
                **({"objective": self._objective_row(cell)} if not self.plan.objective.is_tps else {}),
                "client": {
                    "requests": client.get("requests", 0), "errors": client.get("errors", 0),
                    "untimed": client.get("untimed", 0), "retried": client.get("retried", 0),
                    "first_error": client.get("first_error"),
                    "output_tps": round(client["output_tokens"] / secs, 3) if secs and client.get("output_tokens") else None,
                    "decode_tps": dec.to_json() if dec else None, "ttft_s": ttft.to_json() if ttft else None,
                },
            })
        verdict = self.verdict.to_json() if self.verdict else {
            "best": None, "best_steps": None, "speedup_pct": None, "separated": False, "sentence": "no data"}
        verdict = {**verdict, **self._client_check(self.verdict),
                   **(self._winner_json(self.verdict) if self.verdict else {"best_setting": None, "best_dims": None})}
        return {
            "verdict": verdict,
            "verdicts": [{**v.to_json(), **self._client_check(v), **self._winner_json(v)} for v in self.verdicts],
            "dimensions": list(self.plan.dimensions),
            "winners_differ": self.winners_differ(),
            "schedules": [sc.to_json() for sc in self.schedules()],
            "objective": self.plan.objective.to_json(),
            **({"objective_verdict": self.objective_verdicts[0].to_json() if self.objective_verdicts else None,
                "objective_verdicts": [v.to_json() for v in self.objective_verdicts]}
               if not self.plan.objective.is_tps else {}),
            "runs": runs,
            "plan": self.plan.to_json(),
            "finished": self.finished,
            "state": self.state_path,
            "restarts": self.restarts,
            "needs_more": [n.to_json() for n in self.needs_more],
            # Prompts paired across launches and settings: which pay for speculation (descriptive).
            "prompts": prompt_groups(self.cells),
            "settings": len({c.setting for c in self.cells}),
            "skipped": sorted({c.setting_label for c in self.cells if c.status == SKIPPED}),
        }

    def _objective_row(self, cell: CellState) -> dict[str, Any] | None:
        for v in self.objective_verdicts:
            if (v.concurrency, v.workload) == cell.group:
                row = next((r for r in v.rows if r.key == cell.key), None)
                return {**row.to_json(), "requests_counted": cell.requests} if row else {
                    "requests_counted": cell.requests}
        return None

    def row_of(self, cell: CellState) -> ConfigRow | None:
        """The analysis row of one setting (None before it has samples)."""
        for v in self.verdicts:
            if (v.concurrency, v.workload) == cell.group:
                return next((r for r in v.analysis.rows if r.config is not None and _row_is(r.config, cell)), None)
        return None

    def winner_cell(self, v: SweepVerdict | None) -> CellState | None:
        """The setting a verdict names best (None when it names none)."""
        if v is None or v.best is None or v.best.config is None:
            return None
        cfg = v.best.config
        return next((c for c in self.cells if c.group == (v.concurrency, v.workload) and _row_is(cfg, c)), None)

    def _winner_json(self, v: SweepVerdict) -> dict[str, Any]:
        cell = self.winner_cell(v)
        return {"best_setting": cell.setting_label if cell else None,
                "best_dims": dict(cell.point) if cell and cell.point else None}

    def schedules(self) -> list[Schedule]:
        """A step count per batch size from the verdicts at each concurrency (:mod:`specmon.model.schedule`);
        empty for one concurrency, or for a grid (a schedule varies the step count only)."""
        if self.plan.points:
            return []
        return schedules_from(self.deciding)

    def _leader_cell(self, v: SweepVerdict | ObjectiveVerdict) -> CellState | None:
        """The setting a deciding verdict names best by mean (None when it names none)."""
        if isinstance(v, SweepVerdict):
            return self.winner_cell(v)
        best = v.best
        return None if best is None else next((c for c in self.cells if c.key == best.key), None)

    def winners_differ(self) -> str | None:
        """A sentence when the best setting is not the same at every concurrency and workload (else None),
        by the deciding verdicts (the objective's where it decides: tok/s is then context only)."""
        named = [(v, cell) for v in self.deciding if (cell := self._leader_cell(v)) is not None]
        if len(named) < 2 or len({cell.setting for _, cell in named}) == 1:
            return None
        what = []
        if len({v.concurrency for v, _ in named}) > 1:
            what.append("load")
        if len({v.workload for v, _ in named}) > 1:
            what.append("workload")
        parts = [f"{cell.setting_label} at concurrency {v.concurrency}"
                 + (f" on the {v.workload} prompts" if v.workload else "") for v, cell in named]
        listed = "; ".join(parts)
        if all(v.separated for v, _ in named):
            return f"The winner depends on the {' and '.join(what) or 'load'}: {listed}."
        best = "fastest setting" if self.plan.objective.is_tps else f"best setting on {self.plan.objective.name}"
        return (f"The {best} by mean differs with the {' and '.join(what) or 'load'}: {listed}; "
                "not every verdict separates it from the runner-up, so this may be noise.")

    def _client_check(self, v: SweepVerdict | None) -> dict[str, Any]:
        """The client-side view: which step count the client measured fastest, and whether it agrees.

        The same measure as the verdict's ``client`` check (:func:`source_means`): the per-request
        decode speed named another fastest setting than the check did (a demo sweep's JSON held
        ``checks[0].best_steps = 5`` beside ``client_best_steps = 2``).
        """
        if v is None:
            return {"client_best_steps": None, "client_agrees": None}
        means: dict[tuple[int, Point], float] = {}
        for cell in self.cells:
            if cell.group == (v.concurrency, v.workload) and (m := source_means(cell).get("client")) is not None:
                means[cell.setting] = m
        if not means:
            return {"client_best_steps": None, "client_agrees": None}
        best = max(means, key=lambda s: means[s])
        server = self.winner_cell(v)
        extra = {"client_best_setting": dimensions.label(*best)} if self.plan.points else {}
        return {"client_best_steps": best[0], **extra,
                "client_agrees": None if server is None else best == server.setting}


def pooled_counters(segments: Sequence[Segment]) -> float | None:
    """Σ tokens / Σ seconds over counter samples: each sample weighted by the time it measured.

    Like the client's pooled decode speed, and unlike a mean of per-sample ratios, which
    gives a one-second interval with a fast request as much weight as one with a slow
    request (on the llama.cpp kit the ratio mean read 15% above the pooled figure).
    None when a segment lacks its token counts (a sweep file from before they were kept).
    """
    tokens = seconds = 0.0
    for seg in segments:
        if len(seg.tokens) != len(seg.throughput):
            return None
        for n, tps in zip(seg.tokens, seg.throughput, strict=True):
            if tps > 0:
                tokens, seconds = tokens + n, seconds + n / tps
    return tokens / seconds if seconds > 0 else None


def _counts_streams(engine: object) -> bool:
    """Whether an engine's counters give one request stream's decode speed: its own generation
    seconds, no request count beside them (llama.cpp's ``tokens_predicted_seconds_total``)."""
    ad = by_name(engine) if isinstance(engine, str) else None
    c = ad.counters if ad is not None else None
    return c is not None and c.gen_seconds is not None and c.gen_requests is None


def source_means(cell: CellState) -> dict[str, float]:
    """Mean tok/s of one setting by each source that measured it (counters, log, client)."""
    out: dict[str, float] = {}
    counted = [s for s in cell.segments if s.kind == "counters" and s.throughput]
    ctr = [v for s in counted for v in s.throughput]
    log = [v for s in cell.segments for v in s.log_samples]
    if ctr:
        out["counters"] = pooled_counters(counted) or sum(ctr) / len(ctr)
    if log:
        out["log"] = sum(log) / len(log)
    # The client's output tok/s (tokens over the load's wall time) is what compares with the server's
    # throughput: both include prefill and the gaps between requests. Its per-request decode speed
    # leaves those out (on purpose: it is what a reader of the stream sees) and runs higher.
    # llama.cpp's counters are that decode speed (generated tokens over generation seconds, per
    # stream): there the client's pooled decode speed is the like-for-like figure (on the kit,
    # output tok/s at concurrency 2 read 59-72% off a correct counters figure).
    if ctr and any(_counts_streams((s.config or {}).get("engine")) for s in cell.segments if s.kind == "counters"):
        dsecs, dtokens = cell.client.get("decode_seconds") or 0.0, cell.client.get("decode_tokens") or 0
        if dsecs > 0 and dtokens and cell.client.get("requests", 0) >= 3:
            out["client"] = dtokens / dsecs
        return out
    secs, tokens = cell.client.get("seconds") or 0.0, cell.client.get("output_tokens") or 0
    if secs > 0 and tokens and cell.client.get("requests", 0) >= 3:
        out["client"] = tokens / secs
    return out


def verdict_sources(verdict: SweepVerdict, cells: Sequence[CellState], concurrency: int,
                    tolerance_pct: float = 10.0) -> SweepVerdict:
    """Say which source ``verdict`` rests on and whether the other sources agree with it."""
    cs = [c for c in cells if c.group == (concurrency, verdict.workload) and c.n]
    kinds = {s.kind for c in cs for s in c.segments if s.throughput}
    source = "counters" if kinds == {"counters"} else ("log" if kinds <= {"log"} else "counters+log")
    multi = any(c.point for c in cs)

    def name(c: CellState) -> Any:
        # Steps-only sweeps keep step counts as names (the sentences say "N steps").
        return c.setting_label if multi else c.steps

    # Each source's own mean (counters pooled over time) against the others': like for like. The
    # verdict's summary means have warm-up and batching applied, which the other sources have not.
    primary = {name(c): source_means(c).get(source, sm.mean) for c in cs if (sm := c.summary()) is not None}
    best_cfg = verdict.best.config if verdict.best else None
    best = None if best_cfg is None else next((name(c) for c in cs if _row_is(best_cfg, c)), None)
    checks = []
    for src in ("counters", "log", "client"):
        if src == source or (source == "counters+log" and src != "client"):
            continue
        means = {name(c): m[src] for c in cs if src in (m := source_means(c))}
        if means:
            checks.append(check_source(src, means, primary, verdict_best=best, separated=verdict.separated,
                                       tolerance_pct=tolerance_pct))
    return verdict.with_sources(source, checks)


def _row_is(cfg: RunConfig, cell: CellState) -> bool:
    """Whether an analysis row's configuration is this setting's."""
    if cell.steps == 0:
        return cfg.is_nospec or (cfg.steps == 0)
    if cfg.steps != cell.steps:
        return False
    pt = dict(cell.point)
    params = tuple((k, str(v)) for k, v in cell.point if k not in ("topk", "draft_tokens"))
    return (cfg.params == params and all(getattr(cfg, k) == pt[k] for k in ("topk", "draft_tokens") if k in pt))


def analyses_from_cells(cells: Sequence[CellState], concurrency: int,
                        launch_cv: float = DEFAULT_LAUNCH_CV) -> Analysis:
    """Analyse one concurrency's settings with :func:`specmon.model.analysis.analyze`.

    The stored samples are replayed into a fresh session (one run per segment,
    warm-up already excluded), so a resumed sweep and a live one reach their
    verdict through exactly the same code as ``specmon summarize``.
    """
    session = Session(warmup=0)
    line = 0
    for cell in cells:
        if cell.concurrency != concurrency:
            continue
        last: tuple[str, int] | None = None
        for i, seg in enumerate(cell.segments):
            if not seg.throughput and not seg.accept_len:
                continue
            cfg = config_for(cell.steps, seg.config, cell.point)
            ident = (seg.source, seg.run_id) if seg.run_id is not None else None
            same_launch = ident is not None and ident == last
            last = ident
            if not same_launch:
                # One run per server launch: visits on the same run are one launch, not a replicate.
                session.begin_source(f"sweep {cell.key} #{i + 1}")
                line += 1
                session.ingest(Config(line, None, None, engine=cfg.engine, algorithm=cfg.algorithm,
                                      steps=cfg.steps, topk=cfg.topk, draft_tokens=cfg.draft_tokens, model=cfg.model))
                if cfg.params and session.runs and session.runs[-1].config is not None:
                    # The log's Config record has no field for them: the run carries the sweep's own.
                    session.runs[-1].config = cfg
            # Acceptance rides on the decode records (as SGLang logs it); any extra acceptance
            # samples (vLLM logs them separately) follow as spec records.
            acc, rates = seg.accept_len, seg.accept_rate
            for j, v in enumerate(seg.throughput):
                line += 1
                session.ingest(Decode(line, None, None, running_req=concurrency, gen_throughput=v,
                                      accept_len=acc[j] if j < len(acc) else None,
                                      accept_rate=rates[j] if j < len(rates) else None))
            for j in range(len(seg.throughput), max(len(acc), len(rates))):
                line += 1
                session.ingest(Spec(line, None, None, mean_acceptance_length=acc[j] if j < len(acc) else None,
                                    draft_acceptance_rate=rates[j] if j < len(rates) else None))
            if seg.per_position:
                line += 1
                session.ingest(Spec(line, None, None, per_position=tuple(seg.per_position)))
    return analyze(session.runs, launch_cv=launch_cv)


def group_objective_verdict(plan: SweepPlan, cells: Sequence[CellState], rule: StoppingRule, concurrency: int,
                            workload: str | None) -> ObjectiveVerdict:
    """The verdict on the plan's objective over one concurrency's settings (launches as units).

    The same two-level model and adjusted level as the throughput verdict
    (:func:`specmon.experiment.stats.design.summaries`, the rule's ``test_level``), on each launch's
    value of the objective (:meth:`CellState.objective_launches`).
    """
    obj = plan.objective
    live = [c for c in cells if c.status != "failed" or c.segments]
    _, sums = design_summaries({c.key: c.objective_launches(obj) for c in live}, plan.launch_cv)
    return objective_verdict(obj, sums, {c.key: c.label or c.setting_label for c in live},
                             {c.key: c.steps for c in live}, level=rule.test_level, margin_pct=rule.margin_pct,
                             concurrency=concurrency, workload=workload,
                             requests={c.key: c.requests for c in live})
