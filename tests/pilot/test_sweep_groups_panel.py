"""The verdict panel of a sweep over several workloads (or concurrencies): the finding across
them and every group's verdict, each group's table under its name, whole at 80x24 and 120x40.

The panel showed the first group's verdict only: a user who swept chat and code saw "chat"
and never learned that code had another winner.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import Static

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.output.tables import sweep_outcome, sweep_outcomes
from specmon.sim.sweepworld import SweepWorld
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen, _group_head
from tests.pilot.test_whole_at_sizes import shown_lines, words
from tests.support.app_factory import wait_for


def a_sweep(seed: int, workloads: dict[str, float], concurrency: tuple[int, ...]) -> dict[str, object]:
    world = SweepWorld(seed, workloads=workloads)
    plan = SweepPlan((0, 1, 2, 3), seed=seed, rule=StoppingRule(), max_minutes=None, workloads=tuple(workloads),
                     concurrency=concurrency, launch_cv=0.0)
    return asyncio.run(Sweep(plan, session=world.session, restart=world.restart, clock=world.clock,
                             sleep=world.sleep, load=world).run()).to_json()


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (60, 15)])
@pytest.mark.parametrize(("seed", "workloads", "concurrency"), [
    (7, {"chat": 0.55, "code": 1.35}, (1,)),
    (5, {"code": 1.3, "chat": 0.6}, (1, 16)),
])
async def test_the_panel_gives_every_group_whole(tmp_path: Path, size: tuple[int, int], seed: int,
                                                 workloads: dict[str, float], concurrency: tuple[int, ...]) -> None:
    doc = await asyncio.to_thread(a_sweep, seed, workloads, concurrency)  # the sweep runs its own loop
    outcome, groups = sweep_outcome(doc), sweep_outcomes(doc)
    assert outcome is not None and len(groups) == len(workloads) * len(concurrency)
    finding = doc["winners_differ"]
    screen = SweepVerdictScreen(outcome, report=tmp_path / "r.md", groups=groups,
                                finding=finding if isinstance(finding, str) else None)
    text = screen.text
    for g in groups:
        assert any(line.startswith(f"{g.tag}: {g.headline}") for line in screen.lines["table"]), g.headline
        for row in g.rows:
            assert row.label[:20] in text
    if isinstance(finding, str):
        assert screen.lines["head"][0] == finding

    app: App[None] = App()
    async with app.run_test(size=size) as pilot:
        app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen, "the verdict panel")
        await pilot.pause()
        w, h = size
        head = screen.query_one("#verdict-head", Static)
        foot = screen.query_one("#verdict-foot", Static)
        if h < screen.SHORT_ROWS:  # the verdict scrolls with the table; the keys stay
            head = screen.query_one("#verdict-head-scrolled", Static)
        for part, widget in (("head", head), ("foot", foot)):
            assert widget.region.right <= w, (part, widget.region)
            if part == "foot" or h >= screen.SHORT_ROWS:
                assert widget.region.bottom <= h, (part, widget.region)
            shown = " ".join(shown_lines(widget))
            # Every character, none cut (a path longer than the panel breaks inside itself).
            assert "".join(words(shown)) == "".join(words(" ".join(screen.lines[part]))), (part, shown)
        # The verdicts scroll: every group's headline, whole, comes into view by scrolling the panel.
        scroll = screen.query_one("#verdict-scroll")
        assert scroll.region.bottom <= foot.region.y and scroll.region.height >= 3
        heads = list(screen.query(".group-head").results(Static))
        assert len(heads) == len(groups)
        for g, widget in zip(groups, heads, strict=True):
            assert widget.region.width <= w  # wrapped inside the panel: no sideways scrolling to read it
            # Its mark and words first (☆ leads, undecided / ★ winner), the headline, what would decide it.
            assert words(" ".join(shown_lines(widget))) == words(_group_head(g))
            assert _group_head(g).startswith(g.tag)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
@pytest.mark.parametrize("groups", [1, 2])
async def test_p_shows_the_comparison_as_a_chart_and_back(tmp_path: Path, size: tuple[int, int], groups: int) -> None:
    """The same numbers as the table, as a picture: every setting on the x axis, a bar per interval."""
    from specmon.ui.widgets.comparison_plot import ComparisonPlot, settings_of

    workloads = {"chat": 0.55, "code": 1.35} if groups == 2 else {"code": 1.35}
    doc = await asyncio.to_thread(a_sweep, 7, workloads, (1,))
    outcome, outcomes = sweep_outcome(doc), sweep_outcomes(doc)
    assert outcome is not None
    screen = SweepVerdictScreen(outcome, report=tmp_path / "r.md", groups=outcomes if groups > 1 else ())
    assert "p: chart" in screen.text
    app: App[None] = App()
    async with app.run_test(size=size) as pilot:
        app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen, "the verdict panel")
        await pilot.pause()
        chart = screen.query_one("#verdict-chart", ComparisonPlot)
        assert not chart.display or chart.region.height == 0
        await pilot.press("p")
        await pilot.pause()
        await pilot.pause()
        w, h = size
        assert chart.region.height >= 8 and chart.region.bottom <= h and chart.region.right <= w
        assert chart.draws >= 1
        drawn = "\n".join(line.text for line in (chart.render_line(y) for y in range(chart.size.height)))
        assert "tok/s" in drawn  # the title with its unit
        assert settings_of(chart.groups) == sorted({r.label for g in chart.groups for r in g.rows},
                                                   key=lambda s: [r.steps for g in chart.groups for r in g.rows
                                                                  if r.label == s][0] or 0)
        foot = screen.query_one("#verdict-foot", Static)
        assert foot.region.bottom <= h  # the keys stay on screen
        await pilot.press("p")
        await pilot.pause()
        assert screen.query_one("#verdict-scroll").display


@pytest.mark.parametrize("size", [(60, 15), (80, 24)])
async def test_one_groups_panel_keeps_its_keys_on_a_short_terminal(tmp_path: Path, size: tuple[int, int]) -> None:
    """At 60x15 the verdict and the table scroll between the title and the keys; the keys stay whole."""
    doc = await asyncio.to_thread(a_sweep, 7, {"code": 1.35}, (1,))
    outcome = sweep_outcome(doc)
    assert outcome is not None
    screen = SweepVerdictScreen(outcome, report=tmp_path / "r.md")
    app: App[None] = App()
    async with app.run_test(size=size) as pilot:
        app.push_screen(screen)
        await wait_for(pilot, lambda: app.screen is screen, "the verdict panel")
        await pilot.pause()
        await pilot.pause()
        foot = screen.query_one("#verdict-foot", Static)
        assert foot.region.bottom <= size[1] and foot.region.height > 0
        assert "".join(words(" ".join(shown_lines(foot)))) == "".join(words(" ".join(screen.lines["foot"])))
        assert screen.has_class("-short") == (size[1] < screen.SHORT_ROWS)
