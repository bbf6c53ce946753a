"""The typed records that parsing produces from log lines.

Records are plain slotted dataclasses: one is built for every interesting line,
so they must be cheap. Every record carries the 1-based ``line`` number it came
from, the ``timestamp`` the line printed (seconds since the epoch, the naive
log time read as UTC, or ``None``) and the ``rank`` prefix (``"DP0 TP0"``) when
the engine printed one.

``Record.to_json()`` gives the stable field names of ``specmon parse``.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from enum import Enum
from typing import Any, ClassVar, cast


class Engine(str, Enum):
    """An engine's name: what a record, a run and a profile say made them.

    The list of engines is :data:`specmon.engines.ADAPTERS`, not this class: an engine's module
    joins it with ``Engine.register("name")`` (one line, in that module), and the name is then a
    member like the four spelled here. Those four stay spelled for the code that means them (the
    simulated SGLang server, the bulk path's SGLang columns); a new engine needs none. Code
    outside :mod:`specmon.engines` never compares against an engine's name
    (``tests/unit/test_engine_facts.py``): it asks the engine's adapter.
    """

    SGLANG = "sglang"
    VLLM = "vllm"
    LLAMACPP = "llamacpp"
    TRTLLM = "trtllm"
    UNKNOWN = "unknown"

    @classmethod
    def register(cls, name: str) -> Engine:
        """The member named ``name``, made one when the engine's module registers it.

        Idempotent. The new member joins the enum's own maps, so ``Engine("name")``, iteration,
        pickling (a forked or spawned worker imports the engines too) and pydantic's validation
        (through :meth:`_missing_`) treat it as they treat the spelled ones.
        """
        found = cls._value2member_map_.get(name)
        if found is not None:
            return cast(Engine, found)
        if not name or not name.isidentifier() or name != name.lower():
            raise ValueError(f"an engine's name is a lower-case identifier, not {name!r}")
        member = str.__new__(cls, name)
        member._name_ = name.upper()
        member._value_ = name
        cls._member_map_[member._name_] = member
        cls._member_names_.append(member._name_)
        cls._value2member_map_[name] = member
        return member

    @classmethod
    def _missing_(cls, value: object) -> Engine | None:
        # pydantic builds its lookup from the members at class definition: a member registered
        # later is found here.
        return cast("Engine | None", cls._value2member_map_.get(value)) if isinstance(value, str) else None


class Event(str, Enum):
    """Lifecycle events of a server, in the order a healthy start shows them."""

    SERVER_START = "server_start"  # the launch line (server args / vLLM banner)
    LOAD_BEGIN = "load_begin"
    LOAD_PROGRESS = "load_progress"  # checkpoint shard n/m
    LOAD_END = "load_end"
    KV_CACHE = "kv_cache"
    GRAPH_BEGIN = "graph_begin"
    GRAPH_PROGRESS = "graph_progress"
    GRAPH_END = "graph_end"
    READY = "ready"
    RETRACT = "retract"  # KV pool full, requests retracted (pressure, not fatal)
    OOM = "oom"
    CRASH = "crash"
    SHUTDOWN = "shutdown"


#: Events after which the server is no longer serving.
FATAL_EVENTS = frozenset({Event.OOM, Event.CRASH})


def iso_timestamp(ts: float | None) -> str | None:
    """Format a record timestamp as ISO 8601 (no zone: log times are naive)."""
    if ts is None:
        return None
    text = datetime.fromtimestamp(ts, tz=UTC).replace(tzinfo=None).isoformat()
    return text


@dataclass(slots=True)
class Record:
    """Fields every record has."""

    kind: ClassVar[str] = "record"
    line: int
    timestamp: float | None
    rank: str | None

    def to_json(self) -> dict[str, Any]:
        """The record as the JSON object ``specmon parse`` prints."""
        out: dict[str, Any] = {"kind": self.kind}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "timestamp":
                value = iso_timestamp(value)
            elif isinstance(value, Enum):
                value = value.value
            elif isinstance(value, tuple):
                value = list(value)
            out[f.name] = value
        return out


@dataclass(slots=True)
class Decode(Record):
    """One stats-logging interval of one rank with its acceptance on the same line (SGLang's
    ``Decode batch``, LMDeploy's ``Avg thr (in/out)``): :attr:`engine` says whose."""

    kind: ClassVar[str] = "decode"
    running_req: int | None = None
    tokens: int | None = None
    token_usage: float | None = None
    accept_len: float | None = None
    accept_rate: float | None = None
    graph: bool | None = None
    gen_throughput: float | None = None
    queue_req: int | None = None
    #: The engine whose line kind read it; set by the line parser and the bulk path; not part
    #: of equality (the same numbers are the same record).
    engine: Engine = field(default=Engine.UNKNOWN, compare=False)


@dataclass(slots=True)
class Prefill(Record):
    """An SGLang ``Prefill batch`` line."""

    kind: ClassVar[str] = "prefill"
    new_seq: int | None = None
    new_token: int | None = None
    cached_token: int | None = None
    running_req: int | None = None
    queue_req: int | None = None
    input_throughput: float | None = None


@dataclass(slots=True)
class EngineStats(Record):
    """A vLLM periodic ``Engine NNN: Avg prompt throughput ...`` line (V1 or V0)."""

    kind: ClassVar[str] = "engine_stats"
    prompt_throughput: float | None = None
    gen_throughput: float | None = None
    running: int | None = None
    waiting: int | None = None
    kv_cache_usage: float | None = None  # percent, as printed
    prefix_cache_hit_rate: float | None = None  # percent, as printed
    engine_index: int | None = None  # 0 for "Engine 000"; None for V0 / aggregated
    engines_aggregated: int | None = None  # N for "N Engines Aggregated"
    #: The engine whose marker the line carried (llama.cpp's eval line is one too); set by the
    #: line parser; not part of equality (the same numbers are the same record).
    engine: Engine = field(default=Engine.UNKNOWN, compare=False)


@dataclass(slots=True)
class Spec(Record):
    """A speculative-decoding metrics line (vLLM ``SpecDecoding metrics``, V0
    ``Speculative metrics``, llama.cpp ``draft acceptance``)."""

    kind: ClassVar[str] = "spec"
    mean_acceptance_length: float | None = None  # includes the bonus token
    accepted: int | None = None
    drafted: int | None = None
    draft_acceptance_rate: float | None = None  # fraction 0..1 (vLLM prints percent)
    per_position: tuple[float, ...] | None = None
    accepted_throughput: float | None = None
    drafted_throughput: float | None = None
    #: The engine whose marker the line carried: vLLM and llama.cpp both print spec metrics.
    engine: Engine = field(default=Engine.UNKNOWN, compare=False)


@dataclass(slots=True)
class Lifecycle(Record):
    """A server lifecycle event (loading, graphs, ready, crash, shutdown)."""

    kind: ClassVar[str] = "lifecycle"
    event: Event = Event.SERVER_START
    detail: str = ""
    progress: tuple[int, int] | None = None  # (done, total) for shard / batch progress


@dataclass(slots=True)
class Config(Record):
    """The server's speculative configuration, read from its startup line."""

    kind: ClassVar[str] = "config"
    engine: Engine = Engine.UNKNOWN
    algorithm: str | None = None  # EAGLE3, NEXTN, ngram, ... ; None = no speculation
    steps: int | None = None  # speculative steps (vLLM: num_speculative_tokens)
    topk: int | None = None
    draft_tokens: int | None = None
    model: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(slots=True)
class Unparsed(Record):
    """A line that carries a known marker but could not be parsed: kept, never dropped."""

    kind: ClassVar[str] = "unparsed"
    marker: str = ""
    reason: str = ""
    text: str = ""  # the line, cut to a bounded length


@dataclass(slots=True)
class Serving(Record):
    """A line that shows the server answering a request (an access line with a success status, a
    llama.cpp slot's task), given only while an error the server may have caught is pending: the
    session uses it to call that error caught (the server went on serving), nothing else."""

    kind: ClassVar[str] = "serving"
    detail: str = ""  # the line, cut to a bounded length


ParsedRecord = Decode | Prefill | EngineStats | Spec | Lifecycle | Config | Unparsed | Serving

#: The ``kind`` names, in the order ``summarize`` reports their counts.
KINDS = ("decode", "prefill", "engine_stats", "spec", "lifecycle", "config", "unparsed")
