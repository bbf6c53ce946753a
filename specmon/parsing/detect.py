"""Recognise which engine wrote a log from its first lines."""

from __future__ import annotations

import re
from collections.abc import Iterable
from itertools import islice

from specmon.records import Engine

# Substrings that only one engine prints, with a weight for how telling they are.
_SIGNS: dict[Engine, tuple[tuple[str, int], ...]] = {
    Engine.SGLANG: (("Decode batch", 3), ("Prefill batch", 3), ("server_args=ServerArgs(", 5),
                    ("fired up and ready to roll", 5), ("sglang", 1)),
    Engine.VLLM: (("Avg prompt throughput", 3), ("SpecDecoding metrics", 3), ("non-default args", 5),
                  ("LLM engine (v", 5), ("vLLM", 2), ("[loggers.py:", 3), ("Speculative metrics", 3)),
    Engine.LLAMACPP: (("slot print_timing", 4), ("llama_", 2), ("draft acceptance", 3), ("ggml_", 2),
                      ("srv  ", 1), ("llama-server", 3)),
}


# Line shapes: SGLang's "[date time TPn]" prefix, vLLM's "LEVEL MM-DD HH:MM:SS [file.py:N]",
# llama.cpp's "slot name: id N" / "srv name:" — telling even in logs with no stats line yet.
_SHAPES: dict[Engine, re.Pattern[str]] = {
    Engine.SGLANG: re.compile(r"\d{2}:\d{2}:\d{2}(?:\.\d{3})?(?: (?:DP|PP|TP|EP)\d+)+\] "),
    Engine.VLLM: re.compile(r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d{2}-\d{2} \d{2}:\d{2}:\d{2} \[?[\w./]+\.py:\d+\]"),
    Engine.LLAMACPP: re.compile(r"(?:^|\| |\s)(?:slot +\w+: +id +\d+|srv +\w+:)"),
}


def detect_engine(lines: Iterable[str], limit: int = 5000) -> Engine:
    """The engine whose signature lines dominate the first ``limit`` lines, or UNKNOWN."""
    score = dict.fromkeys(_SIGNS, 0)
    for line in islice(lines, limit):
        for engine, signs in _SIGNS.items():
            for sign, weight in signs:
                if sign in line:
                    score[engine] += weight
        for engine, shape in _SHAPES.items():
            if shape.search(line):
                score[engine] += 1
    best = max(score, key=lambda e: score[e])
    return best if score[best] > 0 else Engine.UNKNOWN
