"""Server lifecycle markers: loading, graph capture, ready, crash, shutdown.

Markers are matched as substrings anywhere in the line (real captures wrap
lines in prefixes we may not know). They are tried in order, most specific
first, so ``Scheduler hit an exception: Traceback ...`` is one crash, not two.
"""

from __future__ import annotations

import re

from specmon.engines import ADAPTERS
from specmon.records import Engine, Event

# Markers any engine may print (Python's and the C library's), by group; each engine's own
# markers (specmon.engines) come first in their group.
_SHARED: tuple[tuple[str, Event], ...] = (
    # crash / fatal
    ("CUDA out of memory", Event.OOM),
    ("OutOfMemoryError", Event.OOM),
    # A native abort ends the process whatever the engine: a failed C assertion (glibc's
    # "prog: file.c:12: func: Assertion `x' failed."), an uncaught C++ exception, a signal.
    ("terminate called after throwing an instance of", Event.CRASH),
    ("Assertion `", Event.CRASH),
    ("Aborted (core dumped)", Event.CRASH),
    ("Segmentation fault", Event.CRASH),
    ("received signal SIGABRT", Event.CRASH),
    ("received signal SIGSEGV", Event.CRASH),
    ("Fatal Python error", Event.CRASH),
    ("Traceback (most recent call last)", Event.CRASH),
    # shutdown
    ("SIGTERM received", Event.SHUTDOWN),
    ("Gracefully exiting", Event.SHUTDOWN),
    ("shutdown triggered", Event.SHUTDOWN),
    ("Application shutdown complete", Event.SHUTDOWN),
    ("Shutting down", Event.SHUTDOWN),
    # loading
    ("Loading safetensors checkpoint shards", Event.LOAD_PROGRESS),
    ("Loading pt checkpoint shards", Event.LOAD_PROGRESS),
)

#: The order markers are tried in, by what they announce: fatal first, ready last, so that
#: ``Scheduler hit an exception: Traceback ...`` is one crash, not two.
_GROUPS: tuple[frozenset[Event], ...] = (
    frozenset({Event.CRASH, Event.OOM, Event.RETRACT}), frozenset({Event.SHUTDOWN}),
    frozenset({Event.SERVER_START}), frozenset({Event.LOAD_BEGIN, Event.LOAD_PROGRESS, Event.LOAD_END}),
    frozenset({Event.KV_CACHE}), frozenset({Event.GRAPH_BEGIN, Event.GRAPH_PROGRESS, Event.GRAPH_END}),
    frozenset({Event.READY}),
)


#: Fatal lines known by their shape, any engine: (what a line must hold first: a literal, some
#: literals or a regex that starts with one — cheap, tried on every line the gate above lets
#: through or not —, the regex, the event).
_SHARED_SHAPES: tuple[tuple[str | tuple[str, ...] | re.Pattern[str], str, Event], ...] = (
    # ggml_abort (GGML_ABORT, and GGML_ASSERT through it) and other C/C++ aborts print
    # "file.cpp:LINE: message" before abort(): "/src/ggml-cuda/ggml-cuda.cu:75: CUDA error".
    # A column ("x.c:12:5: warning", a compiler's) or a "]" (glog's "file.cc:12]") is no abort.
    (re.compile(r"\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|m|mm|metal):\d+: \S"),
     r"(?<![^\s(\[])[^\s:()\[\]\"']{0,300}\.(?:c|cc|cpp|cxx|cu|cuh|h|hpp|m|mm|metal):\d+: \S", Event.CRASH),
    # A shell's report of its child's death: the whole line ("Killed", "Aborted"), or a script's
    # job line ("./serve.sh: line 3: 12345 Killed                  llama-server -m ...").
    (("Killed", "Aborted", "Bus error", "Illegal instruction", "Floating point exception", "Trace/breakpoint",
      "Segmentation fault"),
     r"^(?:(?:[^\n:]{1,200}: line \d+: +)?\d+ +(?:Killed|Aborted|Bus error|Illegal instruction"
     r"|Floating point exception|Trace/breakpoint trap|Segmentation fault)(?: +\S.*)?"
     r"|(?:Killed|Aborted|Bus error|Illegal instruction|Floating point exception|Trace/breakpoint trap)"
     r"(?: +\(core dumped\))?)$", Event.CRASH),
    # Go's and the shells' names of a signal that dumped core ("signal: aborted (core dumped)",
    # "Bus error (core dumped)"): the process is gone. The line from its start names what died.
    ("(core dumped)", r"^.*\(core dumped\)", Event.CRASH),
)

#: The shells' words of a death shorter than the line parser's shortest line worth reading.
SHORT_FATAL = ("Killed", "Aborted")

_Gate = tuple[str, ...] | re.Pattern[str]


def _shapes() -> tuple[tuple[_Gate, re.Pattern[str], Event], ...]:
    declared = [s for a in ADAPTERS for s in a.fatal_shapes] + list(_SHARED_SHAPES)
    return tuple(((gate,) if isinstance(gate, str) else gate, re.compile(rx), ev) for gate, rx, ev in declared)


#: Every fatal shape, engines' first: (what a line must hold first, compiled regex, event), tried
#: after the fatal phrases (a phrase names a line more precisely) and before every other group.
SHAPES: tuple[tuple[_Gate, re.Pattern[str], Event], ...] = _shapes()


def _markers() -> tuple[tuple[str, Event, frozenset[Engine] | None], ...]:
    out: list[tuple[str, Event, frozenset[Engine] | None]] = []
    # A ready line other servers print too (uvicorn's) counts in the logs of the engines that
    # declare it, or in a log not yet recognised.
    shared_ready: dict[str, set[Engine]] = {}
    for a in ADAPTERS:
        for phrase in a.shared_ready:
            shared_ready.setdefault(phrase, {Engine.UNKNOWN}).add(a.engine)
    for group in _GROUPS:
        out += [(p, ev, None) for a in ADAPTERS for p, ev in a.lifecycle if ev in group]
        out += [(p, ev, None) for p, ev in _SHARED if ev in group]
        if Event.READY in group:
            out += [(p, Event.READY, frozenset(es)) for p, es in shared_ready.items()]
    return tuple(out)


#: (substring, event, engines it applies to or None for all), in the order they are tried.
MARKERS: tuple[tuple[str, Event, frozenset[Engine] | None], ...] = _markers()
#: Where the fatal phrases end in MARKERS: the shapes are tried there.
_FATAL_END = next(i for i, (_m, ev, _e) in enumerate(MARKERS) if ev not in _GROUPS[0])

# "Capture cuda graph begin." / 2026 "Capture target decode CUDA graph begin." / draft variants.
_CAPTURE = re.compile(r"Capture (?:[\w ]*?)(?:cuda|CUDA|NPU|CPU|XPU) graph (?P<what>begin|end)")
#: Words every _CAPTURE match holds: with MARKERS, what a line needs to give a lifecycle record
#: (the bulk path skips lines of a shape that holds none of them; see ingest/bulk.py).
CAPTURE_WORDS = ("Capture", "graph")
_PROGRESS = re.compile(r"(?P<pct>\d{1,3})%[^\n]*?(?P<done>\d+)/(?P<total>\d+)")
_PCT_ONLY = re.compile(r"(?P<pct>\d{1,3})%\|")
# The final line of a Python traceback: "RuntimeError: CUDA error: ...".
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)(?::|$)")


def pending_fatal(event: Event, detail: str | None) -> bool:
    """Whether a fatal line is only an exception (a traceback's header or its exception line) or an
    out-of-memory error: a server also prints those for an error it catches and survives (a request
    too big for the memory left), so serving that follows says it did. The engines' own words of a
    death, a signal, an abort or a wrapper's report are certain."""
    return event is Event.OOM or event is Event.CRASH and bool(
        detail and (detail.startswith("Traceback") or EXCEPTION_LINE.match(detail)))


#: Every engine's lines of a request answered (``EngineAdapter.serving_shapes``): (literal, regex).
SERVING: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (gate, re.compile(rx)) for gate, rx in dict.fromkeys(s for a in ADAPTERS for s in a.serving_shapes))


def match_serving(message: str) -> str | None:
    """The part of ``message`` that shows a request answered (see SERVING), bounded; else None."""
    for gate, rx in SERVING:
        if gate in message and (m := rx.search(message)) is not None:
            return _detail(message, m.start())
    return None

# A command-line parser's refusal, printed raw at the top of the log before the server
# does anything: argparse ("prog: error: msg", where prog is vLLM's "vllm", "vllm serve",
# SGLang's "launch_server.py", Python 3.14's "python -m pkg.mod") and llama.cpp's argument
# parser ("error: invalid argument: -cc", 'error while handling argument "-c": ...').
# Only a restart's tracker reads it (a new log, from its first line), where such a line can
# only be the cause; in a running server's log "error:" at a line start means nothing certain.
_USAGE_ERROR = re.compile(
    r"^(?:(?:python3?(?:\.\d+)? -m )?[\w.\-/]{1,80}(?: [a-z][\w\-]{0,40})?: error: "
    r"|error: |error while handling argument )\S")


def usage_error(line: str) -> str | None:
    """The line itself, bounded, when it is a command-line parser's error; else None."""
    text = line.strip()
    return None if _USAGE_ERROR.match(text) is None else _detail(text, 0)


#: Cheap gate: a line with none of these substrings has no lifecycle marker (shapes apart).
_GATE = ("ceback", "rror", "xception", "ailed", "emory", "SIG", "xiting", "hut", "erver", "oad",
         "KV", "apture", "apturing", "eady", "omplete", "sigquit", "blocks", "ngine", "isten", "erminate",
         "ssert", "ASSERT", "bort", "egmentation", "before exit", "died", "dumped", "DataParallel",
         "interrupt")


def match_lifecycle(message: str, engine: Engine) -> tuple[Event, str, tuple[int, int] | None] | None:
    """The lifecycle event a message carries, its short detail and progress, or None."""
    for g in _GATE:
        if g in message:
            break
    else:
        return _match_shape(message)
    m = _CAPTURE.search(message)
    if m is not None:
        ev = Event.GRAPH_BEGIN if m.group("what") == "begin" else Event.GRAPH_END
        return ev, _detail(message, m.start()), None
    for i, (marker, event, engines) in enumerate(MARKERS):
        if i == _FATAL_END and (shaped := _match_shape(message)) is not None:
            return shaped
        at = message.find(marker)
        if at < 0:
            continue
        if engines is not None and engine not in engines:
            continue
        progress = None
        if event in (Event.LOAD_PROGRESS, Event.GRAPH_PROGRESS):
            pm = _PROGRESS.search(message, at)
            if pm is not None:
                progress = (int(pm.group("done")), int(pm.group("total")))
            else:
                pc = _PCT_ONLY.search(message, at)
                if pc is not None:
                    progress = (int(pc.group("pct")), 100)
        return event, _detail(message, at), progress
    return None


def _match_shape(message: str) -> tuple[Event, str, None] | None:
    for gate, rx, event in SHAPES:
        if isinstance(gate, tuple):
            for g in gate:  # (a loop, not any() of a generator: 1.5 µs a line less, on every line)
                if g in message:
                    break
            else:
                continue
        elif gate.search(message) is None:
            continue
        if (m := rx.search(message)) is not None:
            return event, _detail(message, m.start()), None
    return None


def _detail(message: str, at: int) -> str:
    """A short human detail: the message from the marker on, bounded."""
    text = message[at:].strip()
    return text if len(text) <= 160 else text[:157] + "..."
