"""llama.cpp ``llama-server`` per-request speculative summaries and generation speed.

llama.cpp logs speculation once per finished request (``draft acceptance rate =
...`` or, since 2026, ``draft acceptance = ..., mean acceptance length = ...,
acceptance rate per position = (...)``) and the request's generation speed in
the ``eval time = ... tokens per second`` line of the same ``print_timing`` block.

The configuration comes from the start-up lines of ``common_speculative``:
``adding speculative implementation 'draft-simple'`` then its parameters on the
next line (``- n_max=4, ...`` for a draft model, ``- size_key=3, size_value=4, ...``
for ``ngram-map-k``), or ``no implementations specified for speculative decoding``
(no speculation). :class:`SpecSetup` pairs the two lines into one ``Config``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from specmon.engines.base import ConfigReader, CounterNames, Dimension, EngineAdapter, draft_pair
from specmon.grammar.common import cut, to_float
from specmon.grammar.kinds import FieldSpec, LineKind, items_converter
from specmon.records import Config, Engine, EngineStats, Event, Spec, Unparsed

SPEC_MARKER = "draft acceptance"
EVAL_MARKER = "eval time ="
#: Every start-up line about the speculative set-up carries this (module ``common_speculative``).
SETUP_MARKER = "common_specu"

_SPEC = re.compile(
    r"draft acceptance(?: rate)? = (?P<rate>[\d.]+|nan) \(\s*(?P<acc>\d+) accepted /\s*(?P<gen>\d+) generated\)"
    r"(?:, mean (?:acceptance )?len(?:gth)? =\s*(?P<mal>[\d.]+|nan))?"
    r"(?:, acceptance rate per position = \((?P<pp>[^)]*)\))?"
)
_STATS_START = re.compile(r"draft acceptance(?: rate)? =")
_EVAL = re.compile(
    r"(?<!prompt )eval time =\s*[\d.]+ ms /\s*(?P<n>\d+) (?:tokens|runs)\s*\(\s*[\d.]+ ms per token,\s*(?P<tps>[\d.]+) tokens per second\)"
)


def parse_spec(message: str, line: int, ts: float | None, rank: str | None) -> Spec | Unparsed | None:
    """Parse a ``draft acceptance ...`` line."""
    m = _SPEC.search(message)
    if m is None:
        # "draft acceptance rate = 0.98260 ( 1186 acc": the statistics line itself, damaged.
        if _STATS_START.search(message):
            return Unparsed(line, ts, rank, marker=SPEC_MARKER, reason="unrecognised draft acceptance line",
                            text=cut(message))
        return None  # e.g. a sentence that merely mentions draft acceptance
    accepted, drafted = int(m.group("acc")), int(m.group("gen"))
    per_pos = None
    if m.group("pp"):
        vals = [to_float(v) for v in m.group("pp").split(",")]
        per_pos = tuple(v for v in vals if v is not None) or None
    return Spec(
        line, ts, rank,
        mean_acceptance_length=to_float(m.group("mal")) if m.group("mal") else None,
        accepted=accepted,
        drafted=drafted,
        draft_acceptance_rate=to_float(m.group("rate")),
        per_position=per_pos,
    )


def parse_eval(message: str, line: int, ts: float | None, rank: str | None) -> EngineStats | None:
    """A request's generation speed from its ``eval time = ...`` line (not ``prompt eval time``)."""
    m = _EVAL.search(message)
    if m is None:
        return None
    return EngineStats(line, ts, rank, gen_throughput=to_float(m.group("tps")), running=None)


_IMPL = re.compile(r"adding speculative implementation '(?P<type>[\w.-]+)'")
# The draft depth of each kind of implementation: n_max (draft models, ngram-mod),
# size_value / size_m (the n-gram maps and ngram-simple).
_DEPTH = re.compile(r"^-\s.*?\b(?:n_max|size_value|size_m)=(?P<n>\d+)")
_NOSPEC = "no implementations specified for speculative decoding"


class SpecSetup:
    """Pairs ``adding speculative implementation 'T'`` with its parameter line into a ``Config``."""

    def __init__(self) -> None:
        self.pending: str | None = None

    def feed(self, message: str, line: int, ts: float | None, rank: str | None) -> Config | None:
        """Read one line holding :data:`SETUP_MARKER`; a ``Config`` once the depth is known."""
        at = message.find(SETUP_MARKER)
        body = message[message.find(":", at) + 1:].strip() if at >= 0 else message
        if _NOSPEC in body:
            self.pending = None
            return Config(line, ts, rank, engine=Engine.LLAMACPP, algorithm=None, steps=0)
        m = _IMPL.search(body)
        if m is not None:
            self.pending = m.group("type")
            return None
        if self.pending is not None:
            d = _DEPTH.search(body)
            if d is not None:
                kind, self.pending = self.pending, None
                return Config(line, ts, rank, engine=Engine.LLAMACPP, algorithm=kind, steps=int(d.group("n")))
        return None


# -- the grammar of these lines (shared with the bulk path): fixed words, not key: value ----------

_F = r"\d{1,18}(?:\.\d{1,18})?"
_I = r"\d{1,18}"
_COUNTS = rf"\( *(?P<accepted>{_I}) accepted / *(?P<drafted>{_I}) generated\)"
SPEC = LineKind(
    name="llamacpp.spec", engine=Engine.LLAMACPP, marker=SPEC_MARKER, parse=parse_spec, record=Spec,
    fields=(
        FieldSpec("draft_acceptance_rate", (), _F, float),
        FieldSpec("accepted", (), _I, int),
        FieldSpec("drafted", (), _I, int),
        FieldSpec("mean_acceptance_length", (), _F, float),
        FieldSpec("per_position", (), _F, items_converter(float, b","), items=True),
    ),
    body=lambda message: message.index(SPEC_MARKER),
    # Most specific first: the line parser reads the longest form the line has.
    shapes=(
        rf"draft acceptance(?: rate)? = (?P<draft_acceptance_rate>{_F}) {_COUNTS}, mean (?:acceptance )?"
        rf"len(?:gth)? = *(?P<mean_acceptance_length>{_F}), acceptance rate per position = "
        rf"\((?P<per_position>{_F}(?:, {_F})*)\)(?![\d.,])",
        rf"draft acceptance(?: rate)? = (?P<draft_acceptance_rate>{_F}) {_COUNTS}, mean (?:acceptance )?"
        rf"len(?:gth)? = *(?P<mean_acceptance_length>{_F})(?![\d.]|, acceptance rate per position)",
        rf"draft acceptance(?: rate)? = (?P<draft_acceptance_rate>{_F}) {_COUNTS}(?!, mean (?:acceptance )?len)",
    ),
    columns=("mean_acceptance_length", "draft_acceptance_rate", "accepted", "drafted", "per_position"),
)
EVAL = LineKind(
    name="llamacpp.eval", engine=Engine.LLAMACPP, marker=EVAL_MARKER, parse=parse_eval, record=EngineStats,
    # llama.cpp's command-line tools (llama-cli, llama-bench, llama-speculative) print their run's
    # totals through llama_perf_context_print (llama_print_timings before mid-2024): no server
    # wrote them, so they are no server's sample. The server prints its own print_timing block.
    gate=lambda text: "tokens per second" in text and "prompt eval" not in text and "_print_timings" not in text
    and "llama_perf_" not in text,
    vetoes=("prompt eval", "llama_perf_", "_print_timings"),
    fields=(FieldSpec("gen_throughput", (), _F, float),),
    body=lambda message: message.index(EVAL_MARKER),
    shapes=(rf"eval time = *{_F} ms / *{_I} (?:tokens|runs) *\( *{_F} ms per token, *"
            rf"(?P<gen_throughput>{_F}) tokens per second\)",),
    columns=("running", "gen_throughput"),
)


# -- the engine's facts ------------------------------------------------------------------------


class _SetupReader:
    """A configuration reader that pairs llama.cpp's two set-up lines (one per log)."""

    def __init__(self) -> None:
        self._setup = SpecSetup()

    def __call__(self, message: str, line: int, ts: float | None, rank: str | None) -> Config | None:
        return self._setup.feed(message, line, ts, rank)


#: What ``llama-server --spec-type`` accepts (build 11434, ``llama-server --help``); ``none`` turns it off.
SPEC_TYPES: tuple[str, ...] = (
    "none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
)


class LlamaCpp(EngineAdapter):
    """llama.cpp's ``llama-server``: per-request summaries, set-up lines, counters on ``/metrics``."""

    engine = Engine.LLAMACPP
    label = "llama.cpp"
    kinds = (SPEC, EVAL)
    config_words = (SETUP_MARKER,)
    # The set-up lines only: "common_specu: statistics ..." follows every request.
    config_markers = (f"{SETUP_MARKER}: adding speculative implementation", f"{SETUP_MARKER}: {_NOSPEC}",
                      f"{SETUP_MARKER}: - ")
    signs = (("slot print_timing", 4), ("llama_", 2), ("draft acceptance", 3), ("ggml_", 2),
             ("srv  ", 1), ("llama-server", 3))
    shapes = (re.compile(r"(?:^|\| |\s)(?:slot +\w+: +id +\d+|srv +\w+:)"),)
    shape_gates = ("slot", "srv")
    lifecycle = (
        # A failed ggml assertion aborts the process (ggml_abort): "ggml.c:1554: GGML_ASSERT(x) failed".
        ("GGML_ASSERT(", Event.CRASH),
        ("main: model loaded", Event.LOAD_END),
        ("main: loading model", Event.LOAD_BEGIN),
        ("llama_server: listening on http", Event.READY),
        # What llama-server logs when SIGINT or SIGTERM stops it ("srv    operator(): operator():
        # cleaning up before exit..."), the end of every log of the kit's samples.
        ("cleaning up before exit", Event.SHUTDOWN),
        # A second SIGINT/SIGTERM (server.cpp's signal_handler, raw on stderr) ends it at once: how a
        # user stops a server whose first signal hung it (the handler takes the task queue's mutex,
        # so a signal landing on a thread that holds it deadlocks the server).
        ("Received second interrupt, terminating immediately", Event.SHUTDOWN),
        # Servers that run llama.cpp as a child name its death in their own log. Ollama
        # (llm/server.go, server/sched.go): 'error loading llama server" error="llama runner
        # process has terminated: signal: killed' and 'msg="llama runner terminated"'.
        ("runner process has terminated", Event.CRASH),
        ("llama runner terminated", Event.CRASH),
        # llama-swap (proxy/process.go) logs "<model> cmd.Wait() returned error: <err>" for every
        # exit of its llama-server; "signal: terminated" / "signal: interrupt" are its own stops
        # (its stop sends SIGTERM; it calls them "Process stopped OK").
        ("cmd.Wait() returned error: signal: terminated", Event.SHUTDOWN),
        ("cmd.Wait() returned error: signal: interrupt", Event.SHUTDOWN),
        ("cmd.Wait() returned error: <nil>", Event.SHUTDOWN),
    )
    # llama-swap's report of any other exit: a signal (killed, aborted (core dumped), segmentation
    # fault) or an exit status.
    fatal_shapes = (("cmd.Wait() returned error: ",
                     r"cmd\.Wait\(\) returned error: (?!signal: (?:terminated|interrupt)\b|<nil>)\S", Event.CRASH),)
    # Requests answered, read while an error is pending: the HTTP log ("srv  log_server_r: request:
    # POST /completion 127.0.0.1 200", "done request: ..."), a slot taking or ending a task
    # ("slot launch_slot_: id  0 | task 5 | processing task"), Ollama's gin log of its runner's
    # answer ('[GIN] 2024/05/01 - 12:00:00 | 200 |  1.2s | 127.0.0.1 | POST "/api/generate"').
    serving_shapes = (
        ("request: POST ", r"request: POST \S{1,500} \S{1,200} 2\d\d\b"),
        ("| task ", r"\bslot +\w{1,40}: +id +\d{1,6} \| task \d{1,18} \| "),
        ("[GIN] ", r"\[GIN\] [^|\n]{1,80}\| 2\d\d \|[^\n]{1,300}\| +POST +\""),
    )
    # Said by other servers too: read only in llama.cpp's (or a not yet known) log.
    shared_ready = ("server is listening on http",)
    ready_marker = "server is listening on http"
    metric_prefix = "llamacpp:"
    metrics_hint = "llama-server needs --metrics"
    env_prefixes = ("LLAMA_", "GGML_")
    counters = CounterNames(
        gen="llamacpp:tokens_predicted_total",
        drafts="llamacpp:spec_decode_num_drafts_total",
        draft_tokens="llamacpp:spec_decode_num_draft_tokens_total",
        accepted="llamacpp:spec_decode_num_accepted_tokens_total",
        gen_seconds="llamacpp:tokens_predicted_seconds_total",
        per_position="llamacpp:spec_decode_num_accepted_tokens_per_pos_total",
    )
    dimensions = (Dimension("spec_type", "llama.cpp speculative type", choices=SPEC_TYPES),)
    default_port = 8080

    def request_drafts(self, answer: Mapping[str, Any]) -> tuple[int, int] | None:
        """llama-server's ``timings`` (every answer; in a stream, the last chunk): ``draft_n`` and
        ``draft_n_accepted``, present only when the request drafted (server-common.cpp, b11434)."""
        return draft_pair(answer.get("timings"), "draft_n", "draft_n_accepted")

    def config_at(self, message: str) -> int:
        return message.find(SETUP_MARKER)

    def config_reader(self) -> ConfigReader:
        return _SetupReader()
