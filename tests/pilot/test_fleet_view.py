"""The fleet view (``specmon watch LOG1 LOG2 ...``): sizes, sorting, filtering, a replica's dashboard, literal text.

Every fleet is written as log files and read by the app's own followers and feeders.
"""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from textual.widget import Widget
from textual.widgets import Input, Static
from textual.widgets._footer import FooterKey

from specmon.model.fleet import ReplicaState
from specmon.ui.fleet_app import FleetApp, FleetOptions, fleet_app
from specmon.ui.literal import plain
from specmon.ui.screens.fleet import FleetScreen
from specmon.ui.screens.fleet_help import FleetHelpScreen
from specmon.ui.screens.replica import ReplicaScreen
from specmon.ui.widgets.fleet_table import FittedTable
from specmon.ui.widgets.metric_panel import MetricPanel
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import wait_for
from tests.support.logtext import campaign

CRASH_LOG = Path(__file__).resolve().parents[1] / "data" / "dashboard" / "crash_3step.log"
SAMPLES = 40


def write_fleet(root: Path, n: int, *, slow: int | None = 5) -> list[str]:
    """``n`` replicas as ``host-NN/sglang/server.log``: EAGLE3 2 steps, 3 steps and no speculation; one slow."""
    paths = []
    for i in range(n):
        steps = (2, 2, 3, None)[i % 4]
        mean = (94.0 if steps else 88.0) * (0.7 if i == slow else 1.0 + 0.01 * (i % 3 - 1))
        path = root / f"host-{i:02d}" / "sglang" / "server.log"
        path.parent.mkdir(parents=True)
        path.write_text("\n".join(campaign(steps, mean, SAMPLES)) + "\n")
        paths.append(str(path))
    return paths


def make(paths: Sequence[str]) -> FleetApp:
    return fleet_app(paths, options=FleetOptions(animations=False), user_themes=None, poll_interval=0.05)


async def settle(app: FleetApp, pilot: Any, lines: Sequence[int] | None = None) -> None:
    """Every replica has read its log (``lines`` each, default: the whole file); then one refresh."""
    want = list(lines) if lines is not None else [
        sum(1 for _ in open(r.path, "rb")) for r in app.fleet.replicas]
    await wait_for(pilot, lambda: all(r.feeder.lines >= n for r, n in zip(app.fleet.replicas, want, strict=True)),
                   "every replica read", rounds=1500)
    app.refresh_fleet()
    await pilot.pause()
    # Drawn, not only updated: on a loaded machine a table read right after its update was still
    # blank (a clean-clone CI run).
    await wait_for(pilot, lambda: any(line.strip() for line in shown_lines(app.fleet_screen.replica_table)[1:]),
                   "the replica table drawn", rounds=1500)


def shown_lines(widget: Widget) -> list[str]:
    return [widget.render_line(y).text for y in range(widget.size.height)]


def check_whole(table: FittedTable, width: int) -> set[str]:
    """Every header and every visible cell of the table is on screen whole; returns the row keys visible."""
    lines = shown_lines(table)
    assert table.region.right <= width
    # No horizontal scrolling: the columns fit the table.
    assert table.virtual_size.width <= table.scrollable_content_region.width, (table.virtual_size, table.size)
    columns = [c for c in table.COLUMNS if c.key in table.columns_shown]
    for c in columns:
        assert c.header in lines[0], (c.header, lines[0])
    assert not any("…" in line for line in lines), lines
    visible = set()
    rows = table.rows_shown
    top = int(table.scroll_y)
    for y, line in enumerate(lines[1:]):
        i = top + y
        if i >= len(rows):
            break
        row = rows[i]
        for c in columns:
            cell = plain(c.cell(row))
            assert cell in line, (c.key, cell, line)
        visible.add(str(row.key))
    return visible


async def test_16_replicas_at_80x24_every_row_reachable_every_cell_whole(tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, 16)
    app = make(paths)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        screen = app.fleet_screen
        assert app.screen is screen
        table = screen.replica_table
        assert table.row_count == 16
        # The columns that always stay at 80 columns, and the ones dropped first.
        for key in ("name", "config", "state", "tps", "flags"):
            assert key in table.columns_shown
        assert "source" not in table.columns_shown
        seen = check_whole(table, 80)
        assert len(seen) < 16  # the table scrolls at 80x24 ...
        for _ in range(16):
            await pilot.press("down")
            await pilot.pause()
            seen |= check_whole(table, 80)
            key = table.cursor_key()
            assert key is not None and key in seen  # the highlighted row is on screen
        assert seen == {str(i) for i in range(16)}  # ... and every row is reachable
        check_whole(screen.config_table, 80)
        assert screen.config_table.row_count == 3
        # The slow replica is flagged, and its row says why in the line under the table.
        slow = next(r for r in table.rows_shown if r.name == "host-05")
        assert slow.flags == ("slow",)
        for key in ("o", "/", "?", "q"):
            footer = [k for k in app.screen.query(FooterKey) if k.key_display == key]
            assert footer and footer[0].region.right <= 80


async def test_64_replicas_at_120x40(tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, 64, slow=None)
    app = make(paths)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(app, pilot)
        table = app.fleet_screen.replica_table
        assert table.row_count == 64
        assert {"name", "config", "state", "tps", "run", "acc_len", "flags"} <= set(table.columns_shown)
        top = check_whole(table, 120)
        await pilot.press("ctrl+end")
        await pilot.pause()
        assert table.cursor_key() == "63"
        bottom = check_whole(table, 120)
        assert "0" in top and "63" not in top and "63" in bottom and "0" not in bottom
        pool = {p.label: p for p in app.fleet_screen.config_table.rows_shown}
        assert pool["EAGLE3 2 steps"].covers == "32 replicas" and pool["no speculation"].covers == "16 replicas"
        check_whole(app.fleet_screen.config_table, 120)
        assert all(r.state is ReplicaState.LIVE for r in table.rows_shown)
        # Refreshes update cells in place: no row is laid out again while nothing moves.
        rebuilds = table.rebuilds
        for _ in range(3):
            app.refresh_fleet()
            await pilot.pause()
        assert table.rebuilds == rebuilds


async def test_sort_and_filter_keys(tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, 8)
    app = make(paths)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        screen = app.fleet_screen
        table = screen.replica_table
        assert [r.name for r in table.rows_shown] == [f"host-{i:02d}" for i in range(8)]
        for _ in range(10):
            if table.sort_column == "tps":
                break
            await pilot.press("o")
        assert table.sort_column == "tps"
        speeds = [r.tps_recent for r in table.rows_shown]
        assert speeds == sorted(speeds, reverse=True)
        assert "sorted by tok/s (recent) ▼" in str(screen.query_one("#replicas-title", Static).render())
        await pilot.press("O")
        speeds = [r.tps_recent for r in table.rows_shown]
        assert speeds == sorted(speeds)
        # The rows on screen are in that order too.
        lines = shown_lines(table)[1:9]
        assert [line.split()[0] for line in lines] == [r.name for r in table.rows_shown]
        await pilot.press("slash")
        assert isinstance(app.focused, Input)
        await pilot.press(*"3 steps")  # an o and a slash-free text: typed, not sort keys
        await pilot.pause()
        assert screen.filter_text == "3 steps" and table.sort_column == "tps"
        assert {r.config for r in table.rows_shown} == {"EAGLE3 3 steps"} and table.row_count == 2
        assert [p.label for p in screen.config_table.rows_shown] == ["EAGLE3 3 steps"]
        await pilot.press("enter")  # back to the table, the filter kept
        assert app.focused is table and table.row_count == 2
        await pilot.press("escape")
        await pilot.pause()
        assert screen.filter_text == "" and table.row_count == 8
        assert not screen.filter_input.has_class("-open")
        # Enter on a configuration filters the replicas to it.
        screen.config_table.focus()
        # (The cursor stayed on the configuration it was on while filtered: EAGLE3 3 steps.)
        first = next(p.label for p in screen.config_table.rows_shown if str(p.key) == screen.config_table.cursor_key())
        assert first == "EAGLE3 3 steps"
        await pilot.press("enter")
        await pilot.pause()
        assert screen.filter_text == first and screen.filter_input.value == first
        assert {r.config for r in table.rows_shown} == {first} and app.focused is table


async def test_enter_opens_the_replicas_dashboard_and_escape_comes_back(tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, 4)
    app = make(paths)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        await pilot.press("down", "down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplicaScreen), "the replica's dashboard")
        screen = app.screen
        assert isinstance(screen, ReplicaScreen)
        screen.refresh_now()
        await pilot.pause()
        header = screen.query_one(StatusHeader)
        assert header.view is not None and header.view.source == paths[2]
        assert "host-02" in header.view.mode
        throughput = screen.query_one("#m-throughput", MetricPanel)
        assert throughput._view is not None and throughput._view.current is not None
        runs = screen.query_one(RunTable)
        assert runs.row_count == 1 and runs.coordinate_to_cell_key((0, 0)).row_key.value == "EAGLE3 3 steps"
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.fleet_screen, "back to the fleet")
        before = app.refreshes
        await wait_for(pilot, lambda: app.refreshes > before + 1, "the fleet still refreshing")


async def test_markup_in_a_path_or_a_log_line_is_shown_literally(tmp_path: Path) -> None:
    # A slash cannot be in a file name: "[bold]x[" is a folder, "bold].log" the file in it.
    bold = tmp_path / "[bold]x[" / "bold].log"
    bold.parent.mkdir()
    bold.write_text("\n".join(campaign(2, 90.0, 20)) + "\n")
    crash = tmp_path / "[red]y[" / "red].log"
    crash.parent.mkdir()
    text = CRASH_LOG.read_text().replace("CUDA out of memory.", "[bold]CUDA[/bold] out of memory [/pytorch/x.cpp:1].")
    crash.write_text(text)
    plain_log = tmp_path / "z.log"
    shutil.copy(bold, plain_log)
    app = make([str(bold), str(crash), str(plain_log)])
    async with app.run_test(size=(120, 30)) as pilot:
        await settle(app, pilot)
        table = app.fleet_screen.replica_table
        lines = shown_lines(table)
        assert any("[bold]x[/bold].log" in line for line in lines), lines
        assert any("[red]y[/red].log" in line and "crashed" in line for line in lines), lines
        await pilot.press("down")
        await pilot.pause()
        detail = str(app.fleet_screen.query_one("#replica-detail", Static).render())
        assert "[bold]CUDA[/bold] out of memory [/pytorch/x.cpp:1]" in detail, detail
        assert "[red]y[/red].log" in detail
        await pilot.press("up", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplicaScreen), "the replica's dashboard")
        app.screen.refresh_now()  # type: ignore[attr-defined]
        await pilot.pause()
        assert "[bold]x[/bold].log" in app.screen.query_one(StatusHeader).render().plain


async def test_help_and_q_quits(tmp_path: Path) -> None:
    paths = write_fleet(tmp_path, 3)
    app = make(paths)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetHelpScreen), "the help")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, FleetScreen), "back")
        await pilot.press("q")
        await wait_for(pilot, lambda: app.return_code is not None, "the app quits", rounds=200)
    assert app.return_code == 0
    assert all(r.source.status.state.value == "ended" for r in app.fleet.replicas)


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_a_bad_replica_shows_as_its_own_state(tmp_path: Path, size: tuple[int, int]) -> None:
    paths = write_fleet(tmp_path, 3, slow=None)
    garbage = tmp_path / "garbage.log"
    garbage.write_bytes(b"\x00\xff[bold]junk[/bold]\n" * 50)
    app = make([*paths, str(tmp_path / "not-yet.log"), str(garbage)])
    async with app.run_test(size=size) as pilot:
        await settle(app, pilot, [SAMPLES + 2] * 3 + [0, 50])
        await wait_for(pilot, lambda: (app.refresh_fleet() or True) and app.fleet_screen.snapshot.count(
            ReplicaState.MISSING) == 1, "the missing log's state")
        states = {r.name: r.state_text for r in app.fleet_screen.replica_table.rows_shown}
        assert states["not-yet.log"] == "no file yet" and states["garbage.log"] == "no data yet"
        assert [states[f"host-{i:02d}/sglang/server.log"] for i in range(3)] == ["live"] * 3
        check_whole(app.fleet_screen.replica_table, size[0])


async def test_a_table_without_its_component_styles_draws_plain_then_styles_at_the_next_refresh(tmp_path: Path) -> None:
    """Textual can lack a widget's component styles for a moment (seen once in CI as a replica first
    turned "stopped": KeyError, the view dead). Every row state's style is asked with them gone:
    the rows are drawn plain, and styled once the styles are back."""
    from dataclasses import replace

    paths = write_fleet(tmp_path, 4)
    app = make(paths)
    async with app.run_test(size=(100, 30)) as pilot:
        await settle(app, pilot)
        table = app.fleet_screen.replica_table
        rows = list(app.fleet_screen.snapshot.replicas)
        for state in ReplicaState:
            changed = [replace(rows[0], state=state), *rows[1:]]
            table._component_styles.clear()  # as Textual leaves them for that moment
            table._rich_style_cache.clear()
            table.show(changed)  # no KeyError
            style_name = table.row_style(changed[0])
            app.stylesheet.apply(table)  # the styles are back
            table.show(changed)
            first = table.get_row(str(changed[0].key))[0]
            want = table.get_component_rich_style(style_name, partial=True) if style_name else None
            assert want is None or first.style == want, (state, first.style, want)
        await pilot.pause()


@pytest.mark.parametrize("ticks", [0, 1, 2])
async def test_quitting_as_the_fleet_or_a_replica_screen_opens_ends_cleanly(tmp_path: Path, ticks: int) -> None:
    # As tests/pilot/test_quit_as_a_screen_opens.py for the dashboard's screens: the app told to exit at
    # the moment a screen opens must end without an exception (its widgets pruned before its Mount).
    paths = write_fleet(tmp_path, 4)
    app = make(paths)
    async with app.run_test(size=(80, 24)) as pilot:
        for _ in range(ticks):
            await pilot.pause()
        app.exit()
    assert not app.is_running
    app = make(paths)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(app, pilot)
        await pilot.press("down", "enter")
        for _ in range(ticks):
            await pilot.pause()
        app.exit()
    assert not app.is_running
