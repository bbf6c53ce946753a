"""The sweep runner over SGLang's (steps, top-k, draft tokens), against the simulated server with known truth."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from specmon.control.dims import expand_grid, parse_grid
from specmon.experiment.sweep_plan import RestartOutcome, SweepError, SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.sim.sweepworld import SweepWorld

GRID = ["steps=0,1,2,3", "topk=1,4", "draft_tokens=2,3,4,5,8"]


def plan(strategy: str = "grid", grid: list[str] = GRID, **kw: object) -> SweepPlan:
    settings = expand_grid(parse_grid(grid)).settings
    steps = tuple(dict.fromkeys(s for s, _ in settings))
    # SweepWorld's launches are alike unless asked otherwise: the sweep is told so (launch CV 0).
    return SweepPlan(steps, seed=1, rule=StoppingRule(), max_minutes=None, strategy=strategy, points=settings,
                     **{"launch_cv": 0.0, **kw})  # type: ignore[arg-type]


def run(p: SweepPlan, world: SweepWorld, **kw: object) -> tuple[Sweep, SweepResult]:
    sweep = Sweep(p, session=world.session, restart=world.restart, clock=world.clock, sleep=world.sleep,
                  **kw)  # type: ignore[arg-type]
    return sweep, asyncio.run(sweep.run())


def test_a_grid_sweep_restarts_once_per_setting_with_its_own_tree_and_keeps_the_rows_apart() -> None:
    w = SweepWorld(3)
    p = plan()
    sweep, result = run(p, w)
    assert sweep.restarts == len(p.settings) == len(w.restarts)
    # The server was started with exactly each setting (SGLang's own rules applied by the simulator).
    asked = {(s, dict(pt).get("topk", 1), dict(pt).get("draft_tokens", s + 1 if s else 0)) for s, pt in p.settings}
    assert set(w.restarts) == asked
    v = result.verdict
    assert v is not None and v.best is not None
    labels = [r.label for r in v.analysis.rows]
    assert len(labels) == len(set(labels)) == len(p.settings)
    winner = result.winner_cell(v)
    assert winner is not None
    truth = max(p.settings, key=lambda st: w.expected(st[0], dict(st[1])))
    if v.separated:
        assert winner.setting == truth
    doc = result.to_json()
    assert doc["dimensions"] == ["steps", "topk", "draft_tokens"]
    assert doc["restarts"] == len(p.settings) and doc["skipped"] == []
    assert {r["setting"] for r in doc["runs"]} == {c.setting_label for c in result.cells}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_guided_strategy_reaches_the_grids_winner_with_fewer_restarts(seed: int) -> None:
    grid_sweep, grid = run(plan(), SweepWorld(seed))
    guided_sweep, guided = run(plan("guided"), SweepWorld(seed))
    assert guided_sweep.restarts < grid_sweep.restarts
    g, u = grid.winner_cell(grid.verdict), guided.winner_cell(guided.verdict)
    assert g is not None and u is not None
    if grid.verdict is not None and grid.verdict.separated:
        assert u.setting == g.setting
    skipped = [c for c in guided.cells if c.status == "skipped"]
    assert skipped and all("cost model bounds it" in c.text for c in skipped)
    assert guided.to_json()["restarts"] == guided_sweep.restarts == len(guided.cells) - len(skipped)


def test_an_interrupted_sweep_over_dimensions_resumes_with_its_settings(tmp_path: Path) -> None:
    state = tmp_path / "s.json"
    w = SweepWorld(4)
    p = plan(grid=["steps=1,2", "topk=1,2", "draft_tokens=2,3,4,5"])
    sweep = Sweep(p, session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep, state_path=state)

    async def first() -> None:
        task = asyncio.ensure_future(sweep.run())
        while sum(1 for c in sweep.cells if c.status == "done") < 2:
            await asyncio.sleep(0)
        sweep.request_stop()
        await task

    asyncio.run(first())
    done = {c.key for c in sweep.cells if c.status == "done"}
    again = Sweep(p, session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep, state_path=state)
    assert again.resumed and {c.key for c in again.cells if c.status == "done"} == done
    assert any("/topk=2/" in k for k in (c.key for c in again.cells))
    result = asyncio.run(again.run())
    assert result.finished and again.restarts <= len(p.settings) - len(done) + 1
    # A plan over other settings does not take this state file for its own.
    with pytest.raises(SweepError, match="different sweep"):
        Sweep(plan(grid=["steps=1,2", "topk=1,2", "draft_tokens=2,3,5"]), session=w.session, restart=w.restart,
              state_path=state)


def test_a_server_that_runs_another_tree_than_asked_fails_that_setting() -> None:
    w = SweepWorld(5)

    async def wrong(steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
        # The server silently ignores the requested top-k (a profile without {topk}, say).
        await w.restart(steps, {"topk": 1} if steps else None)
        return RestartOutcome(True, "ready")

    p = plan(grid=["steps=2", "topk=2", "draft_tokens=4"])
    sweep = Sweep(p, session=w.session, restart=wrong, clock=w.clock, sleep=w.sleep)
    result = asyncio.run(sweep.run())
    (cell,) = result.cells
    assert cell.status == "failed" and "not the 2 steps, topk 2, draft_tokens 4 asked for" in cell.text
    assert "{topk}" in cell.text


def test_plans_refuse_settings_the_engine_would_not_run_as_asked() -> None:
    with pytest.raises(SweepError, match="top-k 1 makes SGLang use steps\\+1"):
        SweepPlan((2,), points=((2, (("topk", 1), ("draft_tokens", 5))),))
    with pytest.raises(SweepError, match="listed twice"):
        SweepPlan((2,), points=((2, (("topk", 2),)), (2, (("topk", 2),))))
    with pytest.raises(SweepError, match="step counts of the points"):
        SweepPlan((1, 2), points=((2, (("topk", 2),)),))


def test_the_verdict_says_when_the_winner_depends_on_the_load() -> None:
    # The simulator's batch model: speculation pays at concurrency 1 and turns into a loss at 16.
    w = SweepWorld(6)
    assert w.expected_at(2, None, 1) > w.expected_at(0, None, 1)
    assert w.expected_at(2, None, 16) < w.expected_at(0, None, 16)
    p = SweepPlan((0, 2), concurrency=(1, 16), seed=1, rule=StoppingRule(), max_minutes=None, launch_cv=0.0)
    result = run(p, w, load=w)[1]
    assert [v.concurrency for v in result.verdicts] == [1, 16]
    assert all(v.separated for v in result.verdicts)
    assert [result.winner_cell(v).steps for v in result.verdicts] == [2, 0]  # type: ignore[union-attr]
    note = result.winners_differ()
    assert note == ("The winner depends on the load: 2 steps at concurrency 1; no speculation at concurrency 16.")
    assert result.to_json()["winners_differ"] == note
    # When one of them is not separated, a dependence is not claimed.
    from dataclasses import replace

    result.verdicts[1] = replace(result.verdicts[1], separated=False)
    hedged = result.winners_differ()
    assert hedged is not None and "depends" not in hedged and "may be noise" in hedged
    same = run(SweepPlan((0, 2), concurrency=(1, 2), seed=1, rule=StoppingRule(), max_minutes=None),
               SweepWorld(6), load=None)[1]
    assert same.winners_differ() is None


def test_a_verdict_per_workload_says_when_the_winner_differs_between_them() -> None:
    # Code repeats itself: the drafter is right more often, so deeper speculation pays; on chat it does not.
    w = SweepWorld(7, workloads={"code": 1.35, "chat": 0.55})
    chat, code = w.model_for("chat"), w.model_for("code")
    assert max(range(6), key=lambda s: code.expected_throughput(s)) > max(range(6), key=chat.expected_throughput)
    p = SweepPlan((0, 1, 2, 3, 5), seed=1, rule=StoppingRule(), max_minutes=None, workloads=("chat", "code"),
                  launch_cv=0.0)
    sweep, result = run(p, w, load=w)
    assert sweep.restarts == 5  # one restart serves both workloads
    assert [(v.concurrency, v.workload) for v in result.verdicts] == [(1, "chat"), (1, "code")]
    best = {v.workload: result.winner_cell(v) for v in result.verdicts}
    assert best["chat"] is not None and best["code"] is not None
    assert best["chat"].steps < best["code"].steps
    note = result.winners_differ()
    assert note is not None and note.startswith("The winner depends on the workload: ")
    assert "on the chat prompts" in note and "on the code prompts" in note
    assert all("on the " in v.sentence for v in result.verdicts)
    doc = result.to_json()
    assert [v["workload"] for v in doc["verdicts"]] == ["chat", "code"]
    assert {r.get("workload") for r in doc["runs"]} == {"chat", "code"}


def test_settings_the_log_cannot_tell_apart_stay_separate_rows() -> None:
    """vLLM logs num_speculative_tokens but not prompt_lookup_max: the sweep's own setting names the row."""
    from specmon.experiment.sweep_result import analyses_from_cells
    from specmon.experiment.sweep_state import CellState, Segment

    logged = {"engine": "vllm", "algorithm": "ngram", "steps": 2, "topk": None, "draft_tokens": 2, "model": "/m"}
    cells = []
    for lm, tps in ((2, 600.0), (4, 700.0)):
        cell = CellState(2, 1, "done", point=(("prompt_lookup_max", lm),))
        cell.segments.append(Segment("s", 1, logged, [tps + i for i in range(10)], [1.5] * 10))
        cells.append(cell)
    rows = analyses_from_cells(cells, 1).rows
    assert [r.label for r in rows] == ["ngram 2 tokens prompt_lookup_max 2", "ngram 2 tokens prompt_lookup_max 4"]
    assert [round(r.throughput.mean) for r in rows if r.throughput] == [604, 704]


def test_guided_over_workloads_restarts_once_per_setting_it_measures() -> None:
    w = SweepWorld(8, workloads={"code": 1.3, "chat": 0.6})
    p = SweepPlan(tuple(range(0, 9)), seed=1, rule=StoppingRule(), max_minutes=None, strategy="guided",
                  workloads=("chat", "code"))
    sweep, result = run(p, w, load=w)
    measured = {c.setting for c in result.cells if c.status == "done"}
    assert sweep.restarts == len(measured) < 9  # a setting measured for one workload is measured for both
    assert len(result.verdicts) == 2 and all(c.status in ("done", "skipped") for c in result.cells)


def test_guided_ends_when_a_setting_it_asks_for_cannot_start() -> None:
    w = SweepWorld(9)
    asked: list[int] = []

    async def restart(steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
        asked.append(steps)
        if steps == 3:
            return RestartOutcome(False, "specmon-start result=failed reason=command-not-found")
        return await w.restart(steps, dims)  # type: ignore[return-value]

    p = SweepPlan(tuple(range(0, 9)), seed=1, rule=StoppingRule(), max_minutes=None, strategy="guided")
    sweep = Sweep(p, session=w.session, restart=restart, clock=w.clock, sleep=w.sleep)
    result = asyncio.run(sweep.run())
    # 3 steps is next to the best (2 steps in this world), so the search asks for it, once.
    assert asked.count(3) == 1 and result.verdict is not None
    assert all(c.status in ("done", "skipped", "failed") for c in result.cells)
