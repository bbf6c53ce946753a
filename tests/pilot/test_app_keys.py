"""Pilot tests of the dashboard's keys: pause, speed, baseline, export, theme, help, restart/sweep, quit."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from textual.screen import Screen
from textual.widgets import Static

from specmon.model.analysis import analyze
from specmon.output.tables import to_csv, to_markdown
from specmon.ui.screens.help import HelpScreen
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import (
    FIXED_NOW,
    SWEEP,
    FakeMonotonic,
    StaticSource,
    build_app,
    header_text,
    settle,
    settle_source,
    source_app,
    sweep_app,
    wait_for,
)
from tests.support.logtext import ready, server_args

SIZE = (100, 30)


async def test_pause_stops_a_replay_and_resume_continues(isolated_home: Path) -> None:
    mono = FakeMonotonic()
    app = build_app(SWEEP[:1], speed=1.0, monotonic=mono)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines > 0, "first lines")
        await pilot.press("p")
        assert app.feeder.replay_clock.paused
        assert "paused" in header_text(app)
        held = app.feeder.lines
        mono.advance(10_000.0)  # hours of log time would be due, were it not paused
        await pilot.pause(0.4)
        assert app.feeder.lines == held
        await pilot.press("p")
        assert not app.feeder.replay_clock.paused
        mono.advance(10_000.0)
        await wait_for(pilot, lambda: app.feeder.lines > held, "lines after resume")
        assert "replay 1×" in header_text(app) or app.feeder.done


async def test_speed_keys_step_the_replay_speed(isolated_home: Path) -> None:
    app = build_app(SWEEP[:1], speed=1.0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("plus")
        assert app.feeder.replay_clock.speed == 2.0
        await pilot.press("minus", "minus")
        assert app.feeder.replay_clock.speed == 0.5
        app._tick()
        assert "replay 0.5×" in header_text(app)
        assert app.dashboard.check_action("faster", ()) is True


async def test_speed_keys_are_hidden_for_a_live_source(isolated_home: Path) -> None:
    app = source_app(StaticSource([[ready(0)]]))
    async with app.run_test(size=SIZE):
        assert app.dashboard.check_action("faster", ()) is False
        assert app.dashboard.check_action("slower", ()) is False


async def test_b_marks_the_current_configuration_as_baseline_and_b_again_unmarks(isolated_home: Path) -> None:
    app = build_app(SWEEP[:4])  # no spec, 1, 2, 3 steps; the current run is 3 steps
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.builder.analysis.baseline.label == "no speculation"
        await pilot.press("b")
        app.refresh_now()
        rows = {r.steps: r for r in app.builder.table(app.feeder.session).rows}
        assert rows[3].is_baseline and rows[3].vs_short == "baseline"
        assert not rows[0].is_baseline
        assert rows[2].vs_pct is not None and rows[2].vs_pct > 0  # 2 steps beats 3 steps
        assert rows[0].vs_pct is not None and rows[0].vs_pct < 0
        assert app.dashboard._panels[0]._view.is_baseline
        await pilot.press("b")
        app.refresh_now()
        rows = {r.steps: r for r in app.builder.table(app.feeder.session).rows}
        assert rows[0].is_baseline and not rows[3].is_baseline


async def test_b_is_greyed_before_the_current_run_has_samples(isolated_home: Path) -> None:
    source = StaticSource([[server_args(2, 0)]])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        assert app.dashboard.check_action("mark_baseline", ()) is None
        await pilot.press("b")
        assert app.builder.baseline_key is None


async def test_e_exports_the_run_table_in_three_formats(isolated_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "exports"
    out.mkdir()
    app = sweep_app(export_dir=out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        names = sorted(p.name for p in out.iterdir())
        assert names == ["specmon-runs-20260212-120000.csv", "specmon-runs-20260212-120000.json",
                         "specmon-runs-20260212-120000.md"]
        assert app.dashboard.last_export == [out / n for n in ("specmon-runs-20260212-120000.csv",
                                                     "specmon-runs-20260212-120000.json",
                                                     "specmon-runs-20260212-120000.md")]
        expected = analyze(app.feeder.session.runs)
        csv_text = (out / names[0]).read_text()
        assert csv_text == to_csv(expected)  # the same renderer as `specmon summarize`
        rows = list(csv.DictReader(io.StringIO(csv_text)))
        assert [r["steps"] for r in rows] == ["0", "1", "2", "3", "5", "10"]
        assert [r["best"] for r in rows].count("1") == 1 and rows[2]["best"] == "1"
        doc = json.loads((out / names[1]).read_text())
        assert doc["verdict"]["best_steps"] == 2
        assert doc["lines"] == app.feeder.session.lines
        assert (out / names[2]).read_text() == to_markdown(expected)
        # A second export in the same second does not overwrite the first.
        await pilot.press("e")
        assert len(list(out.iterdir())) == 6
        assert app.dashboard.last_export[0].name == "specmon-runs-20260212-120000-2.csv"


async def test_export_failure_is_a_notification_not_a_crash(isolated_home: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    app = sweep_app(export_dir=blocker / "exports")  # the folder cannot be made
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        assert app.dashboard.last_export == []
        said = [n.message for n in app._notifications if n.severity == "error"]
        assert any(str(blocker / "exports") in m and "no file was written" in m for m in said), said
        assert app.write_failed  # the exit status says so too


async def test_t_cycles_through_the_specmon_themes(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        assert app.theme == "specmon-dark"
        assert set(app.specmon_themes) == {"specmon-dark", "specmon-light", "specmon-contrast"}
        seen = [app.theme]
        for _ in range(3):
            await pilot.press("t")
            seen.append(app.theme)
        assert seen[-1] == "specmon-dark"
        assert set(seen) == {"specmon-dark", "specmon-light", "specmon-contrast"}
        # Widgets paint from the theme: the header background follows it.
        app.theme = "specmon-light"
        await pilot.pause()
        light_bg = app.query_one(StatusHeader).styles.background
        app.theme = "specmon-contrast"
        await pilot.pause()
        assert app.query_one(StatusHeader).styles.background != light_bg


async def test_theme_option_and_user_theme_folder(isolated_home: Path, tmp_path: Path) -> None:
    from specmon.ui.factories import make_app
    from tests.support.app_factory import options

    folder = tmp_path / "my-themes"
    folder.mkdir()
    (folder / "night.toml").write_text('name = "night"\nprimary = "#204080"\ndark = true\n')
    (folder / "broken.toml").write_text('name = "broken"\n')
    app = make_app(StaticSource([[ready(0)]]), options=options(theme="night"), user_themes=folder,
                   clock=lambda: FIXED_NOW)
    async with app.run_test(size=SIZE):
        assert app.theme == "night"
        assert "night" in app.specmon_themes
        assert len(app.theme_problems) == 1 and "broken.toml" in app.theme_problems[0]


async def test_unknown_theme_falls_back_and_says_so(isolated_home: Path) -> None:
    app = build_app(SWEEP[:1], theme="no-such-theme")
    async with app.run_test(size=SIZE):
        assert app.theme == "specmon-dark"
        assert any("no-such-theme" in p for p in app.theme_problems)


async def test_help_opens_and_closes(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        text = app.screen.query_one("Markdown").source
        assert "including the bonus token" in text and "Accept rate" in text
        await pilot.press("question_mark")  # ? toggles: a second one closes, never stacks
        assert not isinstance(app.screen, HelpScreen)
        assert len(app.screen_stack) == 1
        await pilot.press("question_mark")
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)
        await pilot.press("question_mark")
        await pilot.press("q")  # q closes help, it does not quit
        assert not isinstance(app.screen, HelpScreen)
        assert app.is_running


class FakeController:
    """A stand-in for the control subsystem: its screens just say what they are."""

    def restart_screen(self) -> Screen:
        return _Named("restart")

    def sweep_screen(self) -> Screen:
        return _Named("sweep")

    def unavailable_reason(self, action: str) -> str | None:
        return None


class _Named(Screen):
    def __init__(self, what: str) -> None:
        super().__init__()
        self.what = what

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static(self.what)


async def test_restart_and_sweep_are_greyed_without_a_controller(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("restart", ()) is None
        assert app.check_action("sweep", ()) is None
        await pilot.press("r", "s")
        assert not isinstance(app.screen, _Named)
        footer_keys = {b.binding.key for b in app.active_bindings.values()}
        assert {"p", "b", "e", "t", "question_mark", "q", "r", "s"} <= footer_keys


async def test_restart_and_sweep_open_the_controller_screens(isolated_home: Path) -> None:
    app = sweep_app(controller=FakeController())
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("restart", ()) is True
        await pilot.press("r")
        assert isinstance(app.screen, _Named) and app.screen.what == "restart"
        await app.pop_screen()  # (not awaited, a late pop could take the sweep screen off instead)
        await pilot.press("s")
        assert isinstance(app.screen, _Named) and app.screen.what == "sweep"


async def test_read_only_greys_restart_even_with_a_controller(isolated_home: Path) -> None:
    app = sweep_app(controller=FakeController(), read_only=True)
    async with app.run_test(size=SIZE) as pilot:
        assert app.check_action("restart", ()) is None
        await pilot.press("r")
        assert not isinstance(app.screen, _Named)


async def test_palette_lists_every_action_and_says_why_one_is_unavailable(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        for title in ("Pause / resume", "Mark baseline", "Export run table", "Next theme", "Help"):
            assert title in commands
        assert "Restart server (unavailable)" in commands
        assert "a replay shows saved logs" in commands["Restart server (unavailable)"].help


async def test_q_quits_and_closes_the_source(isolated_home: Path) -> None:
    source = StaticSource([[ready(0)]])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
    assert source._closed.is_set()
    assert app.return_code == 0
