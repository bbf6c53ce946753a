"""Recognise which engine wrote a log from its first lines."""

from __future__ import annotations

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


def detect_engine(lines: Iterable[str], limit: int = 5000) -> Engine:
    """The engine whose signature lines dominate the first ``limit`` lines, or UNKNOWN."""
    score = dict.fromkeys(_SIGNS, 0)
    for line in islice(lines, limit):
        for engine, signs in _SIGNS.items():
            for sign, weight in signs:
                if sign in line:
                    score[engine] += weight
    best = max(score, key=lambda e: score[e])
    return best if score[best] > 0 else Engine.UNKNOWN
