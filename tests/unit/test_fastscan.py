"""The bulk path of summarize gives exactly what the line-by-line path gives."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.ingest import bulk as fastscan
from specmon.ingest import feeding, templates
from specmon.ingest.files import ingest_file
from specmon.model.analysis import analyze
from specmon.model.session import Session
from specmon.output.tables import to_json
from tests.support import logtext as L

REAL = Path(__file__).parents[1] / "data" / "real_logs"


def _doc(session: Session) -> dict:
    return json.loads(json.dumps(to_json(session, analyze(session.runs))))


def _line_session(path: Path, warmup: int | None = None) -> Session:
    session = Session(warmup=warmup)
    ingest_file(session, str(path))
    return session


def _state(session: Session) -> list[object]:
    """What the bulk path must leave as the line path does: each run's columns and rank states."""
    return [(list(r.throughput), list(r.concurrency), list(r.accept_len), list(r.accept_rate),
             r.excluded_idle, r.excluded_warmup, sorted(r.ranks),
             {k: (s.seen, s.gap_ema, s.last_ts) for k, s in r._ranks.items()}) for r in session.runs]


def _both(path: Path, jobs: int) -> tuple[dict, dict]:
    slow = Session()
    ingest_file(slow, str(path))
    fast = Session()
    feeding.ingest_file_fast(fast, str(path), jobs=jobs)
    return _doc(slow), _doc(fast)


def _mixed_log(path: Path, seed: int) -> None:
    """Standard bulk lines with everything that forces the slow path sprinkled in."""
    rng = random.Random(seed)
    lines = [L.server_args(2), L.ready(1)]
    t = 2.0
    for _i in range(6000):
        t += rng.choice((0.0, 1.0, 1.0, 1.0))
        r = rng.random()
        if r < 0.6:
            lines.append(L.decode(t, rng.uniform(58, 120), rng.uniform(1.5, 2.9), rng.uniform(.4, .9),
                                  running=rng.choice((1, 1, 2))))
        elif r < 0.75:
            lines.append(f"{L.stamp(t)} Prefill batch, #new-seq: 1, #new-token: 28, #cached-token: 0, "
                         f"token usage: 0.00, #running-req: 0, #queue-req: 0, ")
        elif r < 0.95:
            lines.append(f"{L.stamp(t, None)} INFO:     127.0.0.1:3766 - \"POST /v1/completions HTTP/1.1\" 200 OK")
        elif r < 0.96:
            t += 30  # idle gap
        elif r < 0.965:
            lines.append(f"{L.stamp(t)} Decode batch, #running-req: 1, #token: 44672, token usaccept rate: 0.32, "
                         f"cuda graph: False, gen throughput (token/s): 863.65, #queue-req")
        elif r < 0.97:
            lines.append(L.decode(t, 90, 2.0, 0.6, rank="DP1 TP1"))
        elif r < 0.972:
            lines.extend(L.campaign(rng.choice((None, 1, 2, 3)), 90, 5, start=t))
        else:
            lines.append("\x1b[32mrandom noise\x1b[0m " + "x" * rng.randint(0, 50))
    path.write_text("\n".join(lines) + "\n")


@pytest.mark.parametrize("seed", [1, 2])
def test_bulk_path_equals_line_path_on_mixed_log(tmp_path: Path, monkeypatch, seed: int) -> None:
    monkeypatch.setattr(feeding, "PIECE", 64 << 10)  # many pieces, some bulk, some not
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    log = tmp_path / "mixed.log"
    _mixed_log(log, seed)
    slow, fast_one = _both(log, jobs=1)
    _, fast_two = _both(log, jobs=2)
    assert slow["counts"]["decode"] > 3000  # the log really has bulk pieces
    assert fast_one == slow
    assert fast_two == slow


def test_bulk_path_equals_line_path_on_real_logs(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(feeding, "PIECE", 512)
    logs = sorted(REAL.glob("*.log")) + sorted((REAL / "vllm_cpu_kit").glob("*.log"))
    assert len(logs) > 40
    for log in logs:
        slow, fast = _both(log, jobs=1)
        assert fast == slow, log.name


def test_pieces_cover_the_file_on_line_boundaries(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(feeding, "PIECE", 100)
    p = tmp_path / "a.log"
    data = b"".join(b"x" * n + b"\n" for n in (5, 300, 0, 99, 100, 1, 250)) + b"tail-without-newline"
    p.write_bytes(data)
    pieces = list(feeding.line_ranges(str(p), len(data)))
    assert pieces[0][0] == 0 and pieces[-1][1] == len(data)
    assert all(a[1] == b[0] for a, b in zip(pieces, pieces[1:], strict=False))
    assert all(data[e - 1:e] == b"\n" for _, e in pieces[:-1])


def test_bulk_steady_path_equals_line_path(tmp_path: Path, monkeypatch) -> None:
    """A clean single-rank log with idle gaps: every piece takes the steady bulk path."""
    monkeypatch.setattr(feeding, "PIECE", 32 << 10)
    calls = {"steady": 0, "not": 0}
    original = Session._bulk_steady

    def counting(self, *args):  # type: ignore[no-untyped-def]
        done = original(self, *args)
        calls["steady" if done else "not"] += 1
        return done

    monkeypatch.setattr(Session, "_bulk_steady", counting)
    rng = random.Random(3)
    lines = [L.server_args(3), L.ready(1)]
    t = 2.0
    for i in range(8000):
        t += rng.choice((0.0, 1.0)) + (45.0 if i % 2500 == 2499 else 0.0)  # a few idle gaps
        if rng.random() < 0.7:
            lines.append(L.decode(t, rng.uniform(58, 120), rng.uniform(1.5, 2.9), rng.uniform(.4, .9)))
        else:
            lines.append(f"{L.stamp(t, None)} INFO:     127.0.0.1:3766 - \"POST /v1/completions HTTP/1.1\" 200 OK")
    log = tmp_path / "clean.log"
    log.write_text("\n".join(lines) + "\n")
    slow, fast = _both(log, jobs=1)
    assert calls["steady"] > 10 and calls["not"] == 0  # the idle gaps too found in bulk
    assert fast == slow
    assert slow["runs"][0]["excluded_idle"] >= 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 5), st.integers(0, 2**31), st.sampled_from((None, 0, 3)))
def test_steady_path_with_ranks_in_turn_equals_line_path(tmp_path: Path, monkeypatch, ranks: int, seed: int,
                                                        warmup: int | None) -> None:
    """DP attention prints one decode line per DP rank in turn: the steady bulk path takes each
    rank's gaps and average over its own samples, and gives what the line path gives — with a
    rank that joins late, idle gaps on one rank, and lines without a time."""
    monkeypatch.setattr(feeding, "PIECE", 16 << 10)
    calls = {"steady": 0}
    original = Session._bulk_steady

    def counting(self, *args):  # type: ignore[no-untyped-def]
        done = original(self, *args)
        calls["steady"] += done
        return done

    monkeypatch.setattr(Session, "_bulk_steady", counting)
    rng = random.Random(seed)
    names = [f"DP{r} TP{r} EP{r}" for r in range(ranks)]
    lines = [L.server_args(3), L.ready(1)]
    t = 2.0
    for i in range(3000):
        r = i % ranks if i > 600 else i % max(1, ranks - 1)  # the last rank joins late
        t += rng.choice((0.0, 0.0, 1.0)) + (40.0 if rng.random() < 0.002 else 0.0)
        rank = names[r] if rng.random() > 0.001 else None
        lines.append(L.decode(t, rng.uniform(58, 120), rng.uniform(1.5, 2.9), rng.uniform(.4, .9),
                              running=rng.randint(0, 9), rank=rank))
    log = tmp_path / "dp.log"
    log.write_text("\n".join(lines) + "\n")
    slow = _line_session(log, warmup)
    session = Session(warmup=warmup)
    feeding.ingest_file_fast(session, str(log), jobs=1)
    assert _state(session) == _state(slow)
    assert _doc(session) == _doc(slow)
    assert calls["steady"] > 0


def test_lines_a_veto_turns_away_are_not_learnt_from(tmp_path: Path, monkeypatch) -> None:
    """llama.cpp's "prompt eval time" lines hold the eval lines' marker and a veto: never an eval
    line, each with its own stamp. They were tried 32 times a piece (0.45 ms, and a search of
    the whole piece); now passed over, and the session is what the line path makes."""
    lines = []
    for i in range(3000):
        ms = f"{i % 1000:03d}"
        lines += [f"2026-05-14 09:{i // 600:02d}:{i // 10 % 60:02d}.{ms} | slot print_timing: id  0 | task {i} | ",
                  f"2026-05-14 09:{i // 600:02d}:{i // 10 % 60:02d}.{ms} | prompt eval time =     {600 + i}.99 ms /"
                  f"   133 tokens (    4.88 ms per token,   204.94 tokens per second)",
                  f"2026-05-14 09:{i // 600:02d}:{i // 10 % 60:02d}.{ms} |        eval time =   25040.27 ms /  2048 "
                  f"tokens (   12.23 ms per token,    {80 + i % 9}.79 tokens per second)",
                  f"2026-05-14 09:{i // 600:02d}:{i // 10 % 60:02d}.{ms} | draft acceptance rate = 0.46727 "
                  f"( 564 accepted /  1207 generated)"]
    log = tmp_path / "llama.log"
    log.write_text("\n".join(lines) + "\n")
    tried: list[bytes] = []
    original = fastscan._try_learn

    def spy(kind, raw, probe, year):  # type: ignore[no-untyped-def]
        tried.append(raw)
        return original(kind, raw, probe, year)

    monkeypatch.setattr(fastscan, "_try_learn", spy)
    monkeypatch.setattr(feeding, "PIECE", 64 << 10)
    templates._LEARNER.__init__()  # type: ignore[misc]
    slow, fast = _both(log, jobs=1)
    assert fast == slow
    assert not [raw for raw in tried if b"prompt eval" in raw]
    assert any(b"       eval time" in raw for raw in tried)  # (the eval lines' own shape was learnt)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(sorted(p.name for p in REAL.glob("*.log")))
       .map(lambda names: names[:3]), piece=st.sampled_from([256, 4096, 1 << 20]))
def test_a_file_of_several_engines_votes_as_the_line_path(tmp_path: Path, monkeypatch, order: list[str],
                                                          piece: int) -> None:
    """Logs of different engines one after the other: the engine votes (which decide the session's
    engine and so the default warm-up) are those of the line path, prefill lines counted in bulk
    voting for SGLang as their records do."""
    monkeypatch.setattr(feeding, "PIECE", piece)
    log = tmp_path / "several.log"
    log.write_text("".join((REAL / name).read_text(encoding="utf-8", errors="replace") for name in order))
    slow = _line_session(log)
    fast = Session()
    feeding.ingest_file_fast(fast, str(log), jobs=1)
    assert dict(fast.engine_votes) == dict(slow.engine_votes)
    assert fast.engine is slow.engine and fast.counts == slow.counts


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3000), st.integers(0, 3000)), min_size=50, max_size=400),
       st.sampled_from([2048, 16 << 10]))
def test_llamacpp_draft_lines_without_a_mean_length_sum_as_the_line_path(tmp_path: Path, monkeypatch,
                                                                        blocks: list[tuple[int, int]],
                                                                        piece: int) -> None:
    """llama.cpp's print_timing blocks give a draft line without a mean acceptance length (every
    spec line takes the path that keeps only lines that drafted), some drafting nothing: counts,
    rates and samples as the line path's, whichever way the drafted counts cross."""
    monkeypatch.setattr(feeding, "PIECE", piece)
    monkeypatch.setattr(feeding, "PARALLEL_MIN_BYTES", 0)
    lines = []
    for task, (generated, accepted) in enumerate(blocks):
        accepted = min(accepted, generated)
        rate = accepted / generated if generated else 0.0
        t = f"2026-05-14 09:{task // 60 % 60:02d}:{task % 60:02d}.00"
        lines += [f"{t}0 | slot print_timing: id  0 | task {task} | ",
                  f"{t}1 |        eval time =   43837.29 ms /  2048 tokens (   21.40 ms per token,    46.72 tokens per second)",
                  f"{t}2 | draft acceptance rate = {rate:.5f} ( {accepted} accepted /  {generated} generated)"]
    log = tmp_path / "timing.log"
    log.write_text("\n".join(lines) + "\n")
    slow = _line_session(log)
    fast = Session()
    feeding.ingest_file_fast(fast, str(log), jobs=1)
    assert _doc(fast) == _doc(slow)
    assert [(r.accepted, r.drafted, list(r.accept_rate)) for r in fast.runs] == \
        [(r.accepted, r.drafted, list(r.accept_rate)) for r in slow.runs]
