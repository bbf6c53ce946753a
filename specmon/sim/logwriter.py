"""Writes log lines in the exact shape of SGLang (early 2026, ≥ v0.5.8).

Formats follow shared/FORMATS.md §1 and real logs of that period:

* prefix ``[YYYY-MM-DD HH:MM:SS TP0] `` on scheduler lines (tp_size 8, so a
  rank is printed), ``[YYYY-MM-DD HH:MM:SS] `` on HTTP-process lines, none on
  tqdm progress lines and traceback continuation lines;
* ``Decode batch, #running-req: …, #token: …, token usage: …, [accept len: …,
  accept rate: …, ]cuda graph: …, gen throughput (token/s): …, #queue-req: …``
  (comma after ``Decode batch``, no trailing ``", "``);
* ``accept rate`` with the 2026 meaning: accepted drafts / offered drafts,
  bonus token excluded, i.e. ``(accept_len - 1) / (num_draft_tokens - 1)``.

Timestamps are floats of *naive* seconds (``calendar.timegm`` of the wall
time to print); they are formatted with ``time.gmtime`` so a run does not
depend on the machine's time zone.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TextIO

from specmon.sim.model import SpecConfig

MODEL_PATH = "moonshotai/Kimi-K2.5"
DRAFT_MODEL_PATH = "/data/models/Kimi-K2.5-EAGLE3"
MODEL_TYPE = "KimiK25ForConditionalGeneration"
DRAFT_MODEL_TYPE = "LlamaForCausalLMEagle3"
TP_SIZE = 8
SHARDS = 64
CUDA_GRAPH_BS = (1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64)
MAX_TOTAL_TOKENS = 611_328  # what mem_fraction_static=0.85 leaves for KV after the weights
KV_BYTES_PER_TOKEN = 70_272  # MLA latent (512 + 64) x 61 layers x bf16
CONTEXT_LEN = 262_144
GB = 1 << 30

#: ``ranks`` value for a line printed by the HTTP process: timestamp, no rank.
HTTP = ""
#: ``ranks`` value for a line printed with no prefix at all (tqdm, tracebacks).
RAW = None


def format_timestamp(ts: float) -> str:
    """``2026-02-12 09:14:03`` for naive seconds ``ts``."""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts))


def format_line(ts: float, message: str, ranks: str | None = "TP0") -> str:
    """One log line (no newline): prefix by ``ranks`` (``"TP0"``, :data:`HTTP`, :data:`RAW`)."""
    if ranks is None:
        return message
    tag = f" {ranks}" if ranks else ""
    return f"[{format_timestamp(ts)}{tag}] {message}"


def decode_message(
    running_req: int,
    tokens: int,
    token_usage: float,
    gen_throughput: float,
    *,
    accept_len: float | None = None,
    accept_rate: float | None = None,
    cuda_graph: bool = True,
    queue_req: int = 0,
) -> str:
    """The body of a ``Decode batch`` line; accept fields only when speculating."""
    msg = f"Decode batch, #running-req: {running_req}, #token: {tokens}, token usage: {token_usage:.2f}, "
    if accept_len is not None:
        msg += f"accept len: {accept_len:.2f}, accept rate: {accept_rate or 0.0:.2f}, "
    return msg + f"cuda graph: {cuda_graph}, gen throughput (token/s): {gen_throughput:.2f}, #queue-req: {queue_req}"


def prefill_message(
    new_seq: int,
    new_token: int,
    cached_token: int,
    token_usage: float,
    running_req: int,
    queue_req: int,
    input_throughput: float,
) -> str:
    """The body of a ``Prefill batch`` line (prefill runs without CUDA graph)."""
    return (
        f"Prefill batch, #new-seq: {new_seq}, #new-token: {new_token}, #cached-token: {cached_token}, "
        f"token usage: {token_usage:.2f}, #running-req: {running_req}, #queue-req: {queue_req}, "
        f"cuda graph: False, input throughput (token/s): {input_throughput:.2f}"
    )


def access_message(client_port: int, method: str, path: str, status: int = 200) -> str:
    """A uvicorn access line body: ``INFO:     127.0.0.1:51234 - "POST /v1/completions HTTP/1.1" 200 OK``."""
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 503: "Service Unavailable"}.get(status, "")
    return f'INFO:     127.0.0.1:{client_port} - "{method} {path} HTTP/1.1" {status} {reason}'.rstrip()


def server_args_message(spec: SpecConfig, *, port: int = 30000, seed: int = 0) -> str:
    """``server_args=ServerArgs(...)`` as SGLang prints it at launch (a realistic subset, real order)."""
    on = spec.enabled
    fields: list[tuple[str, object]] = [
        ("model_path", MODEL_PATH),
        ("tokenizer_path", MODEL_PATH),
        ("tokenizer_mode", "auto"),
        ("tokenizer_worker_num", 1),
        ("skip_tokenizer_init", False),
        ("load_format", "auto"),
        ("model_loader_extra_config", "{}"),
        ("trust_remote_code", True),
        ("context_length", None),
        ("is_embedding", False),
        ("enable_multimodal", None),
        ("revision", None),
        ("model_impl", "auto"),
        ("host", "127.0.0.1"),
        ("port", port),
        ("skip_server_warmup", False),
        ("dtype", "auto"),
        ("quantization", None),
        ("kv_cache_dtype", "auto"),
        ("mem_fraction_static", 0.85),
        ("max_running_requests", None),
        ("max_queued_requests", None),
        ("max_total_tokens", None),
        ("chunked_prefill_size", 8192),
        ("max_prefill_tokens", 16384),
        ("schedule_policy", "fcfs"),
        ("schedule_conservativeness", 1.0),
        ("page_size", 1),
        ("device", "cuda"),
        ("tp_size", TP_SIZE),
        ("pp_size", 1),
        ("stream_interval", 1),
        ("stream_output", False),
        ("random_seed", seed),
        ("watchdog_timeout", 300),
        ("log_level", "info"),
        ("log_level_http", None),
        ("log_requests", False),
        ("enable_metrics", False),
        ("decode_log_interval", 40),
        ("api_key", None),
        ("served_model_name", MODEL_PATH),
        ("reasoning_parser", "kimi_k2"),
        ("tool_call_parser", "kimi_k2"),
        ("dp_size", 1),
        ("load_balance_method", "round_robin"),
        ("attention_backend", None),
        ("speculative_algorithm", "EAGLE3" if on else None),
        ("speculative_draft_model_path", DRAFT_MODEL_PATH if on else None),
        ("speculative_draft_model_revision", None),
        ("speculative_draft_load_format", None),
        ("speculative_num_steps", spec.steps if on else None),
        ("speculative_eagle_topk", spec.topk if on else None),
        ("speculative_num_draft_tokens", spec.draft_tokens if on else None),
        ("speculative_accept_threshold_single", 1.0),
        ("speculative_accept_threshold_acc", 1.0),
        ("speculative_token_map", None),
        ("speculative_attention_mode", "prefill"),
        ("ep_size", 1),
        ("moe_a2a_backend", "none"),
        ("moe_runner_backend", "auto"),
        ("enable_hierarchical_cache", False),
        ("disable_radix_cache", False),
        ("cuda_graph_max_bs", CUDA_GRAPH_BS[-1]),
        ("cuda_graph_bs", list(CUDA_GRAPH_BS)),
        ("disable_cuda_graph", False),
        ("disable_overlap_schedule", False),
        ("enable_mixed_chunk", False),
        ("enable_dp_attention", False),
        ("enable_torch_compile", False),
        ("torch_compile_max_bs", 32),
        ("num_continuous_decode_steps", 1),
        ("disaggregation_mode", "null"),
    ]
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields) + ")"


# -- tqdm look-alikes -------------------------------------------------------


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


def _tqdm_tail(n: int, total: int, elapsed: float) -> str:
    if n == 0 or elapsed <= 0:
        return f"{n}/{total} [00:00<?, ?it/s]"
    rate = n / elapsed
    remaining = (total - n) / rate
    rate_fmt = f"{rate:5.2f}it/s" if rate >= 1 else f"{1 / rate:5.2f}s/it"
    return f"{n}/{total} [{_clock(elapsed)}<{_clock(remaining)}, {rate_fmt}]"


def _tqdm_bar(n: int, total: int, width: int = 10) -> str:
    blocks = " ▏▎▍▌▋▊▉"
    filled = n / total * width
    full = int(filled)
    bar = "█" * full
    if full < width:
        bar += blocks[int((filled - full) * 8)].strip() or " "
        bar = bar.ljust(width)
    return bar


def shard_progress_line(n: int, total: int, elapsed: float) -> str:
    """``Loading safetensors checkpoint shards:  45% Completed | 29/64 [02:31<03:02,  5.21s/it]``."""
    return f"Loading safetensors checkpoint shards: {100 * n / total:3.0f}% Completed | {_tqdm_tail(n, total, elapsed)}"


def capture_progress_line(bs: int, avail_gb: float, n: int, total: int, elapsed: float) -> str:
    """``Capturing batches (bs=8 avail_mem=21.30 GB):  75%|███████▌  | 9/12 [00:31<00:10,  3.45s/it]``."""
    desc = f"Capturing batches (bs={bs} avail_mem={avail_gb:.2f} GB)"
    return f"{desc}: {100 * n / total:3.0f}%|{_tqdm_bar(n, total)}| {_tqdm_tail(n, total, elapsed)}"


# -- scripted start-up, crash and shutdown ------------------------------------


@dataclass(frozen=True, slots=True)
class ScriptLine:
    """A line to print ``at`` simulated seconds after the launch."""

    at: float
    message: str
    ranks: str | None = "TP0"


def _all_ranks(
    out: list[ScriptLine], at: float, rng: random.Random, make: Callable[[int], str], spread: float = 0.0
) -> None:
    """Append one line per TP rank, in the jumbled order real multi-process logs show."""
    order = list(range(TP_SIZE))
    rng.shuffle(order)
    for i, rank in enumerate(order):
        out.append(ScriptLine(at + spread * i * rng.random() / TP_SIZE, make(rank), f"TP{rank}"))


def startup_script(
    spec: SpecConfig,
    rng: random.Random,
    duration: float,
    *,
    port: int = 30000,
    pid: int = 4242,
    seed: int = 0,
    crash_at: float | None = None,
) -> list[ScriptLine]:
    """The start-up of one launch, from ``server_args`` to ``fired up and ready``.

    Phases take fixed shares of ``duration`` (simulated seconds): init 3 %,
    weights 52 % (64 shards), KV 2 %, target graphs 22 %, draft model and
    graphs 12 % (speculation only), HTTP and warm-up the rest.

    Args:
        spec: The launch's speculative configuration.
        rng: Source of small realistic variations (memory figures, order of ranks).
        duration: Total simulated seconds until ready.
        port: HTTP port printed by uvicorn.
        pid: Process id printed by uvicorn.
        seed: ``random_seed`` printed in the server args.
        crash_at: If set (0..1), stop the script at that share of ``duration``
            with a scheduler traceback instead of becoming ready.

    Returns:
        Lines sorted by time.
    """
    out: list[ScriptLine] = []
    d = duration
    lead = 0.001 * d  # small gaps inside a phase (tqdm's 0/N line after the begin lines, ...)

    def ranks(at: float, make: Callable[[int], str]) -> None:
        # Less than the gap between two phases, so each rank keeps its own order.
        _all_ranks(out, at, rng, make, spread=0.8 * lead)

    out.append(ScriptLine(0.0, server_args_message(spec, port=port, seed=seed), HTTP))
    template = "Using default HuggingFace chat template with detected content format: string"
    out.append(ScriptLine(0.004 * d, template, HTTP))
    ranks(0.01 * d, lambda r: "Init torch distributed begin.")
    init_s = 0.02 * d
    ranks(
        0.03 * d,
        lambda r: f"Init torch distributed ends. elapsed={init_s * (0.97 + 0.06 * rng.random()):.2f} s, "
        f"mem usage={3.4 + 0.4 * rng.random():.2f} GB",
    )
    avail0 = [135.4 + 0.4 * rng.random() for _ in range(TP_SIZE)]
    load_start, load_end = 0.031 * d, 0.56 * d
    ranks(load_start, lambda r: f"Load weight begin. avail mem={avail0[r]:.2f} GB")
    # Shard progress: one tqdm line per shard, at a slightly uneven pace.
    weights = [0.7 + 0.6 * rng.random() for _ in range(SHARDS)]
    scale = (load_end - load_start - 2 * lead) / sum(weights)
    t = load_start + lead
    out.append(ScriptLine(t, shard_progress_line(0, SHARDS, 0.0), RAW))
    for n, w in enumerate(weights, start=1):
        t += w * scale
        out.append(ScriptLine(t, shard_progress_line(n, SHARDS, t - load_start - lead), RAW))
    weights_gb = 74.62
    avail1 = [a - weights_gb for a in avail0]
    ranks(
        load_end,
        lambda r: f"Load weight end. elapsed={load_end - load_start - 2.0 * rng.random():.2f} s, type={MODEL_TYPE}, "
        f"dtype=torch.bfloat16, avail mem={avail1[r]:.2f} GB, mem usage={weights_gb:.2f} GB.",
    )
    kv_gb = MAX_TOTAL_TOKENS * KV_BYTES_PER_TOKEN / GB
    out.append(ScriptLine(0.565 * d, "Using KV cache dtype: torch.bfloat16"))
    ranks(0.57 * d, lambda r: f"KV Cache is allocated. #tokens: {MAX_TOTAL_TOKENS}, KV size: {kv_gb:.2f} GB")
    avail2 = [a - kv_gb for a in avail1]
    ranks(0.575 * d, lambda r: f"Memory pool end. avail mem={avail2[r]:.2f} GB")
    g0, g1 = 0.58 * d, 0.80 * d
    begin = "Capture cuda graph begin. This can take up to several minutes."
    ranks(g0, lambda r: f"{begin} avail mem={avail2[r] - 0.15:.2f} GB")
    out.append(ScriptLine(g0 + lead, f"Capture cuda graph bs {list(CUDA_GRAPH_BS)}"))
    total = len(CUDA_GRAPH_BS)
    step = (g1 - g0 - 3 * lead) / total
    avail = avail2[0] - 0.4
    out.append(ScriptLine(g0 + 2 * lead, capture_progress_line(CUDA_GRAPH_BS[-1], avail, 0, total, 0.0), RAW))
    for n, bs in enumerate(reversed(CUDA_GRAPH_BS), start=1):
        avail -= 0.11
        out.append(ScriptLine(g0 + 2 * lead + n * step, capture_progress_line(bs, avail, n, total, n * step), RAW))
    graph_gb = 0.11 * total + 0.4
    ranks(
        g1,
        lambda r: f"Capture cuda graph end. Time elapsed: {g1 - g0:.2f} s. mem usage={graph_gb:.2f} GB. "
        f"avail mem={avail2[r] - graph_gb:.2f} GB.",
    )
    avail3 = [a - graph_gb for a in avail2]
    if spec.enabled:
        dl0, dl1, dg0, dg1 = 0.81 * d, 0.84 * d, 0.85 * d, 0.92 * d
        ranks(dl0, lambda r: f"Load weight begin. avail mem={avail3[r]:.2f} GB")
        ranks(
            dl1,
            lambda r: f"Load weight end. elapsed={dl1 - dl0:.2f} s, type={DRAFT_MODEL_TYPE}, dtype=torch.bfloat16, "
            f"avail mem={avail3[r] - 0.98:.2f} GB, mem usage=0.98 GB.",
        )
        draft_kv = MAX_TOTAL_TOKENS * 1536 / GB  # one draft layer
        ranks(dl1 + lead, lambda r: f"KV Cache is allocated. #tokens: {MAX_TOTAL_TOKENS}, KV size: {draft_kv:.2f} GB")
        ranks(
            dg0,
            lambda r: "Capture draft cuda graph begin. This can take up to several minutes. "
            f"avail mem={avail3[r] - 1.9:.2f} GB",
        )
        mid = (dg0 + dg1) / 2
        ranks(
            mid,
            lambda r: f"Capture draft cuda graph end. Time elapsed: {mid - dg0:.2f} s. mem usage=0.31 GB. "
            f"avail mem={avail3[r] - 2.21:.2f} GB.",
        )
        ranks(
            mid + lead,
            lambda r: "Capture draft extend cuda graph begin. This can take up to several minutes. "
            f"avail mem={avail3[r] - 2.21:.2f} GB",
        )
        ranks(
            dg1,
            lambda r: f"Capture draft extend cuda graph end. Time elapsed: {dg1 - mid - lead:.2f} s. "
            "mem usage=0.27 GB. "
            f"avail mem={avail3[r] - 2.48:.2f} GB.",
        )
    out.append(
        ScriptLine(
            0.95 * d,
            f"max_total_num_tokens={MAX_TOTAL_TOKENS}, chunked_prefill_size=8192, max_prefill_tokens=16384, "
            f"max_running_requests=2048, context_len={CONTEXT_LEN}, "
            f"available_gpu_mem={avail3[0] - (2.48 if spec.enabled else 0):.2f} GB",
        )
    )
    out.append(ScriptLine(0.96 * d, f"INFO:     Started server process [{pid}]", HTTP))
    out.append(ScriptLine(0.96 * d, "INFO:     Waiting for application startup.", HTTP))
    out.append(ScriptLine(0.96 * d, "INFO:     Application startup complete.", HTTP))
    uvicorn = f"INFO:     Uvicorn running on http://127.0.0.1:{port} (Press CTRL+C to quit)"
    out.append(ScriptLine(0.96 * d, uvicorn, HTTP))
    out.append(ScriptLine(0.97 * d, access_message(rng.randint(40000, 60000), "GET", "/get_model_info"), HTTP))
    warm = 0.98 * d
    out.append(ScriptLine(warm, prefill_message(1, 6, 0, 0.0, 0, 0, 6 / max(warm, 1.0))))
    out.append(ScriptLine(0.995 * d, access_message(rng.randint(40000, 60000), "POST", "/generate"), HTTP))
    out.append(ScriptLine(d, "The server is fired up and ready to roll!", HTTP))
    out.sort(key=lambda s: s.at)
    if crash_at is not None:
        cut = crash_at * d
        out = [s for s in out if s.at < cut]
        out.extend(crash_script(cut, rng))
    return out


def crash_script(at: float, rng: random.Random) -> list[ScriptLine]:
    """A scheduler dying while loading weights: traceback, then the parent's sigquit line."""
    rank = rng.randrange(1, TP_SIZE)
    src = "/sgl-workspace/sglang/python/sglang/srt"
    frames = [
        (f"{src}/managers/scheduler.py", 2937, "run_scheduler_process", "scheduler = Scheduler("),
        (f"{src}/managers/scheduler.py", 346, "__init__", "self.init_model_worker()"),
        (f"{src}/managers/scheduler.py", 497, "init_tp_model_worker", "self.tp_worker = TpModelWorker("),
        (f"{src}/managers/tp_worker.py", 246, "__init__", "self._init_model_runner()"),
        (f"{src}/model_executor/model_runner.py", 460, "initialize", "self.load_model()"),
        (f"{src}/model_executor/model_runner.py", 889, "load_model", "self.model = self.loader.load_model("),
        (f"{src}/model_loader/loader.py", 657, "load_model", "self.load_weights_and_postprocess("),
    ]
    lines = [ScriptLine(at, "Scheduler hit an exception: Traceback (most recent call last):", f"TP{rank}")]
    for path, lineno, func, code in frames:
        lines.append(ScriptLine(at, f'  File "{path}", line {lineno}, in {func}', RAW))
        lines.append(ScriptLine(at, f"    {code}", RAW))
    lines.append(
        ScriptLine(
            at,
            f"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 7.00 GiB. GPU {rank} has a total capacity "
            "of 139.81 GiB of which 2.19 GiB is free. Of the allocated memory 136.02 GiB is allocated by PyTorch, "
            "and 12.31 MiB is reserved by PyTorch but unallocated.",
            RAW,
        )
    )
    lines.append(ScriptLine(at, "", RAW))
    sigquit = "Received sigquit from a child process. It usually means the child failed."
    lines.append(ScriptLine(at + 0.2, sigquit, HTTP))
    return lines


def shutdown_script(remaining_rids: Sequence[str] = ()) -> list[ScriptLine]:
    """What SGLang prints after SIGTERM (graceful drain, then exit), given the requests still in flight."""
    return [
        ScriptLine(0.0, "SIGTERM received. signum=None frame=None. Draining requests and shutting down...", HTTP),
        ScriptLine(
            0.05,
            f"Gracefully exiting... Remaining number of requests {len(remaining_rids)}. "
            f"Remaining requests remaining_rids={list(remaining_rids)!r}.",
            HTTP,
        ),
    ]


class LogWriter:
    """Writes formatted lines to a text stream, optionally flushing each one."""

    def __init__(self, stream: TextIO, *, flush_each: bool = False) -> None:
        self._stream = stream
        self._flush = flush_each
        self.lines_written = 0

    def line(self, ts: float, message: str, ranks: str | None = "TP0") -> None:
        """Write one line at simulated time ``ts``."""
        self._stream.write(format_line(ts, message, ranks) + "\n")
        self.lines_written += 1
        if self._flush:
            self._stream.flush()

    def script(self, start: float, lines: Iterable[ScriptLine]) -> None:
        """Write scripted lines at once, stamped ``start + at`` (offline use)."""
        for s in lines:
            self.line(start + s.at, s.message, s.ranks)
