"""Pilot tests of what the dashboard shows: panels, table, states, events, connection."""

from __future__ import annotations

from pathlib import Path

from textual.color import Color

from specmon.sources.base import ConnectionState, SourceStatus
from specmon.ui.views import connection_text
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.run_table import RunTable
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import (
    CRASH,
    FIXED_NOW,
    SWEEP,
    VLLM_KIT,
    StaticSource,
    build_app,
    header_text,
    settle,
    settle_source,
    source_app,
    sweep_app,
    wait_for,
)
from tests.support.logtext import campaign, decode, ready, server_args

SIZE = (100, 30)


async def test_sweep_fills_every_panel_and_ends_with_two_steps_best(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.builder.table(app.feeder.session)
        best = [r for r in table.rows if r.best]
        assert [(r.steps, r.algorithm) for r in best] == [(2, "EAGLE3")]
        assert [r.steps for r in table.rows] == [0, 1, 2, 3, 5, 10]
        runs = app.query_one(RunTable)
        assert runs.row_count == 6
        # The six-run campaign's leader is not separated: ☆ (leads, undecided), never ★ beside
        # "no winner declared", and the line under the table says so with the same mark.
        assert runs.get_row_at(2)[0].plain.startswith("☆")
        assert table.verdict.startswith("☆ leads, undecided: EAGLE3 2 steps") and "no winner declared" in table.verdict
        assert not any("★" in runs.get_row_at(i)[0].plain for i in range(runs.row_count))
        tp, al, ar = app.dashboard._panels
        assert tp._view.current is not None and tp._view.mean is not None and tp._view.series
        assert al._view.ceiling == 11.0  # the 10-step run: steps + 1
        assert ar._view.current is not None
        assert app.dashboard._plot._view is not None and len(app.dashboard._plot._view.segments) == 6
        assert "replay finished" in header_text(app)
        assert "10 steps" in header_text(app)


async def test_a_flow_message_that_arrives_during_shutdown_is_harmless(isolated_home: Path) -> None:
    """A restart or sweep flow may post its last FlowChanged as the app exits (seen in CI:
    "No screens on stack" from refresh_bindings): with no screen left it is dropped."""
    from specmon.ui.messages import FlowChanged

    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
    assert not app.screen_stack
    app._flow_changed(FlowChanged())  # raised ScreenStackError before


async def test_timers_keep_refreshing_under_the_help_screen(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        await settle(app, pilot)  # refreshes while the modal is on top: no lookup failures
        assert app.dashboard._header.view is not None and app.dashboard._header.view.mode == "replay finished"


async def test_a_crash_turns_the_state_red(isolated_home: Path) -> None:
    app = build_app([SWEEP[0], CRASH])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        header = app.query_one(StatusHeader)
        assert header.has_class("-crashed")
        assert header.view.state == "crashed"
        assert "OOM" in header.view.state_text
        # The state is painted in the theme's error colour.
        error = Color.parse(app.theme_variables["error"]).rich_color
        line = header.render_line(1)
        state_segments = [s for s in line if "crashed" in s.text]
        assert state_segments and all(s.style.color == error for s in state_segments)
        events = app.query_one(EventLog).events
        assert any(e.level == "error" and "out of memory" in e.text.lower() for e in events)


async def test_unparsable_decode_lines_are_a_warning_in_the_event_log(isolated_home: Path) -> None:
    bad = decode(7, 90.0).replace("gen throughput (token/s): 90.00", "gen throughput (token/s): x")
    source = StaticSource([[server_args(0, 0), ready(5), decode(6, 90.0), bad]])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        events = app.query_one(EventLog).events
        assert any(e.level == "warning" and "could not be parsed" in e.text for e in events)
        assert "1 unparsed" in header_text(app)


async def test_live_pause_freezes_the_view_while_data_keeps_arriving(isolated_home: Path) -> None:
    lines = campaign(2, 94.0, 30)
    source = StaticSource([lines])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        await pilot.press("p")
        assert app.display_paused and "paused" in header_text(app)
        frozen = app.dashboard._panels[0]._view
        more = [decode(100 + i, 50.0, 2.0, 0.5) for i in range(10)]
        await source.more.put(more)
        await wait_for(pilot, lambda: app.feeder.lines == len(lines) + len(more), "more lines ingested")
        app._tick()
        assert app.dashboard._panels[0]._view is frozen
        await pilot.press("p")
        assert not app.display_paused
        assert app.dashboard._panels[0]._view.current == 50.0


async def test_connection_state_renders_from_the_source_status(isolated_home: Path) -> None:
    status = SourceStatus(state=ConnectionState.RECONNECTING, retry_at=FIXED_NOW + 3.2, attempts=2,
                          detail="connection reset")
    source = StaticSource([[server_args(2, 0)]], status=status)
    app = source_app(source)
    async with app.run_test(size=(140, 30)) as pilot:
        await settle_source(app, source, pilot)
        assert "reconnecting in 4 s (attempt 2): connection reset" in header_text(app)
        assert "gpu-host:/var/log/sglang.log" in header_text(app)


def test_connection_text_for_every_state() -> None:
    now = 1000.0
    assert connection_text(SourceStatus(ConnectionState.LIVE, latency_ms=23.4), now) == ("live · 23 ms", "ok")
    live = SourceStatus(ConnectionState.LIVE, latency_ms=12.4, bytes=1_234_567, last_line_at=now - 4)
    assert connection_text(live, now)[0] == "live · 12 ms · 1.2 MB · last line 4s ago"
    assert connection_text(SourceStatus(ConnectionState.LIVE, last_line_at=now - 95), now)[0] == "live · quiet 1m 35s"
    retrying = SourceStatus(ConnectionState.RECONNECTING, retry_at=now + 3.5, attempts=2,
                            detail="connection lost: reset; retrying in 4.0s (attempt 2)")
    assert connection_text(retrying, now)[0] == "reconnecting in 4 s (attempt 2): connection lost: reset"
    assert connection_text(SourceStatus(ConnectionState.RECONNECTING, retry_at=now + 4), now) == (
        "reconnecting in 4 s", "busy")
    assert connection_text(SourceStatus(ConnectionState.CONNECTING, detail="file not found: /x"), now) == (
        "connecting: file not found: /x", "busy")
    assert connection_text(SourceStatus(ConnectionState.FAILED, detail="host key mismatch"), now) == (
        "failed: host key mismatch", "error")
    assert connection_text(SourceStatus(ConnectionState.ENDED), now) == ("ended", "idle")


async def test_a_failing_source_becomes_visible_state(isolated_home: Path) -> None:
    source = StaticSource([[server_args(2, 0)]], fail_with=RuntimeError("pipe burst"))
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.done, "feeder stopped")
        await wait_for(pilot, lambda: any("pipe burst" in e.text for e in app.feeder.session.events),
                       "error in the event log")
        app._tick()
        events = app.query_one(EventLog).events
        assert any(e.level == "error" and "reading stopped" in e.text for e in events)
        assert app.is_running


async def test_looped_replay_starts_over_with_a_fresh_view(isolated_home: Path) -> None:
    app = build_app(SWEEP[:1], loop=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.loops >= 2, "two loops")
        app.refresh_now()
        table = app.builder.table(app.feeder.session)
        assert len(table.rows) <= 1  # one log, never pooled with itself
        assert "loop" in app.dashboard._mode()


async def test_per_position_bars_for_an_engine_that_logs_them(isolated_home: Path) -> None:
    app = build_app([VLLM_KIT[1]], baseline_files=[VLLM_KIT[0]])  # the n-gram run ran first: time order
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        view = app.dashboard._bars.view
        assert view is not None and view.values is not None and len(view.values) == 3
        assert view.values[0] > view.values[1] > view.values[2]  # acceptance decays with depth
        assert not app.dashboard._bars.has_class("-empty")
        assert app.dashboard._panels[1]._view.ceiling == 4.0  # 3 speculative tokens + the bonus token
        assert "vllm" in header_text(app)


async def test_sglang_says_it_does_not_log_per_position(isolated_home: Path) -> None:
    app = build_app(SWEEP[:2])
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        assert app.dashboard._bars.view.values is None
        assert "does not log" in app.dashboard._bars.view.note


async def test_run_table_sorts_by_a_column(isolated_home: Path) -> None:
    app = sweep_app()
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app._table

        def steps_column() -> list[str]:
            column = list(table.columns).index("steps")
            return [table.get_row_at(i)[column].plain for i in range(table.row_count)]

        assert steps_column() == ["0", "1", "2", "3", "5", "10"]  # step order, as summarize prints
        table.sort_by("tps", reverse=True)
        assert steps_column()[0] == "2" and steps_column()[-1] == "10"  # fastest first
        # Clicking a header sorts by it; clicking it again reverses.
        column = list(table.columns).index("n")
        x = sum(c.get_render_width(table) for c in list(table.columns.values())[:column]) + 2
        await pilot.click(RunTable, offset=(x, 0))
        assert table.sort_column == "n"
        first = steps_column()
        await pilot.click(RunTable, offset=(x, 0))
        assert steps_column() == list(reversed(first))  # every row has a different n


async def test_the_run_table_without_its_component_styles_draws_plain_then_styles_them() -> None:
    """Textual can lack a widget's component styles for a moment (its issues 5646, 6528): the run
    table's rebuild then draws its rows plain instead of ending the dashboard, and the next
    rebuild styles them (the best row's mark)."""
    app = build_app(SWEEP)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        table = app.query_one(RunTable)
        table._component_styles.clear()
        table._rich_style_cache.clear()
        table._rebuild()  # no KeyError
        assert table.row_count > 0
        app.stylesheet.apply(table)
        table._rebuild()
        best = table.get_component_rich_style("run-table--best", partial=True)
        styles = [table.get_row_at(i)[0].style for i in range(table.row_count)]
        assert best in styles, styles
