"""``--strategy guided`` in the sweep runner: the grid's answer in fewer restarts, on the simulated campaign."""

from __future__ import annotations

import asyncio

import pytest

from specmon.experiment.sweep_plan import SweepError, SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_run import Sweep
from specmon.experiment.sweep_state import SKIPPED
from specmon.model.stopping import StoppingRule
from tests.support.sweepsim import SimWorld

SPACE = (0, 1, 2, 3, 4, 5, 6, 8, 10)


def sweep(seed: int, strategy: str, **world: object) -> tuple[SweepResult, SimWorld]:
    w = SimWorld(seed, **world)  # type: ignore[arg-type]
    plan = SweepPlan(SPACE, seed=seed, rule=StoppingRule(), max_minutes=None, strategy=strategy)
    result = asyncio.run(Sweep(plan, session=w.session, restart=w.restart, clock=w.clock, sleep=w.sleep).run())
    return result, w


@pytest.mark.parametrize("seed", range(6))
def test_guided_reaches_the_grids_verdict_with_fewer_restarts(seed: int) -> None:
    grid, grid_world = sweep(seed, "grid")
    guided, guided_world = sweep(seed, "guided")
    assert grid.verdict is not None and guided.verdict is not None
    assert grid.verdict.best is not None and guided.verdict.best is not None
    assert guided.verdict.best.steps == grid.verdict.best.steps == 2  # the campaign's true best
    assert len(guided_world.restarts) < len(grid_world.restarts) == len(SPACE)
    assert len(set(guided_world.restarts)) == len(guided_world.restarts)  # no setting restarted twice
    skipped = [c for c in guided.cells if c.status == SKIPPED]
    assert skipped and all(c.steps not in guided_world.restarts for c in skipped)
    assert all("cost model bounds it" in c.text for c in skipped)
    assert guided.finished
    assert guided.to_json()["plan"]["strategy"] == "guided"


def test_a_failed_initial_setting_does_not_stop_the_search() -> None:
    guided, w = sweep(1, "guided", fail_steps=frozenset({10}))
    assert guided.verdict is not None and guided.verdict.best is not None
    assert guided.verdict.best.steps == 2
    assert 10 in w.restarts


def test_guided_takes_no_interleaving_and_names_the_strategies() -> None:
    with pytest.raises(SweepError, match="chooses its own order"):
        SweepPlan((0, 1, 2), order="interleave", strategy="guided")
    with pytest.raises(SweepError, match="grid, guided"):
        SweepPlan((0, 1, 2), strategy="bayes")
