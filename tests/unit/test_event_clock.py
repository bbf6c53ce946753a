"""One clock for the event log: events in the order they arrived, shown on the wall clock
(never running backwards), the log's own stamp beside it when the two clocks differ — whatever
the log's clock does (a simulated pace, a remote host's skew, a clock stepped back)."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest.live import Feeder, FeedInput
from specmon.model.session import SessionEvent
from specmon.ui.views import CLOCKS_DIFFER_S, as_log_scale, fold_events, from_log_scale
from tests.support.app_factory import StaticSource

T0 = 1_770_897_600.0

event = st.tuples(
    st.booleans(),  # from the log (True) or specmon's own (False)
    st.floats(-3.0, 30.0),  # wall seconds since the previous event (the wall clock may step back)
    st.one_of(st.just(0.0), st.floats(-86_400.0, 86_400.0)),  # the log host's clock skew
    st.floats(-0.5, 0.5),  # jitter of the log's stamp
)


@settings(max_examples=300, deadline=None)
@given(st.lists(event, min_size=1, max_size=40))
def test_events_read_in_order_on_one_clock(spec: list[tuple[bool, float, float, float]]) -> None:
    wall = T0
    events = []
    for i, (from_log, dt, skew, jitter) in enumerate(spec):
        wall += dt
        ts = as_log_scale(wall) + skew + jitter if from_log else None
        # Unique texts without a colon: nothing folds, so views and events pair up.
        events.append(SessionEvent(i + 1 if from_log else 0, ts, "info", f"event {i}", received=wall))
    views = fold_events(events)
    assert [v.text for v in views] == [e.text for e in events]  # the order they arrived
    shown = [v.at for v in views]
    assert all(a is not None for a in shown)
    assert all(a <= b for a, b in zip(shown, shown[1:], strict=False))  # type: ignore[operator]
    latest = None
    for e, v in zip(events, views, strict=True):
        assert e.received is not None and v.at is not None
        latest = e.received if latest is None else max(latest, e.received)
        assert v.at <= latest  # never a time specmon had not reached yet
        if e.timestamp is None:
            assert v.at >= e.received  # specmon's own: when it happened (or after the one before)
        else:
            # The log's stamp when it is a possible wall time, else the stamp is shown beside.
            assert bool(v.log_time) == (abs(from_log_scale(e.timestamp) - v.at) > CLOCKS_DIFFER_S)


def test_a_replay_keeps_the_log_clock() -> None:
    events = [SessionEvent(1, 1000.0, "info", "a"), SessionEvent(2, None, "info", "b"), SessionEvent(3, 1010.0, "info", "c")]
    views = fold_events(events)
    assert [v.time for v in views] == ["00:16:40", "00:16:40", "00:16:50"] and not any(v.log_time for v in views)


def test_the_feeder_stamps_log_events_with_the_wall_time_they_were_read_at() -> None:
    lines = ["[2026-02-12 10:00:00] Load weight begin. avail mem=70.00 GB",
             "[2026-02-12 10:00:05] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16"]
    feeder = Feeder([FeedInput(StaticSource([lines], stay_open=False))], clock=lambda: T0)
    asyncio.run(feeder.run())
    from_log = [e for e in feeder.session.events if e.line]
    assert from_log and all(e.received == T0 for e in from_log)
    views = fold_events(list(feeder.session.events))
    # Stamped two hours before it was read: a log read from its start keeps its history's times.
    assert views[-1].at == from_log_scale(as_log_scale(T0) - 7195) and views[-1].time == "10:00:05"
    assert not views[-1].log_time


def test_a_clock_ahead_of_ours_shows_when_it_was_read() -> None:
    ahead = as_log_scale(T0) + 3600  # the remote host's clock is an hour fast
    events = [SessionEvent(0, None, "info", "restart to 2 steps", received=T0),
              SessionEvent(5, ahead + 3, "info", "ready", received=T0 + 3)]
    views = fold_events(events)
    assert [v.at for v in views] == [T0, T0 + 3] and views[1].log_time  # in order; the log's stamp beside


@pytest.mark.parametrize("every", [1, 2, 3])
def test_the_event_log_follows_a_full_log_whatever_ids_the_new_events_get(every: int) -> None:
    """The shown events are rebuilt when the kept events change, also once the log is full (its
    length no longer changes) and a new last event gets the id a dropped one had: CPython lends a
    freed object's memory to the next one of its size (here, the last event of two rounds back)."""
    from specmon.model.session import EVENTS_KEPT, Session
    from specmon.ui.views import SnapshotBuilder

    session, builder = Session(), SnapshotBuilder()
    for round_ in range(12):
        for i in range(EVENTS_KEPT + 1):
            session.events.append(SessionEvent(i, None, "info", f"round {round_} event {i}"))
        if round_ % every == 0:
            shown = builder._event_views(session)
            assert shown[-1].text == f"round {round_} event {EVENTS_KEPT}", round_
