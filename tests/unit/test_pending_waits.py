"""Only a confirmed end of serving ends a sweep's launch, a restart's start or a replica (issue 43,
item 6): a pending error (an exception, an out-of-memory error) waits a bounded time
(``specmon.model.pending.PENDING_WAIT_S``) for serving to resume; a sample or a request answered in
that time makes it an error the server caught, and nothing ends."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.pending import PENDING_WAIT_S, PendingWatch
from specmon.model.session import ServerState, Session
from specmon.records import Decode, Event, Lifecycle, Serving
from tests.support.sweepsim import SimWorld


def _error(w: SimWorld, detail: str) -> None:
    w.line += 1
    w.session.ingest(Lifecycle(w.line, w.log_time, None, event=Event.CRASH, detail=detail))


def _sweep(w: SimWorld, sleep: object) -> Sweep:
    return Sweep(SweepPlan((0, 2, 5), max_minutes=None), session=w.session, restart=w.restart,  # type: ignore[arg-type]
                 clock=w.clock, sleep=sleep)  # type: ignore[arg-type]


@pytest.mark.parametrize("silence_s", [0.0, 5.0, PENDING_WAIT_S - 6.0])
def test_a_caught_error_does_not_end_a_sweeps_launch(silence_s: float) -> None:
    """A per-request error in the middle of a launch, then samples again after ``silence_s``."""
    w = SimWorld(2)
    original = w.sleep
    state: dict[str, object] = {"at": None, "sampler": None}

    async def sleep(seconds: float) -> None:
        await original(seconds)
        run = w.session.current
        if state["at"] is None and w.restarts and w.restarts[-1] == 2 and run is not None and len(run.throughput) > 60:
            _error(w, "ValueError: The input (40000 tokens) is longer than the model's context length")
            state["at"], state["sampler"], w.sampler = w.now, w.sampler, None
        elif state["sampler"] is not None and w.now - float(state["at"]) >= silence_s:  # type: ignore[arg-type]
            w.sampler, state["sampler"] = state["sampler"], None  # type: ignore[assignment]

    result = asyncio.run(_sweep(w, sleep).run())
    by = {c.steps: c for c in result.cells}
    assert state["at"] is not None
    assert by[2].status == "done", by[2].text
    assert w.restarts == [0, 2, 5]  # no restart for it
    assert any(c == "ValueError: The input (40000 tokens) is longer than the model's context length"
               for r in w.session.runs for _line, c in r.errors_survived)


def test_a_pending_error_with_no_serving_after_it_ends_the_launch_after_the_wait() -> None:
    w = SimWorld(2)
    original = w.sleep
    state: dict[str, float | None] = {"at": None}

    async def sleep(seconds: float) -> None:
        await original(seconds)
        run = w.session.current
        if state["at"] is None and w.restarts and w.restarts[-1] == 2 and run is not None and len(run.throughput) > 60:
            _error(w, "torch.OutOfMemoryError: CUDA out of memory")
            state["at"], w.sampler = w.now, None

    events: list[tuple[float, str]] = []
    sweep = Sweep(SweepPlan((0, 2, 5), max_minutes=None), session=w.session, restart=w.restart,  # type: ignore[arg-type]
                  clock=w.clock, sleep=sleep, on_event=lambda e: events.append((w.now, e.kind)))
    result = asyncio.run(sweep.run())
    by = {c.steps: c for c in result.cells}
    assert by[2].status == "failed" and by[2].reason == "crash" and "out of memory" in by[2].text
    at = state["at"]
    assert at is not None
    failed_at = next(t for t, kind in events if kind == "failed")
    # Not at once (it may have been caught), and not later than the wait and a poll or two.
    assert PENDING_WAIT_S <= failed_at - at <= PENDING_WAIT_S + 2 * sweep.plan.poll_s
    assert by[5].status == "done"


@settings(max_examples=60, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["sample", "error", "certain", "served", "tick"]),
                                st.floats(0, 20)), max_size=30))
def test_the_watch_ends_only_on_a_certain_crash_or_a_pending_one_that_waited(steps: list[tuple[str, float]]) -> None:
    """Any order of samples, errors, requests answered, deaths and time: the watch says ended
    exactly when the run's crash is certain, or pending for PENDING_WAIT_S since it was first seen."""
    session = Session()
    now = 0.0
    watch = PendingWatch()
    pending_since: float | None = None
    for line, (what, dt) in enumerate(steps, 1):
        now += dt
        if what == "sample":
            session.ingest(Decode(line, None, "TP0", running_req=1, gen_throughput=90.0))
        elif what == "error":
            session.ingest(Lifecycle(line, None, None, event=Event.CRASH, detail="RuntimeError: boom"))
        elif what == "certain":
            session.ingest(Lifecycle(line, None, None, event=Event.CRASH, detail="Aborted (core dumped)"))
        elif what == "served":
            session.ingest(Serving(line, None, None, detail='- "POST /generate HTTP/1.1" 200 OK'))
        run = session.current
        crashed = run is not None and run.state is ServerState.CRASHED
        pending = crashed and run is not None and run.crash_pending
        if not pending:
            pending_since = None
        elif pending_since is None:
            pending_since = now
        want = crashed and (not pending or now - pending_since >= PENDING_WAIT_S)  # type: ignore[operator]
        assert watch.ended(run, now) == want


# -- a restart's start-up ------------------------------------------------------------------------------

_LOADING = ["[2026-02-02 02:40:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE3', "
            "speculative_num_steps=2, speculative_eagle_topk=1, speculative_num_draft_tokens=3)",
            "[2026-02-02 02:40:05 TP0] Load weight begin. avail mem=139.00 GB"]
_TRACEBACK = ["Traceback (most recent call last):", '  File "/sgl/warmup.py", line 3, in warm',
              "RuntimeError: the warm-up request failed"]


def test_a_start_ups_pending_error_is_its_crash_only_after_the_wait() -> None:
    from specmon.control.startup import StartupTracker

    now = [0.0]
    t = StartupTracker(clock=lambda: now[0])
    t.feed(_LOADING + _TRACEBACK)
    assert t.crash is None and t.pending_error == "RuntimeError: the warm-up request failed"
    crash_at: dict[float, str | None] = {}
    for now[0] in (PENDING_WAIT_S - 1, PENDING_WAIT_S):
        crash_at[now[0]] = t.crash
    assert crash_at == {PENDING_WAIT_S - 1: None, PENDING_WAIT_S: "RuntimeError: the warm-up request failed"}
    # Without a clock it waits for the process's exit (the caller's) or a word of a death.
    pure = StartupTracker()
    pure.feed(_LOADING + _TRACEBACK)
    assert pure.crash is None and pure.pending_error is not None
    pure.feed(["[2026-02-02 02:40:09] Received sigquit from a child process. It usually means the child failed."])
    assert pure.crash == "RuntimeError: the warm-up request failed"  # the first fatal line names it


def test_a_start_ups_caught_error_is_no_crash_however_long_after() -> None:
    from specmon.control.startup import StartupTracker

    now = [0.0]
    t = StartupTracker(clock=lambda: now[0])
    t.feed(_LOADING + _TRACEBACK)
    assert t.crash is None
    now[0] = 5.0
    t.feed(["[2026-02-02 02:40:10] The server is fired up and ready to roll!",
            '[2026-02-02 02:40:11] INFO:     127.0.0.1:5 - "POST /generate HTTP/1.1" 200 OK'])
    now[0] = 10 * PENDING_WAIT_S
    assert t.crash is None and t.pending_error is None
    assert t.session.current is not None and t.session.current.errors_survived


# -- the fleet view ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("fatal", "age", "refused", "want"), [
    ("RuntimeError: boom", 5.0, 0, "error (serving stopped?)"),
    ("RuntimeError: boom", PENDING_WAIT_S + 1, 0, "crashed"),  # the wait is over, nothing served
    ("RuntimeError: boom", 5.0, 2, "crashed"),  # its /metrics is gone: the process with it
    ("Aborted (core dumped)", 1.0, 0, "crashed"),  # certain at once
])
def test_a_replicas_pending_error_is_a_warning_until_the_wait_ends(fatal: str, age: float, refused: int,
                                                                   want: str) -> None:
    from specmon.model.fleet import FleetModel, ReplicaInput, ReplicaState

    session = Session()
    session.begin_source("r0.log")
    for i in range(8):
        session.ingest(Decode(i + 1, float(i), "TP0", running_req=1, gen_throughput=90.0))
    session.ingest(Lifecycle(9, 8.0, None, event=Event.CRASH, detail=fatal))
    now = 1000.0
    inp = ReplicaInput("r0", "r0.log", session, lines=9, last_sample_at=now - age, metrics_refused=refused)
    replica = FleetModel().snapshot([inp], now).replicas[0]
    assert replica.state_text == want
    assert replica.state is (ReplicaState.QUIET if want.startswith("error") else ReplicaState.CRASHED)
    assert fatal in replica.detail
