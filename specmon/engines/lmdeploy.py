"""LMDeploy (``lmdeploy serve api_server``, PyTorch engine): its stats line, configuration, counters.

The fifth engine, added as this one module and its line in ``engines/__init__.py``.

What LMDeploy prints (read from its source, ``lmdeploy/metrics/loggers.py``,
``LoggingStatLogger.log``; real excerpts in ``tests/data/real_logs/lmdeploy_*``, sources in
SOURCES.md): with ``--enable-metrics``, one line per logging interval and data-parallel rank,
printed (not logged) and only when the interval processed tokens::

    [2026-02-05 17:05:17 DP0] Avg thr (in/out): 4618.5 / 2756.3 tokens/s, API server
    (completed/routed/waiting): 1 / 50 / 50, Engine (running/waiting): 45 / 5, KV cache: 21.6%,

and, with speculative decoding, the same line goes on with ``SpecDecoding metrics: Draft
acceptance rate: 62.50%, Mean acceptance length: 2.88, Accepted: 150 tokens, Drafted: 240
tokens, Per-position acceptance rate: 0.800, 0.625, 0.450`` — vLLM's words for its own spec
line, which is why this kind is tried before vLLM's. The middle group changed names across
releases (``API server (completed/routed/waiting)``, ``Server
(succeeded/failed/routed/waiting)``): it is not read. Throughput and acceptance share one
line, so it gives a :class:`~specmon.records.Decode` record (SGLang's shape), marked as
LMDeploy's; its throughput is the interval's tokens over the interval, as vLLM's, so its
idle intervals are the ones that ran nothing, not the ones after a gap.

Its configuration: ``AsyncEngine`` logs ``speculative_config=SpeculativeConfig(method='eagle3',
model='/m', num_speculative_tokens=3)`` (or ``=None``) through its logger
(``2026-08-21 10:00:00,123 - lmdeploy - INFO - async_engine.py:131 - ...``).
``num_speculative_tokens`` counts draft tokens per step (``--speculative-num-draft-tokens``).

Its Prometheus series (``PrometheusStatLogger``, at ``/metrics`` with ``--enable-metrics``)
are vLLM's under ``lmdeploy:``: ``generation_tokens_total``, ``spec_decode_num_drafts_total``,
``..._num_draft_tokens_total``, ``..._num_accepted_tokens_total`` and, by ``position``,
``..._num_accepted_tokens_per_pos_total`` (a position appears once it was recorded).
"""

from __future__ import annotations

import re

from specmon.engines.base import ConfigReader, CounterNames, EngineAdapter, EntryPoints
from specmon.grammar.common import cut, to_float, to_int
from specmon.grammar.kinds import LineKind
from specmon.records import Config, Decode, Engine, Unparsed

LMDEPLOY = Engine.register("lmdeploy")

STATS_MARKER = "Avg thr (in/out):"
_THR = re.compile(r"Avg thr \(in/out\): (?P<inp>\S+) / (?P<out>\S+) tokens/s")
_ENGINE = re.compile(r"Engine \(running/waiting\): (?P<run>\d+) / (?P<wait>\d+)")
_KV = re.compile(r"KV cache: (?P<kv>[^%,\s]+)%")
_RATE = re.compile(r"Draft acceptance rate: (?P<rate>[^%,\s]+)%")
_MAL = re.compile(r"Mean acceptance length: (?P<mal>[^,\s]+)")
_SPEC = "SpecDecoding metrics:"


def _fraction(text: str | None) -> float | None:
    value = to_float(text) if text is not None else None
    return None if value is None else value / 100.0


def parse_stats(message: str, line: int, ts: float | None, rank: str | None) -> Decode | Unparsed:
    """One ``Avg thr (in/out)`` line: its throughput, requests, KV use and, if there, acceptance."""
    thr = _THR.search(message)
    out = to_float(thr.group("out")) if thr is not None else None
    if thr is None or out is None:
        return Unparsed(line, ts, rank, marker=STATS_MARKER, reason="no readable output throughput",
                        text=cut(message))
    eng = _ENGINE.search(message)
    kv = _KV.search(message)
    acc_len = acc_rate = None
    spec_at = message.find(_SPEC)
    if spec_at >= 0:
        spec = message[spec_at:]
        mal, rate = _MAL.search(spec), _RATE.search(spec)
        acc_len = to_float(mal.group("mal")) if mal is not None else None
        acc_rate = _fraction(rate.group("rate")) if rate is not None else None
        if acc_len is None and acc_rate is None and "nan" not in spec:
            # nan: nothing drafted in the interval (no acceptance to read), not damage.
            return Unparsed(line, ts, rank, marker=_SPEC, reason="no readable acceptance values",
                            text=cut(message))
    return Decode(
        line, ts, rank,
        running_req=to_int(eng.group("run")) if eng is not None else None,
        queue_req=to_int(eng.group("wait")) if eng is not None else None,
        token_usage=_fraction(kv.group("kv")) if kv is not None else None,
        accept_len=acc_len,
        accept_rate=acc_rate,
        gen_throughput=out,
        engine=LMDEPLOY,
    )


STATS = LineKind(name="lmdeploy.stats", engine=LMDEPLOY, marker=STATS_MARKER, parse=parse_stats, record=Decode)

CONFIG_MARKER = "speculative_config="
_CONFIG_AT = re.compile(r"(?:^|- )(speculative_config=)(?=SpeculativeConfig\(|None\b)")
_CONFIG = re.compile(r"speculative_config=(?:None\b|SpeculativeConfig\((?P<body>[^()]*)\))")


def _config_at(message: str) -> int:
    # Its own line holds nothing before the key but the logger's prefix: vLLM's engine-init line
    # also says "speculative_config=SpeculativeConfig(" in the middle of its text.
    m = _CONFIG_AT.search(message)
    return m.start(1) if m is not None else -1


def parse_config(message: str, line: int, ts: float | None, rank: str | None) -> Config | Unparsed | None:
    """``speculative_config=SpeculativeConfig(method='eagle3', model='...', num_speculative_tokens=3)``."""
    at = _config_at(message)
    if at < 0:
        return None
    m = _CONFIG.match(message, at)
    if m is None:
        return Unparsed(line, ts, rank, marker=CONFIG_MARKER, reason="speculative_config without its fields",
                        text=cut(message))
    body = m.group("body")
    if body is None:
        return Config(line, ts, rank, engine=LMDEPLOY, algorithm=None, steps=0, draft_tokens=0)
    method = re.search(r"method='([^']*)'", body)
    n = re.search(r"num_speculative_tokens=(\d+)", body)
    steps = int(n.group(1)) if n is not None else None
    # The draft model's path is not kept: a run's label shows what is swept, not where weights lie.
    return Config(line, ts, rank, engine=LMDEPLOY, algorithm=method.group(1) if method else "unknown",
                  steps=steps, draft_tokens=steps)


class LMDeploy(EngineAdapter):
    """LMDeploy's ``api_server`` (PyTorch engine): its stats line, its configuration, its counters."""

    engine = LMDEPLOY
    label = "LMDeploy"
    kinds = (STATS,)
    config_words = (CONFIG_MARKER,)
    config_markers = (CONFIG_MARKER,)
    signs = (("Avg thr (in/out)", 5), ("Engine (running/waiting)", 5), (" - lmdeploy - ", 5),
             ("lmdeploy", 2))
    shapes = (re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} - lmdeploy - (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "),)
    shape_gates = ("- lmdeploy -",)
    shared_ready = ("Application startup complete",)  # uvicorn's
    ready_marker = "Application startup complete."
    # Its line prints them, but on the line they share with the throughput: read from its counters.
    per_position_note = "LMDeploy's per-position acceptance is read from its /metrics"
    warmup = 1  # one interval, as vLLM's: the first covers the start
    draft_tokens_count_root = False  # num_speculative_tokens is the drafted tokens
    throughput_since_last_line = False
    metric_prefix = "lmdeploy:"
    metrics_hint = "LMDeploy needs --enable-metrics"
    latency = ("lmdeploy:time_to_first_token_seconds", "lmdeploy:iter_token_latency")
    counters = CounterNames(
        gen="lmdeploy:generation_tokens_total",
        drafts="lmdeploy:spec_decode_num_drafts_total",
        draft_tokens="lmdeploy:spec_decode_num_draft_tokens_total",
        accepted="lmdeploy:spec_decode_num_accepted_tokens_total",
        per_position="lmdeploy:spec_decode_num_accepted_tokens_per_pos_total",
        request_tokens="lmdeploy:request_generation_tokens_sum",
        request_count="lmdeploy:request_generation_tokens_count",
        request_decode_s="lmdeploy:request_decode_time_seconds_sum",
    )
    default_port = 23333
    env_prefixes = ("LMDEPLOY_",)
    entry_points = EntryPoints(scripts=(("lmdeploy", "serve"),),
                               modules=(("lmdeploy", "serve"), ("lmdeploy.cli.entrypoint", "serve")))

    def config_at(self, message: str) -> int:
        return _config_at(message)

    def config_reader(self) -> ConfigReader:
        return parse_config
