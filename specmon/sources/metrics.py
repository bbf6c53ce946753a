"""The engine's own counters as a source: Prometheus ``/metrics`` scraped about once a second.

A server log gives one throughput figure per logging interval (vLLM: 10 s by
default), so a decision needs minutes of it. The engine's counters can be read
as often as we like: the difference of two scrapes is an exact count of what
the engine did in between. :class:`MetricsScraper` reads ``/metrics`` every
``interval_s`` (through the SSH local port forward for a remote server, or
directly for a local one) and turns each difference into a
:class:`CounterSample`:

* **vLLM** (counters): ``vllm:generation_tokens_total`` gives tok/s;
  ``vllm:spec_decode_num_drafts_total``, ``..._num_draft_tokens_total``,
  ``..._num_accepted_tokens_total`` and ``..._num_accepted_tokens_per_pos_total``
  give accept length ``1 + accepted/drafts``, acceptance rate
  ``accepted/draft_tokens`` and per-position acceptance ``accepted[pos]/drafts``
  — the same definitions as vLLM's own ``SpecDecoding metrics`` log line.
  Series summed over label sets (several engines/ranks add up).
* **llama.cpp** (``llama-server --metrics``, checked on build 11434): the same
  spec counters under ``llamacpp:`` (``spec_decode_num_drafts_total``,
  ``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total``,
  ``..._num_accepted_tokens_per_pos_total{position="N"}``; the per-position series
  appear once a draft was accepted), plus ``llamacpp:tokens_predicted_total`` and
  ``llamacpp:tokens_predicted_seconds_total``. llama.cpp adds a request's totals
  to every counter when the request *finishes* (``metrics_on_prediction`` at slot
  release), so a sample is "the requests that finished since the last scrape",
  and its tok/s is their tokens over their own generation time
  (Δtokens_predicted / Δtokens_predicted_seconds: the decode speed per request
  stream, like the log's ``eval time ... tokens per second``). Tokens over wall
  time would put a ten-second request's tokens into one second. At concurrency 1
  the two are the same thing minus prefill and idle gaps; at concurrency c the
  engine's seconds overlap, so it is the speed of one stream, not the server's sum.
  A server started without ``--metrics`` answers HTTP 501.
* **SGLang** (``--enable-metrics``; checked on 0.5.23, ``tests/data/metrics/``): its
  speed and acceptance are *gauges* the scheduler sets at every decode log line, to
  the very figures that line prints for its interval (``sglang:gen_throughput``,
  ``sglang:spec_accept_length``, ``sglang:spec_accept_rate``); a sample is taken when
  they change, never once per scrape (a gauge read twice is one measurement, not two).
  ``sglang:spec_num_steps`` and ``sglang:spec_num_draft_tokens`` are gauges of the
  active setting (0 until the first decode line): :attr:`Snapshot.sglang_setting`.
  The *counters* ``sglang:generation_tokens_total`` and ``sglang:spec_verify_calls_total``
  advance only when a request **finishes** (the tokenizer manager adds its completion
  tokens and verify passes), so their differences count the requests that finished
  between two scrapes: too coarse to time, but exact for acceptance.
  :func:`sglang_accept_length` is Δtokens / Δverify passes — SGLang's own per-request
  ``spec_accept_length`` (``completion_tokens / spec_verify_ct``) pooled over those
  requests, the prefill's first token included (+1/verify passes per request against
  the log's accepted-tokens-per-verify).

Counter resets (a restart) are found by any counter going down: that interval
is dropped and counting starts again from the new values. A value out of its series' range
(a counter below 0, infinite or NaN; an acceptance rate outside 0..1; see :data:`RANGES`) is
refused where the text becomes numbers, as if the series were not there, and counted
(:attr:`Snapshot.refused`, :attr:`MetricsScraper.refused_values`): never shown. A derived
figure that cannot be (more tokens accepted than drafted) is left out the same way. An answer
is read up to :data:`MAX_SCRAPE_BYTES` (an engine's is 20-300 KB): past that the scrape fails
and says the cap, and memory stays bounded whatever a server sends. Missing series are
simply absent figures (a server without speculation has no spec counters). A
server without ``/metrics`` (404, connection refused, no known series) leaves
:attr:`MetricsScraper.available` false with a reason: the caller falls back
to the log and says so.

The text format is parsed with ``prometheus_client.parser``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import cast

import httpx
from prometheus_client.parser import text_string_to_metric_families

from specmon.engines import ADAPTERS, CounterNames, adapter
from specmon.engines.base import GaugeNames
from specmon.model.adaptive import SettingTracker
from specmon.model.latency import Buckets
from specmon.records import Engine

# Each engine's counter names are its module's (specmon.engines); the constants name the ones
# read below by engine.
_VLLM_C = cast(CounterNames, adapter(Engine.VLLM).counters)
_LLAMA_C = cast(CounterNames, adapter(Engine.LLAMACPP).counters)
VLLM_GEN, VLLM_DRAFTS, VLLM_DRAFT_TOKENS, VLLM_ACCEPTED = (
    _VLLM_C.gen, cast(str, _VLLM_C.drafts), _VLLM_C.draft_tokens, _VLLM_C.accepted)
VLLM_PER_POS = cast(str, _VLLM_C.per_position)
#: Gauge names by engine name, for the engines read through gauges (SGLang's), and SGLang's own
#: (its accept length from its counters, below).
_GAUGE_NAMES = {a.engine.value: a.gauges for a in ADAPTERS if a.gauges is not None}
_SGL = cast(GaugeNames, adapter(Engine.SGLANG).gauges)
SGL_GEN_TPS, SGL_ACCEPT_LEN, SGL_ACCEPT_RATE = _SGL.figures
SGL_GEN, SGL_VERIFY, SGL_REQUESTS = cast(tuple[str, str, str], _SGL.counters)
SGL_NUM_STEPS, SGL_NUM_DRAFT_TOKENS = cast(tuple[str, str], _SGL.setting)
#: The gauge engines' counters (finished requests): a restart is seen by them going down.
_SGL_COUNTERS = tuple(n for g in _GAUGE_NAMES.values() for n in g.counters)
LLAMA_GEN, LLAMA_GEN_S = _LLAMA_C.gen, cast(str, _LLAMA_C.gen_seconds)
#: Per-position series of every engine that exports them: name -> (its position label, drafted?).
_PER_POS = {name: (c.position_label, drafted) for a in ADAPTERS if (c := a.counters) is not None
            for name, drafted in ((c.per_position, False), (c.drafted_per_position, True)) if name}
#: The engines' per-request histograms (sums and counts; vLLM's, LMDeploy's): decode time is first
#: to last token of a request.
_HISTOGRAMS = tuple(n for a in ADAPTERS if (c := a.counters) is not None
                    for n in (c.request_tokens, c.request_count, c.request_decode_s) if n)


#: Bytes of one ``/metrics`` answer read at most (an engine's is 20-300 KB; a 200 MB answer was
#: read whole and lifted memory to 349 MB). Asked for uncompressed: the cap is on what is parsed.
MAX_SCRAPE_BYTES = 4 << 20
#: The largest value a counter may hold (a float counts exactly to 2**53).
MAX_COUNTER = float(2**53)
#: Each read gauge's range, both ends included; a value outside is refused. Counters: 0..MAX_COUNTER.
RANGES: dict[str, tuple[float, float]] = {
    "sglang:gen_throughput": (0.0, 1e7),  # tok/s of a whole server
    "sglang:spec_accept_length": (0.0, 65.0),  # 1 + accepted per step (0 before the first decode line)
    "sglang:spec_accept_rate": (0.0, 1.0),
    "sglang:spec_num_steps": (0.0, 1024.0),
    "sglang:spec_num_draft_tokens": (0.0, 1024.0),
}


def value_ok(name: str, value: float) -> bool:
    """Whether a series' value is in its range (:data:`RANGES`; a counter or bucket 0..MAX_COUNTER)."""
    lo, hi = RANGES.get(name, (0.0, MAX_COUNTER))
    return lo <= value <= hi  # (NaN fails both)


#: Seconds of latency histograms a scraper keeps (a window of a minute, and room to find its start).
LATENCY_KEEP_S = 180.0
#: The latency histograms' bucket series, by the histogram's base name they belong to.
_BUCKETS = {f"{name}_bucket": name for a in ADAPTERS if a.latency for name in a.latency}
#: Counter names by engine name, for the engines that export counters.
_NAMES = {a.engine.value: a.counters for a in ADAPTERS if a.counters is not None}
_COUNTERS = tuple(n for names in _NAMES.values() for n in names.counters)
_GAUGES = tuple(n for g in _GAUGE_NAMES.values() for n in g.figures)
#: Gauges of the active speculative setting (averaged over ranks as the others; not samples).
_SETTING_GAUGES = tuple(n for g in _GAUGE_NAMES.values() for n in g.setting)
#: The engines whose series a scrape recognises, and what each needs to export them.
_LABELS = [a.label for a in ADAPTERS if a.metric_prefix]
_ENGINES = ", ".join(_LABELS[:-1]) + " or " + _LABELS[-1] if len(_LABELS) > 1 else "".join(_LABELS)
_HINTS = "; ".join(a.metrics_hint for a in ADAPTERS if a.metric_prefix and a.metrics_hint)


@dataclass(frozen=True, slots=True)
class Snapshot:
    """One scrape: the series specmon reads (None when the server does not export one)."""

    t: float
    values: dict[str, float]
    #: Accepted tokens by draft position (summed over label sets).
    per_pos: tuple[float, ...] | None = None
    #: The engines' latency histograms: name -> (upper bound, cumulative count), summed over label sets.
    buckets: dict[str, Buckets] = field(default_factory=dict)
    #: Drafted tokens by draft position, where the engine counts drafts so (TensorRT-LLM).
    drafted_pos: tuple[float, ...] | None = None
    #: Values refused as out of their series' range (the first few, as ``name = value``), and how many.
    refused: tuple[str, ...] = ()
    refused_count: int = 0

    @property
    def engine(self) -> str | None:
        """The engine's name (``vllm``) by the series seen; None when none is there."""
        for ad in ADAPTERS:
            if ad.metric_prefix and any(k.startswith(ad.metric_prefix) for k in self.values):
                return ad.engine.value
        return None

    def get(self, name: str) -> float | None:
        """A series' value (summed over label sets), or None."""
        return self.values.get(name)

    @property
    def sglang_setting(self) -> tuple[int, int] | None:
        """SGLang's active (steps, draft tokens) from its gauges; None before the first decode
        line has set them (both 0) or without the series. NGRAM reports 0 steps."""
        g = _GAUGE_NAMES.get(self.engine or "")
        if g is None or g.num_steps is None or g.num_draft_tokens is None:
            return None
        steps, tokens = self.get(g.num_steps), self.get(g.num_draft_tokens)
        if steps is None or tokens is None or (steps == 0 and tokens == 0):
            return None
        return round(steps), round(tokens)


def parse_snapshot(text: str, t: float) -> Snapshot:
    """Read the series specmon uses from Prometheus text.

    Raises:
        ValueError: the text is not the Prometheus exposition format.
    """
    wanted = set(_COUNTERS) | set(_GAUGES) | set(_SETTING_GAUGES) | set(_HISTOGRAMS) | set(_SGL_COUNTERS)
    values: dict[str, float] = {}
    per_pos: dict[int, float] = {}
    drafted_pos: dict[int, float] = {}
    gauge_seen: dict[str, float] = {}
    hist: dict[str, dict[float, float]] = {}
    refused: list[str] = []
    n_refused = 0
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            if (s.name in _BUCKETS or s.name in _PER_POS or s.name in wanted) and not value_ok(s.name, s.value):
                # (out of range: as if the series were not there; a NaN gauge is "no value yet")
                if not math.isnan(s.value) or s.name not in wanted:
                    n_refused += 1
                    if len(refused) < 3:
                        refused.append(f"{s.name} = {s.value:g}")
                continue
            if s.name in _BUCKETS:
                try:
                    le = float(s.labels.get("le", ""))
                except ValueError:
                    continue
                by_le = hist.setdefault(_BUCKETS[s.name], {})
                by_le[le] = by_le.get(le, 0.0) + s.value
            elif s.name in _PER_POS:
                label, drafted = _PER_POS[s.name]
                try:
                    pos = int(s.labels.get(label, ""))
                except ValueError:
                    continue
                into = drafted_pos if drafted else per_pos
                into[pos] = into.get(pos, 0.0) + s.value
            elif s.name in wanted:
                if s.name in _GAUGES or s.name in _SETTING_GAUGES:
                    # A gauge per rank/DP group: their mean is the server's figure.
                    gauge_seen[s.name] = gauge_seen.get(s.name, 0.0) + 1
                values[s.name] = values.get(s.name, 0.0) + s.value
    for name, count in gauge_seen.items():
        values[name] /= count
    buckets = {name: tuple(sorted(by_le.items())) for name, by_le in hist.items()}
    return Snapshot(t, values, _positions(per_pos), buckets, _positions(drafted_pos), tuple(refused), n_refused)


def _positions(by_pos: dict[int, float]) -> tuple[float, ...] | None:
    """Per-position values from position 0 on, a missing position as 0 (its series not made yet)."""
    if not by_pos or min(by_pos) < 0:
        return None
    return tuple(by_pos.get(i, 0.0) for i in range(max(by_pos) + 1))


@dataclass(frozen=True, slots=True)
class CounterSample:
    """What the engine did between two scrapes.

    Attributes:
        t: Time of the later scrape (the scraper's clock).
        dt: Seconds between the two scrapes.
        tokens: Tokens generated in between (None for gauge-based SGLang samples).
        throughput: Generated tok/s.
        accept_len: Mean acceptance length (accepted drafts + the bonus token per step).
        accept_rate: Accepted draft tokens over drafted tokens (0..1).
        per_position: Acceptance rate of each draft position (0..1).
        drafts: Speculative steps in between (vLLM), weights the per-position figures.
    """

    t: float
    dt: float
    tokens: float | None
    throughput: float | None
    accept_len: float | None = None
    accept_rate: float | None = None
    per_position: tuple[float, ...] | None = None
    drafts: float = 0.0


def difference(prev: Snapshot, cur: Snapshot) -> CounterSample | None:
    """The sample between two scrapes of an engine with counters; None when nothing was generated
    or a counter reset.

    A counter that went down means the server restarted: no sample (the caller
    takes ``cur`` as the new base).
    """
    dt = cur.t - prev.t
    names = _NAMES.get(cur.engine or "")
    if dt <= 0 or names is None or prev.engine != cur.engine:
        return None
    if _went_down(prev, cur):
        return None
    tokens = _counted(prev, cur, names.gen)
    if tokens is None or tokens <= 0:
        return None  # idle: an interval without load says nothing about speed
    throughput: float | None = tokens / dt
    if names.gen_seconds is not None:
        seconds = _counted(prev, cur, names.gen_seconds)
        # Seconds from each request's first token to its last leave that first token out.
        timed = tokens - ((_counted(prev, cur, names.gen_requests) or 0.0) if names.gen_requests else 0.0)
        throughput = timed / seconds if seconds is not None and seconds > 0 and timed > 0 else None
    accept_len = accept_rate = None
    per_position = None
    drafts = 0.0
    accepted = _counted(prev, cur, names.accepted)
    drafted = _counted(prev, cur, names.draft_tokens)
    if accepted is not None and drafted is not None and drafted > 0:
        accept_rate = accepted / drafted
    per_pos = _position_deltas(prev.per_pos, cur.per_pos)
    if names.drafts is not None:
        d = _counted(prev, cur, names.drafts)
        if d is not None and d > 0 and accepted is not None:
            drafts = d
            accept_len = 1.0 + accepted / drafts
        else:
            accept_rate = None  # (no draft counted: the server did not speculate in between)
    else:
        # Drafts counted by position (TensorRT-LLM): every draft drafts its first position. Its
        # per-position counters count the same requests, so the length comes from them alone.
        by_pos = _position_deltas(prev.drafted_pos, cur.drafted_pos)
        if by_pos and by_pos[0] > 0:
            drafts = by_pos[0]
            # A position drafted but never accepted has no accepted series yet: it accepted 0.
            per_pos = _padded(per_pos or (), len(by_pos)) or per_pos
            accept_len = 1.0 + sum(per_pos or ()) / drafts
    if drafts > 0 and per_pos is not None:
        per_position = tuple(v / drafts for v in per_pos)
    # Counters that cannot be (more accepted than drafted, a position accepted more often than
    # drafted): figures out of their range are left out, never shown.
    if accept_rate is not None and not 0.0 <= accept_rate <= 1.0:
        accept_rate = accept_len = None
    if per_position is not None and not all(0.0 <= v <= 1.0 for v in per_position):
        per_position = None
    if accept_len is not None and not 1.0 <= accept_len <= RANGES[SGL_ACCEPT_LEN][1]:
        accept_len = None
    if throughput is not None and not 0.0 <= throughput <= RANGES[SGL_GEN_TPS][1]:
        throughput = None
    return CounterSample(cur.t, dt, tokens, throughput, accept_len, accept_rate, per_position, drafts)


def _position_deltas(before: tuple[float, ...] | None, after: tuple[float, ...] | None) -> tuple[float, ...] | None:
    """Per-position differences; a position with no series before counted nothing (llama.cpp and
    TensorRT-LLM add a position's series once it counts). None without series, or with fewer after."""
    if after is None:
        return None
    padded = _padded(before or (), len(after))
    if padded is None:
        return None
    return tuple(b - a for a, b in zip(padded, after, strict=True))


def decode_speed(prev: Snapshot, cur: Snapshot) -> float | None:
    """The engine's own per-request decode speed over the requests that finished between two scrapes.

    The same definition as the load driver's per-request ``decode_tps`` (tokens after
    the first over the time from the first to the last token), pooled over requests
    (Σ tokens / Σ seconds), measured by the server: vLLM's ``request_generation_tokens``
    and ``request_decode_time_seconds`` histograms (``(Σtokens − requests) / Σdecode``,
    as vLLM's own time per output token leaves the prefill's token out), llama.cpp's
    ``tokens_predicted_total / tokens_predicted_seconds_total``. Unlike
    :attr:`CounterSample.throughput` of vLLM (tokens over wall time), it leaves out
    prefill and the gaps between requests. None when no request finished, or the
    engine does not export them.
    """
    names = _NAMES.get(cur.engine or "")
    if names is not None and names.gen_seconds is not None and names.gen_requests is None:
        # Its counters time generation itself (llama.cpp's tokens_predicted_seconds_total): the
        # first token is in the seconds, so no request's first token is taken out.
        tokens, seconds, requests = _delta(prev, cur, names.gen), _delta(prev, cur, names.gen_seconds), 0.0
    elif names is not None and names.request_tokens and names.request_decode_s and names.request_count:
        # Its per-request histograms (vLLM's, LMDeploy's): the first token is not in the decode seconds.
        tokens, seconds = _delta(prev, cur, names.request_tokens), _delta(prev, cur, names.request_decode_s)
        requests = _delta(prev, cur, names.request_count) or 0.0
        if requests <= 0:
            return None
    else:
        return None  # no per-request figures exported
    if tokens is None or seconds is None or seconds <= 0 or tokens - requests <= 0:
        return None
    return (tokens - requests) / seconds


def _counted(prev: Snapshot, cur: Snapshot, name: str) -> float | None:
    """What a counter counted between two scrapes of one server. A labelled counter's series is
    made at 0 when first counted (prometheus_client's children; TensorRT-LLM makes its series so):
    one that appeared in between counted its whole value. None when the later scrape has none."""
    b = cur.get(name)
    if b is None:
        return None
    a = prev.get(name)
    return b - (a if a is not None else 0.0)


def _delta(prev: Snapshot, cur: Snapshot, name: str) -> float | None:
    a, b = prev.get(name), cur.get(name)
    return None if a is None or b is None else b - a


def _padded(values: tuple[float, ...], n: int) -> tuple[float, ...] | None:
    """``values`` padded with zeros to ``n`` positions; None when it has more (not the same server)."""
    if len(values) > n:
        return None
    return values + (0.0,) * (n - len(values))


def sglang_accept_length(prev: Snapshot, cur: Snapshot) -> tuple[float, float, float] | None:
    """SGLang's acceptance over the requests that finished between two scrapes, from its counters:
    (accept length, generated tokens, verify passes); None when no speculative request finished
    or a counter went down (a restart).

    Accept length = Δ``generation_tokens_total`` / Δ``spec_verify_calls_total``: what SGLang
    reports per request as ``spec_accept_length``, pooled (weighted by verify passes). A request
    whose verify count is 0 (no speculation) adds tokens but no passes: a server without
    speculation gives None, as it has no ``spec_verify_calls_total`` series at all.
    """
    tokens, verifies = _delta(prev, cur, SGL_GEN), _delta(prev, cur, SGL_VERIFY)
    if tokens is None or verifies is None or verifies <= 0 or tokens < 0 or _went_down(prev, cur):
        return None
    return tokens / verifies, tokens, verifies


def gauge_sample(prev: Snapshot | None, cur: Snapshot) -> CounterSample | None:
    """A sample of an engine read through its gauges (SGLang) when they moved since ``prev`` (a
    new decode log interval)."""
    g = _GAUGE_NAMES.get(cur.engine or "", _SGL)
    tps = cur.get(g.gen_tps)
    if tps is None or tps <= 0:
        return None
    key = tuple(cur.get(n) for n in g.figures)
    if prev is not None and tuple(prev.get(n) for n in g.figures) == key:
        return None
    dt = cur.t - prev.t if prev is not None else 0.0
    return CounterSample(cur.t, dt, None, tps, cur.get(g.accept_len), cur.get(g.accept_rate))


@dataclass
class MetricsScraper:
    """Scrapes ``url`` every ``interval_s`` seconds into :attr:`samples` (bounded by ``max_samples``).

    Args:
        url: ``http://127.0.0.1:PORT/metrics`` (for a remote server: the forwarded local port).
        interval_s: Seconds between scrapes.
        timeout_s: Upper bound on one scrape.
        clock: Monotonic seconds.
    """

    url: str
    interval_s: float = 1.0
    timeout_s: float = 5.0
    clock: Callable[[], float] = time.monotonic
    max_samples: int = 200_000
    samples: list[CounterSample] = field(default_factory=list)
    #: The active speculative setting as the scrapes saw it (SGLang's adaptive mode).
    controller: SettingTracker = field(default_factory=SettingTracker)
    #: (time, latency histograms) of the scrapes of the last :data:`LATENCY_KEEP_S` seconds.
    latency: deque[tuple[float, dict[str, Buckets]]] = field(default_factory=deque)
    #: Why there are no counters (None while they are fine or not tried yet).
    problem: str | None = None
    engine: str | None = None
    scrapes: int = 0
    resets: int = 0
    #: Values refused as out of range, over every scrape, and the last ones (``name = value``).
    refused_values: int = 0
    last_refused: tuple[str, ...] = ()
    #: Scrapes in a row that found nothing answering: refused, or the connection closed without an
    #: answer (what a forwarded port whose server is gone gives). A timeout is not counted: a busy
    #: server is slow, not gone.
    refused: int = 0
    _last: Snapshot | None = field(default=None, repr=False)
    #: The last good scrape before failed ones: the first good one after them is compared with it,
    #: so a server that restarted while unreadable counts as a reset (a blip does not).
    _before_gap: Snapshot | None = field(default=None, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, repr=False)
    _ok: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _scraped: asyncio.Event = field(default_factory=asyncio.Event, repr=False)
    _client: httpx.AsyncClient | None = field(default=None, repr=False)

    @property
    def available(self) -> bool:
        """Whether the last scrape read known series."""
        return self._ok.is_set()

    @property
    def label(self) -> str:
        """``counters`` or ``counters unavailable: ...`` for a status line."""
        if self.available:
            refused = (f"; {self.refused_values} out-of-range values refused ({', '.join(self.last_refused)})"
                       if self.refused_values else "")
            return f"counters ({self.url}, every {self.interval_s:g} s{refused})"
        return f"no counters: {self.problem or 'not read yet'}"

    def rebase(self) -> None:
        """Forget the last scrape: the next sample starts afresh (after a restart or a load change)."""
        self._last = None

    async def scrape_once(self) -> CounterSample | None:
        """One scrape; adds and returns the sample it completes (None: none yet, or no metrics)."""
        try:
            return await self._scrape()
        finally:
            self._scraped.set()

    async def _scrape(self) -> CounterSample | None:
        if self._client is None:
            self._client = httpx.AsyncClient(timeout=self.timeout_s, trust_env=False)
        t = self.clock()
        self.scrapes += 1
        try:
            status, body = await self._read(self.url)
        except httpx.HTTPError as exc:
            gone = isinstance(exc, httpx.TransportError) and not isinstance(exc, httpx.TimeoutException)
            self.refused = self.refused + 1 if gone else 0
            self._fail(f"cannot read {self.url} ({type(exc).__name__}: {exc or 'no detail'})")
            return None
        self.refused = 0
        if status != 200:
            self._fail(f"{self.url} answered HTTP {status} (does the server export metrics? {_HINTS})")
            return None
        if body is None:
            self._fail(f"{self.url} answered more than {MAX_SCRAPE_BYTES >> 20} MB, the most specmon reads of "
                       "one scrape (an engine's metrics are a few hundred KB: is this the engine's address?)")
            return None
        try:
            snap = parse_snapshot(body.decode("utf-8", errors="replace"), t)
        except ValueError as exc:
            self._fail(f"{self.url} is not Prometheus text ({exc})")
            return None
        if snap.refused_count:
            self.refused_values += snap.refused_count
            self.last_refused = snap.refused
        if snap.engine is None:
            self._fail(f"{self.url} has no {_ENGINES} series ({_HINTS})")
            return None
        self.engine = snap.engine
        # The engine's own controller (SGLang's adaptive tiers): the setting this scrape saw.
        self.controller.observe(snap.t, snap.sglang_setting)
        if snap.buckets:
            self.latency.append((snap.t, snap.buckets))
            while self.latency and self.latency[0][0] < snap.t - LATENCY_KEEP_S:
                self.latency.popleft()
        self.problem = None
        self._ok.set()
        prev, self._last = self._last, snap
        if prev is None and self._before_gap is not None:
            if _went_down(self._before_gap, snap):
                self.resets += 1
            self._before_gap = None
        if snap.engine not in _NAMES:  # no counters: its gauges give the interval's figures (SGLang)
            sample = gauge_sample(prev, snap)
            if prev is not None and _went_down(prev, snap):
                self.resets += 1  # its finished-request counters went down: a restart
        elif prev is None:
            return None
        else:
            sample = difference(prev, snap)
            if sample is None and _went_down(prev, snap):
                self.resets += 1
        if sample is not None:
            self.samples.append(sample)
            if len(self.samples) > self.max_samples:
                del self.samples[: len(self.samples) - self.max_samples]
        return sample

    async def _read(self, url: str) -> tuple[int, bytes | None]:
        """The answer's status and body, read as it streams in; None for a body past
        :data:`MAX_SCRAPE_BYTES` (read no further: memory stays bounded)."""
        assert self._client is not None
        async with self._client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as resp:
            if resp.status_code != 200:
                return resp.status_code, b""
            declared = resp.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > MAX_SCRAPE_BYTES:
                return resp.status_code, None
            body = bytearray()
            async for chunk in resp.aiter_bytes():
                body += chunk
                if len(body) > MAX_SCRAPE_BYTES:
                    return resp.status_code, None
            return resp.status_code, bytes(body)

    def _fail(self, why: str) -> None:
        self.problem = why
        self._ok.clear()
        # No sample spans the gap (its rates would count the time unread), but the counters
        # before it are kept to tell a blip from a restart.
        self._before_gap = self._last or self._before_gap
        self._last = None

    async def wait_available(self, timeout_s: float, scrapes: int = 3) -> bool:
        """Wait for known series: True at the first good scrape; False after ``scrapes`` failed
        ones (a server that just became ready may need a moment) or ``timeout_s``."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout_s):
                for _ in range(scrapes):
                    self._scraped.clear()
                    if self.available and self._last is not None:
                        return True
                    await self._scraped.wait()
                    if self.available:
                        return True
        return self.available

    async def _loop(self) -> None:
        while True:
            started = self.clock()
            await self.scrape_once()
            await asyncio.sleep(max(0.0, self.interval_s - (self.clock() - started)))

    def start(self) -> None:
        """Scrape in the background until :meth:`stop`."""
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._loop())

    async def pause(self) -> None:
        """Stop scraping (between measurements: no scrape hits a server that is restarting)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._last = None

    async def stop(self) -> None:
        """Stop scraping and close the connection."""
        await self.pause()
        if self._client is not None:
            await self._client.aclose()
            self._client = None


def _went_down(prev: Snapshot, cur: Snapshot) -> bool:
    """Any counter (or per-position counter) lower than before, or fewer positions: a restart."""
    if any((a := prev.get(n)) is not None and (b := cur.get(n)) is not None and b < a
           for n in (*_COUNTERS, *_SGL_COUNTERS)):
        return True
    for before, after in ((prev.per_pos, cur.per_pos), (prev.drafted_pos, cur.drafted_pos)):
        if before is not None and after is not None:
            moved = _position_deltas(before, after)
            if moved is None or min(moved, default=0.0) < 0:
                return True
    return False


def metrics_url_for(port: int, host: str = "127.0.0.1", engine: Engine | str | None = None) -> str:
    """The usual metrics URL of a server listening on ``port``: every engine serves its Prometheus
    text on its API port, at the path its module declares (``/metrics`` when unknown)."""
    return f"http://{host}:{port}{adapter(engine).metrics_path}"
