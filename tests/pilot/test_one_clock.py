"""One clock on the live dashboard: the header's time in a state runs on the wall clock when
specmon saw the state begin (not on a log clock running at another pace), the event log reads in
order with specmon's own events on the wall clock, and the run table follows a new run at once."""

from __future__ import annotations

from pathlib import Path

from specmon.ui.factories import make_app
from specmon.ui.messages import FlowLogged
from tests.support.app_factory import StaticSource, header_text, options, wait_for
from tests.support.logtext import T0, campaign, decode, ready, server_args

SIZE = (100, 30)
#: The wall clock: four days after the log's (2026-08-23 09:00) — a host whose clock is wrong.
WALL0 = T0.timestamp() + 4 * 86400


class Wall:
    def __init__(self) -> None:
        self.now = WALL0

    def __call__(self) -> float:
        return self.now


async def test_time_in_a_state_is_wall_time_when_seen_live(isolated_home: Path) -> None:
    wall = Wall()
    source = StaticSource([[server_args(2, 0.0)]])
    app = make_app(source, options=options(), clock=wall, user_themes=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines == 1, "the first line")
        await source.more.put([ready(5.0), decode(5.0, 90.0)])
        await wait_for(pilot, lambda: app.feeder.lines == 3, "ready")
        # The server's log clock runs ten times faster than ours (the demo's simulated server):
        # ten wall seconds later, a hundred log seconds.
        wall.now += 10.0
        await source.more.put([decode(16.0 + 10 * i, 90.0 + i % 3) for i in range(10)])
        await wait_for(pilot, lambda: app.feeder.lines == 13, "ten more lines")
        app._tick()
        text = header_text(app)
        assert "serving · 10s" in text, text  # the log would say 1m 45s


async def test_events_in_order_on_the_wall_clock(isolated_home: Path) -> None:
    wall = Wall()
    source = StaticSource([campaign(2, 94.0, 5)])
    app = make_app(source, options=options(), clock=wall, user_themes=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines == 7, "the lines")
        wall.now += 30.0
        app.post_message(FlowLogged("info", "restart to 3 steps on gpu-box: running", wall.now))
        await pilot.pause()
        await source.more.put([server_args(3, 200.0), ready(205.0)])
        await wait_for(pilot, lambda: app.feeder.lines == 9, "the restart's lines")
        app._tick()
        events = app.dashboard._events.events
        texts = [e.text for e in events]
        mine = texts.index("restart to 3 steps on gpu-box: running")
        assert any(t.startswith("ready") for t in texts[mine + 1:])  # arrival order kept
        shown = [e.at for e in events]
        assert all(a is not None for a in shown) and shown == sorted(shown)  # type: ignore[type-var]
        assert events[mine].at == wall.now and not events[mine].log_time  # specmon's own: the wall clock
        # The log's clock is four days behind ours: its events keep their own time, said as such.
        assert events[0].log_time == "" and events[0].time == "09:00:00"


async def test_the_table_follows_a_new_run_without_waiting(isolated_home: Path) -> None:
    source = StaticSource([campaign(2, 94.0, 30)])
    app = make_app(source, options=options(), clock=Wall(), user_themes=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines == 32, "the first run")
        await wait_for(pilot, lambda: not app.dashboard._analysis_running and app.builder.analysis is not None, "analysis")
        await source.more.put(campaign(3, 96.0, 8, start=100.0))
        await wait_for(pilot, lambda: app.feeder.lines == 42, "the second run")
        runs = len(app.feeder.session.runs)
        app._tick()
        # The fast tick itself started the analysis of the new run (not the next slow tick).
        assert app.dashboard._runs_sig[1] == runs and app.dashboard._analysis_sig == app.dashboard._signature()
        await wait_for(pilot, lambda: not app.dashboard._analysis_running, "the analysis")
        assert any("3 steps" in r.label for r in app.builder.table(app.feeder.session).rows)
