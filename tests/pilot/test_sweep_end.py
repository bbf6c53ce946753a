"""The end of a sweep as a moment: a verdict panel that stays, restart on the winner through the
usual confirmation, the report one key away, the run table showing the panel's numbers, and the
baseline switched to the no-speculation run the sweep measured."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from specmon.commands.demo import build_demo_app, register
from specmon.control.demo import stop_demo_server
from specmon.model.stopping import StoppingRule
from specmon.output.tables import sweep_outcome
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from specmon.ui.screens.text_view import TextViewScreen
from tests.support.app_factory import FIXED_NOW, build_app, options, wait_for
from tests.support.sweepsim import run_sweep

SIZE = (80, 24)
ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = [ROOT / "sample_logs" / f"sim_eagle3_{n}.log" for n in ("nospec", "1step", "2step", "3step")]


def demo_args(folder: Path) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="specmon")
    register(p.add_subparsers())
    return p.parse_args(["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5",
                         "--dir", str(folder)])


def a_verdict(winner: int, steps: tuple[int, ...] = (0, 1, 2, 3)) -> dict[str, object]:
    """A sweep document (the simulated world) whose fastest setting is ``winner`` steps."""
    for seed in range(40):
        doc = run_sweep(seed, steps=steps, rule=StoppingRule(looks=1, min_samples=30, max_samples=30)).to_json()
        if doc["verdict"]["best_steps"] == winner:  # type: ignore[index]
            return doc
    raise AssertionError(f"no seed made {winner} steps the fastest")


async def test_the_verdict_panel_stays_and_restarts_on_the_winner(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    app, setup = build_demo_app(demo_args(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None, export_dir=tmp_path, recorder=None, sweeper=None)
    assert isinstance(app.sweeper, SweepFlow)
    c = setup.controller
    outcome = sweep_outcome(await asyncio.to_thread(a_verdict, 2))  # run_sweep runs its own loop
    assert outcome is not None and outcome.best is not None and outcome.speedup_text is not None
    report = tmp_path / "specmon-sweep-x.md"
    report.write_text("# specmon report\n\n## Verdict\n\nthe report's own text\n", encoding="utf-8")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            assert c.current_steps != 2
            app.sweeper.show_verdict(outcome, report)
            await wait_for(pilot, lambda: isinstance(app.screen, SweepVerdictScreen), "the verdict panel")
            panel = app.screen
            assert isinstance(panel, SweepVerdictScreen)
            assert outcome.speedup_text in panel.text and "runner-up:" in panel.text
            assert "numbers from the server log" in panel.text.lower()
            assert str(report) in panel.text and "w: restart on the" in panel.text
            # The run table shows the panel's rows and numbers, not a second verdict.
            table = app.builder.table(app.feeder.session)
            assert table.verdict.startswith("sweep: ") and outcome.speedup_text in table.verdict
            best = next(r for r in table.rows if r.best)
            assert best.vs.split(" (")[0] == outcome.speedup_text.split(" (")[0]
            app.dashboard._push_table()
            assert app.dashboard._table_box.border_title == "runs · the sweep's numbers"  # says whose numbers
            # The throughput panel compares the current run as the table does (one number on screen).
            app._tick()
            mine = next(r for r in table.rows if r.current)
            shown = app.dashboard._panels[0]._view
            assert shown is not None and shown.delta == mine.vs_pct and shown.baseline == table.baseline_mean
            # It stays: time passes, keys of the dashboard do not reach it.
            for _ in range(20):
                await pilot.pause(0.05)
            assert app.screen is panel
            # o opens the report, escape comes back to the panel.
            await pilot.press("o")
            await wait_for(pilot, lambda: isinstance(app.screen, TextViewScreen), "the report view")
            assert "the report's own text" in app.screen.body
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is panel, "back to the panel")
            await pilot.press("c")
            await pilot.pause()
            assert app.clipboard == str(report)
            # w: the commands of the restart on the winner, shown before anything runs.
            await pilot.press("w")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
            assert "--steps 2" in app.screen.text and not c.busy
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmCommandsScreen), "cancelled")
            assert not c.busy and c.current_steps != 2
            assert any(e.text == "restart cancelled: nothing was run" for e in app.feeder.session.events)
    finally:
        await stop_demo_server(c, lambda _: None)


async def test_no_winner_to_restart_on_when_the_server_runs_it(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    app, setup = build_demo_app(demo_args(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None, export_dir=tmp_path, recorder=None, sweeper=None)
    assert isinstance(app.sweeper, SweepFlow)
    c = setup.controller
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            outcome = sweep_outcome(await asyncio.to_thread(a_verdict, c.current_steps, (c.current_steps,)))
            assert outcome is not None
            app.sweeper.show_verdict(outcome, None)
            await wait_for(pilot, lambda: isinstance(app.screen, SweepVerdictScreen), "the verdict panel")
            assert "already: nothing to restart" in app.screen.text and "report: not written" in app.screen.text
            await pilot.press("w")
            await pilot.pause()
            assert isinstance(app.screen, SweepVerdictScreen)  # nothing to confirm, it says why
            await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, SweepVerdictScreen), "closed")
    finally:
        await stop_demo_server(c, lambda _: None)


async def test_the_baseline_switches_to_the_run_without_speculation(isolated_home: Path) -> None:
    app = build_app(CAMPAIGN)
    async with app.run_test(size=(120, 40)) as pilot:
        await app.feeder.wait_finished()
        app.refresh_now()
        await pilot.press("b")  # the current run (3 steps) marked as the baseline
        app.refresh_now()
        assert app.builder.analysis is not None and app.builder.analysis.baseline is not None
        assert "3 steps" in app.builder.analysis.baseline.label
        note = app.baseline_to_nospec()
        app.refresh_now()
        assert note.startswith("baseline: now no speculation")
        assert app.builder.analysis.baseline.label == "no speculation"
        assert app.baseline_to_nospec() == ""  # already: nothing said twice
