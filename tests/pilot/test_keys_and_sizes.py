"""Keys, texts and sizes of the dashboard (issue 11): what a new user trips on, checked by behaviour.

Keys: one source for the footer, the help, the palette and the README; ``d``/escape
and ``g`` from anywhere; Ctrl+C quits (asking while a restart runs); reasons when
a key cannot run. Texts: replay, first start, baselines without speculation,
short sparklines, restarting to the running setting. Sizes: 80×24 and 60×15 keep
the header, the footer, the actions and the table's configuration column.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st
from textual.widgets import Button, Static
from textual.widgets._footer import FooterKey
from textual.widgets._toast import Toast

from specmon.control.restart_controller import RestartController
from specmon.control.runner import Result
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.keys import ACTIONS, DIALOG_KEYS
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.help import HELP_TEXT, HelpScreen
from specmon.ui.screens.quit_confirm import QuitConfirmScreen
from specmon.ui.screens.restart_dialog import MeasuredStep, RestartDialog
from specmon.ui.views import MetricView
from specmon.ui.widgets.key_footer import fit_labels
from specmon.ui.widgets.metric_panel import MetricPanel, delta_text
from specmon.ui.widgets.run_table import COLUMNS, DROP_ORDER, RunTable, mark_text
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import (
    ROOT,
    SWEEP,
    StaticSource,
    build_app,
    header_text,
    settle,
    source_app,
    sweep_app,
    wait_for,
)
from tests.support.dialogs import fixed_controller, fixed_profile, ready_view
from tests.support.logtext import ready, server_args

SIZE = (120, 40)


def live_source() -> StaticSource:
    return StaticSource([[server_args(1), ready(1)]], name="/srv/sglang/logs/sglang_1step.log")


class Held:
    """A runner whose every command waits for the test's gate (a restart stays in flight)."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()

    async def run(self, command: str, timeout: float) -> Result:
        await self.gate.wait()
        return Result(2, "specmon-stop result=refused reason=test\n", "")


def readme_tables() -> list[list[tuple[str, str]]]:
    """The README's key tables (under "Dashboard keys"), as (key, action) rows."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("### Dashboard keys", 1)[1].split("\n## ", 1)[0]
    tables: list[list[tuple[str, str]]] = []
    rows: list[tuple[str, str]] | None = None
    for line in section.splitlines():
        if line.startswith("| key |"):
            rows = []
            tables.append(rows)
        elif line.startswith("|---") or rows is None:
            continue
        elif line.startswith("| "):
            key, action = (cell.strip() for cell in line.strip().strip("|").split(" | ", 1))
            rows.append((key, action))
        else:
            rows = None
    return tables


def help_tables() -> list[list[tuple[str, str]]]:
    """The help screen's key tables, parsed from the Markdown it renders."""
    tables: list[list[tuple[str, str]]] = []
    rows: list[tuple[str, str]] | None = None
    for line in HELP_TEXT.splitlines():
        if line.startswith("| key |"):
            rows = []
            tables.append(rows)
        elif line.startswith("|---") or rows is None:
            continue
        elif line.startswith("| "):
            key, action = (cell.strip() for cell in line.strip().strip("|").split(" | ", 1))
            rows.append((key, action))
        else:
            rows = None
    return tables


# -- one list of actions ------------------------------------------------------------------------------------


async def test_readme_help_and_palette_list_the_same_actions(isolated_home: Path) -> None:
    readme = readme_tables()
    helps = help_tables()
    assert len(readme) == 2 and len(helps) == 2
    assert readme == helps  # the same keys, the same words
    assert [k for k, _ in readme[0]] == [a.display for a in ACTIONS]
    assert readme[1] == list(DIALOG_KEYS)
    for wanted in ("`g`", "`d` / `escape`", "`q` / `ctrl+c`"):
        assert wanted in [k for k, _ in helps[0]]
    assert {"`y`", "`x`"} <= {k for k, _ in helps[1]}
    # The palette: one entry per action the README lists (ctrl+p is the palette itself).
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        titles = [c.title.removesuffix(" (unavailable)") for c in app.get_system_commands(app.screen)]
        for action in ACTIONS:
            if action.title is not None:
                assert titles.count(action.title) == 1, action.title
        assert [t for t in titles if "heme" in t] == ["Next theme"]  # one theme command, not two
        assert "Go back" in titles and "Quit" in titles and titles.count("Quit") == 1
        # The bindings are the same list: every README key is bound to its action (g by the dashboard screen).
        bound = {b.action for b in app.dashboard._bindings.key_to_bindings.get("g", [])}
        assert bound == {"go_back"}


async def test_unavailable_actions_say_why_in_the_palette_and_when_pressed(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        commands = {c.title: c for c in app.get_system_commands(app.screen)}
        assert "replay" in commands["Restart server (unavailable)"].help
        assert "replay" in commands["Sweep step counts (unavailable)"].help
        assert "failed restart" in commands["Go back (unavailable)"].help or \
            "no restart ran" in commands["Go back (unavailable)"].help
        app.clear_notifications()
        for key in ("r", "s"):
            await pilot.press(key)
            await pilot.pause()
        texts = [n.message for n in app._notifications]
        assert len([t for t in texts if "a replay shows saved logs" in t]) == 2, texts
        # In the footer r and s are greyed (disabled), not shown as enabled.
        keys = {k.action: k for k in app.query(FooterKey)}
        assert keys["restart"].has_class("-disabled") and keys["sweep"].has_class("-disabled")


# -- d / escape / g from anywhere ---------------------------------------------------------------------------


async def test_d_and_escape_dismiss_the_panel_at_the_first_press_whatever_has_the_focus(isolated_home: Path) -> None:
    for key in ("d", "escape"):
        flow = RestartFlow(fixed_controller())
        app = source_app(live_source(), controller=flow)
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda a=app: a.feeder.lines >= 2, "the lines")
            flow._visible = True
            flow.panel.view = ready_view()
            app.set_focus(app.query_one(RunTable))
            await pilot.pause()
            assert not flow.panel.can_focus
            assert app.dashboard.check_action("dismiss", ()) is True
            await pilot.press(key)
            await pilot.pause()
            shown: object = flow.panel.view  # (read again: the key changed it)
            assert shown is None, key
            assert app.dashboard.check_action("dismiss", ()) is False  # nothing left: the footer drops d


async def test_g_goes_back_after_a_failure_from_the_app(isolated_home: Path) -> None:
    from tests.support.dialogs import crashed_view

    c = fixed_controller(current_steps=2)
    c.previous_steps = 1  # as after a restart from 1 step that crashed
    flow = RestartFlow(c)
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines >= 2, "the lines")
        assert app.dashboard.check_action("go_back", ()) is False
        flow._visible = True
        flow.panel.view = crashed_view()
        await pilot.pause()
        assert app.dashboard.check_action("go_back", ()) is True
        app.set_focus(app.query_one(RunTable))
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the go-back commands")
        screen = app.screen
        assert isinstance(screen, ConfirmCommandsScreen) and screen.title_text == "Go back"


# -- quitting -----------------------------------------------------------------------------------------------


async def test_ctrl_c_quits_at_once_when_nothing_runs(isolated_home: Path) -> None:
    source = StaticSource([[ready(0)]])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
    assert source._closed.is_set() and app.return_code == 0


async def test_ctrl_c_asks_while_a_restart_runs(isolated_home: Path) -> None:
    runner = Held()
    c = RestartController(fixed_profile(), runner, host="gpu-box", current_steps=1)
    flow = RestartFlow(c)
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        flow.start_now(2)
        await wait_for(pilot, lambda: c.busy, "the restart to start")
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitConfirmScreen), "the question")
        assert "restart is in progress" in str(app.screen.query_one("#quit-title", Static).render())
        await pilot.press("n")
        await pilot.pause()
        assert not isinstance(app.screen, QuitConfirmScreen) and app.is_running and c.busy
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, QuitConfirmScreen), "the question again")
        await pilot.press("ctrl+c")  # again on the question: the user means it
        await pilot.pause()
    # The held restart's worker was cancelled with the app (its gate is never opened).
    assert app.return_code == 0


# -- texts --------------------------------------------------------------------------------------------------


async def test_replay_says_replay_and_a_finished_replay_is_not_down(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app._tick()
        text = header_text(app)
        assert "source: replay" in text and "source: live" not in text
        assert "● down" not in text and "log ended (last state: down)" in text


async def test_the_first_start_is_a_start_without_a_stop_phase(isolated_home: Path) -> None:
    runner = Held()
    c = RestartController(fixed_profile(), runner, host="gpu-box", current_steps=None)
    flow = RestartFlow(c)
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        flow.start_now(1)
        await wait_for(pilot, lambda: c.busy and flow.panel.view is not None, "the start")
        text = str(flow.panel.render())
        assert text.startswith("start → 1 step") and "restart" not in text and "stopping" not in text
        assert (flow.header_state() or ("",))[0].startswith("start → 1 step")  # the header state: the panel's view
        # The flow's event is a message: it reaches the session on the app's next turn, which a loaded
        # machine can put after the panel's first view (the race this test lost under -n 2).
        await wait_for(pilot, lambda: any(e.text.startswith("start 1 step") for e in app.feeder.session.events),
                       "the start's event")
        runner.gate.set()
        await wait_for(pilot, lambda: not c.busy, "the start to end")


def test_no_ci_yet_is_said_and_explained() -> None:
    view = MetricView("throughput", "generation throughput", "tok/s", 1, 90.0, 91.0, 20, (90.0,),
                      baseline=88.8, delta=2.5, delta_is_pct=True, significant=None)
    assert "(no CI yet)" in delta_text(view, 60).plain
    assert "(n/a)" not in delta_text(view, 60).plain
    assert "`(no CI yet)`" in HELP_TEXT and "95% interval" in HELP_TEXT


async def test_accept_rate_names_a_baseline_without_speculation(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app._tick()
        rate = app.query_one("#m-accept-rate", MetricPanel)
        text = str(rate._delta.render())
        assert "no baseline yet" not in text and "no drafts" in text


async def test_a_sparkline_of_few_samples_is_as_wide_as_its_samples(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        app.display_paused = True  # the live refresh would show the replay's own series again
        panel = app.query_one("#m-throughput", MetricPanel)
        few = MetricView("throughput", "generation throughput", "tok/s", 1, 90.0, 89.0, 4, (88.0, 92.0, 86.0, 90.0))
        panel.show(few, sparkline=True)
        await pilot.pause()
        assert panel._spark.size.width == 4 < panel.content_size.width
        many = MetricView("throughput", "generation throughput", "tok/s", 1, 90.0, 89.0, 20,
                          tuple(float(80 + i % 7) for i in range(120)))
        panel.show(many, sparkline=True)
        await pilot.pause()
        assert panel._spark.size.width == panel.content_size.width


async def test_restarting_to_the_running_setting_warns(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        c = fixed_controller(current_steps=2)
        app.push_screen(ConfirmCommandsScreen(c, c.plan_for(2), now_steps=2))
        await pilot.pause()
        warning = str(app.screen.query_one("#confirm-same", Static).render())
        assert "2 steps is what runs now" in warning
        await pilot.press("escape")
        app.push_screen(RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=2))
        await pilot.pause()
        await pilot.press("2")
        await pilot.pause()
        assert "same as now" in str(app.screen.query_one("#restart-error", Static).render())
        # Another count: nothing to warn about.
        c2 = fixed_controller(current_steps=1)
        await pilot.press("escape")
        app.push_screen(ConfirmCommandsScreen(c2, c2.plan_for(2), now_steps=1))
        await pilot.pause()
        assert not app.screen.query("#confirm-same")


# -- marks --------------------------------------------------------------------------------------------------


def test_marks_have_one_slot_each() -> None:
    assert mark_text("★", True, True) == "★B▸"
    assert mark_text("", True, False) == " B "
    assert mark_text("☆", False, True) == "☆ ▸"


async def test_the_baseline_row_shows_b_also_when_it_is_the_current_run(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("b")  # the 10-step run (current) becomes the baseline
        app.refresh_now()
        await pilot.pause()
        table = app.query_one(RunTable)
        marks = [table.get_row_at(i)[0].plain for i in range(table.row_count)]
        assert marks[-1] == " B▸" and marks.count(" B▸") == 1
        assert sum("B" in m for m in marks) == 1


# -- sizes --------------------------------------------------------------------------------------------------


def inside(region: Any, width: int, height: int) -> bool:
    return bool(region.x >= 0 and region.y >= 0 and region.right <= width and region.bottom <= height)


async def test_small_terminals_keep_the_header_footer_and_table(isolated_home: Path) -> None:
    for size in ((60, 15), (80, 24), (120, 40), (200, 60)):
        app = sweep_app()
        async with app.run_test(size=size) as pilot:
            await settle(app, pilot)
            await pilot.pause()
            w, h = size
            assert app.screen.max_scroll_y == 0, size  # nothing scrolls the header away
            header = app.query_one(StatusHeader)
            assert header.region.y == 0 and header.region.height == 2
            keys = list(app.query(FooterKey))
            assert keys and all(inside(k.region, w, h) and k.region.y == h - 1 for k in keys), size
            assert {k.action for k in keys} >= {"restart", "sweep", "help", "quit", "command_palette"}
            table = app.query_one(RunTable)
            shown = [str(c.value) for c in table.columns]
            assert {"config", "steps", "tps", "vs"} <= set(shown), size
            dropped = {c[0] for c in COLUMNS if c[0] not in shown}
            assert dropped == set(DROP_ORDER[:len(dropped)]), size  # in the chosen order
            assert table.virtual_size.width <= table.size.width, size  # no sideways scrolling
            assert table.row_count == 6 and table.region.bottom <= h - 1
            assert table.size.height >= 7, size  # every row and the header line are drawn


async def test_toasts_stay_off_the_table_at_60x15(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=(60, 15), notifications=True) as pilot:
        await settle(app, pilot)
        app.notify("cannot mark a baseline: the current run has no counted throughput samples yet "
                   "(warm-up excluded)", title="baseline", severity="warning", timeout=30)
        await pilot.pause()
        await pilot.pause()
        toasts = list(app.screen.query(Toast))
        table = app.query_one(RunTable).region
        assert toasts and all(not t.region.overlaps(table) for t in toasts)
        assert all(not t.region.overlaps(app.query_one(StatusHeader).region) for t in toasts)


async def test_the_confirmation_keeps_y_and_its_buttons_on_screen_at_80x24(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        c = fixed_controller()
        app.push_screen(ConfirmCommandsScreen(c, c.plan_for(2), now_steps=1,
                                              eta_text="usually 11m 39s on gpu-box, from 2 earlier restarts"))
        for _ in range(3):
            await pilot.pause()
        screen = app.screen
        for button in screen.query(Button):
            assert inside(button.region, 80, 24) and button.region.height >= 1, button.id
        hint = next(s for s in screen.query(Static) if "y: run" in str(s.render()))
        assert inside(hint.region, 80, 24)
        await pilot.press("x")  # the exact strings are longer: still on screen
        for _ in range(3):
            await pilot.pause()
        assert all(inside(b.region, 80, 24) for b in screen.query(Button))
        # ... and scrolled into view: they were added below the fold, with nothing showing they were there.
        exact, scroll = screen.query_one("#confirm-exact"), screen.query_one("#confirm-scroll")
        assert exact.display and exact.region.height > 0
        assert scroll.region.y <= exact.region.y < scroll.region.bottom, (exact.region, scroll.region)
        await pilot.click("#confirm-run")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmCommandsScreen)


async def test_the_restart_dialog_shows_acc_len_in_full(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        rows = [MeasuredStep.from_row(r) for r in app.builder.table(app.feeder.session).rows]
        app.push_screen(RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10, measured=rows))
        await pilot.pause()
        await pilot.pause()
        text = str(app.screen.query_one("#restart-measured", Static).render())
        for row in rows:
            if row.accept_len != "—":
                assert re.search(re.escape(row.accept_len) + r"\s*$", text, re.M), row.accept_len
        assert inside(app.screen.query_one("#restart-steps").region, 80, 24)


@given(st.lists(st.sampled_from([a for a in ACTIONS if a.footer]), min_size=1, max_size=12, unique=True),
       st.integers(min_value=10, max_value=220))
def test_footer_labels_fit_or_are_dropped_least_important_first(actions: list[Any], width: int) -> None:
    items = [(a.action, a.display.split(" / ")[0].strip("`"), a.footer) for a in actions]
    labels, palette = fit_labels(items, width)
    cells = sum(len(k) + (1 + len(labels[a]) if labels[a] else 0) + 1 for a, k, _ in items) + (11 if palette else 3)
    keys_only = sum(len(k) + 1 for _, k, _ in items) + 3
    if keys_only <= width:
        assert cells <= width
    full = sum(len(k) + 1 + len(lbl) + 1 for _, k, lbl in items) + 11
    if full <= width:
        assert all(labels[a] for a, _, _ in items) and palette
    # A key's label is only dropped when some key of lower rank lost its label too (or none has one).
    rank = {a.action: a.rank for a in actions}
    kept = [rank[a] for a, _, _ in items if labels[a]]
    dropped = [rank[a] for a, _, _ in items if not labels[a]]
    if kept and dropped:
        assert min(dropped) <= max(kept)


async def test_help_opens_at_80x24_and_escape_closes_it(isolated_home: Path) -> None:
    app = build_app(SWEEP)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_every_dialog_keeps_its_input_or_buttons_on_screen_at_60x15(isolated_home: Path) -> None:
    from textual.widgets import Input

    from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen

    def dialogs(app: Any) -> list[Any]:
        rows = [MeasuredStep.from_row(r) for r in app.builder.table(app.feeder.session).rows]
        c = fixed_controller()
        text = "\n\n".join(c.describe(c.plan_for(s)) for s in (0, 1, 2))
        c2 = fixed_controller()
        return [RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=10, measured=rows),
                SweepScreen(host="gpu-box", lo=0, hi=16),
                SweepConfirmScreen("gpu-box", (0, 1, 2), text, "Load: 1 request at a time."),
                ConfirmCommandsScreen(c2, c2.plan_for(2), now_steps=1),
                QuitConfirmScreen("a restart is in progress")]

    app = sweep_app()
    async with app.run_test(size=(60, 15)) as pilot:
        await settle(app, pilot)
        for screen in dialogs(app):
            app.push_screen(screen)
            for _ in range(4):
                await pilot.pause()
            actions = list(screen.query(Input)) + list(screen.query(Button))
            assert actions, type(screen).__name__
            for widget in actions:
                assert inside(widget.region, 60, 15) and widget.region.height >= 1, type(screen).__name__
            app.pop_screen()
            await pilot.pause()


async def test_toasts_stay_off_the_table_at_80x24_while_a_restart_panel_is_up(isolated_home: Path) -> None:
    from tests.support.dialogs import loading_view

    app = build_app(SWEEP, controller=RestartFlow(fixed_controller()))
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await settle(app, pilot)
        flow = app.controller
        assert isinstance(flow, RestartFlow)
        flow._visible = True
        flow.panel.view = loading_view()
        app._tick()
        await pilot.pause()
        app.notify("restart refused: a restart is in progress on gpu-box; wait for it to end or dismiss it "
                   "first, then press r again", title="restart", severity="error", timeout=30)
        for _ in range(3):
            await pilot.pause()
        toasts = list(app.screen.query(Toast))
        table = app.query_one(RunTable).region
        assert table.height >= 7  # every row
        assert toasts and all(not t.region.overlaps(table) for t in toasts)
