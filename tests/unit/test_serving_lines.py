"""Request lines count as serving (issue 43, item 6): an error the server caught is known by the
requests it answers after it, not only by its next stats sample.

A pending error (a traceback, an out-of-memory error) followed by a line of a request answered —
uvicorn's ``"POST /v1/chat/completions HTTP/1.1" 200`` (SGLang, vLLM, trtllm-serve), llama.cpp's
``log_server_r: request: POST /completion 127.0.0.1 200`` or a slot's ``| task N |`` — is an error
the server caught. A 500, a GET of /metrics or /health (a dead engine's API server still answers
those), or any other line is not. Generated logs per engine interleave caught errors, request
lines, noise and stats lines; the line path and the bulk path (pieces of a few hundred bytes, so
that an error pending at a piece's end carries into the next) must give the same session.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.ingest import feeding
from specmon.ingest.files import ingest_file
from specmon.model.analysis import crashes
from specmon.model.session import ServerState, Session
from specmon.parsing import LineParser, parse_lines
from specmon.records import Serving
from tests.support.crashlogs import NAME, exceptions, serving

ENGINES = ("sglang", "vllm", "llamacpp")

_exc = exceptions(["RuntimeError", "ValueError", "KeyError", "TypeError"])


def _stats(engine: str, i: int) -> str:
    """One stats line of ``engine`` (a sample), the ``i``-th of the log: vLLM's as its V1 API server prints it."""
    return serving(engine, i, vllm_prefix="(APIServer pid=1) ")


def _answered(engine: str, n: int, path: str) -> list[str]:
    """Lines of requests answered, in ``engine``'s words (each one is serving)."""
    if engine == "llamacpp":
        return [f"srv  log_server_r: request: POST {path} 127.0.0.1 200",
                f"srv  log_server_r: done request: POST {path} 10.0.0.{n % 250} 200",
                f"slot launch_slot_: id  {n % 4} | task {n} | processing task",
                f"slot      release: id  {n % 4} | task {n} | stop processing: n_past = {n + 100}, truncated = 0"]
    lead = "[2025-10-22 10:30:00] " if engine == "sglang" else "(APIServer pid=1) "
    return [f'{lead}INFO:     127.0.0.1:{40000 + n} - "POST {path} HTTP/1.1" 200 OK',
            f'INFO:     10.1.2.3:{40000 + n} - "POST {path} HTTP/1.1" 201 Created']


def _not_serving(engine: str, n: int) -> list[str]:
    """Lines that say nothing of serving: failed requests, health and metrics, chatter."""
    if engine == "llamacpp":
        return [f"srv  log_server_r: request: POST /completion 127.0.0.1 {500 + n % 4}",
                "srv  log_server_r: request: GET /health 127.0.0.1 200",
                "srv  update_slots: all slots are idle",
                f"srv  params_from_: Chat format: Content-only {n}"]
    lead = "[2025-10-22 10:30:00] " if engine == "sglang" else "(APIServer pid=1) "
    return [f'{lead}INFO:     127.0.0.1:{40000 + n} - "POST /v1/chat/completions HTTP/1.1" 500 Internal Server Error',
            f'{lead}INFO:     127.0.0.1:{40000 + n} - "GET /metrics HTTP/1.1" 200 OK',
            f'INFO:     127.0.0.1:{40000 + n} - "GET /health HTTP/1.1" 200 OK',
            f"{lead}INFO 10-22 10:30:00 [logger.py:41] Received request cmpl-{n}: params: max_tokens={n}"]


@st.composite
def _caught(draw: st.DrawFn) -> tuple[list[str], str]:
    """A traceback or an out-of-memory error logged for one request: (its lines, its cause)."""
    frames = [f'  File "/{draw(NAME)}/{draw(NAME)}.py", line {draw(st.integers(1, 9999))}, in {draw(NAME)}'
              for _ in range(draw(st.integers(1, 3)))]
    if draw(st.booleans()):
        oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"
        return ["Traceback (most recent call last):", *frames, oom], oom[oom.index("CUDA"):]
    exc = draw(_exc)
    return ["Traceback (most recent call last):", *frames, exc], exc


def _key(s: Session) -> list[object]:
    return [(r.state, r.crash_pending, r.crash_cause, r.errors_survived, len(r.throughput), r.excluded_warmup)
            for r in s.runs]


def _both(path: Path, monkeypatch: pytest.MonkeyPatch, piece: int) -> Session:
    """The line path's session of ``path``, checked equal to the bulk path's in pieces of ``piece`` bytes."""
    slow = Session()
    ingest_file(slow, str(path))
    monkeypatch.setattr(feeding, "PIECE", piece)
    fast = Session()
    feeding.ingest_file_fast(fast, str(path), jobs=1)
    assert _key(fast) == _key(slow)
    assert [e.text for e in fast.events] == [e.text for e in slow.events]
    return slow


_SETTINGS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_SETTINGS
@given(data=st.data(), engine=st.sampled_from(ENGINES), errors=st.integers(1, 4),
       end=st.sampled_from(["answered", "stats", "silent"]), piece=st.sampled_from([300, 900, 4000, 1 << 20]))
def test_requests_answered_after_an_error_make_it_caught_on_both_paths(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: st.DataObject, engine: str, errors: int,
        end: str, piece: int) -> None:
    i = 0
    lines: list[str] = []

    def stats(n: int) -> None:
        nonlocal i
        lines.extend(_stats(engine, i + k) for k in range(n))
        i += n

    def noise() -> None:
        pool = _not_serving(engine, data.draw(st.integers(0, 9999)))
        lines.extend(data.draw(st.lists(st.sampled_from(pool), max_size=6)))

    stats(8)
    caught: list[str] = []
    want_crash = None
    for k in range(errors):
        block, cause = data.draw(_caught())
        lines.extend(block)
        noise()
        # What follows the error: requests answered (no sample at all), a sample, or (the last
        # error only) nothing that serves: then the end of the input confirms it.
        after = end if k == errors - 1 else data.draw(st.sampled_from(["answered", "stats"]))
        if after == "answered":
            path = data.draw(st.sampled_from(["/v1/chat/completions", "/v1/completions", "/generate", "/completion"]))
            answered = _answered(engine, data.draw(st.integers(0, 9999)), path)
            lines.extend(data.draw(st.lists(st.sampled_from(answered), min_size=1, max_size=3)))
            noise()
            caught.append(cause)
        elif after == "stats":
            stats(data.draw(st.integers(1, 3)))
            caught.append(cause)
        else:
            want_crash = cause
        if data.draw(st.booleans()) and after != "silent":
            stats(data.draw(st.integers(0, 3)))
    log = tmp_path / f"{engine}.log"
    log.write_text("\n".join(lines) + "\n")
    session = _both(log, monkeypatch, piece)
    runs = session.runs
    assert len(runs) == 1
    assert [c for _line, c in runs[0].errors_survived] == caught
    if want_crash is None:
        assert crashes(runs) == [] and runs[0].state is ServerState.SERVING
    else:
        assert [c.error for c in crashes(runs)] == [want_crash]
        # Nothing served after it: still pending (the end of the input is what confirms it).
        assert runs[0].state is ServerState.CRASHED and runs[0].crash_pending


@pytest.mark.parametrize("engine", ENGINES)
def test_a_request_answered_demotes_the_error_where_it_is_logged(engine: str) -> None:
    lines = [*(_stats(engine, i) for i in range(8)), "Traceback (most recent call last):",
             '  File "/x/y.py", line 1, in f', "ValueError: prompt too long", *_not_serving(engine, 7),
             _answered(engine, 3, "/v1/completions")[0], *_answered(engine, 4, "/v1/completions")]
    recs = list(parse_lines(lines, year=2025))
    served = [r for r in recs if isinstance(r, Serving)]
    # One record, for the first request answered after the error: the rest give nothing again.
    assert [r.line for r in served] == [len(lines) - len(_answered(engine, 4, "x"))]
    session = Session()
    for rec in recs:
        session.ingest(rec)
    run = session.current
    assert run is not None and run.state is ServerState.SERVING and not run.crash_pending
    assert run.errors_survived == [(11, "ValueError: prompt too long")]
    assert any("went on serving after the error at line 11" in e.text for e in session.events)


def test_request_lines_give_nothing_without_a_pending_error() -> None:
    """A busy log's access lines stay free: no record unless an error waits for one."""
    for engine in ENGINES:
        lines = [*_answered(engine, 1, "/v1/completions"), *(_stats(engine, i) for i in range(3)),
                 *_answered(engine, 2, "/generate")]
        assert not [r for r in parse_lines(lines) if isinstance(r, Serving)], engine


def test_a_certain_crash_is_not_demoted_by_requests_answered() -> None:
    """A worker's death is the end of serving: an API server that answers one more request (its
    queue draining) does not make it a caught error."""
    lines = [*(_stats("vllm", i) for i in range(8)),
             "ERROR 10-22 10:59:00 [multiproc_executor.py:140] Worker proc VllmWorker-0 died unexpectedly, "
             "shutting down executor.", *_answered("vllm", 1, "/v1/completions")]
    session = Session()
    for rec in parse_lines(lines, year=2025):
        session.ingest(rec)
    run = session.current
    assert run is not None and run.state is ServerState.CRASHED and not run.crash_pending
    assert run.errors_survived == []


def test_the_parser_awaits_serving_only_after_an_exception() -> None:
    parser = LineParser(year=2025)
    access = 'INFO:     127.0.0.1:1 - "POST /v1/completions HTTP/1.1" 200 OK'
    assert parser.parse(access, 1) is None
    parser.parse("Traceback (most recent call last):", 2)
    # Inside the traceback a request line of another thread names nothing yet.
    assert parser.parse(access, 3) is None
    parser.parse("RuntimeError: boom", 4)
    waiting = parser.awaiting_serving
    served = parser.parse(access, 5)
    assert waiting and isinstance(served, Serving)
    assert (parser.awaiting_serving, parser.parse(access, 6)) == (False, None)


@settings(max_examples=50, deadline=None)
@given(line=st.integers(1, 10**9), detail=st.text(max_size=160), stamped=st.booleans())
def test_a_serving_record_reads_back_from_a_recording(line: int, detail: str, stamped: bool) -> None:
    """A recording that keeps records (``--record`` with records) holds Serving ones too: each reads
    back as it was, where an unknown kind would be skipped as a damaged entry."""
    from specmon.recording_format import record_from_json

    rec = Serving(line, 1767261600.0 if stamped else None, None, detail=detail)
    assert record_from_json(rec.to_json()) == rec


@pytest.mark.parametrize("seed", range(3))
def test_reports_replay_of_a_recording_agrees_with_the_line_path(tmp_path: Path, seed: int) -> None:
    """``report`` replays a recording's raw lines in blocks, in bulk where it can: an error pending
    at a block's end, answered by an access line in the next, is caught there too."""
    import random

    from specmon.output.recording import write_lines_recording
    from specmon.output.recording_replay import replay_recording

    rng = random.Random(seed)
    lines: list[str] = []
    i = 0
    for _ in range(6):
        n = rng.randint(50, 9000)  # blocks of 8,192 lines: errors on both sides of a boundary
        lines += [_stats("sglang", i + k) for k in range(n)]
        i += n
        lines += ["Traceback (most recent call last):", '  File "/x/y.py", line 1, in f', f"ValueError: bad {i}"]
        lines += _not_serving("sglang", i)[:rng.randint(0, 2)]
        lines += rng.sample(_answered("sglang", i, "/generate"), 1) if rng.random() < 0.7 else []
    path = tmp_path / "rec.jsonl"
    write_lines_recording(path, [("gen.log", lines)])
    by_line = Session()
    by_line.begin_source("gen.log")
    for rec in parse_lines(lines):
        by_line.ingest(rec)
    replayed = replay_recording(path, on_samples=lambda *a: None)
    assert _key(replayed) == _key(by_line)
    assert [e.text for e in replayed.events if "went on serving" in e.text] == \
        [e.text for e in by_line.events if "went on serving" in e.text]
