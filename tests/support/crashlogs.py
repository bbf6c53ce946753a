"""Builders of generated crash logs: tracebacks, exceptions and each engine's stats lines.

The crash tests (how a server's end is read, which errors it survived) draw the same kinds of
lines and check the line parser against the bulk file path the same way: written once here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from hypothesis import strategies as st

from specmon.ingest.files import ingest_file
from specmon.model.session import Run, Session
from specmon.parsing import parse_lines

NAME = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
PATH = st.builds(lambda d, f: f"/{d}/{f}.py", NAME, NAME)
KINDS = ("RuntimeError", "ValueError", "KeyError", "AssertionError", "TypeError")


def exceptions(kinds: Sequence[str] = KINDS, message: str = r"[a-z][a-z ]{0,30}[a-z]") -> st.SearchStrategy[str]:
    """The last line of a traceback: ``[module.]Kind: message``."""
    return st.builds(lambda mod, kind, msg: f"{mod}{kind}: {msg}",
                     st.sampled_from(["", "torch.", "sglang.srt.managers.", "vllm.v1.engine."]),
                     st.sampled_from(list(kinds)), st.from_regex(message, fullmatch=True))


@st.composite
def traceback_frames(draw: st.DrawFn, most: int = 4) -> list[str]:
    """A traceback's ``File …`` lines (1 to ``most`` frames), some with their source line."""
    out = []
    for _ in range(draw(st.integers(1, most))):
        out.append(f'  File "{draw(PATH)}", line {draw(st.integers(1, 9999))}, in {draw(NAME)}')
        if draw(st.booleans()):
            out.append(f"    {draw(NAME)} = {draw(NAME)}(x)")
    return out


def serving(engine: str, i: int, vllm_prefix: str = "") -> str:
    """One stats line of ``engine`` (a sample), the ``i``-th of the log; ``vllm_prefix`` before vLLM's
    (``(APIServer pid=1) ``, as its V1 API server prints it)."""
    t = f"10:{i // 60 % 60:02d}:{i % 60:02d}"
    if engine == "sglang":
        return (f"[2025-10-22 {t} TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.05, "
                f"accept len: 2.{i % 9}1, cuda graph: True, gen throughput (token/s): {100 + i}.5, #queue-req: 0, ")
    if engine == "vllm":
        return (f"{vllm_prefix}INFO 10-22 {t} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
                f"Avg generation throughput: {100 + i}.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    return f"       eval time =     812.19 ms /   128 tokens (    6.35 ms per token, {150 + i}.59 tokens per second)"


def run_both(tmp_path: Path, lines: list[str], key: Callable[[Run], object]) -> Session:
    """The session of ``lines`` by the line parser, checked equal (each run's ``key``) to the bulk path's."""
    by_lines = Session()
    by_lines.begin_source("gen.log")
    for rec in parse_lines(lines, year=2025):
        by_lines.ingest(rec)
    log = tmp_path / "gen.log"
    log.write_text("\n".join(lines) + "\n")
    by_file = Session()
    ingest_file(by_file, str(log))
    assert [key(r) for r in by_file.runs] == [key(r) for r in by_lines.runs]
    return by_lines
