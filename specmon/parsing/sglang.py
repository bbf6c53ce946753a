"""SGLang ``Decode batch`` / ``Prefill batch`` lines and the ``server_args`` configuration.

Bodies are split into ``key: value`` pairs and read by key, never by position:
field order changed across releases, new fields keep appearing, and device
labels vary (``cuda graph``, ``npu graph``, ``cpu graph``, ``musa graph``).
A field that looks cut or glued to another (a terminal copy that lost
characters: ``token usaccept rate: 0.32``) makes the whole line ``Unparsed``:
a value we cannot attribute with certainty is not a value we report.
"""

from __future__ import annotations

import re

from specmon.parsing.common import cut, split_fields, to_bool, to_float, to_int
from specmon.parsing.grammar import (
    ANY,
    BOOL,
    FLOAT,
    INT,
    FieldSpec,
    LineKind,
    register,
    split_trailing,
    to_bool_bytes,
)
from specmon.records import Config, Decode, Engine, Prefill, Unparsed

DECODE_MARKER = "Decode batch"
PREFILL_MARKER = "Prefill batch"

# The keys we read, by record field. First present wins (plain, hybrid SWA/mamba, HiSparse).
_TOKENS_KEYS = ("#token", "#full token", "#gpu token", "#gpu-token")
_USAGE_KEYS = ("token usage", "full token usage", "gpu token usage")
_GRAPH_KEYS = ("cuda graph", "npu graph", "cpu graph", "musa graph", "xpu graph")
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


SERVER_ARGS_MARKER = "server_args=ServerArgs("
_ARG = re.compile(r"(?<![\w.])(?P<k>[a-z_]+)=(?P<v>'(?:[^'\\]|\\.)*'|\"[^\"]*\"|[^,()]+)")
_WANTED = frozenset(
    {
        "model_path", "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
        "speculative_num_draft_tokens", "speculative_draft_model_path", "tp_size", "dp_size",
        "ep_size", "enable_dp_attention", "decode_log_interval", "served_model_name",
    }
)


def _py_value(text: str) -> str | int | None:
    text = text.strip()
    if text == "None":
        return None
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    iv = to_int(text)
    return iv if iv is not None else text


def parse_server_args(message: str, line: int, ts: float | None, rank: str | None) -> Config | Unparsed:
    """The speculative configuration from SGLang's ``server_args=ServerArgs(...)`` line."""
    args: dict[str, str | int | None] = {}
    for m in _ARG.finditer(message, message.index(SERVER_ARGS_MARKER) + len(SERVER_ARGS_MARKER)):
        k = m.group("k")
        if k in _WANTED and k not in args:
            args[k] = _py_value(m.group("v"))
    if "model_path" not in args and "speculative_algorithm" not in args:
        return Unparsed(line, ts, rank, marker=SERVER_ARGS_MARKER,
                        reason="no model_path or speculative_algorithm", text=cut(message))
    algo = args.get("speculative_algorithm")
    algorithm = str(algo) if algo is not None else None

    def as_int(k: str) -> int | None:
        v = args.get(k)
        return v if isinstance(v, int) else None

    steps = as_int("speculative_num_steps")
    if algorithm is None:
        steps = 0
    model = args.get("model_path")
    extra = {k: v for k, v in args.items() if k not in {"model_path", "speculative_algorithm",
                                                         "speculative_num_steps", "speculative_eagle_topk",
                                                         "speculative_num_draft_tokens"}}
    return Config(
        line, ts, rank,
        engine=Engine.SGLANG,
        algorithm=algorithm,
        steps=steps,
        topk=as_int("speculative_eagle_topk") if algorithm else None,
        draft_tokens=as_int("speculative_num_draft_tokens") if algorithm else None,
        model=str(model) if model is not None else None,
        extra=extra,
    )


# -- the grammar of these lines (shared with the bulk path) ------------------------------------

DECODE = register(LineKind(
    name="sglang.decode", engine=Engine.SGLANG, marker=DECODE_MARKER, parse=parse_decode, record=Decode,
    fields=(
        FieldSpec("running_req", ("#running-req",), INT, int),
        FieldSpec("tokens", _TOKENS_KEYS, INT, int),
        FieldSpec("token_usage", _USAGE_KEYS, FLOAT, float),
        FieldSpec("accept_len", ("accept len",), FLOAT, float),
        FieldSpec("accept_rate", ("accept rate",), FLOAT, float),
        FieldSpec("graph", _GRAPH_KEYS, BOOL, to_bool_bytes),
        FieldSpec("gen_throughput", (_THROUGHPUT_KEY,), FLOAT, float),
        FieldSpec("queue_req", ("#queue-req",), INT, int),
    ),
    body=lambda message: _body_start(message, DECODE_MARKER),
    columns=("running_req", "gen_throughput", "accept_len", "accept_rate"),
))


def _opt_int(text: bytes) -> int | None:
    return int(text) if text.isdigit() else None


def _opt_float(text: bytes) -> float | None:
    return to_float(text.decode())


PREFILL = register(LineKind(
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
))
