"""Whose keys are whose (issue 42): the dashboard screen binds what acts on its view, the app what
is app-wide; the footer keeps one order; a modal screen on top stops the dashboard's keys, as it
stopped them when they were the app's; a full screen on top shows only its own keys and the app's."""

from __future__ import annotations

from pathlib import Path

from textual.binding import Binding, BindingType
from textual.widgets._footer import FooterKey

from specmon.ui.app import SpecmonApp
from specmon.ui.keys import ACTIONS, APP, DASHBOARD
from specmon.ui.screens.dashboard import DashboardScreen
from specmon.ui.screens.events_screen import EventsScreen
from specmon.ui.screens.help import HelpScreen
from specmon.ui.screens.run_details import RunDetailsScreen
from tests.support.app_factory import settle, sweep_app, wait_for

SIZE = (120, 40)


def _bindings(declared: list[BindingType]) -> list[Binding]:
    """A class's own ``BINDINGS`` (specmon writes each as a Binding)."""
    out = [b for b in declared if isinstance(b, Binding)]
    assert len(out) == len(declared)
    return out


def _bound(declared: list[BindingType]) -> set[str]:
    """The actions a class declares in its own ``BINDINGS``."""
    return {b.action for b in _bindings(declared)}


def test_the_dashboard_s_keys_are_declared_on_the_dashboard_screen_and_the_app_keeps_the_app_wide_ones() -> None:
    view = {a.action for a in ACTIONS if a.owner == DASHBOARD}
    app_wide = {a.action for a in ACTIONS if a.owner == APP} - {"command_palette"}  # ctrl+p is Textual's own
    assert view == {"toggle_pause", "faster", "slower", "mark_baseline", "export", "events", "go_back", "dismiss"}
    assert app_wide == {"next_theme", "restart", "sweep", "help", "quit"}
    assert _bound(DashboardScreen.BINDINGS) == view
    assert _bound(SpecmonApp.BINDINGS) == app_wide
    for action in view:  # each acts on the screen, not the app
        assert callable(getattr(DashboardScreen, f"action_{action}")), action
        assert not hasattr(SpecmonApp, f"action_{action}"), action
    # Every key of the list is bound once, by its owner, with the keys the help and README show.
    keys = {b.key: b.action for b in _bindings([*DashboardScreen.BINDINGS, *SpecmonApp.BINDINGS])}
    for a in ACTIONS:
        if a.action != "command_palette":
            assert keys[a.keys] == a.action


async def test_the_footer_lists_both_owners_keys_in_the_one_order(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.screen is app.dashboard
        shown = [k.action for k in app.screen.query(FooterKey) if not k.has_class("-command-palette")]
        order = [a.action for a in ACTIONS]
        assert shown == sorted(shown, key=order.index)
        assert {"toggle_pause", "mark_baseline", "export", "next_theme", "help", "quit"} <= set(shown)
        # Pressed on the dashboard, its keys act (the screen's) and so do the app's.
        theme = app.theme
        await pilot.press("p", "b", "t")
        await pilot.pause()
        assert app.dashboard.paused and app.builder.baseline_key is not None and app.theme != theme


async def test_a_modal_screen_on_top_stops_the_dashboard_s_keys_as_before(isolated_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "exports"
    out.mkdir()
    app = sweep_app(export_dir=out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        theme = app.theme
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), "the help")
        # Neither the dashboard's keys nor the app's go through a modal screen (Textual stops the
        # binding chain at it): nothing is paused, marked, written, opened or switched.
        await pilot.press("p", "b", "e", "l", "plus", "t")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        assert not app.dashboard.paused and app.builder.baseline_key is None
        assert list(out.iterdir()) == [] and app.dashboard.last_export == []
        assert app.theme == theme
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard, "back to the dashboard")
        await pilot.press("p")
        assert app.dashboard.paused  # the same key acts once the dashboard is shown again


async def test_a_full_screen_on_top_has_its_own_keys_and_the_app_s(isolated_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "exports"
    out.mkdir()
    app = sweep_app(export_dir=out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("l")
        await wait_for(pilot, lambda: isinstance(app.screen, EventsScreen), "the event log")
        app.screen.set_focus(None)  # not the filter: the keys reach the bindings
        await pilot.pause()
        shown = {k.action for k in app.screen.query(FooterKey)}
        assert {"next_theme", "restart", "sweep", "help"} <= shown
        assert not shown & {"toggle_pause", "mark_baseline", "export", "events"}
        theme = app.theme
        await pilot.press("p", "b", "e", "l", "t")
        await pilot.pause()
        assert isinstance(app.screen, EventsScreen) and len(app.screen_stack) == 2  # l opened no second log
        assert not app.dashboard.paused and app.builder.baseline_key is None and list(out.iterdir()) == []
        assert app.theme != theme  # the theme is the app's: it switches from any full screen
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.dashboard, "back to the dashboard")
        # Enter on a row is the dashboard's too: its details.
        app.dashboard._table.focus()
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, RunDetailsScreen), "a row's details")
