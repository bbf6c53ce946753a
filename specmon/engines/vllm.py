"""vLLM periodic stats (V1 ``Engine NNN: ...``, V0), speculative metrics, and configuration.

vLLM prints its stats every ~10 s while there is load: one engine line and,
with speculation, a ``SpecDecoding metrics`` line right after it (no engine
index in the latter). Rates are stored as fractions: V1 prints percentages,
the very first V1 build and V0 print fractions.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from specmon.engines.argv import ArgvError, SpecSettings, flag_values, last_int, load_json_flag, set_flag, set_json_key
from specmon.engines.base import (
    UVICORN_SERVED,
    ConfigReader,
    CounterNames,
    Dimension,
    EngineAdapter,
    EntryPoints,
    Ranges,
    ScheduleForm,
    draft_pair,
)
from specmon.grammar.common import cut, to_float, to_int
from specmon.grammar.kinds import FLOAT, INT, FieldSpec, LineKind, scaled
from specmon.records import Config, Engine, EngineStats, Event, Spec, Unparsed

STATS_MARKER = "Avg prompt throughput"
SPEC_MARKERS = ("SpecDecoding metrics", "Speculative metrics")
_ENGINE_PREFIX = re.compile(r"(?:Engine (?P<eng>\d{1,4})|(?P<n>\d+) Engines Aggregated): $")


def _number_before(text: str, unit: str) -> str:
    """``"123.8 tokens/s"`` → ``"123.8"``; ``"1 reqs"`` → ``"1"``; ``"17.5%"`` → ``"17.5"``."""
    text = text.strip().rstrip(".")
    if text.endswith(unit):
        text = text[: -len(unit)]
    return text.strip()


def _kv(body: str) -> tuple[dict[str, str], list[str]]:
    """Split ``key: value, ...``; comma-separated list values stay with their key."""
    fields: dict[str, str] = {}
    lists: dict[str, list[str]] = {}  # list values, joined once (+= per item is quadratic)
    bad: list[str] = []
    last: str | None = None
    for seg in body.split(", "):
        seg = seg.strip()
        if not seg:
            continue
        key, sep, value = seg.partition(": ")
        if sep:
            last = key.strip()
            fields[last] = value.strip()
            lists.pop(last, None)
        elif last is not None and last.startswith("Per-position") and (seg == "nan" or to_float(seg) is not None):
            lists.setdefault(last, [fields[last]]).append(seg)
        else:
            bad.append(seg)
    for key, items in lists.items():
        fields[key] = ", ".join(items)
    return fields, bad


def parse_stats(message: str, line: int, ts: float | None, rank: str | None) -> EngineStats | Unparsed:
    """Parse an ``Avg prompt throughput: ...`` line (V1 with engine prefix, or V0)."""
    at = message.index(STATS_MARKER)
    engine_index = engines = None
    m = _ENGINE_PREFIX.search(message[max(0, at - 40):at])
    if m is not None:
        if m.group("eng") is not None:
            engine_index = int(m.group("eng"))
        else:
            engines = int(m.group("n"))
    fields, bad = _kv(message[at:].rstrip().rstrip("."))
    gen_raw = fields.get("Avg generation throughput")
    gen = to_float(_number_before(gen_raw, "tokens/s")) if gen_raw is not None else None
    if bad or gen is None:
        reason = f"cut or malformed field: {bad[0][:60]!r}" if bad else "no readable generation throughput"
        return Unparsed(line, ts, rank, marker=STATS_MARKER, reason=reason, text=cut(message))

    def num(key: str, unit: str, conv=to_float):  # type: ignore[no-untyped-def]
        raw = fields.get(key)
        return conv(_number_before(raw, unit)) if raw is not None else None

    kv = num("GPU KV cache usage", "%")
    if kv is None:
        kv = num("CPU KV cache usage", "%")  # vLLM's CPU build labels its only pool "CPU"
    waiting = num("Waiting", "reqs", to_int)
    if waiting is None:
        waiting = num("Pending", "reqs", to_int)  # V0
    return EngineStats(
        line, ts, rank,
        prompt_throughput=num("Avg prompt throughput", "tokens/s"),
        gen_throughput=gen,
        running=num("Running", "reqs", to_int),
        waiting=waiting,
        kv_cache_usage=kv,
        prefix_cache_hit_rate=num("Prefix cache hit rate", "%"),
        engine_index=engine_index,
        engines_aggregated=engines,
    )


def _rate(text: str | None) -> float | None:
    """A rate printed as ``62.0%`` (V1) or ``0.620`` (V0 / first V1 build) → fraction."""
    if text is None:
        return None
    text = text.strip().rstrip(".")
    if text.endswith("%"):
        v = to_float(text[:-1])
        return None if v is None else v / 100.0
    return to_float(text)


def parse_spec(message: str, line: int, ts: float | None, rank: str | None) -> Spec | Unparsed:
    """Parse every ``SpecDecoding metrics:`` variant and V0 ``Speculative metrics:``."""
    marker = SPEC_MARKERS[0] if SPEC_MARKERS[0] in message else SPEC_MARKERS[1]
    body = message[message.index(marker) + len(marker):].lstrip(": ").rstrip().rstrip(",").rstrip(".")
    fields, bad = _kv(body)

    def get(*keys: str) -> str | None:
        for k in keys:
            if k in fields:
                return fields[k]
        return None

    def count(*keys: str) -> int | None:
        raw = get(*keys)
        return to_int(_number_before(raw, "tokens")) if raw is not None else None

    mal_raw = get("Mean acceptance length")
    mal = to_float(mal_raw) if mal_raw is not None else None
    accepted = count("Accepted", "Number of accepted tokens")
    drafted = count("Drafted", "Number of draft tokens", "Number of draft tokens tokens")
    rate = _rate(get("Avg Draft acceptance rate", "Draft acceptance rate"))
    per_pos: tuple[float, ...] | None = None
    pp_raw = get("Per-position acceptance rate")
    if pp_raw is not None:
        values = [to_float(v) for v in pp_raw.split(", ")]
        # nan positions (nothing drafted there) are kept out rather than guessed.
        per_pos = tuple(v for v in values if v is not None) or None
    if rate is None and accepted is not None and drafted:
        rate = accepted / drafted
    if bad:
        return Unparsed(line, ts, rank, marker=marker, reason=f"cut or malformed field: {bad[0][:60]!r}",
                        text=cut(message))
    if mal is None and rate is None and accepted is None:
        # "nan" everywhere means nothing was drafted in the interval: not a sample, not damage.
        if mal_raw is not None and mal_raw.strip() == "nan":
            return Spec(line, ts, rank, drafted=drafted, accepted=accepted)
        return Unparsed(line, ts, rank, marker=marker, reason="no readable acceptance values",
                        text=cut(message))
    at = get("Accepted throughput")
    dt = get("Drafted throughput")
    return Spec(
        line, ts, rank,
        mean_acceptance_length=mal,
        accepted=accepted,
        drafted=drafted,
        draft_acceptance_rate=rate,
        per_position=per_pos,
        accepted_throughput=to_float(_number_before(at, "tokens/s")) if at else None,
        drafted_throughput=to_float(_number_before(dt, "tokens/s")) if dt else None,
    )


# -- the grammar of these lines (shared with the bulk path) ------------------------------------


_pct = scaled(float, 100.0)


def _spec_body(marker: str) -> Callable[[str], int]:
    def start(message: str) -> int:
        at = message.index(marker) + len(marker)
        while at < len(message) and message[at] in ": ":
            at += 1  # the line parser's lstrip(": ")
        return at
    return start


_TOKS = ((" tokens/s", float),)
STATS = LineKind(
    name="vllm.stats", engine=Engine.VLLM, marker=STATS_MARKER, parse=parse_stats, record=EngineStats,
    fields=(
        FieldSpec("prompt_throughput", ("Avg prompt throughput",), FLOAT, float, _TOKS),
        FieldSpec("gen_throughput", ("Avg generation throughput",), FLOAT, float, _TOKS),
        FieldSpec("running", ("Running",), INT, int, ((" reqs", int),)),
        FieldSpec("waiting", ("Waiting", "Pending"), INT, int, ((" reqs", int),)),
        FieldSpec("kv_cache_usage", ("GPU KV cache usage", "CPU KV cache usage"), FLOAT, float, (("%", float),)),
        FieldSpec("prefix_cache_hit_rate", ("Prefix cache hit rate",), FLOAT, float, (("%", float),)),
        FieldSpec("engine_index", (), INT, int),
        FieldSpec("engines_aggregated", (), INT, int),
    ),
    body=lambda message: message.index(STATS_MARKER),
    lead=(r"Engine (?P<engine_index>\d{1,4}): ", r"(?P<engines_aggregated>\d{1,18}) Engines Aggregated: "),
    strip_end=".",
    columns=("running", "gen_throughput"),
)
_COUNT = ((" tokens", int), ("", int))
SPEC = tuple(LineKind(
    name=f"vllm.spec.{i}", engine=Engine.VLLM, marker=m, parse=parse_spec, record=Spec,
    fields=(
        FieldSpec("mean_acceptance_length", ("Mean acceptance length",), FLOAT, float),
        FieldSpec("accepted", ("Accepted", "Number of accepted tokens"), INT, int, _COUNT),
        FieldSpec("drafted", ("Drafted", "Number of draft tokens", "Number of draft tokens tokens"), INT, int,
                  _COUNT),
        FieldSpec("draft_acceptance_rate", ("Avg Draft acceptance rate", "Draft acceptance rate"), FLOAT, float,
                  (("%", _pct), ("", float))),
        FieldSpec("per_position", ("Per-position acceptance rate",), FLOAT, float, items=True),
        FieldSpec("accepted_throughput", ("Accepted throughput",), FLOAT, float, _TOKS),
        FieldSpec("drafted_throughput", ("Drafted throughput",), FLOAT, float, _TOKS),
    ),
    body=_spec_body(m),
    strip_end=".",
    requires=("draft_acceptance_rate",),
    columns=("mean_acceptance_length", "draft_acceptance_rate", "accepted", "drafted", "per_position"),
) for i, m in enumerate(SPEC_MARKERS))

CONFIG_MARKERS = ("non-default args:", "Initializing a V1 LLM engine", "Initializing an LLM engine",
                  "Initializing a V0 LLM engine")
_SPEC_DICT = re.compile(r"'speculative_config':\s*(\{[^{}]*\})")
_SPEC_OBJ = re.compile(r"speculative_config=(SpeculativeConfig\((?P<body>[^()]*)\)|None)")
_MODEL = re.compile(r"(?:'model'|(?<![\w_])model)[:=]\s*'(?P<m>[^']*)'")


def parse_config(message: str, line: int, ts: float | None, rank: str | None) -> Config | None:
    """The speculative configuration from ``non-default args: {...}`` or the engine-init line."""
    model_m = _MODEL.search(message)
    model = model_m.group("m") if model_m else None
    method: str | None = None
    steps: int | None = None
    extra: dict[str, str] = {}
    if "non-default args:" in message:
        m = _SPEC_DICT.search(message)
        if m is not None:
            try:
                spec = ast.literal_eval(m.group(1))
            except (ValueError, SyntaxError):
                spec = None
            if isinstance(spec, dict):
                method = str(spec.get("method") or spec.get("model") or "draft_model")
                n = spec.get("num_speculative_tokens")
                steps = n if isinstance(n, int) and not isinstance(n, bool) else None
                schedule = schedule_text(spec.get("num_speculative_tokens_per_batch_size"))
                if schedule:
                    extra["schedule"] = schedule
        else:
            method, steps = None, 0  # args printed without a speculative config: no speculation
    else:
        m2 = _SPEC_OBJ.search(message)
        if m2 is None:
            return None
        if m2.group(1) == "None":
            method, steps = None, 0
        else:
            body = m2.group("body") or ""
            mm = re.search(r"method='([^']*)'", body)
            nn = re.search(r"num_spec_tokens=(\d+)", body) or re.search(r"num_speculative_tokens=(\d+)", body)
            method = mm.group(1) if mm else "unknown"
            steps = int(nn.group(1)) if nn else None
    return Config(line, ts, rank, engine=Engine.VLLM, algorithm=method, steps=steps,
                  topk=None, draft_tokens=steps, model=model, extra=extra)


def schedule_text(value: object) -> str | None:
    """vLLM's dynamic speculative decoding table (``num_speculative_tokens_per_batch_size``: inclusive
    batch-size ranges, each with its K) in a few characters: ``1-2:3 3-64:1``; None when there is none
    (or it is not a list of three integers per range, which vLLM itself refuses)."""
    if not isinstance(value, list) or not value:
        return None
    parts = []
    for entry in value:
        if not isinstance(entry, (list, tuple)) or len(entry) != 3 or not all(
                isinstance(x, int) and not isinstance(x, bool) for x in entry):
            return None
        lo, hi, k = entry
        parts.append(f"{lo}-{hi}:{k}" if hi != lo else f"{lo}:{k}")
    return " ".join(parts)


# -- a schedule: its dynamic speculative decoding table ----------------------------------------

SPEC_CONFIG_FLAG = "--speculative-config"
_PLACEHOLDER = re.compile(r"\{[a-z_]+\}")
_TABLE_KEYS = ("num_speculative_tokens", "num_speculative_tokens_per_batch_size")


def spec_config_at(argv: Sequence[str]) -> tuple[int, str] | None:
    """Where ``--speculative-config``'s value is: ``(index of the token, its JSON text)``."""
    for i, token in enumerate(argv):
        if token == SPEC_CONFIG_FLAG and i + 1 < len(argv):
            return i + 1, argv[i + 1]
        if token.startswith(SPEC_CONFIG_FLAG + "="):
            return i, token.split("=", 1)[1]
    return None


def spec_config_base(argv: Sequence[str]) -> dict[str, object] | None:
    """The command line's own speculative config without its step count (method, draft model,
    n-gram window); None when there is none or it cannot be read."""
    found = spec_config_at(argv)
    if found is None:
        return None
    try:
        # The profile's placeholders ({steps}, {draft_tokens}) stand where numbers go.
        doc = json.loads(_PLACEHOLDER.sub("0", found[1]))
    except ValueError:
        return None
    if not isinstance(doc, dict):
        return None
    return {k: v for k, v in doc.items() if k not in _TABLE_KEYS}


def table_keys(ranges: Ranges) -> dict[str, object] | None:
    """The keys a schedule puts in ``--speculative-config`` (None when speculation is off
    everywhere: vLLM needs num_speculative_tokens > 0 to take a table)."""
    top = max((k for _a, _b, k in ranges), default=0)
    if top == 0:
        return None
    return {"num_speculative_tokens": top, "num_speculative_tokens_per_batch_size": [list(r) for r in ranges]}


def table_flag(ranges: Ranges, base: dict[str, object] | None = None) -> str | None:
    """The exact ``--speculative-config '...'`` flag: ``base`` (the profile's own config: method,
    draft model) with the schedule's keys set."""
    keys = table_keys(ranges)
    if keys is None:
        return None
    return f"{SPEC_CONFIG_FLAG} '{json.dumps({**(base or {}), **keys}, separators=(', ', ': '))}'"


# -- the engine's facts ------------------------------------------------------------------------


class VLLM(EngineAdapter):
    """vLLM (V0 and V1): periodic stats and ``SpecDecoding metrics`` lines, counters on ``/metrics``."""

    engine = Engine.VLLM
    label = "vLLM"
    kinds = (STATS, *SPEC)
    config_words = CONFIG_MARKERS
    config_markers = CONFIG_MARKERS
    signs = (("Avg prompt throughput", 3), ("SpecDecoding metrics", 3), ("non-default args", 5),
             ("LLM engine (v", 5), ("vLLM", 2), ("[loggers.py:", 3), ("Speculative metrics", 3))
    shapes = (re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2} \[?[\w./]+\.py:\d+\]"),)
    shape_gates = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
    lifecycle = (
        ("EngineCore encountered a fatal error", Event.CRASH),
        ("Engine core initialization failed", Event.CRASH),
        ("WorkerProc failed to start", Event.CRASH),
        ("EngineDeadError", Event.CRASH),
        ("vLLM API server version", Event.SERVER_START),
        ("Starting vLLM API server", Event.SERVER_START),
        ("Starting to load model", Event.LOAD_BEGIN),
        ("Loading drafter model", Event.LOAD_BEGIN),
        ("Loading weights took", Event.LOAD_END),
        ("Model loading took", Event.LOAD_END),
        ("Loading model weights took", Event.LOAD_END),
        ("GPU KV cache size", Event.KV_CACHE),
        ("CPU KV cache size", Event.KV_CACHE),
        ("# GPU blocks", Event.KV_CACHE),
        ("Capturing CUDA graphs", Event.GRAPH_PROGRESS),
        ("Capturing CUDA graph shapes", Event.GRAPH_PROGRESS),
        ("Capturing the model for CUDA graphs", Event.GRAPH_BEGIN),
        ("Graph capturing finished", Event.GRAPH_END),
    )
    # The executors' and the client's watchers of a process that exited, named from the process:
    # "Worker proc VllmWorker-0 died unexpectedly, shutting down executor." (multiproc_executor.py),
    # "RayWorkerProc rank=[3] died unexpectedly, ..." (ray_executor_v2.py), "Engine core proc
    # EngineCore_DP0 died unexpectedly, shutting down client." (core_client.py); V0's
    # "Worker VllmWorkerProcess pid 1234 died, exit code: -9" (multiproc_worker_utils.py).
    fatal_shapes = (
        ("died unexpectedly", r"(?:(?:Worker proc|Engine core proc|RayWorkerProc) )?\S+ died unexpectedly", Event.CRASH),
        ("died, exit code:", r"Worker \S+ pid \d+ died, exit code:", Event.CRASH),
    )
    serving_shapes = (UVICORN_SERVED,)  # its API server's access log
    shared_ready = ("Application startup complete",)  # uvicorn's
    ready_marker = "Application startup complete."
    metric_prefix = "vllm:"
    latency = ("vllm:time_to_first_token_seconds", "vllm:inter_token_latency_seconds")
    positions_from_start = True
    counters = CounterNames(
        gen="vllm:generation_tokens_total",
        drafts="vllm:spec_decode_num_drafts_total",
        draft_tokens="vllm:spec_decode_num_draft_tokens_total",
        accepted="vllm:spec_decode_num_accepted_tokens_total",
        per_position="vllm:spec_decode_num_accepted_tokens_per_pos_total",
        request_tokens="vllm:request_generation_tokens_sum",
        request_count="vllm:request_generation_tokens_count",
        request_decode_s="vllm:request_decode_time_seconds_sum",
    )
    default_port = 8000
    entry_points = EntryPoints(
        scripts=(("vllm", "serve"),),
        modules=(("vllm.entrypoints.openai.api_server", ""), ("vllm.entrypoints.api_server", ""),
                 ("vllm.entrypoints.cli.main", "serve"), ("vllm", "serve")),
    )

    dimensions = (
        Dimension("prompt_lookup_max", "n-gram lookup window, longest", 1, 64),
        Dimension("prompt_lookup_min", "n-gram lookup window, shortest", 1, 64),
    )

    def request_drafts(self, answer: Mapping[str, Any]) -> tuple[int, int] | None:
        """The answer's ``metrics.speculative_decoding`` (``num_draft_tokens``, ``num_accepted_draft_tokens``):
        with ``--per-request-spec-decode-metrics summary`` (vLLM 0.34, experimental; in a stream, the
        final usage chunk)."""
        metrics = answer.get("metrics")
        spec = metrics.get("speculative_decoding") if isinstance(metrics, Mapping) else None
        return draft_pair(spec, "num_draft_tokens", "num_accepted_draft_tokens")

    def point_problem(self, steps: int, point: Mapping[str, int | str]) -> str | None:
        lo, hi = point.get("prompt_lookup_min"), point.get("prompt_lookup_max")
        if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
            return f"prompt_lookup_min {lo} is above prompt_lookup_max {hi}"
        return None

    spec_flags = r"speculative|num-speculative-tokens|ngram-prompt-lookup|spec-decoding"
    env_prefixes = ("VLLM_",)
    draft_tokens_count_root = False  # num_speculative_tokens is the drafted tokens

    def read_spec(self, argv: Sequence[str]) -> SpecSettings:
        configs = flag_values(argv, "--speculative-config")
        method: str | None = None
        steps: int | None = None
        if configs:
            conf = load_json_flag("--speculative-config", configs[-1])
            method = str(conf.get("method") or conf.get("model") or "") or None
            value = conf.get("num_speculative_tokens")
            if type(value) is int:
                steps = value
        dotted = last_int(argv, "--speculative-config.num-speculative-tokens")
        if dotted is not None:
            steps = dotted
        old = last_int(argv, "--num-speculative-tokens")
        if old is not None:
            steps = old
            models = flag_values(argv, "--speculative-model")
            method = method or (models[-1] if models else None)
        if steps is None and method is None:
            return SpecSettings(steps=0)
        return SpecSettings(steps=steps, method=method)

    def spec_texts(self, argv: Sequence[str], steps: int, draft_tokens: int | None) -> tuple[str | None, str]:
        if draft_tokens is not None:
            raise ArgvError("vLLM has no separate draft-token count")
        return None, "1"

    def write_spec(self, argv: Sequence[str], steps: str, draft_tokens: str | None, topk: str) -> list[str]:
        out = list(argv)
        hit = set_json_key(out, "--speculative-config", "num_speculative_tokens", steps)
        hit |= set_flag(out, "--speculative-config.num-speculative-tokens", steps, add=False)
        hit |= set_flag(out, "--num-speculative-tokens", steps, add=False)
        if not hit:
            raise ArgvError("the server runs without speculative decoding; write a launch profile to add it")
        return out

    def schedule_form(self, ranges: Ranges, *, argv: Sequence[str] | None = None,
                      setting: tuple[str | None, int | None] | None = None,
                      config_path: str = "specmon-schedule.json") -> ScheduleForm:
        base = spec_config_base(argv) if argv else None
        flag = table_flag(ranges, base)
        lines = () if flag is None else (
            flag + ("" if base else f" (add the method and the draft model of your {SPEC_CONFIG_FLAG})"),)
        return ScheduleForm(lines, fields={"vllm_speculative_config": table_keys(ranges)})

    schedule_flag = SPEC_CONFIG_FLAG

    def schedule_argv(self, argv: Sequence[str], ranges: Ranges) -> list[str]:
        found = spec_config_at(argv)
        if found is None:
            raise ArgvError(f"the profile's argv has no {SPEC_CONFIG_FLAG} to put the schedule in")
        index, text = found
        extra = sorted(set(_PLACEHOLDER.findall(text)) - {"{steps}"})
        if extra:
            raise ArgvError(f"the profile's {SPEC_CONFIG_FLAG} varies {', '.join(extra)} besides {{steps}}: a "
                            "schedule sets the step count alone")
        base, keys = spec_config_base(argv), table_keys(ranges)
        if base is None or keys is None:
            raise ArgvError(f"the profile's {SPEC_CONFIG_FLAG} is not a JSON object specmon can read")
        doc = json.dumps({**base, **keys}, separators=(", ", ": "))
        out = list(argv)
        out[index] = doc if out[index] == text else f"{SPEC_CONFIG_FLAG}={doc}"
        return out

    def config_at(self, message: str) -> int:
        for marker in CONFIG_MARKERS:
            at = message.find(marker)
            if at >= 0:
                return at
        return -1

    def config_reader(self) -> ConfigReader:
        return parse_config
