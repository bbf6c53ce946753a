"""Replay pacing, the replay source and the feeder (core: no Textual involved)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specmon.ingest.files import ingest_lines
from specmon.ingest.live import _SUB_BATCH, Feeder, FeedInput, ingest_batch
from specmon.model.analysis import analyze
from specmon.model.session import ServerState, Session
from specmon.output.tables import to_json
from specmon.parsing import LineParser
from specmon.sources.base import ConnectionState
from specmon.sources.replay import (
    SPEED_STEPS,
    ReplayClock,
    ReplaySource,
    line_time,
    speed_text,
)
from tests.support.app_factory import CRASH as _CRASH
from tests.support.app_factory import ROOT, FakeMonotonic, StaticSource
from tests.support.app_factory import SWEEP as _SWEEP
from tests.support.logtext import campaign, decode, ready, server_args, stamp

T0 = line_time(stamp(0), 2026)
SWEEP = [ROOT / p for p in _SWEEP]
CRASH = ROOT / _CRASH


class Sleeper:
    """An injected sleep that advances a fake monotonic clock instead of waiting."""

    def __init__(self, mono: FakeMonotonic) -> None:
        self.mono = mono
        self.slept = 0.0

    async def __call__(self, seconds: float) -> None:
        self.mono.advance(seconds)
        self.slept += seconds
        await asyncio.sleep(0)


def write(tmp_path: Path, name: str, lines: list[str]) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


async def collect(source: ReplaySource) -> list[list[str]]:
    return [batch async for batch in source.batches()]


# -- line_time -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("[2026-08-23 09:00:05 TP0] Decode batch, #running-req: 1", 5.0),
    ("[2026-08-23 09:00:05] The server is fired up and ready to roll!", 5.0),
    ("[2026-08-23 09:00:05.250 DP0 TP0] Prefill batch, #new-seq: 1", 5.25),
    ("INFO 08-23 09:00:05 [loggers.py:271] Engine 000: Avg prompt throughput: 0.0 tokens/s", 5.0),
    ("2026-08-23T09:00:05.000000000Z [2026-08-23 09:00:04 TP0] Decode batch", 5.0),  # docker logs -t
    ("\x1b[32m[2026-08-23 09:00:05 TP0]\x1b[0m Decode batch", 5.0),
])
def test_line_time_reads_the_prefix(text: str, expected: float) -> None:
    assert T0 is not None
    assert line_time(text, 2026) == pytest.approx(T0 + expected)


@pytest.mark.parametrize("text", [
    "Loading safetensors checkpoint shards:  45% Completed | 29/64 [02:31<03:02,  5.21s/it]",
    '  File "/sgl/scheduler.py", line 2937, in run_scheduler_process',
    "12:00:01 a bare time of day is no date",
    "",
])
def test_line_time_none_without_a_dated_prefix(text: str) -> None:
    assert line_time(text, 2026) is None


# -- the clock -----------------------------------------------------------------------------------

def test_clock_runs_at_its_speed_and_stops_when_paused() -> None:
    mono = FakeMonotonic()
    clock = ReplayClock(10.0, monotonic=mono)
    assert clock.log_now() is None
    clock.jump(100.0)
    mono.advance(2.0)
    assert clock.log_now() == pytest.approx(120.0)
    clock.pause()
    mono.advance(50.0)
    assert clock.log_now() == pytest.approx(120.0)
    clock.resume()
    mono.advance(1.0)
    assert clock.log_now() == pytest.approx(130.0)
    clock.set_speed(1.0)  # no jump in log time when the speed changes
    assert clock.log_now() == pytest.approx(130.0)
    mono.advance(1.0)
    assert clock.log_now() == pytest.approx(131.0)


def test_clock_speed_steps() -> None:
    clock = ReplayClock(1.0, monotonic=FakeMonotonic())
    assert clock.faster() == 2.0
    assert clock.slower() == 1.0
    clock.set_speed(3.0)  # not a step: slower goes to the step below, faster to the one above
    assert clock.slower() == 2.0
    clock.set_speed(3.0)
    assert clock.faster() == 5.0
    clock.set_speed(SPEED_STEPS[-2])
    assert clock.faster() is None and speed_text(clock.speed) == "max"
    assert clock.faster() is None  # max stays max
    assert clock.slower() == SPEED_STEPS[-2]
    clock.set_speed(SPEED_STEPS[0])
    assert clock.slower() == SPEED_STEPS[0]
    assert speed_text(0.5) == "0.5×"


# -- the replay source ---------------------------------------------------------------------------------

async def test_max_speed_delivers_every_line_in_order(tmp_path: Path) -> None:
    lines = campaign(2, 94.0, 50)
    src = ReplaySource(write(tmp_path, "a.log", lines), ReplayClock(None), max_batch=16)
    batches = await collect(src)
    assert [ln for b in batches for ln in b] == lines
    assert max(len(b) for b in batches) == 16
    assert src.status.state is ConnectionState.ENDED
    assert src.status.lines == len(lines)


@pytest.mark.parametrize(("speed", "slept"), [(1.0, 11.0), (10.0, 1.1)])
async def test_paced_replay_waits_for_each_line_time(tmp_path: Path, speed: float, slept: float) -> None:
    lines = [server_args(2, 0), "untimestamped continuation", ready(5), decode(6, 90.0, 2.0, 0.5),
             decode(11, 91.0, 2.0, 0.5)]
    mono = FakeMonotonic()
    sleeper = Sleeper(mono)
    src = ReplaySource(write(tmp_path, "a.log", lines), ReplayClock(speed, monotonic=mono, sleep=sleeper))
    batches = await collect(src)
    # The untimestamped line rides with the stamped line before it; each later line waits its turn.
    assert batches == [lines[0:2], [lines[2]], [lines[3]], [lines[4]]]
    assert sleeper.slept == pytest.approx(slept)


async def test_each_file_starts_its_own_time_line(tmp_path: Path) -> None:
    mono = FakeMonotonic()
    sleeper = Sleeper(mono)
    clock = ReplayClock(1.0, monotonic=mono, sleep=sleeper)
    first = ReplaySource(write(tmp_path, "a.log", [ready(0), ready(2)]), clock)
    # The second log was written a day later: no waiting for the gap between the files.
    second = ReplaySource(write(tmp_path, "b.log", [ready(86400), ready(86401)]), clock)
    await collect(first)
    await collect(second)
    assert sleeper.slept == pytest.approx(3.0)


async def test_pause_holds_lines_until_resumed(tmp_path: Path) -> None:
    mono = FakeMonotonic()
    clock = ReplayClock(1.0, monotonic=mono)
    src = ReplaySource(write(tmp_path, "a.log", [ready(0), ready(1)]), clock)
    it = src.batches()
    assert await it.__anext__() == [ready(0)]
    clock.pause()
    nxt = asyncio.ensure_future(it.__anext__())
    mono.advance(100.0)
    await asyncio.sleep(0.05)
    assert not nxt.done()
    clock.resume()
    mono.advance(1.0)
    assert await asyncio.wait_for(nxt, 5) == [ready(1)]
    await it.aclose()


async def test_missing_file_is_a_visible_failure(tmp_path: Path) -> None:
    src = ReplaySource(tmp_path / "nope.log", ReplayClock(None))
    assert await collect(src) == []
    assert src.status.state is ConnectionState.FAILED
    assert "no such file" in src.status.detail


# -- the feeder ----------------------------------------------------------------------------------

async def test_feeder_reads_inputs_in_order_into_one_session() -> None:
    clock = ReplayClock(None)
    inputs = [FeedInput(ReplaySource(p, clock), year=2026) for p in SWEEP[:3]]
    feeder = Feeder(inputs, replay_clock=clock)
    await feeder.run()
    await feeder.wait_finished()
    assert feeder.done
    labels = [r.label for r in feeder.session.runs if r.used]
    assert labels == ["no speculation", "EAGLE3 1 step", "EAGLE3 2 steps"]
    assert feeder.lines == sum(len(p.read_text().splitlines()) for p in SWEEP[:3])
    assert feeder.source is inputs[-1].source


async def test_feeder_marks_baseline_inputs_and_follows_crashes() -> None:
    clock = ReplayClock(None)
    inputs = [FeedInput(ReplaySource(SWEEP[0], ReplayClock(None)), baseline=True),
              FeedInput(ReplaySource(CRASH, clock))]
    feeder = Feeder(inputs, replay_clock=clock)
    await feeder.run()
    runs = feeder.session.runs
    assert runs[0].baseline_source and not runs[-1].baseline_source
    assert feeder.session.current is not None
    assert feeder.session.current.state is ServerState.CRASHED
    errors = [e.text for e in feeder.session.events if e.level == "error"]
    assert any("out of memory" in t.lower() for t in errors)


async def test_loop_replays_into_a_fresh_session(tmp_path: Path) -> None:
    path = write(tmp_path, "a.log", campaign(2, 94.0, 20))
    clock = ReplayClock(None)
    feeder = Feeder([FeedInput(ReplaySource(path, clock))], replay_clock=clock, loop=True)
    task = asyncio.ensure_future(feeder.run())
    while feeder.loops < 2:
        await asyncio.sleep(0)
    first_session = feeder.session
    assert feeder.generation >= 2
    assert len([r for r in first_session.runs if r.used]) <= 1  # never the same log pooled twice
    await feeder.close()
    await asyncio.wait_for(task, 5)
    assert feeder.done


async def test_feeder_yields_to_the_loop_while_parsing_a_burst() -> None:
    lines = campaign(2, 94.0, 3000)
    ticks = 0
    times = iter(range(10**9))  # a perf counter that moves one "second" per call: every slice expires

    async def ticker() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    feeder = Feeder([FeedInput(StaticSource([lines], stay_open=False))], perf=lambda: float(next(times)))
    t = asyncio.ensure_future(ticker())
    await feeder.run()
    t.cancel()
    # One turn for others per sub-batch: a burst never monopolises the loop.
    assert ticks >= len(lines) // _SUB_BATCH
    assert feeder.lines == len(lines)


async def test_source_messages_reach_the_event_log() -> None:
    src = StaticSource([[ready(0)]], stay_open=False)
    src.status.events.append("/var/log/x.log was truncated: reading again from the start")
    feeder = Feeder([FeedInput(src)])
    await feeder.run()
    texts = [e.text for e in feeder.session.events]
    assert any("truncated" in t for t in texts)
    assert src.status.events == []


async def test_live_log_time_moves_with_the_wall_clock() -> None:
    now = [5000.0]
    src = StaticSource([[server_args(2, 0), ready(5)]])
    feeder = Feeder([FeedInput(src)], clock=lambda: now[0])
    task = asyncio.ensure_future(feeder.run())
    await src.delivered.wait()
    await asyncio.sleep(0)
    ts = feeder.session.current.last_at  # type: ignore[union-attr]
    assert feeder.log_now() == pytest.approx(ts)
    now[0] += 30.0  # a server loading weights prints little: elapsed time must still move
    assert feeder.log_now() == pytest.approx(ts + 30.0)
    await feeder.close()
    await asyncio.wait_for(task, 5)


@pytest.mark.parametrize("size", [64, 512, 5000])
def test_bulk_batches_give_exactly_the_line_by_line_session(size: int) -> None:
    """The fast path must not change a single number (crash lines and tracebacks included)."""
    files = [*SWEEP[:3], CRASH]

    def build(bulk: bool) -> dict:  # type: ignore[type-arg]
        session = Session()
        for path in files:
            session.begin_source(str(path))
            parser = LineParser(year=2026)
            lines = path.read_text(encoding="utf-8").splitlines()
            n = 1
            for i in range(0, len(lines), size):
                part = lines[i:i + size]
                n = ingest_batch(session, parser, part, n) if bulk else ingest_lines(session, parser, part, n)
        doc = to_json(session, analyze(session.runs))
        doc["events"] = [(e.line, e.level, e.text) for e in session.events]
        doc["states"] = [(r.state, r.crash_detail, r.excluded_warmup, r.excluded_idle) for r in session.runs]
        return doc

    assert build(True) == build(False)


# -- the incremental analysis behind the run table ---------------------------------------------------

def _doc(session: Session, analysis) -> dict:  # type: ignore[no-untyped-def, type-arg]
    return to_json(session, analysis)


@pytest.mark.parametrize("baseline_tps", [None, 90.0])
def test_incremental_analysis_equals_a_full_one_at_every_step(baseline_tps: float | None) -> None:
    from specmon.ui.views import SnapshotBuilder

    builder = SnapshotBuilder(baseline_tps=baseline_tps)
    session = Session()
    for path in [SWEEP[0], *SWEEP[2:5]]:
        session.begin_source(str(path), baseline=path == SWEEP[0] and baseline_tps is None)
        parser = LineParser(year=2026)
        lines = path.read_text(encoding="utf-8").splitlines()
        n = 1
        for i in range(0, len(lines), 97):  # analyse again and again while data arrives
            n = ingest_lines(session, parser, lines[i:i + 97], n)
            job = builder.prepare(session.runs)
            job.compute()
            incremental = builder.finish(job)
            assert _doc(session, incremental) == _doc(session, analyze(session.runs, baseline_tps=baseline_tps))
    # Finished runs were not recomputed at the end: only the last configuration's row was.
    job = builder.prepare(session.runs)
    assert list(job.todo) == []
    assert len(job.reused) == 4


def test_marked_baseline_is_compared_against() -> None:
    from specmon.ui.views import SnapshotBuilder

    session = Session()
    for path in SWEEP[:4]:
        session.begin_source(str(path))
        ingest_lines(session, LineParser(year=2026), path.read_text(encoding="utf-8").splitlines())
    builder = SnapshotBuilder()
    builder.baseline_key = builder.analyze(session.runs).rows[3].key  # 3 steps
    result = builder.analyze(session.runs)
    rows = {r.steps: r for r in result.rows}
    assert rows[3].is_baseline and not rows[0].is_baseline
    assert result.baseline is not None and result.baseline.label == "EAGLE3 3 steps (marked)"
    assert rows[2].vs_baseline is not None and rows[2].vs_baseline.pct > 0
    assert [r.steps for r in result.rows if r.best] == [2]
