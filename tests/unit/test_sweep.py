"""Sweep mechanics in the in-process simulated world: resume, failures, budgets, concurrency, output."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from specmon.experiment.sweep_plan import RestartOutcome, SweepError, SweepEvent, SweepPlan
from specmon.experiment.sweep_result import analyses_from_cells
from specmon.experiment.sweep_run import Sweep
from specmon.experiment.sweep_state import CellState
from specmon.model.stats import summarize
from specmon.model.stopping import (
    BUDGET,
    EQUIVALENT,
    PRECISE,
    SLOWER,
    StoppingRule,
    adjusted_difference,
)
from specmon.records import Decode, Event, Lifecycle
from tests.support.sweepsim import SimWorld


def make_sweep(world: SimWorld, plan: SweepPlan, **kw: object) -> Sweep:
    return Sweep(plan, session=world.session, restart=world.restart, clock=world.clock, sleep=world.sleep,
                 **kw)  # type: ignore[arg-type]


def plan_of(steps: tuple[int, ...] = (0, 2, 5), **kw: object) -> SweepPlan:
    kw.setdefault("max_minutes", None)
    return SweepPlan(steps, **kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- the rule alone


def test_look_points_are_geometric_and_end_at_the_budget() -> None:
    rule = StoppingRule(min_samples=40, max_samples=1600, looks=5)
    assert rule.look_points == (40, 101, 253, 636, 1600)
    assert rule.next_look(41) == 101 and rule.next_look(1600) == 1600 and rule.next_look(1601) is None
    assert StoppingRule(looks=1, min_samples=50, max_samples=50).look_points == (50,)
    assert rule.test_level == pytest.approx(1 - 0.05 / 10)


@pytest.mark.parametrize("bad", [dict(alpha=0), dict(looks=0), dict(min_samples=2),
                                 dict(min_samples=100, max_samples=50), dict(margin_pct=0)])
def test_rule_rejects_nonsense(bad: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        StoppingRule(**bad)  # type: ignore[arg-type]


def _summary(mean: float, n: int, spread: float, seed: int = 0) -> object:
    import random
    rng = random.Random(seed)
    s = summarize([mean + rng.gauss(0, spread) for _ in range(n)])
    assert s is not None
    return s


def test_rule_decisions() -> None:
    rule = StoppingRule(min_samples=40, max_samples=1600)
    leader = _summary(94.0, 900, 3.0, 1)
    # Clearly slower.
    d = rule.decide(_summary(86.0, 100, 3.0, 2), {"2@1": leader}, label="5 steps", names={"2@1": "2 steps"})
    assert d.stop and d.reason == SLOWER and d.versus == "2@1" and "slower than 2 steps" in d.text
    # Indistinguishable and tight: equivalent within ±1%.
    d = rule.decide(_summary(94.0, 1600, 1.0, 3), {"2@1": _summary(94.0, 1600, 1.0, 4)})
    assert d.stop and d.reason == EQUIVALENT
    # Too few samples to say anything: continue.
    d = rule.decide(_summary(93.0, 40, 8.0, 5), {"2@1": leader})
    assert not d.stop and d.reason == "continue"
    # Alone and precise.
    d = rule.decide(_summary(88.0, 400, 0.5, 6), {})
    assert d.stop and d.reason == PRECISE
    # Budget spent, undecided.
    d = rule.decide(_summary(93.0, 60, 8.0, 7), {"2@1": leader}, budget_spent=True)
    assert d.stop and d.reason == BUDGET
    # Faster than the leader is not a reason to stop before being precise.
    d = rule.decide(_summary(99.0, 101, 8.0, 8), {"0@1": _summary(88.0, 900, 3.0, 9)})
    assert not d.stop


def test_adjusted_interval_is_wider_than_95() -> None:
    a, b = _summary(94.0, 400, 8.0, 1), _summary(92.0, 400, 8.0, 2)
    d95 = adjusted_difference(a, b, 0.95)
    d995 = adjusted_difference(a, b, 0.995)
    assert d995.low < d95.low < d95.high < d995.high  # type: ignore[operator]


# --------------------------------------------------------------------------- plan validation


@pytest.mark.parametrize("kw, message", [
    (dict(steps=()), "at least one"), (dict(steps=(1, 1)), "twice"), (dict(steps=(-1,)), ">= 0"),
    (dict(steps=(1,), concurrency=(0,)), "concurrency"), (dict(steps=(1,), order="sideways"), "order"),
    (dict(steps=(1,), max_minutes=0), "max_minutes"),
])
def test_plan_validation(kw: dict[str, object], message: str) -> None:
    with pytest.raises(SweepError, match=message):
        SweepPlan(**kw)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- resume


def test_interrupted_sweep_resumes_where_it_stopped(tmp_path: Path) -> None:
    state = tmp_path / "sweep.json"
    plan = plan_of((0, 2, 5), seed=3)
    w1 = SimWorld(3)
    events: list[SweepEvent] = []
    sweep = make_sweep(w1, plan, state_path=state, on_event=events.append)

    def stop_after_first(ev: SweepEvent) -> None:
        events.append(ev)
        if ev.kind == "done":
            sweep.request_stop()

    sweep._on_event = stop_after_first
    first = asyncio.run(sweep.run())
    assert not first.finished
    assert [c.status for c in first.cells] == ["done", "pending", "pending"]
    saved = json.loads(state.read_text())
    assert saved["finished"] is False and len(saved["cells"][0]["segments"][0]["throughput"]) == first.cells[0].n

    # A new process: a new world (new server), the same plan and state file.
    w2 = SimWorld(4)
    resumed = make_sweep(w2, plan, state_path=state, on_event=events.append)
    assert resumed.resumed
    result = asyncio.run(resumed.run())
    assert result.finished
    assert w2.restarts == [2, 5]  # the baseline was not measured again
    assert result.cells[0].n == first.cells[0].n
    v = result.verdict
    assert v is not None and v.best is not None and v.best.steps == 2
    assert v.speedup is not None  # the baseline measured before the interruption still counts
    assert any(e.kind == "resume" for e in events)

    # Starting again after it finished shows the verdict without restarting anything.
    w3 = SimWorld(5)
    again = asyncio.run(make_sweep(w3, plan, state_path=state).run())
    assert w3.restarts == [] and again.finished and again.verdict.best.steps == 2  # type: ignore[union-attr]


def test_state_of_another_sweep_is_refused(tmp_path: Path) -> None:
    state = tmp_path / "sweep.json"
    asyncio.run(make_sweep(SimWorld(1), plan_of((0, 2)), state_path=state).run())
    with pytest.raises(SweepError, match="different sweep"):
        make_sweep(SimWorld(1), plan_of((0, 3)), state_path=state)
    state.write_text("{not json")
    with pytest.raises(SweepError, match="cannot read"):
        make_sweep(SimWorld(1), plan_of((0, 2)), state_path=state)
    # resume=False ignores whatever is there.
    make_sweep(SimWorld(1), plan_of((0, 2)), state_path=state, resume=False)


def test_active_cell_in_state_becomes_pending_and_keeps_its_samples() -> None:
    cell = CellState.from_json({"steps": 2, "concurrency": 1, "status": "active", "looks_done": 2,
                                "segments": [{"source": "x", "run_id": 1, "config": None,
                                              "throughput": [90.0] * 50}]})
    assert cell.status == "pending" and cell.n == 50 and cell.looks_done == 2


# --------------------------------------------------------------------------- failures and budgets


def test_failed_restart_marks_the_setting_and_the_sweep_goes_on() -> None:
    w = SimWorld(2, fail_steps=frozenset({5}))
    events: list[SweepEvent] = []
    result = asyncio.run(make_sweep(w, plan_of((0, 5, 2)), on_event=events.append).run())
    by = {c.steps: c for c in result.cells}
    assert by[5].status == "failed" and "restart failed" in by[5].text and "command-not-found" in by[5].text
    assert by[0].status == by[2].status == "done"
    assert result.finished and result.verdict.best.steps == 2  # type: ignore[union-attr]
    assert any(e.kind == "failed" and e.cell == "5@1" for e in events)
    assert [r["status"] for r in result.to_json()["runs"]] == ["done", "failed", "done"]


def test_server_crash_during_collection_fails_that_setting() -> None:
    w = SimWorld(2)
    original = w.sleep

    async def crashing_sleep(seconds: float) -> None:
        await original(seconds)
        if w.restarts and w.restarts[-1] == 2 and w.line > 0 and w.session.current and len(w.session.current.throughput) > 60:
            w.line += 1
            w.session.ingest(Lifecycle(w.line, w.log_time, None, event=Event.CRASH,
                                       detail="torch.OutOfMemoryError: CUDA out of memory"))
            w.sampler = None

    sweep = Sweep(plan_of((0, 2, 5)), session=w.session, restart=w.restart, clock=w.clock, sleep=crashing_sleep)
    result = asyncio.run(sweep.run())
    by = {c.steps: c for c in result.cells}
    assert by[2].status == "failed" and by[2].reason == "crash" and "out of memory" in by[2].text
    assert by[5].status == "done"
    assert w.restarts == [0, 2, 5]  # restarted after the crash


def test_stalled_log_fails_the_setting() -> None:
    w = SimWorld(2)

    async def silent_restart(steps: int) -> RestartOutcome:
        out = await w.restart(steps)
        w.sampler = None if steps == 2 else w.sampler  # the server is up but its log never moves
        return out

    plan = plan_of((0, 2), stall_s=30.0)
    result = asyncio.run(Sweep(plan, session=w.session, restart=silent_restart, clock=w.clock,
                               sleep=w.sleep).run())
    by = {c.steps: c for c in result.cells}
    assert by[2].status == "failed" and by[2].reason == "stalled"


def test_time_budget_stops_collection() -> None:
    w = SimWorld(2, lines_per_poll=1)  # one line per second of (fake) time
    plan = plan_of((0, 2), max_minutes=2.0)
    result = asyncio.run(make_sweep(w, plan).run())
    for cell in result.cells:
        assert cell.status == "done"
        assert cell.elapsed_s == pytest.approx(120.0, abs=2.0) or cell.reason != BUDGET
    assert any(c.reason == BUDGET for c in result.cells)
    assert all(c.n <= 125 for c in result.cells)


def test_wrong_configuration_after_restart_is_reported() -> None:
    w = SimWorld(2)

    async def wrong(steps: int) -> RestartOutcome:
        return await w.restart(steps + 1)  # the profile's {steps} placeholder is in the wrong place

    result = asyncio.run(Sweep(plan_of((2,)), session=w.session, restart=wrong, clock=w.clock,
                               sleep=w.sleep).run())
    assert result.cells[0].status == "failed" and "not the 2 steps" in result.cells[0].text


def test_restart_that_never_shows_in_the_log_times_out() -> None:
    w = SimWorld(2)

    async def invisible(steps: int) -> RestartOutcome:
        return RestartOutcome(True, "ready")

    plan = plan_of((2,), attach_s=5.0)
    result = asyncio.run(Sweep(plan, session=w.session, restart=invisible, clock=w.clock, sleep=w.sleep).run())
    assert result.cells[0].status == "failed" and "no new run" in result.cells[0].text


# --------------------------------------------------------------------------- concurrency and output


class ConcurrentWorld(SimWorld):
    """Decode lines report the concurrency the load asks for; speculation helps less at 4."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.concurrency = 1
        self.load_starts: list[int] = []

    async def start(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self.load_starts.append(concurrency)

    async def stop(self) -> None:
        return None

    async def sleep(self, seconds: float) -> None:
        self.now += seconds
        if self.sampler is None:
            return
        for _ in range(self.lines_per_poll):
            al, ar, tps = self.sampler()
            self.log_time += 0.9
            self.line += 1
            scale = 3.0 if self.concurrency == 4 else 1.0
            self.session.ingest(Decode(self.line, self.log_time, "TP0", running_req=self.concurrency,
                                       accept_len=al, accept_rate=ar, gen_throughput=tps * scale))


def test_several_concurrencies_get_one_verdict_each() -> None:
    w = ConcurrentWorld(6)
    plan = plan_of((0, 2), concurrency=(1, 4))
    sweep = Sweep(plan, session=w.session, restart=w.restart, load=w, clock=w.clock, sleep=w.sleep)
    result = asyncio.run(sweep.run())
    assert w.restarts == [0, 2]  # one restart per step count, both concurrencies measured in it
    assert w.load_starts == [1, 4, 1, 4]
    assert [v.concurrency for v in result.verdicts] == [1, 4]
    doc = result.to_json()
    assert doc["verdict"]["concurrency"] == 1
    assert {(r["steps"], r["concurrency"]) for r in doc["runs"]} == {(0, 1), (0, 4), (2, 1), (2, 4)}
    c4 = [r for r in doc["runs"] if r["concurrency"] == 4]
    assert all(r["throughput"]["mean"] > 200 for r in c4)  # concurrency-4 samples stayed in their own cells
    assert "at concurrency 4" in doc["verdicts"][1]["sentence"]


def test_json_document_shape() -> None:
    result = asyncio.run(make_sweep(SimWorld(8), plan_of((0, 1, 2))).run())
    doc = result.to_json()
    v = doc["verdict"]
    for key in ("best_steps", "speedup_pct", "speedup_ci95", "separated", "sentence", "runner_up_steps"):
        assert key in v
    assert isinstance(v["separated"], bool)
    assert [r["steps"] for r in doc["runs"]] == [0, 1, 2]
    r0 = doc["runs"][0]
    assert r0["is_baseline"] and r0["samples"] >= 40 and r0["throughput"]["ci95_low"] < r0["throughput"]["mean"]
    assert doc["plan"]["steps"] == [0, 1, 2] and doc["finished"] is True
    json.dumps(doc)  # serialisable


def test_analysis_of_cells_pools_segments_as_separate_runs() -> None:
    cell = CellState(2, 1, segments=[])
    from specmon.experiment.sweep_state import Segment
    cell.segments = [Segment("a", 1, None, [94.0 + (i % 7) for i in range(60)], [2.1] * 60, [0.55] * 60),
                     Segment("b", 2, None, [93.0 + (i % 5) for i in range(60)], [2.0] * 60, [0.5] * 60)]
    base = CellState(0, 1, segments=[Segment("c", 3, None, [88.0 + (i % 3) for i in range(80)])])
    analysis = analyses_from_cells([base, cell], 1)
    rows = {r.steps: r for r in analysis.rows}
    assert rows[0].is_baseline and len(rows[2].runs) == 2 and rows[2].samples == 120
    assert rows[2].accept_len is not None and rows[2].accept_len.mean == pytest.approx(2.05)


def test_snapshot_for_the_dashboard() -> None:
    w = SimWorld(9)
    sweep = make_sweep(w, plan_of((0, 2)))
    snap = sweep.snapshot()
    assert [c["status"] for c in snap["cells"]] == ["pending", "pending"] and snap["current"] is None
    asyncio.run(sweep.run())
    snap = sweep.snapshot()
    assert snap["finished"] and all(c["samples"] > 0 and c["mean"] for c in snap["cells"])


def test_a_restart_that_raises_fails_the_setting_instead_of_the_sweep() -> None:
    w = SimWorld(2)

    async def flaky(steps: int) -> RestartOutcome:
        if steps == 5:
            raise ConnectionResetError("SSH connection lost")
        return await w.restart(steps)

    result = asyncio.run(Sweep(plan_of((0, 5, 2)), session=w.session, restart=flaky, clock=w.clock,
                               sleep=w.sleep).run())
    by = {c.steps: c for c in result.cells}
    assert by[5].status == "failed" and "ConnectionResetError: SSH connection lost" in by[5].text
    assert by[2].status == "done" and result.finished
