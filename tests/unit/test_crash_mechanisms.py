"""Crashes told from mechanisms (issue 33): a crash is a server that stopped.

Classes, each with generated variations and, where there are some, real excerpts:

- a native abort (a failed ``GGML_ASSERT``, a C assertion, an uncaught C++ exception, a
  signal) ends a llama.cpp server: reported, with its words as the cause;
- a Python traceback cut at its head (frames and the exception line only) or at its tail
  (the header only) is still a crash when nothing follows;
- a traceback the server caught and survived (samples after it, no new start) is no crash:
  the run goes on, the error is kept as survived;
- an engine's own fatal marker is certain: samples that follow belong to another launch.

Both parse paths (the line parser and the bulk path) must agree on every generated log.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.ingest.files import ingest_file
from specmon.model.session import ServerState, Session
from specmon.parsing import parse_lines

DATA = Path(__file__).resolve().parents[1] / "data" / "crash_logs"

_name = st.from_regex(r"[a-z_][a-z0-9_]{0,12}", fullmatch=True)
_path = st.builds(lambda d, f: f"/{d}/{f}.py", _name, _name)
_exc = st.builds(lambda mod, kind, msg: f"{mod}{kind}: {msg}",
                 st.sampled_from(["", "torch.", "sglang.srt.managers.", "vllm.v1.engine."]),
                 st.sampled_from(["RuntimeError", "ValueError", "KeyError", "AssertionError", "TypeError",
                                  "torch.cuda.CudaError"]),
                 st.from_regex(r"[a-z][a-z ]{0,30}", fullmatch=True))


@st.composite
def _frames(draw: st.DrawFn) -> list[str]:
    out = []
    for _ in range(draw(st.integers(1, 5))):
        out.append(f'  File "{draw(_path)}", line {draw(st.integers(1, 9999))}, in {draw(_name)}')
        if draw(st.booleans()):
            out.append(f"    {draw(_name)} = {draw(_name)}(x)")
    return out


def _serving(engine: str, i: int) -> str:
    """One stats line of ``engine`` (a sample), the ``i``-th of the log."""
    t = f"10:{i // 60 % 60:02d}:{i % 60:02d}"
    if engine == "sglang":
        return (f"[2025-10-22 {t} TP0] Decode batch, #running-req: 4, #token: 900, token usage: 0.05, "
                f"accept len: 2.{i % 9}1, cuda graph: True, gen throughput (token/s): {100 + i}.5, #queue-req: 0, ")
    if engine == "vllm":
        return (f"INFO 10-22 {t} [loggers.py:123] Engine 000: Avg prompt throughput: 0.0 tokens/s, "
                f"Avg generation throughput: {100 + i}.0 tokens/s, Running: 4 reqs, Waiting: 0 reqs, "
                "GPU KV cache usage: 1.0%, Prefix cache hit rate: 0.0%")
    return (f"slot print_timing: id  0 | task {i} | \n       eval time =     812.19 ms /   128 tokens "
            f"(    6.35 ms per token, {150 + i}.59 tokens per second)").split("\n")[1]


def _run_both(tmp_path: Path, lines: list[str]) -> Session:
    """The session of ``lines`` by the line parser, checked equal to the bulk path's."""
    by_lines = Session()
    for rec in parse_lines(lines, year=2025):
        by_lines.ingest(rec)
    log = tmp_path / "gen.log"
    log.write_text("\n".join(lines) + "\n")
    by_file = Session()
    ingest_file(by_file, str(log))
    got = [(r.state, r.crash_cause, len(r.errors_survived), len(r.throughput)) for r in by_file.runs]
    want = [(r.state, r.crash_cause, len(r.errors_survived), len(r.throughput)) for r in by_lines.runs]
    assert got == want
    return by_lines


_ENGINES = st.sampled_from(["sglang", "vllm", "llamacpp"])
_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(engine=_ENGINES, before=st.integers(6, 12), after=st.integers(1, 8), header=st.booleans(),
       frames=_frames(), exc=_exc)
def test_a_traceback_the_server_survived_is_no_crash(tmp_path: Path, engine: str, before: int, after: int,
                                                     header: bool, frames: list[str], exc: str) -> None:
    lines = [_serving(engine, i) for i in range(before)]
    lines += (["Traceback (most recent call last):"] if header else []) + frames + [exc]
    lines += [_serving(engine, before + i) for i in range(after)]
    session = _run_both(tmp_path, lines)
    assert len(session.runs) == 1
    run = session.runs[0]
    assert run.state is ServerState.SERVING
    assert run.crash_cause is None
    assert [cause for _line, cause in run.errors_survived] == [exc.strip()[:160]]
    assert any("went on serving" in e.text for e in session.events)


@_SETTINGS
@given(engine=_ENGINES, before=st.integers(1, 8), header=st.booleans(), tail=st.booleans(),
       frames=_frames(), exc=_exc)
def test_a_traceback_cut_at_either_end_is_a_crash_when_nothing_follows(
        tmp_path: Path, engine: str, before: int, header: bool, tail: bool, frames: list[str], exc: str) -> None:
    if not header and not tail:
        tail = True  # frames alone name nothing
    lines = [_serving(engine, i) for i in range(before)]
    lines += (["Traceback (most recent call last):"] if header else []) + frames + ([exc] if tail else [])
    session = _run_both(tmp_path, lines)
    run = session.runs[-1]
    assert run.state is ServerState.CRASHED
    assert run.crash_cause == (exc.strip()[:160] if tail else "Traceback (most recent call last):")


_ABORTS = st.one_of(
    st.builds(lambda p, n, c: f"{p}:{n}: GGML_ASSERT({c}) failed", _path, st.integers(1, 9999),
              st.from_regex(r"[a-z_.>!= 0-9()]{1,40}", fullmatch=True)),
    st.builds(lambda p, n, c: f"llama-server: {p}:{n}: int f(): Assertion `{c}' failed.", _path,
              st.integers(1, 9999), st.from_regex(r"[a-z_ =]{1,30}", fullmatch=True)),
    st.just("terminate called after throwing an instance of 'std::runtime_error'"),
    st.just("Aborted (core dumped)"),
    st.just("Segmentation fault (core dumped)"),
)


@_SETTINGS
@given(before=st.integers(1, 8), abort=_ABORTS, trail=st.lists(st.sampled_from(
    ["[New LWP 27301]", "No stack.", "[Inferior 1 (process 27300) detached]", "  what():  bad alloc"]), max_size=4))
def test_a_native_abort_ends_a_llamacpp_server(tmp_path: Path, before: int, abort: str, trail: list[str]) -> None:
    lines = [_serving("llamacpp", i) for i in range(before)] + [abort, *trail]
    session = _run_both(tmp_path, lines)
    run = session.runs[-1]
    assert run.state is ServerState.CRASHED
    assert run.crash_cause is not None and run.crash_cause in abort


@_SETTINGS
@given(before=st.integers(1, 6), after=st.integers(1, 6), frames=_frames(), exc=_exc)
def test_an_engines_fatal_marker_is_certain(tmp_path: Path, before: int, after: int, frames: list[str],
                                            exc: str) -> None:
    """SGLang's scheduler dies with its own words: other ranks' last lines are no survival."""
    lines = [_serving("sglang", i) for i in range(before)]
    lines += ["[2025-10-22 10:59:00 TP3] Scheduler hit an exception: Traceback (most recent call last):",
              *frames, exc]
    lines += [_serving("sglang", before + i) for i in range(after)]
    session = _run_both(tmp_path, lines)
    assert session.runs[0].state is ServerState.CRASHED
    assert session.runs[0].errors_survived == []


def test_real_native_aborts_are_crashes() -> None:
    for name, cause in (("llamacpp_ggml_assert_9170.log", "GGML_ASSERT(cell.has_seq_id(seq_id)) failed"),
                        ("ik_llamacpp_ggml_assert_wrapped_1910.log", "GGML_ASSERT(S")):
        session = Session()
        ingest_file(session, str(DATA / name))
        crashed = [r for r in session.runs if r.state is ServerState.CRASHED]
        assert crashed, name
        assert cause in (crashed[0].crash_cause or ""), (name, crashed[0].crash_cause)
