"""The session model: runs, warm-up and idle exclusion, ranks, states, baseline and verdict."""

from __future__ import annotations

import pytest

from specmon.model.analysis import analyze
from specmon.model.session import ServerState, Session
from specmon.parsing import LineParser
from tests.support import logtext as L


def feed(lines: list[str], session: Session | None = None, source: str = "a.log",
         baseline: bool = False) -> Session:
    s = session or Session()
    s.begin_source(source, baseline=baseline)
    p = LineParser(year=2026)
    for i, text in enumerate(lines, 1):
        rec = p.parse(text, i)
        if rec is not None:
            s.ingest(rec)
    return s


def test_each_launch_is_a_run_with_its_config() -> None:
    s = feed(L.campaign(None, 88.8, 30) + L.campaign(2, 94.0, 30, start=100))
    assert [r.config.steps for r in s.runs] == [0, 2]
    assert [r.label for r in s.runs] == ["no speculation", "EAGLE3 2 steps"]
    assert s.runs[1].config.draft_tokens == 3


def test_same_config_relaunched_is_a_new_run_but_one_row() -> None:
    s = feed(L.campaign(2, 94.0, 20) + L.campaign(2, 94.0, 20, start=100))
    assert len(s.runs) == 2
    rows = analyze(s.runs).rows
    assert len(rows) == 1 and len(rows[0].runs) == 2
    assert rows[0].samples == 2 * (20 - 5)


def test_warmup_excluded_per_run_and_configurable() -> None:
    s = feed(L.campaign(2, 94.0, 30))
    run = s.runs[0]
    assert run.excluded_warmup == 5 and len(run.throughput) == 25
    s2 = Session(warmup=0)
    feed(L.campaign(2, 94.0, 30), s2)
    # With no warm-up the first line still cannot count: its interval began before the log.
    assert s2.runs[0].excluded_warmup == 0 and s2.runs[0].excluded_idle == 1
    assert len(s2.runs[0].throughput) == 29 and len(s2.runs[0].accept_len) == 30


def test_line_after_idle_gap_excluded_from_throughput_only() -> None:
    lines = L.campaign(2, 94.0, 20)
    lines.append(L.decode(26 + 60, 3.2, 2.0, 0.66))  # a minute of idle, then a tiny reading
    lines += [L.decode(27 + 60 + i, 94.0, 2.0, 0.66) for i in range(5)]
    run = feed(lines).runs[0]
    assert run.excluded_idle == 1
    assert min(run.throughput) > 80  # the 3.2 tok/s reading is not in the statistics
    assert len(run.accept_len) == len(run.throughput) + 1  # its acceptance still counts


def test_dp_ranks_kept_apart_for_warmup_and_gaps() -> None:
    lines = [L.server_args(2), L.ready(1)]
    for i in range(10):
        lines.append(L.decode(2 + i, 90, 2.0, 0.6, rank="DP0 TP0"))
        lines.append(L.decode(2 + i, 50, 2.0, 0.6, rank="DP1 TP1"))
    run = feed(lines).runs[0]
    assert run.ranks == {"DP0 TP0", "DP1 TP1"}
    assert run.excluded_warmup == 10  # 5 per rank
    assert sorted(run.throughput) == [50.0] * 5 + [90.0] * 5


def test_states_follow_lifecycle_and_crash() -> None:
    s = feed([L.server_args(2), f"{L.stamp(1)} Load weight begin. avail mem=70.00 GB",
              "Loading safetensors checkpoint shards:  45% Completed | 29/64 [00:30<00:31,  1.0it/s]"])
    assert s.state is ServerState.LOADING and s.runs[0].load_progress == (29, 64)
    feed([f"{L.stamp(9)} Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB"], s, "a.log")
    assert s.state is ServerState.CAPTURING
    s2 = feed([L.server_args(3), L.ready(3), L.decode(4, 90, 2, 0.5),
               f"{L.stamp(5)} Scheduler hit an exception: Traceback (most recent call last):",
               "RuntimeError: CUDA error: an illegal memory access was encountered"])
    assert s2.state is ServerState.CRASHED
    assert s2.runs[0].crash_detail == "RuntimeError: CUDA error: an illegal memory access was encountered"
    assert any(e.level == "error" for e in s2.events)


def test_new_source_starts_a_new_run() -> None:
    s = feed([L.decode(i, 90, 2, .5) for i in range(8)], source="x.log")
    feed([L.decode(i, 95, 2, .5) for i in range(8)], s, source="y.log")
    assert [r.source for r in s.runs] == ["x.log", "y.log"]
    assert len(analyze(s.runs).rows) == 2  # unknown configs of different files never merge


def test_verdict_separates_clear_winner() -> None:
    s = feed(L.campaign(None, 88.8, 60) + L.campaign(1, 85.1, 60, start=200)
             + L.campaign(2, 94.0, 60, start=400) + L.campaign(5, 86.7, 60, start=600))
    # One launch each: by default the intervals include an assumed 5% launch CV, which a +5.9%
    # gain over single starts does not beat, and the verdict says so.
    assumed = analyze(s.runs).verdict
    assert assumed.best is not None and assumed.best.steps == 2 and not assumed.separated
    assert "assumed launch CV 5%" in assumed.sentence and "Rests on 4 launches" in assumed.sentence
    # Told that launches do not differ (launch CV 0), the within-launch intervals decide, as before.
    a = analyze(s.runs, launch_cv=0.0)
    assert a.baseline is not None and a.baseline.source == "run"
    v = a.verdict
    assert v.best is not None and v.best.steps == 2
    assert v.separated
    assert v.speedup is not None and v.speedup.pct == pytest.approx(94.0 / 88.8 * 100 - 100, abs=0.5)
    assert v.speedup.ci95_low is not None and v.speedup.ci95_low > 0


def test_verdict_refuses_when_not_separated() -> None:
    s = feed(L.campaign(2, 94.0, 40, spread=10) + L.campaign(3, 93.8, 40, start=200, spread=10))
    v = analyze(s.runs).verdict
    assert v.best is not None and not v.separated
    assert "not distinguishable" in v.sentence


def test_baseline_tps_and_baseline_file() -> None:
    s = feed(L.campaign(2, 94.0, 30))
    a = analyze(s.runs, baseline_tps=88.8)
    assert a.baseline is not None and a.baseline.source == "tps"
    assert a.rows[0].vs_baseline is not None
    assert a.rows[0].vs_baseline.pct == pytest.approx((a.rows[0].throughput.mean / 88.8 - 1) * 100)
    s2 = Session()
    feed(L.campaign(None, 80.0, 30), s2, "base.log", baseline=True)
    feed(L.campaign(2, 94.0, 30), s2, "two.log")
    a2 = analyze(s2.runs)
    assert a2.baseline is not None and a2.baseline.source == "file"
    assert a2.rows[0].is_baseline and a2.rows[1].vs_baseline.pct > 10


def test_concurrency_grouping_and_note() -> None:
    s = feed(L.campaign(1, 150, 30, running=4) + L.campaign(2, 94, 30, start=200, running=1))
    a = analyze(s.runs)
    assert set(a.rows[0].concurrency) == {4} and set(a.rows[1].concurrency) == {1}
    assert a.verdict.concurrency_note is not None
