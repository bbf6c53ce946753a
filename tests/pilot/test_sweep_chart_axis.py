"""The sweep chart's y axis (``p`` on the verdict panel) spans the data with its intervals, not 0 to the top
(issue 42, item 9: 85-94 tok/s sat flat on one line of a 0-100 axis)."""

from __future__ import annotations

import asyncio
import math
import re
from pathlib import Path

from hypothesis import example, given, settings
from hypothesis import strategies as st
from textual.app import App

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.output.tables import sweep_outcome
from specmon.sim.sweepworld import SweepWorld
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from specmon.ui.widgets.comparison_plot import ComparisonPlot, axis_limits
from tests.support.app_factory import wait_for


def a_sweep(seed: int) -> dict[str, object]:
    """A sweep of 0-3 steps on the simulated world (its speeds sit in a narrow band far from 0)."""
    world = SweepWorld(seed, workloads={"code": 1.35})
    plan = SweepPlan((0, 1, 2, 3), seed=seed, rule=StoppingRule(), max_minutes=None, workloads=("code",),
                     concurrency=(1,), launch_cv=0.0)
    return asyncio.run(Sweep(plan, session=world.session, restart=world.restart, clock=world.clock,
                             sleep=world.sleep, load=world).run()).to_json()


def is_round(step: float) -> bool:
    mantissa = step / 10 ** math.floor(math.log10(step))
    return any(abs(mantissa - m) < 1e-6 for m in (1, 2, 2.5, 5, 10))


def test_the_sample_campaigns_speeds_fill_the_axis() -> None:
    """The six-run campaign's figures (85-94 tok/s with their intervals): an axis of 80-95, not 0-100."""
    bottom, top, ticks = axis_limits([84.1, 86.0, 87.9, 88.8, 89.7, 92.6, 94.0, 95.4], 4)
    assert 75 <= bottom <= 84.1 and 95.4 <= top <= 100
    assert ticks[0] == bottom and ticks[-1] == top and len(ticks) >= 3


means = st.floats(0.0, 5000.0, allow_nan=False)
halves = st.floats(0.0, 200.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(means, halves), min_size=1, max_size=12), st.integers(2, 5))
@example([(1.0, 0.015625)], 2)  # found by hypothesis: a fixed 0.1 window floor at a scale of 1
@example([(0.0, 8.7164947393141485e-106)], 2)  # and a window below what the ticks' decimals tell apart
def test_the_axis_holds_every_interval_on_round_ticks_and_is_mostly_data(
        rows: list[tuple[float, float]], intervals: int) -> None:
    values = [v for m, h in rows for v in (max(0.0, m - h), m + h)]
    bottom, top, ticks = axis_limits(values, intervals)
    lo, hi = min(values), max(values)
    assert 0 <= bottom <= lo and hi <= top  # every interval is inside
    assert 2 <= len(ticks) <= intervals + 1 and ticks[0] == bottom and abs(ticks[-1] - top) < 1e-9 * max(1, top)
    steps = {round(b - a, 9) for a, b in zip(ticks, ticks[1:], strict=False)}
    assert len(steps) == 1 and is_round(steps.pop())
    if hi - lo > 0.01 * hi and bottom > 0:
        # The data take at least a fifth of an axis that does not start at 0 (a 0-based axis put
        # 85-94 in a tenth of it).
        assert (hi - lo) / (top - bottom) >= 0.2


async def test_the_drawn_chart_starts_near_the_slowest_interval(tmp_path: Path) -> None:
    doc = await asyncio.to_thread(a_sweep, 7)
    outcome = sweep_outcome(doc)
    assert outcome is not None
    low = min(r.tps_mean - (r.tps_half or 0.0) for r in outcome.rows if r.tps_mean is not None)
    screen = SweepVerdictScreen(outcome, report=tmp_path / "r.md")
    app: App[None] = App()
    async with app.run_test(size=(80, 24)) as pilot:
        app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen, "the verdict panel")
        await pilot.press("p")
        await pilot.pause()
        await pilot.pause()
        chart = screen.query_one("#verdict-chart", ComparisonPlot)
        drawn = [chart.render_line(y).text for y in range(chart.size.height)]
    # The y labels are the numbers at the left edge of the plot's rows.
    labels = [float(m.group(1)) for line in drawn if (m := re.match(r"\s*(\d+(?:\.\d+)?)\s*[┤│┼├]", line))]
    assert labels, "\n".join(drawn)
    assert min(labels) > 0 or low <= 0  # not 0-based when the data are not near 0
    assert min(labels) <= low
