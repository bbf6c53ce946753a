"""SGLang ``Decode batch`` / ``Prefill batch`` lines and the ``server_args`` configuration.

Bodies are split into ``key: value`` pairs and read by key, never by position:
field order changed across releases, new fields keep appearing, and device
labels vary (``cuda graph``, ``npu graph``, ``cpu graph``, ``musa graph``).
A field that looks cut or glued to another (a terminal copy that lost
characters: ``token usaccept rate: 0.32``) makes the whole line ``Unparsed``:
a value we cannot attribute with certainty is not a value we report.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Mapping, Sequence

from specmon.engines.argv import ArgvError, SpecSettings, flag_values, last_int, set_flag
from specmon.engines.base import (
    UVICORN_SERVED,
    ConfigReader,
    Dimension,
    EngineAdapter,
    EntryPoints,
    GaugeNames,
    Ranges,
    ScheduleForm,
)
from specmon.grammar.common import cut, split_fields, to_bool, to_float, to_int
from specmon.grammar.kinds import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    FieldSpec,
    LineKind,
    split_trailing,
    to_bool_bytes,
)
from specmon.records import Config, Decode, Engine, Event, Prefill, Unparsed

DECODE_MARKER = "Decode batch"
PREFILL_MARKER = "Prefill batch"

# The keys we read, by record field. First present wins (plain, hybrid SWA/mamba, HiSparse).
_TOKENS_KEYS = ("#token", "#full token", "#gpu token", "#gpu-token")
_USAGE_KEYS = ("token usage", "full token usage", "gpu token usage")
_GRAPH_KEYS = ("cuda graph", "npu graph", "cpu graph", "musa graph", "xpu graph")
#: Any other device's graph flag (``hpu graph``, ``mlu graph``): one lower-case word + `` graph``.
GRAPH_KEY_PATTERN = r"[a-z][a-z0-9_]{1,11} graph"
_THROUGHPUT_KEY = "gen throughput (token/s)"

#: Every key SGLang is known to print in these lines (FORMATS.md §1.2-1.4). A key
#: outside this set is fine (new releases add fields) unless it looks like two
#: known keys glued by a lost stretch of text.
KNOWN_KEYS = frozenset(
    {
        "#running-req", "#token", "token usage", "#full token", "full token usage",
        "#swa token", "swa token usage", "mamba num", "mamba usage", "#gpu token",
        "gpu token usage", "#cpu token", "cpu token usage", "#gpu-token", "#cpu-token",
        "accept len", "accept rate", "pre-allocated usage", "#prealloc-req",
        "#transfer-req", "#retracted-req", "waiting-image-req", "cuda graph", "npu graph",
        "cpu graph", "musa graph", "xpu graph", "gen throughput (token/s)", "#queue-req",
        "largest-len", "timestamp", "est. decode TFLOPS/s (per GPU)",
        "est. read BW (GB/s per GPU)", "est. write BW (GB/s per GPU)", "fwd occupancy",
        "#new-seq", "#new-token", "#cached-token", "cache hit rate", "#pending-token",
        "#bootstrap-req", "#inflight-req", "#unbootstrapped-req", "#transferring-req",
        "input throughput (token/s)", "est. prefill TFLOPS/s (per GPU)", "#cache_miss",
    }
)
# Known keys long enough that finding one at the end of an unknown key means a glued cut.
_GLUE_SUFFIXES = tuple(k for k in KNOWN_KEYS if len(k) >= 8)


_PREFIXES = frozenset(k[:n] for k in KNOWN_KEYS for n in range(4, len(k)))
_SUFFIXES = frozenset(k[-n:] for k in KNOWN_KEYS for n in range(4, len(k)))


def _glued(key: str, strict: bool) -> bool:
    """Whether an unknown key is the remains of two keys glued by lost text.

    ``token usaccept rate`` (a whole known key after lost text) is caught always.
    ``#cached-tounning-req`` (a known key's start + another's end) is caught only
    when ``strict``: that test would also flag a *new* field built from familiar
    words, so it is used on prefill lines, which only count, and not on decode
    lines, whose statistics must survive the next release's new fields.
    """
    if key.endswith(_GLUE_SUFFIXES):
        return True
    if strict:
        return any(key[:i] in _PREFIXES and key[i:] in _SUFFIXES for i in range(4, len(key) - 3))
    return False


def _check_fields(fields: dict[str, str], bad: list[str], strict: bool) -> str | None:
    """A reason why the body cannot be trusted, or None."""
    if bad:
        return f"cut or malformed field: {bad[0][:60]!r}"
    for key in fields:
        if key not in KNOWN_KEYS and _glued(key, strict):
            return f"cut or malformed field: {key[:60]!r}"
    return None


_SEP = re.compile(r" ?[.,|]")  # what separates the marker from the fields


def _body_start(message: str, marker: str) -> int:
    """Where the key-value body begins after ``Decode batch.``, ``Decode batch,``,
    ``Decode batch |`` or ``Decode batch [N],``."""
    at = message.index(marker) + len(marker)
    if message.startswith(" [", at):  # iteration index, SGLANG_LOG_FORWARD_ITERS
        close = message.find("]", at)
        if close > 0:
            at = close + 1
    sep = _SEP.match(message, at)
    if sep is not None:
        at = sep.end()
    elif message.startswith("(mixed", at):  # v0.2.13-0.3.x mixed-chunk prefill
        close = message.find(")", at)
        at = close + 2 if close > 0 else at
    return at


def _body(message: str, marker: str) -> str:
    """The key-value body after the marker and its separator, without trailing punctuation."""
    return split_trailing(message[_body_start(message, marker):])[0]


def _first(fields: dict[str, str], keys: tuple[str, ...]) -> str | None:
    for k in keys:
        v = fields.get(k)
        if v is not None:
            return v
    return None


def parse_decode(message: str, line: int, ts: float | None, rank: str | None) -> Decode | Unparsed:
    """Parse the message of a ``Decode batch`` line (prefix already read)."""
    # A cut at the very end (``#queue-``) loses that field only; the others are whole.
    fields, bad, _tail = split_fields(_body(message, DECODE_MARKER))
    reason = _check_fields(fields, bad, strict=False)
    thr = fields.get(_THROUGHPUT_KEY)
    gen = to_float(thr) if thr is not None else None
    if reason is None and gen is None:
        reason = "no readable gen throughput"
    if reason is not None:
        return Unparsed(line, ts, rank, marker=DECODE_MARKER, reason=reason, text=cut(message))
    tokens = _first(fields, _TOKENS_KEYS)
    usage = _first(fields, _USAGE_KEYS)
    graph = _first(fields, _GRAPH_KEYS)
    if graph is None:
        graph = next((v for k, v in fields.items() if re.fullmatch(GRAPH_KEY_PATTERN, k)), None)
    running = fields.get("#running-req")
    queue = fields.get("#queue-req")
    acc_len = fields.get("accept len")
    acc_rate = fields.get("accept rate")
    rec = Decode(
        line, ts, rank,
        running_req=to_int(running) if running is not None else None,
        tokens=to_int(tokens) if tokens is not None else None,
        token_usage=to_float(usage) if usage is not None else None,
        accept_len=to_float(acc_len) if acc_len is not None else None,
        accept_rate=to_float(acc_rate) if acc_rate is not None else None,
        graph=to_bool(graph) if graph is not None else None,
        gen_throughput=gen,
        queue_req=to_int(queue) if queue is not None else None,
    )
    # A field that is present but unreadable ("accept len: x.5") is a damaged line.
    for raw, value in ((acc_len, rec.accept_len), (acc_rate, rec.accept_rate), (running, rec.running_req)):
        if raw is not None and value is None:
            return Unparsed(line, ts, rank, marker=DECODE_MARKER,
                            reason=f"unreadable value {raw[:30]!r}", text=cut(message))
    return rec


def parse_prefill(message: str, line: int, ts: float | None, rank: str | None) -> Prefill | Unparsed:
    """Parse the message of a ``Prefill batch`` line."""
    fields, bad, _tail = split_fields(_body(message, PREFILL_MARKER))
    reason = _check_fields(fields, bad, strict=True)
    if reason is None and not fields:
        reason = "no fields"
    if reason is not None:
        return Unparsed(line, ts, rank, marker=PREFILL_MARKER, reason=reason, text=cut(message))

    def num(key: str) -> int | None:
        v = fields.get(key)
        return to_int(v) if v is not None else None

    thr = fields.get("input throughput (token/s)")
    return Prefill(
        line, ts, rank,
        new_seq=num("#new-seq"),
        new_token=num("#new-token"),
        cached_token=num("#cached-token"),
        running_req=num("#running-req"),
        queue_req=num("#queue-req"),
        input_throughput=to_float(thr) if thr is not None else None,
    )


#: The two forms SGLang prints its arguments in at launch: ``ServerArgs(k=v, ...)`` (the
#: dataclass repr, up to 0.4.x) and ``{'k': v, ...}`` (a Python dict, 0.5.x). Both are
#: matched with their opening bracket, so ``server_args=server_args`` in a traceback's
#: source line is not taken for a configuration.
SERVER_ARGS_MARKERS = ("server_args=ServerArgs(", "server_args={")
#: The shortest text every form holds (a cheap first test).
SERVER_ARGS_MARKER = "server_args="
_ARG = re.compile(r"(?<![\w.])(?P<k>[a-z_]+)=(?P<v>'(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()]+)")
#: A dict key and the start of its value, for a dict that is cut or holds a value no literal
#: parser reads (an object's ``<...>`` repr): each value is then read on its own.
_DICT_KEY = re.compile(r"(?:\{|, )'(?P<k>[a-z_][a-z0-9_]*)': ")
#: The dict text ``ast.literal_eval`` is given whole at most (SGLang 0.5.23 prints ~12 KB):
#: parsing cost and memory stay bounded whatever a line holds (the line cap is 1 MiB).
_LITERAL_CAP = 256 * 1024
#: A single value read on its own at most (a path, a JSON string, a short list).
_VALUE_CAP = 4096
_SPEC_KEYS = frozenset({
    "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens",
})
_WANTED = frozenset(
    {
        "model_path", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
        "speculative_num_draft_tokens", "speculative_draft_model_path", "tp_size", "dp_size",
        "ep_size", "enable_dp_attention", "decode_log_interval", "served_model_name",
        "speculative_adaptive", "speculative_adaptive_config", "speculative_ngram_max_trie_depth",
        "speculative_ngram_match_type",
    }
)
#: Algorithms whose drafter has no steps: ``speculative_num_steps`` is 0 or unset, and the
#: depth is the draft tokens after the verified root (``--speculative-num-draft-tokens`` - 1).
_STEPLESS = frozenset({"NGRAM", "LOOKAHEAD"})
_Value = str | int | float | bool | None


def _py_value(text: str) -> str | int | None:
    text = text.strip()
    if text == "None":
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    iv = to_int(text)
    return iv if iv is not None else text


def _plain(value: object) -> _Value:
    """A literal as a scalar record value: containers as their repr (bounded), scalars as they are."""
    if value is None or isinstance(value, str | int | float | bool):
        return value
    return cut(repr(value))


def _literal(text: str) -> tuple[bool, object]:
    """``ast.literal_eval(text)`` for bounded text: (True, value), or (False, None) when it is no literal."""
    if len(text) > _LITERAL_CAP:
        return False, None
    try:
        return True, ast.literal_eval(text)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None


def _dict_args(text: str) -> tuple[dict[str, _Value], bool]:
    """The wanted keys of a ``{'k': v, ...}`` text, and whether the text was whole: the dict as one
    literal when it is one, else each wanted key's value read on its own (a cut line, an object
    repr among the values)."""
    ok, value = _literal(text)
    if ok and isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items() if isinstance(k, str) and k in _WANTED}, True
    out: dict[str, _Value] = {}
    for m in _DICT_KEY.finditer(text):
        k = m.group("k")
        if k not in _WANTED or k in out:
            continue
        # The value runs to the next key (", 'name': ") or the dict's end: the shortest such
        # stretch that is a literal is the value (a string may itself hold ", '").
        at = m.end()
        for nxt in re.finditer(r", '[a-z_][a-z0-9_]*': |\}$", text[at:at + _VALUE_CAP]):
            ok, v = _literal(text[at:at + nxt.start()])
            if ok:
                out[k] = _plain(v)
                break
    return out, False  # (whole or cut, a field it could not read is not known to be absent)


def _call_args(text: str) -> tuple[dict[str, _Value], bool]:
    """The wanted keys of a ``ServerArgs(k=v, ...)`` text: parsed as a call whose keyword values
    are each read as a literal; the old scan by pattern when it is no such call (a cut line)."""
    tree: ast.AST | None = None
    if len(text) <= _LITERAL_CAP:
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            tree = None
    if isinstance(tree, ast.Expression) and isinstance(tree.body, ast.Call):
        out: dict[str, _Value] = {}
        for kw in tree.body.keywords:
            if kw.arg in _WANTED:
                try:
                    out[kw.arg] = _plain(ast.literal_eval(kw.value))
                except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
                    continue  # an object repr (``<Enum.X: 1>``): not a value we read
        return out, True
    args: dict[str, _Value] = {}
    for m in _ARG.finditer(text):
        k = m.group("k")
        if k in _WANTED and k not in args:
            args[k] = _py_value(m.group("v"))
    return args, False


def parse_server_args(message: str, line: int, ts: float | None, rank: str | None) -> Config | Unparsed:
    """The speculative configuration from SGLang's launch line, in either form.

    ``server_args=ServerArgs(model_path='m', ...)`` (to 0.4.x) or
    ``server_args={'model_path': 'm', ...}`` (0.5.x): read with Python's literal parser
    (``ast``), never evaluated, bounded in size. A value that is no literal is skipped.
    """
    at = message.index(SERVER_ARGS_MARKER) + len(SERVER_ARGS_MARKER)
    body = split_trailing(message[at:])[0]
    args, whole = _dict_args(body) if body.startswith("{") else _call_args(body)
    if "model_path" not in args and "speculative_algorithm" not in args:
        return Unparsed(line, ts, rank, marker=SERVER_ARGS_MARKER,
                        reason="no model_path or speculative_algorithm", text=cut(message))
    algo = args.get("speculative_algorithm")
    algorithm = str(algo) if algo is not None else None

    def as_int(k: str) -> int | None:
        v = args.get(k)
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    steps = as_int("speculative_num_steps")
    draft_tokens = as_int("speculative_num_draft_tokens") if algorithm else None
    topk = as_int("speculative_eagle_topk") if algorithm else None
    if algorithm is None:
        # No speculation when the line says so (None), or is whole without the field (releases
        # before speculative decoding); a line cut before the field leaves it unknown.
        steps = 0 if "speculative_algorithm" in args or whole else None
    elif algorithm.upper() in _STEPLESS:
        # NGRAM drafts from a trie, not in steps: SGLang leaves num_steps 0 (which would read as
        # no speculation) and a top-k it does not use; its depth is the tokens after the root.
        steps = draft_tokens - 1 if draft_tokens is not None and draft_tokens > 1 else None
        topk = None
    model = args.get("model_path")
    extra = {k: v for k, v in args.items() if k not in _SPEC_KEYS and k != "model_path"}
    return Config(
        line, ts, rank,
        engine=Engine.SGLANG,
        algorithm=algorithm,
        steps=steps,
        topk=topk,
        draft_tokens=draft_tokens,
        model=str(model) if model is not None else None,
        extra=extra,
    )


# -- the grammar of these lines (shared with the bulk path) ------------------------------------

DECODE = LineKind(
    name="sglang.decode", engine=Engine.SGLANG, marker=DECODE_MARKER, parse=parse_decode, record=Decode,
    fields=(
        FieldSpec("running_req", ("#running-req",), INT, int),
        FieldSpec("tokens", _TOKENS_KEYS, INT, int),
        FieldSpec("token_usage", _USAGE_KEYS, FLOAT, float),
        FieldSpec("accept_len", ("accept len",), FLOAT, float),
        FieldSpec("accept_rate", ("accept rate",), FLOAT, float),
        FieldSpec("graph", _GRAPH_KEYS, BOOL, to_bool_bytes, key_pattern=GRAPH_KEY_PATTERN),
        FieldSpec("gen_throughput", (_THROUGHPUT_KEY,), FLOAT, float),
        FieldSpec("queue_req", ("#queue-req",), INT, int),
    ),
    body=lambda message: _body_start(message, DECODE_MARKER),
    columns=("running_req", "gen_throughput", "accept_len", "accept_rate"),
)


def _opt_int(text: bytes) -> int | None:
    return int(text) if text.isdigit() else None


def _opt_float(text: bytes) -> float | None:
    return to_float(text.decode())


PREFILL = LineKind(
    name="sglang.prefill", engine=Engine.SGLANG, marker=PREFILL_MARKER, parse=parse_prefill, record=Prefill,
    # Prefill values are read when they can be and never make the line unparsed: any value.
    fields=(
        FieldSpec("new_seq", ("#new-seq",), ANY, _opt_int),
        FieldSpec("new_token", ("#new-token",), ANY, _opt_int),
        FieldSpec("cached_token", ("#cached-token",), ANY, _opt_int),
        FieldSpec("running_req", ("#running-req",), ANY, _opt_int),
        FieldSpec("queue_req", ("#queue-req",), ANY, _opt_int),
        FieldSpec("input_throughput", ("input throughput (token/s)",), ANY, _opt_float),
    ),
    body=lambda message: _body_start(message, PREFILL_MARKER),
    columns=(),
)


# -- the engine's facts ------------------------------------------------------------------------


def tree_problem(steps: int, topk: int | None, draft_tokens: int | None) -> str | None:
    """Why SGLang would refuse or rewrite this draft tree (None when it accepts it as given)."""
    if steps == 0 or draft_tokens is None:
        return None
    k = 1 if topk is None else topk
    if k == 1 and draft_tokens != steps + 1:
        return f"top-k 1 makes SGLang use steps+1 = {steps + 1} draft tokens, not {draft_tokens}"
    if draft_tokens > steps * k + 1:
        return f"{draft_tokens} draft tokens exceed steps*topk+1 = {steps * k + 1}"
    if draft_tokens < 2:
        return "a tree needs at least 2 draft tokens"
    return None


# -- its adaptive mode: the tiers it switches between as it runs ------------------------------

#: SGLang's adaptive mode runs these algorithms only, with one draft token per step (top-k 1):
#: sglang/srt/speculative/adaptive_spec_params.py, adaptive_unsupported_reason (0.5.23).
ADAPTIVE_ALGORITHMS = ("EAGLE", "EAGLE3")
ADAPTIVE_FLAG = "--speculative-adaptive"
ADAPTIVE_CONFIG_FLAG = "--speculative-adaptive-config"


def adaptive_unsupported(algorithm: str | None, topk: int | None) -> str | None:
    """Why SGLang's adaptive mode would not run this setting (None when it would)."""
    if algorithm is not None and algorithm.upper() not in ADAPTIVE_ALGORITHMS:
        return f"SGLang's adaptive mode runs EAGLE and EAGLE3 only, not {algorithm}"
    if topk is not None and topk != 1:
        return f"SGLang's adaptive mode runs top-k 1 only (this setting has top-k {topk})"
    return None


def tier_config(ranges: Ranges) -> dict[str, dict[str, list[int]]]:
    """Its adaptive config for a schedule: a slot per range (its first batch size), one candidate
    tier each, so the engine runs the measured K at that load rather than choosing by itself."""
    return {str(first): {"candidate_steps": [k]} for first, _last, k in ranges}


def _flag_value(argv: Sequence[str], flag: str) -> str | None:
    values = flag_values(argv, flag)
    return values[-1] if values else None


class SGLang(EngineAdapter):
    """SGLang: ``Decode batch`` stats lines, ``server_args`` configuration, gauges on ``/metrics``."""

    engine = Engine.SGLANG
    label = "SGLang"
    kinds = (DECODE, PREFILL)
    config_words = SERVER_ARGS_MARKERS
    config_markers = SERVER_ARGS_MARKERS
    signs = (("Decode batch", 3), ("Prefill batch", 3), ("server_args=ServerArgs(", 5), ("server_args={'", 5),
             ("fired up and ready to roll", 5), ("sglang", 1))
    # Its prefix with rank tags anywhere ("07:15:26 TP0] ", searched from its first colon: a
    # pattern that starts with a literal is searched at C speed, one that starts with \d is
    # tried at every position), or bare ("[2025-09-04 07:15:26] ") at the start of a line:
    # vLLM prints "LEVEL MM-DD", llama.cpp no brackets, TGI / TensorRT-LLM other shapes.
    shapes = (re.compile(r":(?<=\d\d:)\d{2}:\d{2}(?:\.\d{3})?(?: [A-Z_]+\d+)+\] "),
              re.compile(r"\A\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?\] "))
    shape_gates = ("] ",)
    serving_shapes = (UVICORN_SERVED,)  # its HTTP server's access log
    lifecycle = (
        # Every SGLang process loop that dies of an uncaught exception logs "<its name> hit an
        # exception: <traceback>" and sends SIGQUIT to the parent, which kills the whole tree
        # (managers/scheduler.py, detokenizer_manager.py, data_parallel_controller.py, the model
        # worker clients' forward threads): the end of the server, whatever the exception.
        ("Scheduler hit an exception", Event.CRASH),
        ("TokenizerManager hit an exception", Event.CRASH),
        ("hit an exception: ", Event.CRASH),
        ("Received sigquit from a child proces", Event.CRASH),
        # data_parallel_controller.py, when a scheduler process it watches exits.
        ("Scheduler or DataParallelController", Event.CRASH),
        ("Capture cuda graph failed", Event.CRASH),
        ("Decode out of memory. Try to lower", Event.OOM),
        ("KV cache pool is full. Retract requests", Event.RETRACT),
        ("Decode out of memory happened", Event.RETRACT),
        ("Load weight begin", Event.LOAD_BEGIN),
        ("Load weight end", Event.LOAD_END),
        ("KV Cache is allocated", Event.KV_CACHE),
        ("Capturing batches", Event.GRAPH_PROGRESS),
        ("The server is fired up and ready to roll", Event.READY),
    )
    ready_marker = "The server is fired up and ready to roll!"
    # CUDA-graph capture and the first batches' compilation make SGLang's first samples slow.
    warmup = 5
    draft_tree = True
    no_schedule_reason = "SGLang reads its adaptive tiers from a file on the host, which specmon does not write yet"
    per_position_note = "SGLang does not log per-position acceptance"
    throughput_since_last_line = True  # tokens since the previous decode line over the time since
    metric_prefix = "sglang:"
    metrics_hint = "SGLang needs --enable-metrics"
    latency = ("sglang:time_to_first_token_seconds", "sglang:inter_token_latency_seconds")
    # Gauges of the last decode log interval, the very figures its line prints (checked on 0.5.23,
    # tests/data/metrics/), its active setting, and its finished requests' counters.
    gauges = GaugeNames(
        gen_tps="sglang:gen_throughput", accept_len="sglang:spec_accept_length",
        accept_rate="sglang:spec_accept_rate", num_steps="sglang:spec_num_steps",
        num_draft_tokens="sglang:spec_num_draft_tokens", gen="sglang:generation_tokens_total",
        verify="sglang:spec_verify_calls_total", requests="sglang:num_requests_total",
    )
    default_port = 30000
    entry_points = EntryPoints(
        scripts=(("sglang", "serve"),),
        modules=(("sglang.launch_server", ""), ("sglang.cli.main", "serve")),  # the ``sglang`` script's
        script_paths=("sglang/launch_server.py",),
    )

    def config_at(self, message: str) -> int:
        if SERVER_ARGS_MARKER not in message:
            return -1
        found = [i for i in (message.find(m) for m in SERVER_ARGS_MARKERS) if i >= 0]
        return min(found) if found else -1

    def config_reader(self) -> ConfigReader:
        return parse_server_args

    dimensions = (
        Dimension("topk", "EAGLE top-k (branches per draft step)", 1, 64),
        Dimension("draft_tokens", "draft tokens verified per cycle", 1, 64 * 64 + 1),
    )

    def draft_limit(self, steps: int, topk: int) -> int | None:
        # The draft tree holds at most steps*topk tokens plus the root.
        return steps * topk + 1

    def schedule_form(self, ranges: Ranges, *, argv: Sequence[str] | None = None,
                      setting: tuple[str | None, int | None] | None = None,
                      config_path: str = "specmon-schedule.json") -> ScheduleForm:
        top = max((k for _a, _b, k in ranges), default=0)
        fields = {"sglang_adaptive_config": tier_config(ranges) if top else None}
        problem = adaptive_unsupported(*setting) if setting is not None else None
        if problem or not top:
            return ScheduleForm(problem=problem, fields=fields)
        flags = (f"{ADAPTIVE_FLAG} {ADAPTIVE_CONFIG_FLAG} {config_path} "
                 f"--speculative-num-steps {top} --speculative-eagle-topk 1")
        return ScheduleForm((flags, f"with {config_path}: {json.dumps(tier_config(ranges))}"), fields=fields)

    adaptive_flag = ADAPTIVE_FLAG

    def adaptive_argv(self, argv: Sequence[str], config_path: str | None = None) -> list[str]:
        if any(t == ADAPTIVE_FLAG or t.startswith(ADAPTIVE_CONFIG_FLAG) for t in argv):
            raise ArgvError("the profile's argv already runs SGLang's adaptive mode: its fixed settings would "
                            "not be fixed")
        topk = _flag_value(argv, "--speculative-eagle-topk")
        why = adaptive_unsupported(_flag_value(argv, "--speculative-algorithm"),
                                   int(topk) if topk is not None and topk.isdigit() else None)
        if why:
            raise ArgvError(why)
        return [*argv, ADAPTIVE_FLAG, *((ADAPTIVE_CONFIG_FLAG, config_path) if config_path else ())]

    def point_problem(self, steps: int, point: Mapping[str, int | str]) -> str | None:
        topk, dt = point.get("topk"), point.get("draft_tokens")
        return tree_problem(steps, topk if isinstance(topk, int) else None, dt if isinstance(dt, int) else None)

    spec_flags = r"speculative"
    env_prefixes = ("SGLANG_", "SGL_")

    def read_spec(self, argv: Sequence[str]) -> SpecSettings:
        methods = flag_values(argv, "--speculative-algorithm")
        if not methods:
            return SpecSettings(steps=0)
        if methods[-1].upper() == "NGRAM":
            # NGRAM drafts from a trie, not in steps: its depth is the draft tokens after the root
            # (SGLang ignores --speculative-num-steps and -eagle-topk for it), as the log reader says.
            tokens = last_int(argv, "--speculative-num-draft-tokens")
            return SpecSettings(steps=tokens - 1 if tokens is not None and tokens > 1 else None,
                                draft_tokens=tokens, method=methods[-1])
        return SpecSettings(
            steps=last_int(argv, "--speculative-num-steps"),
            draft_tokens=last_int(argv, "--speculative-num-draft-tokens"),
            topk=last_int(argv, "--speculative-eagle-topk"),
            method=methods[-1],
        )

    def spec_texts(self, argv: Sequence[str], steps: int, draft_tokens: int | None) -> tuple[str | None, str]:
        topk = self.read_spec(argv).topk or 1
        if draft_tokens is None:
            if topk != 1:
                raise ArgvError(f"top-k is {topk}: say how many draft tokens (at most {steps * topk + 1})")
            draft_tokens = steps + 1
        hi = steps * topk + 1
        if type(draft_tokens) is not int or not 1 <= draft_tokens <= hi:
            raise ArgvError(f"draft_tokens must be between 1 and {hi}, not {draft_tokens!r} "
                            f"(steps*topk+1 with steps {steps}, topk {topk})")
        return str(draft_tokens), str(topk)

    def write_spec(self, argv: Sequence[str], steps: str, draft_tokens: str | None, topk: str) -> list[str]:
        out = list(argv)
        methods = flag_values(out, "--speculative-algorithm")
        if not methods:
            raise ArgvError("the server runs without speculative decoding; write a launch profile to add it")
        if draft_tokens is None:
            raise ArgvError("SGLang needs its draft-token count with the step count")
        if methods[-1].upper() == "NGRAM":
            set_flag(out, "--speculative-num-draft-tokens", draft_tokens, add=True)
            return out
        set_flag(out, "--speculative-num-steps", steps, add=True)
        set_flag(out, "--speculative-num-draft-tokens", draft_tokens, add=True)
        # SGLang chooses steps, top-k and draft tokens together or not at all.
        set_flag(out, "--speculative-eagle-topk", topk, add=True)
        return out

    def counts_tokens(self, algorithm: str | None) -> bool:
        # SGLang counts draft steps, except for its trie drafters (NGRAM), whose depth is the
        # draft tokens after the root.
        return (algorithm or "").upper() in _STEPLESS
