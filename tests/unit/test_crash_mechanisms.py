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
from tests.support.crashlogs import KINDS, PATH, exceptions, run_both, serving, traceback_frames

DATA = Path(__file__).resolve().parents[1] / "data" / "crash_logs"

_exc = exceptions([*KINDS, "torch.cuda.CudaError"], r"[a-z][a-z ]{0,30}")


def _run_both(tmp_path: Path, lines: list[str]) -> Session:
    return run_both(tmp_path, lines, lambda r: (r.state, r.crash_cause, len(r.errors_survived), len(r.throughput)))


_ENGINES = st.sampled_from(["sglang", "vllm", "llamacpp"])
_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(engine=_ENGINES, before=st.integers(6, 12), after=st.integers(1, 8), header=st.booleans(),
       frames=traceback_frames(5), exc=_exc)
def test_a_traceback_the_server_survived_is_no_crash(tmp_path: Path, engine: str, before: int, after: int,
                                                     header: bool, frames: list[str], exc: str) -> None:
    lines = [serving(engine, i) for i in range(before)]
    lines += (["Traceback (most recent call last):"] if header else []) + frames + [exc]
    lines += [serving(engine, before + i) for i in range(after)]
    session = _run_both(tmp_path, lines)
    assert len(session.runs) == 1
    run = session.runs[0]
    assert run.state is ServerState.SERVING
    assert run.crash_cause is None
    assert [cause for _line, cause in run.errors_survived] == [exc.strip()[:160]]
    assert any("went on serving" in e.text for e in session.events)


@_SETTINGS
@given(engine=_ENGINES, before=st.integers(1, 8), header=st.booleans(), tail=st.booleans(),
       frames=traceback_frames(5), exc=_exc)
def test_a_traceback_cut_at_either_end_is_a_crash_when_nothing_follows(
        tmp_path: Path, engine: str, before: int, header: bool, tail: bool, frames: list[str], exc: str) -> None:
    if not header and not tail:
        tail = True  # frames alone name nothing
    lines = [serving(engine, i) for i in range(before)]
    lines += (["Traceback (most recent call last):"] if header else []) + frames + ([exc] if tail else [])
    session = _run_both(tmp_path, lines)
    run = session.runs[-1]
    assert run.state is ServerState.CRASHED
    assert run.crash_cause == (exc.strip()[:160] if tail else "Traceback (most recent call last):")


_ABORTS = st.one_of(
    st.builds(lambda p, n, c: f"{p}:{n}: GGML_ASSERT({c}) failed", PATH, st.integers(1, 9999),
              st.from_regex(r"[a-z_.>!= 0-9()]{1,40}", fullmatch=True)),
    st.builds(lambda p, n, c: f"llama-server: {p}:{n}: int f(): Assertion `{c}' failed.", PATH,
              st.integers(1, 9999), st.from_regex(r"[a-z_ =]{1,30}", fullmatch=True)),
    st.just("terminate called after throwing an instance of 'std::runtime_error'"),
    st.just("Aborted (core dumped)"),
    st.just("Segmentation fault (core dumped)"),
)


@_SETTINGS
@given(before=st.integers(1, 8), abort=_ABORTS, trail=st.lists(st.sampled_from(
    ["[New LWP 27301]", "No stack.", "[Inferior 1 (process 27300) detached]", "  what():  bad alloc"]), max_size=4))
def test_a_native_abort_ends_a_llamacpp_server(tmp_path: Path, before: int, abort: str, trail: list[str]) -> None:
    lines = [serving("llamacpp", i) for i in range(before)] + [abort, *trail]
    session = _run_both(tmp_path, lines)
    run = session.runs[-1]
    assert run.state is ServerState.CRASHED
    assert run.crash_cause is not None and run.crash_cause in abort


@_SETTINGS
@given(before=st.integers(1, 6), after=st.integers(1, 6), frames=traceback_frames(5), exc=_exc)
def test_an_engines_fatal_marker_is_certain(tmp_path: Path, before: int, after: int, frames: list[str],
                                            exc: str) -> None:
    """SGLang's scheduler dies with its own words: other ranks' last lines are no survival."""
    lines = [serving("sglang", i) for i in range(before)]
    lines += ["[2025-10-22 10:59:00 TP3] Scheduler hit an exception: Traceback (most recent call last):",
              *frames, exc]
    lines += [serving("sglang", before + i) for i in range(after)]
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
