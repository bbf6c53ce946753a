"""What an engine module declares: one class per engine, asked by the rest of the program.

Modelled on harlequin's adapters: each engine module (:mod:`specmon.engines.sglang`,
``vllm``, ``llamacpp``, ``trtllm``) holds one subclass of :class:`EngineAdapter` with
every fact specmon knows about that engine — its line kinds and configuration lines,
how a log is recognised as its, its lifecycle and fatal markers, warm-up and units,
its Prometheus counters, the line a start waits for and how an adopted server's
command line is recognised. Parsing, the session, the metrics source, launch and
adoption ask :func:`specmon.engines.adapter` instead of spelling engine names.

Pure declarations and pure functions: below the parser and the model, above the
text primitives (:mod:`specmon.grammar`) and the records.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

from specmon.engines.argv import ArgvError, SpecSettings
from specmon.grammar.kinds import LineKind
from specmon.records import Engine, Event, ParsedRecord

#: A configuration line's reader: (message, line number, timestamp, rank) -> a Config (or an
#: Unparsed one), or None.
ConfigReader = Callable[[str, int, float | None, str | None], ParsedRecord | None]


#: uvicorn's access line for a request a server answered with a success status:
#: 'INFO:     127.0.0.1:52764 - "POST /v1/chat/completions HTTP/1.1" 200 OK' (vLLM, SGLang and
#: trtllm-serve all serve through uvicorn). A POST only: a GET of /metrics or /health is answered by
#: the API server while its engine is dead.
UVICORN_SERVED: tuple[str, str] = ('"POST ', r' - "POST [^"\s]{1,500} HTTP/[\d.]{1,3}" 2\d\d\b')


@dataclass(frozen=True, slots=True)
class CounterNames:
    """An engine's Prometheus counters: generated tokens, drafts (steps), draft tokens, accepted."""

    gen: str
    #: Drafts (speculative steps); None when the engine counts them only by position
    #: (:attr:`drafted_per_position`: every draft drafts its first position).
    drafts: str | None
    draft_tokens: str
    accepted: str
    #: The engine's own generation seconds (llama.cpp's, or a request decode-time sum), else
    #: None: tok/s over wall time.
    gen_seconds: str | None = None
    #: The requests :attr:`gen_seconds` sums over, when it times each request from its first
    #: token to its last (the first token is then not in the seconds: tok/s leaves it out).
    gen_requests: str | None = None
    #: Accepted tokens by draft position, when the engine exports them.
    per_position: str | None = None
    #: Drafted tokens by draft position, when the engine exports them (its first position then
    #: counts the drafts, and accepted-by-position over it is the acceptance per position).
    drafted_per_position: str | None = None
    #: The label that names a draft position in the per-position series.
    position_label: str = "position"
    #: Its per-request histograms' sums and count, where it exports them: generated tokens, and
    #: decode seconds (a request's first token to its last): the engine's own per-request decode speed.
    request_tokens: str | None = None
    request_count: str | None = None
    request_decode_s: str | None = None

    @property
    def counters(self) -> tuple[str, ...]:
        """The plain counters (the per-position series apart): a restart sends one of them down."""
        names = (self.gen, self.drafts, self.draft_tokens, self.accepted, self.gen_seconds, self.gen_requests)
        return tuple(n for n in names if n)


@dataclass(frozen=True, slots=True)
class GaugeNames:
    """An engine's gauges of its last logging interval, read where it exports no counters (SGLang's):
    the figures its log line prints, its active setting, and the counters of finished requests a
    restart sends down."""

    gen_tps: str
    accept_len: str
    accept_rate: str
    #: The active setting (its adaptive controller moves it): steps and draft tokens.
    num_steps: str | None = None
    num_draft_tokens: str | None = None
    #: Counters of finished requests: generated tokens, verify passes, requests.
    gen: str | None = None
    verify: str | None = None
    requests: str | None = None

    @property
    def figures(self) -> tuple[str, str, str]:
        return self.gen_tps, self.accept_len, self.accept_rate

    @property
    def setting(self) -> tuple[str, ...]:
        return tuple(n for n in (self.num_steps, self.num_draft_tokens) if n)

    @property
    def counters(self) -> tuple[str, ...]:
        return tuple(n for n in (self.gen, self.verify, self.requests) if n)


#: Python entry points that run a server: ``python -m MODULE [ARG]`` or ``python SCRIPT``.
@dataclass(frozen=True, slots=True)
class EntryPoints:
    """How a process's command line is recognised as this engine's server (adoption)."""

    #: Console scripts, with the sub-command they need (``vllm serve``), or "" for none.
    scripts: tuple[tuple[str, str], ...] = ()
    #: ``python -m`` modules, with the sub-command they need, or "".
    modules: tuple[tuple[str, str], ...] = ()
    #: Script paths a ``python PATH`` command ends with.
    script_paths: tuple[str, ...] = ()
    #: Native executables (``llama-server``), by basename.
    binaries: tuple[str, ...] = ()


#: A schedule as the engines take it: inclusive batch-size ranges ``(first, last, K)`` from 1 up.
Ranges = Sequence[tuple[int, int, int]]


@dataclass(frozen=True, slots=True)
class ScheduleForm:
    """How one engine takes a step count per batch size: what a sweep prints and records of it."""

    #: The exact flags or file text, as the sweep prints them under the engine's label (empty: not
    #: offered, see :attr:`problem`).
    lines: tuple[str, ...] = ()
    #: Why the engine would not take it (None: it would).
    problem: str | None = None
    #: What a sweep's JSON records of it, under the engine's own keys.
    fields: Mapping[str, object] | None = None
    #: Words after the label on the first line (``(--extra_llm_api_options file; ...)``).
    heading: str = ""


@dataclass(frozen=True, slots=True)
class Dimension:
    """One sweepable launch parameter besides the step count (an engine's flag)."""

    name: str
    what: str
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()

    def check(self, value: object) -> int | str:
        """The value if it is allowed here, else ``ValueError`` with one sentence."""
        if self.choices:
            if not isinstance(value, str) or value not in self.choices:
                raise ValueError(f"{self.name} {value!r} is not one of {', '.join(self.choices)}")
            return value
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise ValueError(f"{self.name} must be a whole number from {self.lo} to {self.hi}, not {value!r}")
        return value


def draft_pair(node: Any, drafted: str, accepted: str) -> tuple[int, int] | None:
    """``(node[drafted], node[accepted])`` when both are whole counts, accepted within drafted and at
    least one token drafted; else None (an answer is the server's text: a wrong value is ignored)."""
    if not isinstance(node, Mapping):
        return None
    d, a = node.get(drafted), node.get(accepted)
    if type(d) is not int or type(a) is not int or not 0 <= a <= d or d == 0:
        return None
    return d, a


class EngineAdapter:
    """One engine's facts. Subclasses set the class attributes; the defaults say "none"."""

    #: The engine (the enum in :mod:`specmon.records` is the one spelling of the list).
    engine: ClassVar[Engine]
    #: The name people write: ``SGLang``.
    label: ClassVar[str]

    # -- lines ----------------------------------------------------------------------------
    #: Stats line kinds, in the order the line parser tests their markers.
    kinds: ClassVar[tuple[LineKind, ...]] = ()
    #: Words a configuration line holds (the bulk path sends lines with them to the parser).
    config_words: ClassVar[tuple[str, ...]] = ()
    #: Texts only the lines stating a launch's configuration hold: a follower that starts mid-log
    #: reads the last of them above its window (specmon.sources.preface). Narrower than
    #: ``config_words`` where other lines share those words (llama.cpp's per-request statistics).
    config_markers: ClassVar[tuple[str, ...]] = ()

    # -- recognising a log ------------------------------------------------------------------
    #: Substrings only this engine prints, with a weight for how telling they are.
    signs: ClassVar[tuple[tuple[str, int], ...]] = ()
    #: The shape of its line prefix, telling even before any stats line.
    shapes: ClassVar[tuple[re.Pattern[str], ...]] = ()
    #: Texts a shape cannot match without (a cheap test before the regex).
    shape_gates: ClassVar[tuple[str, ...]] = ()

    # -- lifecycle ----------------------------------------------------------------------------
    #: Markers only this engine prints, tried before the shared ones of their group.
    lifecycle: ClassVar[tuple[tuple[str, Event], ...]] = ()
    #: Fatal lines known by their shape rather than a fixed phrase: (a literal every match holds,
    #: the regex, the event). A wrapper's report of its child's death ("cmd.Wait() returned error:
    #: signal: killed") names the signal after the words, and some signals are a stop.
    fatal_shapes: ClassVar[tuple[tuple[str, str, Event], ...]] = ()
    #: Lines that show the server answering a request: (a literal every match holds, the regex).
    #: Read only while an error the server may have caught is pending (a traceback, an
    #: out-of-memory error): one of them after it says the server went on serving. A success
    #: status only: a dead engine's API server still answers, with 500s (vLLM's EngineDeadError).
    serving_shapes: ClassVar[tuple[tuple[str, str], ...]] = ()
    #: Ready markers other engines' logs also hold (uvicorn's): read only when the log is
    #: this engine's or not yet known.
    shared_ready: ClassVar[tuple[str, ...]] = ()
    #: The line a managed start waits for by default.
    ready_marker: ClassVar[str | None] = None
    #: What the dashboard says where per-position acceptance would be and its log gives none.
    per_position_note: ClassVar[str | None] = None
    #: Warm-up samples left out of a run's figures (graph capture, first compilations).
    warmup: ClassVar[int] = 1
    #: Its stats line's throughput divides the tokens since its previous line by the time since
    #: then (SGLang's decode line): the first line after a pause spans idle time and is left out by
    #: its gap. Otherwise the line covers one logging interval, idle when it ran nothing.
    throughput_since_last_line: ClassVar[bool] = False

    # -- its speculative settings ------------------------------------------------------------
    #: Whether a profile's ``draft_tokens = "steps+1"`` counts the verified root too (SGLang's
    #: tree: steps + 1 tokens), or the engine's step count already is its draft tokens (vLLM's
    #: ``num_speculative_tokens``: the bonus token is not drafted).
    draft_tokens_count_root: ClassVar[bool] = True
    #: Its draft tokens form a tree with a count of their own (SGLang's
    #: ``--speculative-num-draft-tokens``): a run's label shows a count apart from steps + 1.
    draft_tree: ClassVar[bool] = False

    # -- metrics ------------------------------------------------------------------------------
    #: How its Prometheus series begin, separator included (``vllm:`` for ``vllm:...``,
    #: ``trtllm_`` for ``trtllm_...``): a scrape holding one is this engine's.
    metric_prefix: ClassVar[str | None] = None
    #: Where its server serves the Prometheus text (beside its API, on the same port).
    metrics_path: ClassVar[str] = "/metrics"
    #: What its server needs to export them, said when a scrape finds none of its series.
    metrics_hint: ClassVar[str | None] = None
    #: Its counters, when it exports them as counters (else gauges or nothing).
    counters: ClassVar[CounterNames | None] = None
    #: Its gauges of the last logging interval, when it exports those instead of counters.
    gauges: ClassVar[GaugeNames | None] = None
    #: Its per-position counter has a series for every draft position from start-up on, so
    #: counting them gives the configured draft tokens (vLLM's ``SpecDecodingProm``; llama.cpp
    #: adds a position only once a draft there was accepted).
    positions_from_start: ClassVar[bool] = False
    #: Its latency histograms (base names, without ``_bucket``): time to first token, inter-token.
    latency: ClassVar[tuple[str, str] | None] = None

    # -- sweeps -------------------------------------------------------------------------------
    #: Launch parameters a sweep may vary besides the step count (``{topk}`` in a profile).
    dimensions: ClassVar[tuple[Dimension, ...]] = ()

    # -- launch and adoption ------------------------------------------------------------------
    #: The port a server listens on when its command line names none.
    default_port: ClassVar[int | None] = None
    entry_points: ClassVar[EntryPoints] = EntryPoints()

    #: Flags (a regex of names after ``--``) that set its speculative decoding: a no-speculation
    #: restart of an adopted server drops them.
    spec_flags: ClassVar[str | None] = None
    #: Prefixes of the environment variables its server reads: copied from an adopted server to
    #: its restart (secrets excepted), with the ones every engine shares (CUDA_, NCCL_, HF_, ...).
    env_prefixes: ClassVar[tuple[str, ...]] = ()

    @property
    def adoptable(self) -> bool:
        """Whether a running server of this engine can be adopted: its module reads and rewrites
        the speculative flags of its command line."""
        return type(self).read_spec is not EngineAdapter.read_spec

    def read_spec(self, argv: Sequence[str]) -> SpecSettings:
        """The speculative settings of an adopted server's command line.

        Raises:
            ArgvError: this engine's servers are not adopted, or a value is unreadable.
        """
        raise ArgvError(f"{self.label} servers are not adopted (no rule to read their flags)")

    def spec_texts(self, argv: Sequence[str], steps: int, draft_tokens: int | None) -> tuple[str | None, str]:
        """The draft-token and top-k texts a rewrite to ``steps`` sets (checked), for :meth:`write_spec`."""
        raise ArgvError(f"{self.label} servers are not adopted (no rule to rewrite their flags)")

    def write_spec(self, argv: Sequence[str], steps: str, draft_tokens: str | None, topk: str) -> list[str]:
        """``argv`` with its speculative flags set to these texts (values or ``{steps}`` placeholders).

        Raises:
            ArgvError: the command line has no speculation to change, or cannot be rewritten.
        """
        raise ArgvError(f"{self.label} servers are not adopted (no rule to rewrite their flags)")

    # -- a sweep's schedule and the engine's adaptive mode -----------------------------------

    def schedule_form(self, ranges: Ranges, *, argv: Sequence[str] | None = None,
                      setting: tuple[str | None, int | None] | None = None,
                      config_path: str = "specmon-schedule.json") -> ScheduleForm | None:
        """How this engine would take ``ranges`` (None: it takes no schedule).

        ``argv`` is a launch profile's command line when the profile is this engine's (its own
        flags kept in the form), ``setting`` the swept (algorithm, top-k) when the profile is this
        engine's or names none, ``config_path`` where a file the form reads would be.
        """
        return None

    #: The flag its command line takes a schedule in (vLLM's ``--speculative-config``), else None.
    schedule_flag: ClassVar[str | None] = None
    #: The flag that runs its own adaptive controller (SGLang's ``--speculative-adaptive``), else None.
    adaptive_flag: ClassVar[str | None] = None
    #: Why a schedule is not deployed on its profiles, when the engine has its own way that specmon
    #: does not write (None: its command line takes none).
    no_schedule_reason: ClassVar[str | None] = None

    def schedule_argv(self, argv: Sequence[str], ranges: Ranges) -> list[str]:
        """``argv`` starting the server on ``ranges`` (a schedule deployed on a managed profile).

        Raises:
            ArgvError: this engine's command line takes no schedule, or this one cannot be written in.
        """
        raise ArgvError(f"{self.label} takes no schedule on its command line")

    def adaptive_argv(self, argv: Sequence[str], config_path: str | None = None) -> list[str]:
        """``argv`` running the engine's own adaptive controller instead of its fixed setting.

        Raises:
            ArgvError: the engine has none specmon runs, or this profile's setting cannot run it.
        """
        raise ArgvError(f"{self.label} has no adaptive controller of its own that specmon runs")

    def __deepcopy__(self, memo: dict[int, object]) -> EngineAdapter:
        # Declarations, no state: a line parser copied before a batch (ingest/live.py) shares them.
        return self

    def config_reader(self) -> ConfigReader | None:
        """A fresh reader of this engine's configuration lines (stateful per log), or None."""
        return None

    def config_at(self, message: str) -> int:
        """Where a configuration line's marker starts in ``message``, or -1."""
        return -1

    def point_problem(self, steps: int, point: Mapping[str, int | str]) -> str | None:
        """Why this engine would refuse or silently change a setting (None: it takes it as given)."""
        return None

    def request_drafts(self, answer: Mapping[str, Any]) -> tuple[int, int] | None:
        """``(drafted, accepted)`` draft tokens of one request, read from its answer (a completion's JSON
        or a stream's chunk) where this engine puts them, or None (not there: not this engine's answer,
        a request that drafted nothing, or an engine that gives no per-request figures)."""
        return None

    def draft_limit(self, steps: int, topk: int) -> int | None:
        """The most draft tokens a launch of ``steps`` steps at ``topk`` may ask for (its draft
        tree's size), or None when the engine has no such rule."""
        return None

    def counts_tokens(self, algorithm: str | None) -> bool:
        """Whether its step count counts draft tokens (vLLM, llama.cpp) or draft steps."""
        return True

    def steps_unit(self, algorithm: str | None) -> str:
        """``token`` or ``step``: what this engine's step count counts for ``algorithm``."""
        return "token" if self.counts_tokens(algorithm) else "step"

    def serves(self, argv: Sequence[str]) -> bool:
        """Whether ``argv`` (after the interpreter and its options) starts this engine's server.

        ``argv`` is the command from the script or module on: ``["vllm", "serve", ...]``,
        ``["-m", "sglang.launch_server", ...]``, ``["/x/llama-server", ...]``.
        """
        if not argv:
            return False
        ep = self.entry_points
        head = argv[0]
        nxt = argv[1] if len(argv) > 1 else ""
        if head == "-m":
            module = nxt
            sub = argv[2] if len(argv) > 2 else ""
            return any(module == m and (not need or sub == need) for m, need in ep.modules)
        base = head.rsplit("/", 1)[-1]
        if any(base == s and (not need or nxt == need) for s, need in ep.scripts):
            return True
        if base in ep.binaries:
            return True
        return any(head.endswith(p) for p in ep.script_paths)
