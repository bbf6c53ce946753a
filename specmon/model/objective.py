"""What a sweep optimises: throughput, a latency percentile, or goodput under an SLO.

Users judge a speculative setting by more than tok/s: the time to the first token and
between tokens at a percentile, and *goodput* (requests a second that meet a TTFT and an
ITL objective: AIPerf, llm-d, Dynamo's planner). ``--objective`` names one:

- ``tps``: the server's throughput (the log's or the counters' samples; the default);
- ``itl-pQ``: the Q-th percentile of the requests' inter-token latency, each request's
  ``(latency − TTFT) / (tokens − 1)`` (vLLM's benchmark calls it TPOT): lower is better;
- ``ttft-pQ``: the Q-th percentile of the requests' time to first token: lower is better;
- ``goodput:ttft=MS,itl=MS``: completed requests a second whose TTFT and ITL are within
  the limits (either may be left out): higher is better.

A request is timed only when its tokens came in more than one chunk spread over at least half
its latency (:attr:`specmon.control.load_report.RequestResult.timed`): a stream that arrived in
one burst (a buffering hop, a client starved of CPU) says nothing of when its first token came or
of the pace after it. Such requests are counted, not timed; goodput takes the share within the
limits among the timed ones.

The unit of evidence stays the **launch** (:mod:`specmon.model.launches`): each launch gives
one value, from the requests the load driver completed on it, with its within-launch
standard error, and the launches of every setting give the between-launch spread. So a
latency objective goes through the same two-level model, stopping rule and adjusted level
as tok/s does. A latency is carried *as its reciprocal* (a rate: higher is better, as the
rule expects); ``1 / quantile_q(latency) = quantile_{1−q}(1 / latency)``, so the ordering,
the separation test and every ratio are those of the latency itself, and the numbers are
turned back into milliseconds for the user (a ratio's interval inverts; a difference in
ms is not shown, because the interval is made on the rate's scale).

Within a launch a percentile is the Harrell-Davis estimate with its standard error
(``scipy.stats.mstats.hdquantiles`` / ``hdquantiles_sd``: smooth, with a known error, where the
plain order statistic jumps); a launch counts only with enough requests for its percentile
(:meth:`Objective.min_requests`: three beyond it). Goodput's error is the count's (Poisson).
The first wave of requests after a launch (one per client slot) met a cold server and a
ramp and is left out: :func:`request_figures`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from specmon.model.launches import Estimate, Launch, rests_on
from specmon.model.stats import Summary
from specmon.model.verdict import Answer, answer

__all__ = ["Objective", "ObjectiveError", "ObjectiveRow", "ObjectiveVerdict", "launch_value", "objective_verdict",
           "parse_objective", "request_figures"]

#: The default: the server's throughput.
TPS = "tps"
#: A request's figures as a segment keeps them: (TTFT seconds, ITL seconds), None where unknown; a
#: failed request is (None, None) and ``ok`` False.
RequestFigures = tuple[bool, float | None, float | None]

_QUANTILE = re.compile(r"^(itl|ttft)-p(\d{1,2}(?:\.\d{1,3})?)$")


class ObjectiveError(ValueError):
    """An objective that cannot be read (the message says what is accepted)."""


@dataclass(frozen=True, slots=True)
class Objective:
    """One objective (see the module docstring).

    Attributes:
        kind: ``tps``, ``itl``, ``ttft`` or ``goodput``.
        quantile: The percentile as a fraction (``itl``/``ttft`` only).
        ttft_ms: Goodput's TTFT limit, milliseconds (None: no limit).
        itl_ms: Goodput's ITL limit, milliseconds (None: no limit).
    """

    kind: str = TPS
    quantile: float | None = None
    ttft_ms: float | None = None
    itl_ms: float | None = None

    @property
    def is_tps(self) -> bool:
        return self.kind == TPS

    @property
    def token(self) -> str:
        """The canonical spelling (what ``--objective`` takes; kept in the state's identity)."""
        if self.kind in ("itl", "ttft"):
            assert self.quantile is not None
            return f"{self.kind}-p{_pct(self.quantile)}"
        if self.kind == "goodput":
            parts = [f"ttft={self.ttft_ms:g}" if self.ttft_ms is not None else "",
                     f"itl={self.itl_ms:g}" if self.itl_ms is not None else ""]
            return "goodput:" + ",".join(p for p in parts if p)
        return TPS

    @property
    def name(self) -> str:
        """``ITL p50``, ``TTFT p99``, ``goodput (TTFT ≤ 500 ms, ITL ≤ 50 ms)``, ``tok/s``."""
        if self.kind in ("itl", "ttft"):
            assert self.quantile is not None
            return f"{self.kind.upper()} p{_pct(self.quantile)}"
        if self.kind == "goodput":
            return f"goodput ({self.slo_text})"
        return "tok/s"

    @property
    def slo_text(self) -> str:
        """``TTFT ≤ 500 ms, ITL ≤ 50 ms``."""
        parts = ([f"TTFT ≤ {self.ttft_ms:g} ms"] if self.ttft_ms is not None else []) + (
            [f"ITL ≤ {self.itl_ms:g} ms"] if self.itl_ms is not None else [])
        return ", ".join(parts)

    @property
    def lower_is_better(self) -> bool:
        return self.kind in ("itl", "ttft")

    @property
    def unit(self) -> str:
        return "ms" if self.lower_is_better else ("req/s" if self.kind == "goodput" else "tok/s")

    def shown(self, internal: float) -> float:
        """A value in the user's unit from the internal rate (ms for a latency)."""
        if self.lower_is_better:
            return 1000.0 / internal if internal > 0 else math.inf
        return internal

    def shown_interval(self, low: float | None, high: float | None) -> tuple[float, float] | None:
        """An internal interval in the user's unit, low to high (a latency's bounds swap)."""
        if low is None or high is None:
            return None
        # A rate is never below 0: a latency's bound then has no end, a goodput's is 0.
        a, b = self.shown(max(low, 0.0)), self.shown(max(high, 0.0))
        return (min(a, b), max(a, b))

    def change_pct(self, internal_pct: float) -> float:
        """A change of the internal rate, in percent, as a change of the user's figure (a latency's inverts)."""
        if self.lower_is_better:
            return (100.0 / (100.0 + internal_pct) - 1.0) * 100.0 if internal_pct > -100 else math.inf
        return internal_pct

    def min_requests(self) -> int:
        """Requests a launch needs before its value counts: three beyond the percentile, at least 10."""
        if self.quantile is not None:
            tail = min(self.quantile, 1.0 - self.quantile)
            return max(10, math.ceil(3.0 / tail - 1e-9))
        return 10

    def to_json(self) -> dict[str, Any]:
        return {"objective": self.token, "name": self.name, "unit": self.unit,
                "lower_is_better": self.lower_is_better}


def _pct(q: float) -> str:
    return f"{100 * q:.3f}".rstrip("0").rstrip(".")


def parse_objective(text: str) -> Objective:
    """``tps``, ``itl-p50``, ``ttft-p99``, ``goodput:ttft=500,itl=50`` (see the module docstring).

    Raises:
        ObjectiveError: anything else, with what is accepted.
    """
    t = text.strip().lower()
    accepted = "tps, itl-pQ, ttft-pQ (Q a percentile: itl-p50, ttft-p99) or goodput:ttft=MS,itl=MS"
    if t == TPS:
        return Objective()
    m = _QUANTILE.match(t)
    if m:
        q = float(m.group(2)) / 100.0
        if not 0 < q < 1:
            raise ObjectiveError(f"{text!r}: the percentile is between 0 and 100 (exclusive)")
        return Objective(m.group(1), q)
    if t.startswith("goodput"):
        rest = t[len("goodput"):]
        if not rest.startswith(":") or not rest[1:]:
            raise ObjectiveError(f"{text!r}: goodput needs its limits, e.g. goodput:ttft=500,itl=50 (milliseconds)")
        limits: dict[str, float] = {}
        for part in rest[1:].split(","):
            key, eq, value = part.partition("=")
            key = key.strip()
            if not eq or key not in ("ttft", "itl") or key in limits:
                raise ObjectiveError(f"{text!r}: goodput's limits are ttft=MS and itl=MS, each once")
            try:
                v = float(value)
            except ValueError:
                raise ObjectiveError(f"{text!r}: {key}={value!r} is not a number of milliseconds") from None
            if not math.isfinite(v) or v <= 0:
                raise ObjectiveError(f"{text!r}: {key} must be a positive number of milliseconds")
            limits[key] = v
        return Objective("goodput", None, limits.get("ttft"), limits.get("itl"))
    raise ObjectiveError(f"unknown objective {text!r}: use {accepted}")


# --------------------------------------------------------------------------- one launch


def request_figures(results: Sequence[Any], concurrency: int, time_scale: float = 1.0) -> list[RequestFigures]:
    """Each request's ``(ok, TTFT s, ITL s)`` from a load run's results, the first wave left out.

    ``results`` are :class:`specmon.control.load_report.RequestResult`-like (``ok``,
    ``started_at``, ``latency_s``, ``ttft_s``, ``output_tokens``); times are scaled to the
    server's seconds by ``time_scale`` (the simulator's). The ``concurrency`` requests started
    first met a cold server and a ramp: they are not counted.
    """
    ordered = sorted(results, key=lambda r: r.started_at)[max(concurrency, 0):]
    out: list[RequestFigures] = []
    for r in ordered:
        if not r.ok:
            out.append((False, None, None))
            continue
        if not r.timed:
            # One chunk, or the chunks came in one burst (a buffering hop, a starved client): when the
            # first token arrived is not known, nor the pace after it. Counted, not timed.
            out.append((True, None, None))
            continue
        ttft = r.ttft_s * time_scale if r.ttft_s is not None else None
        itl = None
        if ttft is not None and r.output_tokens >= 2 and r.latency_s * time_scale > ttft:
            itl = (r.latency_s * time_scale - ttft) / (r.output_tokens - 1)
        out.append((True, ttft, itl))
    return out


def launch_value(obj: Objective, requests: Sequence[RequestFigures], seconds: float, name: str = "") -> Launch | None:
    """One launch's value of ``obj`` on the internal (higher is better) scale, with its error.

    None when the launch has too few requests for the objective (:meth:`Objective.min_requests`).
    """
    if obj.kind in ("itl", "ttft"):
        assert obj.quantile is not None
        idx = 2 if obj.kind == "itl" else 1
        rates = np.array([1.0 / r[idx] for r in requests if r[0] and r[idx] is not None and r[idx] > 0])  # type: ignore[operator]
        n = len(rates)
        if n < obj.min_requests():
            return None
        from scipy.stats.mstats import hdquantiles, hdquantiles_sd

        q = 1.0 - obj.quantile  # the slow tail of a latency is the low tail of its rate
        value = float(np.asarray(hdquantiles(rates, [q]))[0])
        se = float(np.asarray(hdquantiles_sd(rates, [q]))[0])
        return Launch(value, se, float(n - 1), n, name)
    if obj.kind == "goodput":
        n = len(requests)
        if n < obj.min_requests() or seconds <= 0:
            return None
        completed = sum(1 for ok, _, _ in requests if ok)
        timed = [(t, i) for ok, t, i in requests if ok and (t is not None or i is not None)]
        if len(timed) < obj.min_requests():
            return None
        good = sum(1 for t, i in timed if _within(obj, t, i))
        # The completed requests a second, times the share of the timed ones within the limits (an
        # untimed request's latency is unknown, not bad). No request within them still has a rate to
        # compare: half a request.
        value = max(good, 0.5) / len(timed) * completed / seconds
        return Launch(value, value / math.sqrt(max(good, 1)), float(n - 1), n, name)
    raise ValueError("tok/s launches come from the throughput samples")


def _within(obj: Objective, ttft: float | None, itl: float | None) -> bool:
    if obj.ttft_ms is not None and (ttft is None or ttft * 1000.0 > obj.ttft_ms):
        return False
    return not (obj.itl_ms is not None and (itl is None or itl * 1000.0 > obj.itl_ms))


def good_share(obj: Objective, requests: Sequence[RequestFigures]) -> float | None:
    """The share of requests within goodput's limits (None without requests)."""
    if not requests:
        return None
    return sum(1 for ok, t, i in requests if ok and _within(obj, t, i)) / len(requests)


# --------------------------------------------------------------------------- the verdict


@dataclass(frozen=True, slots=True)
class ObjectiveRow:
    """One setting under the objective (values in the user's unit)."""

    key: Hashable
    label: str
    steps: int
    launches: int
    requests: int
    value: float
    ci95: tuple[float, float] | None
    covers: str
    summary: Summary
    #: Against the best, percent of the best's figure (None for the best itself).
    vs_best_pct: float | None = None

    def to_json(self) -> dict[str, Any]:
        return {"label": self.label, "steps": self.steps, "launches": self.launches, "requests": self.requests,
                "value": _r(self.value), "ci95": None if self.ci95 is None else [_r(v) for v in self.ci95],
                "interval_covers": self.covers, "vs_best_pct": _r(self.vs_best_pct)}


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 3)


@dataclass(frozen=True, slots=True)
class ObjectiveVerdict:
    """The sweep's answer on ``objective`` at one concurrency (and workload).

    ``separated`` is the same adjusted test the sweep stopped on, made on the internal
    rate (a latency's reciprocal), so it is the latency's own ordering.
    """

    objective: Objective
    concurrency: int | None
    workload: str | None
    rows: tuple[ObjectiveRow, ...]
    separated: bool
    equivalent: bool
    level: float
    margin_pct: float
    #: Best against the runner-up in percent of the runner-up's figure, with the adjusted interval.
    diff_pct: tuple[float, float | None, float | None] | None
    sentence: str

    @property
    def best(self) -> ObjectiveRow | None:
        return self.rows[0] if self.rows else None

    @property
    def runner_up(self) -> ObjectiveRow | None:
        return self.rows[1] if len(self.rows) > 1 else None

    @property
    def winner_steps(self) -> int | None:
        return self.rows[0].steps if self.rows and self.separated else None

    @property
    def answer(self) -> Answer:
        """What every surface draws: ★ only for a declared winner (:mod:`specmon.model.verdict`)."""
        best, runner = self.best, self.runner_up
        return answer(leader=best.label if best else None, runner_up=runner.label if runner else None,
                      separated=self.separated, equivalent=self.equivalent, sentence=self.sentence,
                      leader_steps=best.steps if best else None, runner_up_steps=runner.steps if runner else None,
                      measure=self.objective.name, level=self.level)

    def candidates(self) -> list[tuple[int, Summary]]:
        """Every setting's step count and internal summary (what a schedule is chosen from)."""
        return [(r.steps, r.summary) for r in self.rows]

    def to_json(self) -> dict[str, Any]:
        best, runner = self.best, self.runner_up
        d = self.diff_pct
        return {
            **self.objective.to_json(),
            "concurrency": self.concurrency,
            **({"workload": self.workload} if self.workload else {}),
            "best": best.label if best else None,
            "best_steps": best.steps if best else None,
            "best_value": _r(best.value) if best else None,
            "best_ci95": [_r(v) for v in best.ci95] if best and best.ci95 else None,
            "runner_up": runner.label if runner else None,
            "separated": self.separated,
            "equivalent": self.equivalent,
            "winner_steps": self.winner_steps,
            "diff_pct": None if d is None else _r(d[0]),
            "diff_pct_interval": None if d is None or d[1] is None else [_r(d[1]), _r(d[2])],
            "diff_level": round(self.level, 5),
            "margin_pct": self.margin_pct,
            "rows": [r.to_json() for r in self.rows],
            "sentence": self.sentence,
            "answer": self.answer.to_json(),
        }


def _signed(x: float) -> str:
    """``+12.3``; an interval with no end (a rate's bound at 0) reads ``+∞``."""
    return f"{x:+.1f}" if math.isfinite(x) else ("+∞" if x > 0 else "−∞")


def _better_word(obj: Objective) -> tuple[str, str]:
    return ("lower", "higher") if obj.lower_is_better else ("higher", "lower")


def _value_text(obj: Objective, v: float) -> str:
    if not math.isfinite(v):
        return "unbounded"
    if obj.unit == "ms":
        return f"{v:.1f} ms" if v < 1000 else f"{v / 1000:.2f} s"
    return f"{v:.3g} {obj.unit}" if obj.unit == "req/s" else f"{v:.1f} {obj.unit}"


def objective_verdict(obj: Objective, summaries: Mapping[Hashable, Summary], labels: Mapping[Hashable, str],
                      steps: Mapping[Hashable, int], *, level: float, margin_pct: float,
                      concurrency: int | None = None, workload: str | None = None,
                      requests: Mapping[Hashable, int] | None = None) -> ObjectiveVerdict:
    """The verdict on ``obj`` from each setting's two-level summary (internal scale, launches as units).

    Args:
        summaries: :func:`specmon.experiment.stats.design.summaries` of the objective's launches.
        labels: Each setting's name; ``steps``: its step count.
        level: The adjusted level the sweep stopped on; ``margin_pct``: its equivalence margin.
        requests: Requests counted per setting (for the rows).
    """
    from specmon.model.stopping import adjusted_difference

    ranked = sorted(summaries, key=lambda k: -summaries[k].mean)
    rows: list[ObjectiveRow] = []
    at = (f" at concurrency {concurrency}" if concurrency else "") + (f" on the {workload} prompts" if workload else "")
    if not ranked:
        return ObjectiveVerdict(obj, concurrency, workload, (), False, False, level, margin_pct, None,
                                f"No setting has a {obj.name} yet{at}: each launch needs "
                                f"{obj.min_requests()} requests after its first wave.")
    best_s = summaries[ranked[0]]
    for k in ranked:
        s = summaries[k]
        est = s.model if isinstance(s.model, Estimate) else None
        vs = None
        if k != ranked[0] and best_s.mean > 0:
            vs = obj.change_pct((s.mean / best_s.mean - 1.0) * 100.0)
        rows.append(ObjectiveRow(k, labels.get(k, str(k)), steps.get(k, 0), s.batches,
                                 (requests or {}).get(k, s.n), obj.shown(s.mean),
                                 obj.shown_interval(s.ci95_low, s.ci95_high),
                                 est.covers() if est is not None else f"{s.batches} launches", s, vs))
    best = rows[0]
    better, worse = _better_word(obj)
    ci = f", 95% CI {_value_text(obj, best.ci95[0])}–{_value_text(obj, best.ci95[1])}" if best.ci95 else ""
    head = f"{best.label} has the {'lowest' if obj.lower_is_better else 'highest'} {obj.name}{at}: " \
           f"{_value_text(obj, best.value)} ({best.covers}{ci})"
    separated = equivalent = False
    diff_pct = None
    tail = "; nothing else to compare with."
    if len(rows) > 1:
        runner = rows[1]
        rs = summaries[runner.key]
        d = adjusted_difference(best_s, rs, level)
        separated = d.known and d.low > 0 and rs.mean > 0  # type: ignore[operator]
        margin = margin_pct / 100.0 * best_s.mean
        equivalent = (not separated and d.known and rs.mean > 0 and -margin < d.low  # type: ignore[operator]
                      and d.high < margin)  # type: ignore[operator]
        pct = obj.change_pct((best_s.mean / rs.mean - 1.0) * 100.0 if rs.mean > 0 else math.inf)
        bounds: tuple[float, float] | None = None
        if d.low is not None and d.high is not None and rs.mean > 0:
            a, b = obj.change_pct(d.low / rs.mean * 100.0), obj.change_pct(d.high / rs.mean * 100.0)
            bounds = (min(a, b), max(a, b))
        diff_pct = (pct, bounds[0] if bounds else None, bounds[1] if bounds else None)
        lv = f"{100 * level:.2f}%"
        if separated and bounds is not None:
            lo, hi = sorted((abs(bounds[0]), abs(bounds[1])))
            tail = (f"; {abs(pct):.1f}% {better} than {runner.label} ({lv} interval {lo:.1f}…{hi:.1f}% {better}, "
                    "adjusted for repeated looks).")
        elif equivalent and bounds is not None:
            tail = (f"; {runner.label} is equivalent within ±{margin_pct:g}% ({lv} interval of the difference "
                    f"{_signed(bounds[0])}…{_signed(bounds[1])}%): either will do.")
        elif bounds is not None:
            tail = (f"; {runner.label} is not distinguishable ({lv} interval of the difference "
                    f"{_signed(bounds[0])}…{_signed(bounds[1])}%, wider than ±{margin_pct:g}%): no winner declared.")
        else:
            tail = f"; {runner.label} is not distinguishable: no winner declared."
    ests = [(r.label, r.summary.model) for r in rows if isinstance(r.summary.model, Estimate)]
    if ests:
        first = ests[0][1]
        assert isinstance(first, Estimate)
        tail += " " + rests_on([(n, e) for n, e in ests if isinstance(e, Estimate)], first.between)
    return ObjectiveVerdict(obj, concurrency, workload, tuple(rows), separated, bool(equivalent), level,
                            margin_pct, diff_pct, head + tail)
