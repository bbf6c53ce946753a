"""Server lifecycle markers: loading, graph capture, ready, crash, shutdown.

Markers are matched as substrings anywhere in the line (real captures wrap
lines in prefixes we may not know). They are tried in order, most specific
first, so ``Scheduler hit an exception: Traceback ...`` is one crash, not two.
"""

from __future__ import annotations

import re

from specmon.records import Engine, Event

# (substring, event, engines it applies to or None for all)
MARKERS: tuple[tuple[str, Event, frozenset[Engine] | None], ...] = (
    # crash / fatal
    ("Scheduler hit an exception", Event.CRASH, None),
    ("TokenizerManager hit an exception", Event.CRASH, None),
    ("EngineCore encountered a fatal error", Event.CRASH, None),
    ("Engine core initialization failed", Event.CRASH, None),
    ("WorkerProc failed to start", Event.CRASH, None),
    ("EngineDeadError", Event.CRASH, None),
    ("Received sigquit from a child proces", Event.CRASH, None),
    ("Capture cuda graph failed", Event.CRASH, None),
    ("CUDA out of memory", Event.OOM, None),
    ("OutOfMemoryError", Event.OOM, None),
    ("Decode out of memory. Try to lower", Event.OOM, None),
    ("KV cache pool is full. Retract requests", Event.RETRACT, None),
    ("Decode out of memory happened", Event.RETRACT, None),
    ("Traceback (most recent call last)", Event.CRASH, None),
    # shutdown
    ("SIGTERM received", Event.SHUTDOWN, None),
    ("Gracefully exiting", Event.SHUTDOWN, None),
    ("shutdown triggered", Event.SHUTDOWN, None),
    ("Application shutdown complete", Event.SHUTDOWN, None),
    ("Shutting down", Event.SHUTDOWN, None),
    # start
    ("vLLM API server version", Event.SERVER_START, None),
    ("Starting vLLM API server", Event.SERVER_START, None),
    # loading
    ("Load weight begin", Event.LOAD_BEGIN, None),
    ("Starting to load model", Event.LOAD_BEGIN, None),
    ("Loading drafter model", Event.LOAD_BEGIN, None),
    ("Loading safetensors checkpoint shards", Event.LOAD_PROGRESS, None),
    ("Loading pt checkpoint shards", Event.LOAD_PROGRESS, None),
    ("Load weight end", Event.LOAD_END, None),
    ("Loading weights took", Event.LOAD_END, None),
    ("Model loading took", Event.LOAD_END, None),
    ("Loading model weights took", Event.LOAD_END, None),
    ("main: model loaded", Event.LOAD_END, None),
    ("main: loading model", Event.LOAD_BEGIN, None),
    # KV cache
    ("KV Cache is allocated", Event.KV_CACHE, None),
    ("GPU KV cache size", Event.KV_CACHE, None),
    ("CPU KV cache size", Event.KV_CACHE, None),
    ("# GPU blocks", Event.KV_CACHE, None),
    # graphs
    ("Capturing batches", Event.GRAPH_PROGRESS, None),
    ("Capturing CUDA graphs", Event.GRAPH_PROGRESS, None),
    ("Capturing CUDA graph shapes", Event.GRAPH_PROGRESS, None),
    ("Capturing the model for CUDA graphs", Event.GRAPH_BEGIN, None),
    ("Graph capturing finished", Event.GRAPH_END, None),
    # ready
    ("The server is fired up and ready to roll", Event.READY, None),
    ("Application startup complete", Event.READY, frozenset({Engine.VLLM, Engine.UNKNOWN})),
    ("server is listening on http", Event.READY, frozenset({Engine.LLAMACPP, Engine.UNKNOWN})),
    ("llama_server: listening on http", Event.READY, None),
)

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
         "KV", "apture", "apturing", "eady", "omplete", "sigquit", "blocks", "ngine", "isten")


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
