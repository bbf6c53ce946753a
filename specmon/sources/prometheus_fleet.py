"""A fleet read through Prometheus: every replica's rates, one query per figure, every few seconds.

With hundreds of replicas, one SSH connection (or one ``/metrics`` scrape) per replica is
not how they are read: their Prometheus already scrapes them all. :class:`PrometheusFleetSource`
asks its HTTP API (``POST /api/v1/query``) the queries of :func:`specmon.sources.promql.fleet_queries`
— generated tok/s, accept length and accept rate per instance for each engine with counters,
and ``up`` — all at once, and hands back one :class:`Poll`. Prometheus computes the rates;
nothing here differences counters.

Bounded: each request has a timeout, the whole poll has one too (:attr:`timeout_s`), an
answer is read up to :data:`MAX_ANSWER_BYTES` as it streams in (refused past it, before its
bytes are decoded: memory stays bounded whatever Prometheus sends), and at most
:data:`MAX_INSTANCES` instances are kept. A figure out of its range (a negative rate, an
acceptance rate outside 0..1: :data:`FIGURE_RANGES`) is left out, never shown, and counted
(:attr:`Poll.refused`). A Prometheus that is down, slow or refuses a query gives a Poll with a
``problem`` sentence instead of raising: the fleet shows it as state and keeps its last figures.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx

from specmon.records import Engine
from specmon.sources.promql import FleetQuery, PromAnswerError, Selector, fleet_queries, parse_vector

__all__ = ["MAX_ANSWER_BYTES", "MAX_INSTANCES", "InstanceFigures", "Poll", "PrometheusFleetSource"]

#: Bytes one answer may have (a thousand instances take about 150 KB, MAX_INSTANCES under 1 MB;
#: json makes ten times its size in objects: 16 MB allowed a 200 MB peak).
MAX_ANSWER_BYTES = 4 << 20
#: Each figure's range, both ends included: a value outside is refused (None), not shown.
FIGURE_RANGES: dict[str, tuple[float, float]] = {
    "tps": (0.0, 1e7), "accept_len": (1.0, 65.0), "accept_rate": (0.0, 1.0), "spec_tokens": (0.0, 1024.0),
    "up": (0.0, 1.0),
}
#: Instances read from one answer (more are left out, and the poll says so).
MAX_INSTANCES = 5000


@dataclass(slots=True)
class InstanceFigures:
    """What one poll says of one instance (None: that figure is not there).

    Attributes:
        engine: The engine whose counters it exports (None: it is only in ``up``).
        tps: Generated tokens per second over the rate window.
        accept_len: 1 + rate(accepted) / rate(drafts).
        accept_rate: rate(accepted) / rate(draft tokens).
        spec_tokens: Draft tokens per step, where the engine's counters tell it.
        up: The target's ``up`` (1 scraped, 0 not), when the selector names target labels.
    """

    engine: Engine | None = None
    tps: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    spec_tokens: int | None = None
    up: float | None = None


@dataclass(frozen=True, slots=True)
class Poll:
    """One poll of Prometheus.

    Attributes:
        at: When it started (the source's clock).
        took_s: How long it took.
        instances: Per instance label, what it said (empty when it failed).
        problem: Why it failed (None: every query answered).
        dropped: Instances left out past :data:`MAX_INSTANCES`.
        refused: Figures left out as out of their range (:data:`FIGURE_RANGES`).
    """

    at: float
    took_s: float
    instances: dict[str, InstanceFigures] = field(default_factory=dict)
    problem: str | None = None
    dropped: int = 0
    refused: int = 0

    @property
    def ok(self) -> bool:
        """Whether every query answered."""
        return self.problem is None


@dataclass
class PrometheusFleetSource:
    """Asks a Prometheus for a fleet's rates.

    Args:
        url: Prometheus's base URL (``http://127.0.0.1:9090``; a path prefix behind a proxy is kept).
        selector: The fleet's replicas (checked: :func:`specmon.sources.promql.parse_selector`).
        window_s: The rate window, in seconds.
        engine: Only this engine's counters (None: every engine with counters).
        timeout_s: Bound on one poll, every query included.
        clock: Wall clock, for :attr:`Poll.at`.
    """

    url: str
    selector: Selector
    window_s: int = 60
    engine: Engine | None = None
    timeout_s: float = 4.0
    clock: Callable[[], float] = time.time
    queries: tuple[FleetQuery, ...] = field(init=False)
    _client: httpx.AsyncClient | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        self.queries = fleet_queries(self.selector, self.window_s, self.engine)

    @property
    def endpoint(self) -> str:
        """``.../api/v1/query``."""
        return self.url.rstrip("/") + "/api/v1/query"

    async def poll(self) -> Poll:
        """Run every query at once; never raises for Prometheus's sake, never takes longer than :attr:`timeout_s`."""
        if self._client is None:
            # No proxy from the environment: a fleet's Prometheus is named by the profile, as given.
            self._client = httpx.AsyncClient(timeout=self.timeout_s, trust_env=False,
                                             limits=httpx.Limits(max_connections=4))
        started = self.clock()
        t0 = time.monotonic()
        try:
            async with asyncio.timeout(self.timeout_s):
                answers = await asyncio.gather(*(self._ask(q.expr) for q in self.queries))
        except TimeoutError:
            return Poll(started, time.monotonic() - t0,
                        problem=f"Prometheus at {self.url} did not answer within {self.timeout_s:g} s")
        except (httpx.HTTPError, OSError) as exc:
            return Poll(started, time.monotonic() - t0,
                        problem=f"cannot reach Prometheus at {self.url} ({type(exc).__name__}: {exc or 'no detail'})")
        except PromAnswerError as exc:
            return Poll(started, time.monotonic() - t0, problem=f"Prometheus at {self.url}: {exc}")
        instances: dict[str, InstanceFigures] = {}
        dropped: set[str] = set()
        refused = 0
        for query, values in zip(self.queries, answers, strict=True):
            lo, hi = FIGURE_RANGES.get(query.figure, (-math.inf, math.inf))
            for instance, value in values.items():
                figures = instances.get(instance)
                if figures is None:
                    if len(instances) >= MAX_INSTANCES:
                        dropped.add(instance)
                        continue
                    figures = instances[instance] = InstanceFigures()
                if value is not None and not lo <= value <= hi:
                    value = None  # (a counter reset mid-window, a mislabelled series: not a figure)
                    refused += 1
                _put(figures, query, value)
        return Poll(started, time.monotonic() - t0, instances, dropped=len(dropped), refused=refused)

    async def _ask(self, expr: str) -> dict[str, float | None]:
        assert self._client is not None
        async with self._client.stream("POST", self.endpoint, data={"query": expr},
                                       headers={"Accept-Encoding": "identity"}) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                raise PromAnswerError(f"an answer is larger than {MAX_ANSWER_BYTES >> 20} MB")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER_BYTES:
                    raise PromAnswerError(f"an answer is larger than {MAX_ANSWER_BYTES >> 20} MB")
        try:
            answer = json.loads(body)
        except ValueError:
            raise PromAnswerError(f"HTTP {response.status_code}, and the answer is not JSON "
                                  "(is this Prometheus's address?)") from None
        # A 400 with a JSON error (a bad selector regex) says its own sentence; parse_vector reads it.
        return parse_vector(answer, limit=MAX_INSTANCES)

    async def close(self) -> None:
        """Close the HTTP connections."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _put(figures: InstanceFigures, query: FleetQuery, value: float | None) -> None:
    if query.figure == "up":
        figures.up = value
        return
    if figures.engine is None:
        figures.engine = query.engine
    elif figures.engine is not query.engine:
        return  # an instance exporting two engines' counters: the first engine's figures stay
    if query.figure == "tps":
        figures.tps = value
    elif query.figure == "accept_len":
        figures.accept_len = value
    elif query.figure == "accept_rate":
        figures.accept_rate = value
    elif query.figure == "spec_tokens" and value is not None:
        figures.spec_tokens = round(value)
