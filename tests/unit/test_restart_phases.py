"""Every start-up phase the log passes is shown, however its lines arrive.

A busy host makes the log outrun the dashboard's looks at it: the readiness check
takes a second, the tail delivers several phases in one batch. The controller must
still give its listeners (the panel, the sweep) one view of each phase the attempt
went through, in order, with what the log said of it: the weight shards while
loading. The log's lines are cut into batches at generated points and delivered at
generated times; the fake clock makes each example deterministic.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.control.restart_progress import Phase, RestartProgress
from tests.support.restarting import READY, STARTED, STOPPED, WAITING, Harness, ScriptedRunner, startup_lines

LINES = startup_lines(steps=2)
ORDER = [Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING, Phase.READY]


def distinct(views: list[RestartProgress]) -> list[Phase]:
    phases = [v.phase for v in views]
    return [p for i, p in enumerate(phases) if i == 0 or phases[i - 1] is not p]


def restart(script: list[tuple[float, list[str]]]) -> tuple[RestartProgress, list[RestartProgress]]:
    with tempfile.TemporaryDirectory() as tmp:
        runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING] * 60 + [READY])
        h = Harness(Path(tmp), runner, current_steps=1)
        h.script = script
        views: list[RestartProgress] = []
        c = h.controller
        plan = c.plan_for(2)
        c.describe(plan)
        final = asyncio.run(c.run(plan, on_progress=views.append))
        return final, views


def check(final: RestartProgress, views: list[RestartProgress]) -> None:
    assert final.phase is Phase.READY, final.message
    assert distinct(views) == ORDER
    assert [p for p, _ in final.done] == ORDER[:-1]
    # Loading's last view says how far it got: all the shards were in the log before capture began.
    assert [v for v in views if v.phase is Phase.LOADING][-1].load_progress == (64, 64)


def test_the_whole_start_up_in_one_batch() -> None:
    """Loading and capture came and went between two looks: each is still shown once."""
    final, views = restart([(2.0, LINES)])
    check(final, views)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cuts=st.lists(st.integers(1, len(LINES) - 1), max_size=6, unique=True).map(sorted),
       gaps=st.lists(st.floats(0.05, 3.0), min_size=7, max_size=7))
def test_any_batching_shows_every_phase_in_order(cuts: list[int], gaps: list[float]) -> None:
    bounds = [0, *cuts, len(LINES)]
    at, script = 0.5, []
    for lo, hi, gap in zip(bounds, bounds[1:], gaps, strict=False):  # gaps has one more than needed at most
        at += gap
        script.append((at, LINES[lo:hi]))
    final, views = restart(script)
    check(final, views)
