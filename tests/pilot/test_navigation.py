"""Navigation like k9s or lazygit: a run-table row → ``r`` restarts on its configuration (commands
shown first) or Enter opens its details; ``l`` opens the whole event log, filtered and searched."""

from __future__ import annotations

from pathlib import Path

from specmon.control.restart_controller import RestartController
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.events_screen import EventsScreen, event_lines
from specmon.ui.screens.restart_dialog import RestartDialog
from specmon.ui.screens.run_details import RunDetailsScreen, histogram_lines, strip_line
from tests.support.app_factory import build_app, wait_for
from tests.support.restarting import STARTED, STOPPED, WAITING, ScriptedRunner, profile

SIZE = (80, 24)
ROOT = Path(__file__).resolve().parents[2]
CAMPAIGN = [ROOT / "sample_logs" / f"sim_eagle3_{n}.log" for n in ("nospec", "1step", "2step", "3step")]


def restart_flow(tmp_path: Path) -> tuple[RestartFlow, ScriptedRunner]:
    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING])
    return RestartFlow(RestartController(profile(tmp_path), runner, host="gpu-box", current_steps=3)), runner


async def focus_row(pilot, app, label_part: str) -> None:  # type: ignore[no-untyped-def]
    """Focus the run table and move its cursor to the row whose label contains ``label_part``."""
    table = app._table
    table.focus()
    await pilot.pause()
    keys = [str(k.value) for k in table.rows]
    target = next(i for i, k in enumerate(keys) if label_part in k)
    while table.cursor_row < target:
        await pilot.press("down")
    while table.cursor_row > target:
        await pilot.press("up")
    assert label_part in keys[table.cursor_row]


async def test_r_on_a_row_restarts_on_that_configuration(isolated_home: Path, tmp_path: Path) -> None:
    flow, runner = restart_flow(tmp_path)
    app = build_app(CAMPAIGN, controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await app.feeder.wait_finished()
        app.refresh_now()
        await pilot.pause()
        await focus_row(pilot, app, "2 steps")
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
        assert "--steps 2" in app.screen.text and runner.calls == []  # shown, nothing run
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmCommandsScreen), "cancelled")
        assert runner.calls == []
        # Without the table focused, r asks for a step count as before.
        app.set_focus(None)
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step dialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RestartDialog), "closed")
        # Focused but no row chosen (the table has the focus from the start): the dialog too.
        app._table.focus()
        await pilot.pause()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step dialog again")
        await pilot.press("escape")


async def test_enter_on_a_row_opens_its_details(isolated_home: Path, tmp_path: Path) -> None:
    flow, _ = restart_flow(tmp_path)
    app = build_app(CAMPAIGN, controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await app.feeder.wait_finished()
        app.refresh_now()
        await pilot.pause()
        await focus_row(pilot, app, "2 steps")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailsScreen), "the details")
        screen = app.screen
        assert isinstance(screen, RunDetailsScreen)
        await wait_for(pilot, lambda: bool(screen.lines), "the details text")
        text = screen.text
        row = screen.row
        assert row.label.endswith("2 steps") and f"(1 launch + assumed launch CV 5%; {row.throughput.n:,} counted samples" in text  # type: ignore[union-attr]
        assert "samples over time" in text and "histogram (tok/s)" in text
        warm = sum(r.excluded_warmup for r in row.runs)
        assert f"warm-up     {warm:,} samples" in text and "idle " in text
        # The exact server arguments: the command r would run (specmon did not start this replay).
        assert "the start command r runs for 2 steps" in text and "--steps 2" in text
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, RunDetailsScreen), "back")


async def test_l_opens_the_whole_event_log_filtered_and_searched(isolated_home: Path) -> None:
    app = build_app(CAMPAIGN)
    async with app.run_test(size=SIZE) as pilot:
        await app.feeder.wait_finished()
        app.refresh_now()
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, EventsScreen), "the event log")
        screen = app.screen
        assert isinstance(screen, EventsScreen)
        everything = list(screen.lines)
        assert len(everything) > 10
        # Full lines: longer than the panel's width, nothing cut.
        assert max(len(line) for line in everything) > 40 and not any(line.endswith("…") for line in everything)
        await pilot.press("slash")
        for ch in "ready":
            await pilot.press(ch)
        await wait_for(pilot, lambda: screen.query_text == "ready", "the filter")
        assert screen.lines and all("ready" in line.lower() for line in screen.lines)
        assert len(screen.lines) < len(everything)
        await pilot.press("enter")  # back to the list; the filter stays
        await pilot.press("f")  # unfold: each rank's line on its own
        assert not screen.fold and len(screen.lines) >= 1
        await pilot.press("exclamation_mark")  # warnings and errors only
        assert all(("▲" in line or "✖" in line) for line in screen.lines)
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, EventsScreen), "back to the dashboard")


def test_event_lines_show_both_clocks_and_filter() -> None:
    from specmon.model.session import SessionEvent

    t0 = 1_770_897_600.0
    events = [SessionEvent(0, None, "info", "restart to 2 steps on gpu-box: running", received=t0),
              SessionEvent(12, t0 + 7200.0, "info", "ready: The server is fired up", received=t0 + 5),
              SessionEvent(13, None, "warning", "connection lost", received=t0 + 6)]
    lines, total = event_lines(events)
    assert total == 3 and lines[0].startswith("12:00:00 [specmon] restart to 2 steps")
    assert "(log 14:00:00) [line 12] ready" in lines[1] and "▲ connection lost" in lines[2]
    assert event_lines(events, query="server READY")[0] == [lines[1]]


def test_strip_and_histogram() -> None:
    flat = strip_line([1.0, 1.0, 1.0], 3, 0.0, 2.0)
    assert len(set(flat)) == 1 and flat[0] not in "▁█"  # a flat series reads flat, mid-range
    assert strip_line([0.0, 2.0], 2, 0.0, 2.0) == "▁█"
    hist = histogram_lines([1.0, 1.0, 2.0, 3.0], bins=2, width=4)
    assert len(hist) == 2 and hist[0].endswith(" 2") and hist[1].endswith(" 2")
