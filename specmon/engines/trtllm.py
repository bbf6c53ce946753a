"""TensorRT-LLM (``trtllm-serve``, PyTorch backend): iteration lines, lifecycle, recognition.

What TensorRT-LLM logs (``tests/data/real_logs/trtllm_*``; sources in SOURCES.md):

- its Python logger's prefix ``[04/28/2025-09:56:44] [TRT-LLM] [I] `` (C++: ``[TensorRT-LLM][INFO] ``);
- with ``print_iter_log``, one line per iteration: ``iter = 198, global_rank = 0, rank = 0,
  currank_total_requests = 0/0, elapsed_time = 0.005s, timestamp = 2025-04-28 09:56:44,
  num_scheduled_requests: 10, states = {'num_ctx_requests': 0, 'num_ctx_tokens': 0,
  'num_generation_tokens': 16}``.

The iteration line carries no acceptance, and its ``num_generation_tokens`` counts the
tokens an iteration *processed* (with speculation, each request's drafts too), not the
tokens it produced: a throughput computed from it would overstate speculation by its own
draft length. So the line gives the scheduled requests only; the speed and acceptance come
from its Prometheus series.

What it exports (``tensorrt_llm/metrics/collector.py``, ``MetricsCollector``; served as
Prometheus text at ``/prometheus/metrics`` — its ``/metrics`` is the JSON of iteration
statistics — with ``return_perf_metrics`` and ``enable_iter_perf_stats`` set):

- per *finished request*: ``trtllm_generation_tokens_total``, the decode-time histogram
  ``trtllm_request_decode_time_seconds`` (first to last token) and, by ``token_position``,
  ``trtllm_spec_decode_drafted_tokens_total`` / ``trtllm_spec_decode_accepted_tokens_total``;
- per *iteration*: ``trtllm_spec_decode_num_draft_tokens_total`` and
  ``..._num_accepted_tokens_total``.

It counts no drafts: every draft drafts its first position, so drafted tokens at position 0
are the drafts, and the accept length is 1 + the accepted tokens of all positions over them
(the same requests on both sides: TensorRT-LLM's own ``acceptanceLength`` definition,
``(numAcceptedTokens + numRequestsWithDraftTokens) / numRequestsWithDraftTokens``). The
acceptance rate is the iteration counters' accepted over drafted. tok/s is the finished
requests' tokens after their first over their decode seconds: the speed of one request
stream, like llama.cpp's. Its time-per-output-token histogram is a per-request mean, not
the per-token inter-token latency the header shows for vLLM and SGLang: not shown as one.
"""

from __future__ import annotations

import re
from calendar import timegm
from collections.abc import Sequence

from specmon.engines.base import UVICORN_SERVED, CounterNames, EngineAdapter, EntryPoints, Ranges, ScheduleForm
from specmon.grammar.common import cut, to_float, to_int
from specmon.grammar.kinds import LineKind
from specmon.records import Engine, EngineStats, Unparsed

ITER_MARKER = "iter = "
_ITER = re.compile(
    r"iter = (?P<iter>\d+), global_rank = (?P<grank>\d+), rank = (?P<rank>\d+)"
    r"(?:, currank_total_requests = (?P<cur>\d+)/(?P<total>\d+))?"
    r"(?:, [^,]*?)*?, elapsed_time = (?P<elapsed>[\d.eE+-]+)s"
    r"(?:, timestamp = (?P<date>\d{4}-\d\d-\d\d) (?P<hms>\d\d:\d\d:\d\d))?"
)
_SCHEDULED = re.compile(r"num_scheduled_requests: (?P<n>\d+)")
_GEN_TOKENS = re.compile(r"'num_generation_tokens': (?P<n>\d+)")


def _stamp(date: str, hms: str) -> float | None:
    try:
        y, mo, d = (int(x) for x in date.split("-"))
        h, mi, s = (int(x) for x in hms.split(":"))
        return float(timegm((y, mo, d, h, mi, s, 0, 0, 0)))
    except ValueError:
        return None


def parse_iter(message: str, line: int, ts: float | None, rank: str | None) -> EngineStats | Unparsed | None:
    """One iteration line: its scheduled requests and its own date (the prefix has no year order)."""
    if "elapsed_time" not in message:
        return None
    m = _ITER.search(message)
    if m is None:
        return Unparsed(line, ts, rank, reason="TensorRT-LLM iteration line without its fields",
                        text=cut(message))
    if m.group("date"):
        ts = _stamp(m.group("date"), m.group("hms")) or ts
    if to_float(m.group("elapsed")) is None:
        return Unparsed(line, ts, rank, reason="elapsed_time is not a number", text=cut(message))
    sched = _SCHEDULED.search(message)
    running = to_int(sched.group("n")) if sched is not None else None
    return EngineStats(line, ts, f"rank{m.group('rank')}", gen_throughput=None, running=running)


ITER = LineKind(
    name="trtllm.iter", engine=Engine.TRTLLM, marker=ITER_MARKER, parse=parse_iter, record=EngineStats,
    gate=lambda text: "global_rank" in text and "elapsed_time" in text,
)


def draft_len_schedule(ranges: Ranges) -> dict[int, int] | None:
    """Its ``draft_len_schedule`` for a schedule: each range's first batch size and its draft length
    (a batch takes the entry at the largest threshold at or below it); None when off everywhere."""
    if max((k for _a, _b, k in ranges), default=0) == 0:
        return None
    return {first: k for first, _last, k in ranges}


def schedule_problem(ranges: Ranges) -> str | None:
    """Why TensorRT-LLM would refuse this schedule (None when it takes it).

    Its validator (``DecodingBaseConfig.validate_draft_len_schedule_and_sort``) wants batch size 1
    in the schedule with the largest draft length: ``draft_len_schedule[1] == max_draft_len``.
    """
    top = max((k for _a, _b, k in ranges), default=0)
    if ranges and ranges[0][2] != top:
        peak = next(first for first, _last, k in ranges if k == top)
        return (f"it wants the largest draft length at batch size 1 (draft_len_schedule[1] == "
                f"max_draft_len); this schedule runs {ranges[0][2]} there and {top} from {peak}")
    return None


def schedule_options(ranges: Ranges) -> str | None:
    """The ``speculative_config`` keys for its ``--extra_llm_api_options`` YAML file, in YAML's flow
    style (integer keys stay integers); None when off everywhere or refused."""
    table = draft_len_schedule(ranges)
    if table is None or schedule_problem(ranges) is not None:
        return None
    entries = ", ".join(f"{b}: {k}" for b, k in table.items())
    return f"speculative_config: {{max_draft_len: {max(table.values())}, draft_len_schedule: {{{entries}}}}}"


class TensorRTLLM(EngineAdapter):
    """TensorRT-LLM's ``trtllm-serve``: lifecycle and iteration lines; a fourth engine in one module."""

    engine = Engine.TRTLLM
    label = "TensorRT-LLM"
    kinds = (ITER,)
    # "[TensorRT-LLM][INFO]" lines also come from TensorRT-LLM kernels inside other engines
    # (SGLang's trtllm backends): a weak sign; the Python logger's "[TRT-LLM]" is its own.
    signs = (("[TRT-LLM]", 5), ("[TensorRT-LLM]", 2), ("global_rank = ", 3),
             # The Triton backend's glog lines: "I1218 03:35:37.688135 20559 libtensorrtllm.cc:1205] {...}".
             ("libtensorrtllm.cc:", 5))
    shapes = (re.compile(r"\[\d\d/\d\d/\d{4}-\d\d:\d\d:\d\d\] \[TRT-LLM\]"),
              re.compile(r"\[TensorRT-LLM\]\[(?:INFO|WARNING|ERROR|DEBUG|VERBOSE)\]"))
    shape_gates = ("TRT-LLM", "TensorRT-LLM")
    serving_shapes = (UVICORN_SERVED,)  # trtllm-serve's access log
    shared_ready = ("Application startup complete",)  # uvicorn's, as vLLM's
    ready_marker = "Application startup complete."
    default_port = 8000
    metric_prefix = "trtllm_"
    metrics_path = "/prometheus/metrics"
    env_prefixes = ("TRTLLM_", "TLLM_")
    metrics_hint = "TensorRT-LLM needs return_perf_metrics and enable_iter_perf_stats"
    counters = CounterNames(
        gen="trtllm_generation_tokens_total",
        drafts=None,  # counted by position
        draft_tokens="trtllm_spec_decode_num_draft_tokens_total",
        accepted="trtllm_spec_decode_num_accepted_tokens_total",
        gen_seconds="trtllm_request_decode_time_seconds_sum",
        gen_requests="trtllm_request_decode_time_seconds_count",
        per_position="trtllm_spec_decode_accepted_tokens_total",
        drafted_per_position="trtllm_spec_decode_drafted_tokens_total",
        position_label="token_position",
    )
    def schedule_form(self, ranges: Ranges, *, argv: Sequence[str] | None = None,
                      setting: tuple[str | None, int | None] | None = None,
                      config_path: str = "specmon-schedule.json") -> ScheduleForm:
        problem = schedule_problem(ranges)
        table = draft_len_schedule(ranges) if problem is None else None
        # JSON keys are strings: the batch-size thresholds as text, each with its draft length.
        fields = {"trtllm_draft_len_schedule": None if table is None else {str(b): k for b, k in table.items()},
                  "trtllm_problem": problem}
        options = schedule_options(ranges)
        return ScheduleForm(() if options is None else (options,), problem, fields,
                            heading="(--extra_llm_api_options file; add your decoding_type, draft)")

    entry_points = EntryPoints(scripts=(("trtllm-serve", ""),),
                               modules=(("tensorrt_llm.commands.serve", ""),))
