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

# "Capture cuda graph begin." / 2026 "Capture target decode CUDA graph begin." / draft variants.
_CAPTURE = re.compile(r"Capture (?:[\w ]*?)(?:cuda|CUDA|NPU|CPU|XPU) graph (?P<what>begin|end)")
#: Words every _CAPTURE match holds: with MARKERS, what a line needs to give a lifecycle record
#: (the bulk path skips lines of a shape that holds none of them; see ingest/bulk.py).
CAPTURE_WORDS = ("Capture", "graph")
_PROGRESS = re.compile(r"(?P<pct>\d{1,3})%[^\n]*?(?P<done>\d+)/(?P<total>\d+)")
_PCT_ONLY = re.compile(r"(?P<pct>\d{1,3})%\|")
# The final line of a Python traceback: "RuntimeError: CUDA error: ...".
EXCEPTION_LINE = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Interrupt|Exit)(?::|$)")

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


#: Cheap gate: a line with none of these substrings has no lifecycle marker.
_GATE = ("ceback", "rror", "xception", "ailed", "emory", "SIG", "xiting", "hut", "erver", "oad",
         "KV", "apture", "apturing", "eady", "omplete", "sigquit", "blocks", "ngine", "isten", "erminate",
         "ssert", "ASSERT", "bort", "egmentation", "before exit")


def match_lifecycle(message: str, engine: Engine) -> tuple[Event, str, tuple[int, int] | None] | None:
    """The lifecycle event a message carries, its short detail and progress, or None."""
    for g in _GATE:
        if g in message:
            break
    else:
        return None
    m = _CAPTURE.search(message)
    if m is not None:
        ev = Event.GRAPH_BEGIN if m.group("what") == "begin" else Event.GRAPH_END
        return ev, _detail(message, m.start()), None
    for marker, event, engines in MARKERS:
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


def _detail(message: str, at: int) -> str:
    """A short human detail: the message from the marker on, bounded."""
    text = message[at:].strip()
    return text if len(text) <= 160 else text[:157] + "..."
