"""Restart the server with another step count, and follow the restart to ready.

:class:`RestartController` is the control side of the dashboard's ``r`` key
(and of ``specmon demo``'s first start). It is built from a launch profile (or
a profile made for an adopted server), a command runner (local or SSH), a host
label, an ETA store and a clock, and it does exactly three things:

1. :meth:`~RestartController.plan_for` builds the :class:`CommandPlan` for a
   step count (validated; :class:`~specmon.control.launch.LaunchError` says why
   not);
2. :meth:`~RestartController.describe` gives the text the user sees before
   anything runs, and marks that plan as shown;
3. :meth:`~RestartController.run` runs that very plan — only the last plan it
   built, only once it was shown, only once — and follows the new log through
   stopping → starting → loading weights → capturing CUDA graphs → ready,
   with elapsed time and an ETA learned from earlier restarts on the host
   (:mod:`specmon.control.eta`). A crash (traceback, OOM, the process gone) or a
   timeout ends it at once, with the last relevant log lines.

No other command is ever run: the controller has no "run this string" call,
and every string it sends is a field of a plan the user saw.

The new log is followed twice: the controller reads it into a private session
(:class:`StartupTracker`) for the lifecycle and the raw lines, and it tells the
dashboard to follow it too (``on_log_switch``), usually through a
:class:`SwitchingSource`, so the run table gains the new run. The log path can
change with the step count (``sglang_{steps}step.log``); a managed start
moves the old one aside (never truncates it), so the new file is read from its start.

Nothing here imports Textual.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from enum import Enum

import asyncssh

from specmon.control.adopt import AdoptError, ServerProcess, probe_servers, profile_from_server
from specmon.control.eta import TIMED_PHASES, EtaEstimate, EtaStore, estimate
from specmon.control.guard import read_only_message, read_only_reason
from specmon.control.launch import (
    CommandPlan,
    LaunchProfile,
    PlanStep,
    ProcessIdentity,
    build_plan,
    expand,
    parse_result_line,
)
from specmon.control.lease import LeaseHeld, ServerLease, lease_for
from specmon.control.runner import (
    MARKER_GRACE_S,
    CommandRunner,
    Held,
    ReadyOutcome,
    Result,
    SSHRunner,
    StepEvent,
    execute,
    ssh_hold,
    wait_ready,
)
from specmon.control.servers import (
    ServerRecord,
    check_record,
    check_with_cause,
    exit_cause,
    forget,
    load_record,
    record_exited,
    record_started,
)
from specmon.model.session import RunConfig, ServerState, Session
from specmon.parsing import LineParser
from specmon.parsing.lifecycle import usage_error
from specmon.records import Engine, Event, Lifecycle
from specmon.redact import redact_text
from specmon.sources.base import LineSource, SourceStatus, stop_reading
from specmon.wording import counted

__all__ = [
    "ConnectingRunner",
    "FAILED_PHASES",
    "RUNNING_PHASES",
    "Phase",
    "RestartController",
    "RestartError",
    "RestartProgress",
    "SourceFactory",
    "StartupTracker",
    "SwitchingSource",
    "controller_for_running_server",
    "plan_label",
]

#: ``(path, from_start) -> LineSource``: a local or SSH tail of ``path``, read
#: from its start (a new or truncated log) or from its current end.
SourceFactory = Callable[[str, bool], LineSource]
#: Told which log to follow now; may be a coroutine function.
LogSwitch = Callable[[str, bool], "None | Awaitable[None]"]

#: Raw log lines kept for display (a crash shows them).
LINES_KEPT = 20
#: Seconds between two looks at the new log while waiting for the readiness check.
WATCH_TICK_S = 0.2
#: Looks at the log after a crash's first line before calling it (the traceback's end follows).
CRASH_GRACE_TICKS = 2


class RestartError(Exception):
    """A restart cannot run (busy, a plan not built or not shown here); the message says why."""


class Phase(str, Enum):
    """Where a restart is."""

    IDLE = "idle"
    STOPPING = "stopping"
    STARTING = "starting"
    LOADING = "loading"
    CAPTURING = "capturing"
    READY = "ready"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    FAILED = "failed"

    @property
    def text(self) -> str:
        """How the header and the panel name it."""
        return _PHASE_TEXT[self]


_PHASE_TEXT = {
    Phase.IDLE: "idle",
    Phase.STOPPING: "stopping",
    Phase.STARTING: "starting",
    Phase.LOADING: "loading weights",
    Phase.CAPTURING: "capturing CUDA graphs",
    Phase.READY: "ready",
    Phase.CRASHED: "crashed during start-up",
    Phase.TIMEOUT: "timed out",
    Phase.FAILED: "failed",
}
#: Phases of a restart in progress, in order.
RUNNING_PHASES: tuple[Phase, ...] = (Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING)
#: How a restart can end badly.
FAILED_PHASES = frozenset({Phase.CRASHED, Phase.TIMEOUT, Phase.FAILED})


def plan_label(steps: int, draft_tokens: int | None = None) -> str:
    """``2 steps, 3 draft tokens``, ``1 step``, ``no speculation``."""
    if steps == 0:
        return "no speculation"
    text = counted(steps, "step")
    if draft_tokens is not None:
        text += f", {counted(draft_tokens, 'draft token')}"
    return text


@dataclass(frozen=True, slots=True)
class RestartProgress:
    """One immutable view of a restart, for the header, the panel and the event log.

    Attributes:
        phase: Where it is.
        steps: The step count being started.
        label: ``2 steps, 3 draft tokens``.
        host: Where (the host label).
        log: The new log.
        elapsed_s: Seconds since the restart began.
        phase_elapsed_s: Seconds in the current phase (0 once finished).
        done: Finished phases and their seconds, in order.
        load_progress: Weight shards ``(done, total)``, once the log shows them.
        graph_progress: CUDA-graph batches ``(done, total)``, where the log shows them.
        eta: What is left, when it can be told (None once finished).
        message: The latest step result, warning or failure reason.
        last_lines: The last relevant raw lines of the new log.
        previous_steps: The step count the server ran before (``go back`` target).
        config: The configuration the new log announced, when read.
    """

    phase: Phase
    steps: int
    label: str
    host: str
    log: str | None
    elapsed_s: float
    phase_elapsed_s: float
    done: tuple[tuple[Phase, float], ...] = ()
    load_progress: tuple[int, int] | None = None
    graph_progress: tuple[int, int] | None = None
    eta: EtaEstimate | None = None
    message: str = ""
    last_lines: tuple[str, ...] = ()
    previous_steps: int | None = None
    config: str | None = None

    @property
    def running(self) -> bool:
        """Whether the restart is still going."""
        return self.phase in RUNNING_PHASES

    @property
    def failed(self) -> bool:
        """Whether it ended badly (crash, timeout, a command failed)."""
        return self.phase in FAILED_PHASES

    @property
    def fraction(self) -> float | None:
        """How far the current phase is, 0..1, where the log tells (shards, graph batches)."""
        prog = None
        if self.phase is Phase.LOADING:
            prog = self.load_progress
        elif self.phase is Phase.CAPTURING:
            prog = self.graph_progress
        elif self.phase is Phase.READY:
            return 1.0
        if prog is None or prog[1] <= 0:
            return None
        return max(0.0, min(1.0, prog[0] / prog[1]))


# --------------------------------------------------------------------------- tracking the new log


class StartupTracker:
    """Reads the new log into a private session: lifecycle, configuration, crash, raw lines.

    Pure (no I/O, no clock): feed it batches of lines.

    Args:
        engine: The engine, when the profile says it (settles ambiguous markers).
        keep: Raw lines kept for display.
    """

    def __init__(self, *, engine: Engine = Engine.UNKNOWN, keep: int = LINES_KEPT) -> None:
        self.session = Session()
        self.session.begin_source("restart")
        self._parser = LineParser(engine=engine)
        self._lineno = 1
        self._lines: deque[str] = deque(maxlen=keep)
        self._last_was_progress = False
        #: The furthest start-up phase the log has shown (LOADING, CAPTURING, READY) or None.
        self.reached: Phase | None = None
        self.load_progress: tuple[int, int] | None = None
        self.graph_progress: tuple[int, int] | None = None
        self.config: RunConfig | None = None
        self._crash_details: list[tuple[Event, str]] = []

    @property
    def crash(self) -> str | None:
        """Why the server died, once the log shows a crash or an out-of-memory error.

        The most telling line wins: an out-of-memory message, else the first
        crash line that is not just a traceback header.
        """
        details = self._crash_details
        if not details:
            return None
        for event, text in details:
            if event is Event.OOM:
                return text
        for _, text in details:
            if "Traceback" not in text:
                return text
        return details[0][1]

    @property
    def last_lines(self) -> tuple[str, ...]:
        """The last raw lines (progress-bar lines folded to the latest one)."""
        return tuple(self._lines)

    @property
    def lines_seen(self) -> int:
        """How many lines of the new log have been fed."""
        return self._lineno - 1

    def feed(self, lines: list[str] | tuple[str, ...]) -> None:
        """Take a batch of complete lines from the new log."""
        for text in lines:
            rec = self._parser.parse(text, self._lineno)
            self._keep(text, rec)
            if rec is not None:
                self.session.ingest(rec)
                self._note(rec)
            elif self.reached is None and (refused := usage_error(text)) is not None:
                # Before any start-up phase, a command-line parser's error is why the server is gone.
                self._crash_details.append((Event.CRASH, refused))
            self._lineno += 1
        self.session.lines += len(lines)

    def catch_up(self, first: int, lines: tuple[str, ...]) -> None:
        """Feed the lines of a log excerpt that starts at line ``first`` which were not fed yet."""
        skip = self.lines_seen + 1 - first
        if skip < 0:
            # The tail fell behind by more than the excerpt: the lines between are lost to the
            # tracker, but the last words are what name the cause.
            self._lineno, skip = first, 0
        if skip < len(lines):
            self.feed(lines[skip:])

    def _keep(self, text: str, rec: object) -> None:
        if not text.strip():
            return
        progress = isinstance(rec, Lifecycle) and rec.event in (Event.LOAD_PROGRESS, Event.GRAPH_PROGRESS)
        if progress and self._last_was_progress and self._lines:
            # A tqdm bar prints one line per shard: only the latest says anything.
            self._lines[-1] = text
        else:
            self._lines.append(text)
        self._last_was_progress = progress

    def _note(self, rec: object) -> None:
        run = self.session.current
        if isinstance(rec, Lifecycle):
            ev = rec.event
            if ev in (Event.LOAD_BEGIN, Event.LOAD_PROGRESS, Event.LOAD_END, Event.KV_CACHE):
                self._reach(Phase.LOADING)
                if ev is Event.LOAD_PROGRESS and rec.progress is not None:
                    self.load_progress = rec.progress
            elif ev in (Event.GRAPH_BEGIN, Event.GRAPH_PROGRESS, Event.GRAPH_END):
                self._reach(Phase.CAPTURING)
                if ev is Event.GRAPH_PROGRESS and rec.progress is not None:
                    self.graph_progress = rec.progress
            elif ev is Event.READY:
                self._reach(Phase.READY)
            elif ev in (Event.CRASH, Event.OOM) and run is not None and run.state is ServerState.CRASHED:
                # A traceback during a requested stop is not a crash (the session knows).
                self._crash_details.append((ev, rec.detail or ev.value))
        elif run is not None and run.config is not None:
            self.config = run.config

    def _reach(self, phase: Phase) -> None:
        order = (None, Phase.LOADING, Phase.CAPTURING, Phase.READY)
        if order.index(phase) > order.index(self.reached):
            self.reached = phase


# --------------------------------------------------------------------------- following the log in the app


class SwitchingSource:
    """A line source that follows one log, and another one when a restart says so.

    The dashboard reads one source; a restart may move the server's output to a
    new file (``sim_{steps}step.log``) or truncate the old one. :meth:`switch`
    closes the current tail and opens the next through the injected factory.
    Lines the old tail had already read are still delivered first; then
    ``on_begin(name)`` is called — the dashboard starts a new input in its
    session there — and the new log's lines follow.

    Args:
        first: The source followed at first.
        factory: Builds the next one: ``(path, from_start) -> LineSource``.
        on_begin: Called with the new source's name before its first line.
    """

    def __init__(self, first: LineSource, factory: SourceFactory,
                 on_begin: Callable[[str], None] | None = None) -> None:
        self._inner = first
        self._factory = factory
        self.on_begin = on_begin
        self._changed = asyncio.Event()
        self._closed = False
        self.switches = 0

    @property
    def name(self) -> str:
        """The current log's name (the header shows it)."""
        return self._inner.name

    @property
    def status(self) -> SourceStatus:
        """The current tail's status."""
        return self._inner.status

    @property
    def inner(self) -> LineSource:
        """The source followed now."""
        return self._inner

    async def batches(self) -> AsyncIterator[list[str]]:
        """Lines of the current log; after a switch, of the next (until :meth:`close`)."""
        while not self._closed:
            inner = self._inner
            gen = inner.batches()
            try:
                async for batch in gen:
                    yield batch
            finally:
                aclose = getattr(gen, "aclose", None)
                if aclose is not None:
                    await aclose()
            if self._is_closed():
                return
            if inner is self._inner:
                # The tail ended by itself (a failed source): wait for a switch or the end.
                self._changed.clear()
                await self._changed.wait()
                if self._is_closed():
                    return
            if self.on_begin is not None:
                self.on_begin(self._inner.name)

    def _is_closed(self) -> bool:
        # A method, not the attribute: close() runs while batches() awaits, which a
        # narrowed ``self._closed`` (False since the loop test) would hide from mypy.
        return self._closed

    async def switch(self, path: str, from_start: bool) -> None:
        """Follow ``path`` from now on (from its start, or from its current end)."""
        if self._closed:
            return
        old = self._inner
        self._inner = self._factory(path, from_start)
        self.switches += 1
        self._changed.set()
        await old.close()

    async def close(self) -> None:
        """Stop following."""
        self._closed = True
        self._changed.set()
        await self._inner.close()


# --------------------------------------------------------------------------- the controller


class _Crashed(Exception):
    """Raised inside the readiness wait when the log shows a crash."""


ProgressCallback = Callable[[RestartProgress], None]


@dataclass
class _Attempt:
    plan: CommandPlan
    started: float
    phase: Phase = Phase.STOPPING
    phase_started: float = 0.0
    done: list[tuple[Phase, float]] = field(default_factory=list)
    message: str = ""
    finished_at: float | None = None
    previous_steps: int | None = None


class RestartController:
    """Builds, shows and runs restarts of one server; follows each to ready.

    Args:
        profile: A validated launch profile (or one made for an adopted server).
        runner: Where commands run (``LocalRunner``, ``SSHRunner``).
        host: The host label shown with every plan and used for the ETA history.
        eta_store: Earlier restarts' durations (None: an in-memory-only store is
            not kept; pass one).
        make_source: ``(path, from_start) -> LineSource`` for following the new log.
        on_log_switch: Told to follow the new log (the dashboard's source);
            may be a coroutine function.
        adopted: A running server found by :mod:`specmon.control.adopt`: the
            first restart stops it by PID and start time, later ones by the pidfile.
        current_steps: The step count the server runs now, when known.
        clock: Monotonic seconds (injected in tests).
        sleep: Awaitable sleep (injected in tests).
        ready_poll_s: Seconds between readiness checks (None: the plan's own).
        record_servers: Record every server a managed start leaves running in the user data
            directory (:mod:`specmon.control.servers`), so the next session adopts it. Real
            servers only (``connect``); the demo stops its own. Real servers are also leased
            (:mod:`specmon.control.lease`): the first restart or stop takes the server's lease,
            and this controller keeps it until :meth:`close` (or the process ends): while it
            does, no other specmon restarts or stops that server, and this one refuses while
            another holds it.
        lease: Lease the server (default: as ``record_servers``; an adopted real server too).
        lease_action: What the lease says this controller does, for the other instances.
    """

    def __init__(
        self,
        profile: LaunchProfile,
        runner: CommandRunner,
        *,
        host: str = "localhost",
        eta_store: EtaStore | None = None,
        make_source: SourceFactory | None = None,
        on_log_switch: LogSwitch | None = None,
        adopted: ProcessIdentity | None = None,
        current_steps: int | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[object]] = asyncio.sleep,
        ready_poll_s: float | None = None,
        record_servers: bool = False,
        lease: bool | None = None,
        lease_action: str = "dashboard restarts",
    ) -> None:
        if not isinstance(profile, LaunchProfile):
            raise TypeError("RestartController needs a validated LaunchProfile")
        self.profile = profile
        self._secrets = profile.secrets()
        self.runner = runner
        self.host = host
        self.eta_store = eta_store
        self.make_source = make_source
        self.on_log_switch = on_log_switch
        self.adopted = adopted
        self.current_steps = current_steps
        self.previous_steps: int | None = None
        self.listeners: list[ProgressCallback] = []
        self._clock = clock
        self._sleep = sleep
        self._poll = ready_poll_s
        self._offered: CommandPlan | None = None
        self._shown = False
        self._attempt: _Attempt | None = None
        self._tracker: StartupTracker | None = None
        self._tail: LineSource | None = None
        self._tail_task: asyncio.Task[None] | None = None
        self._busy = False
        #: The last plan run (or being run): its stop command stops the server at exit.
        self.last_plan: CommandPlan | None = None
        #: Whether the last run was cancelled half-way (its start may still land).
        self.interrupted = False
        self.record_servers = record_servers
        #: The server the last managed start launched (PID, start time), once it reported it.
        self.started: ProcessIdentity | None = None
        #: One controller per server: taken at the first action, kept until close (real servers).
        leased = record_servers if lease is None else lease
        self.lease: ServerLease | None = lease_for(profile, runner, host, lease_action) if leased else None

    # -- state for the UI ----------------------------------------------------------------

    @property
    def busy(self) -> bool:
        """Whether a restart is running now (``r`` is greyed out)."""
        return self._busy

    @property
    def steps_range(self) -> tuple[int, int]:
        """The step counts the profile allows, inclusive."""
        return self.profile.steps_min, self.profile.steps_max

    def draft_rule(self) -> str:
        """How draft tokens follow from steps, for the dialog."""
        return f"draft tokens = {self.profile.draft_tokens}"

    def note_running_steps(self, steps: int | None) -> None:
        """Tell the controller what the server runs now (read from its log), when it does not know."""
        if self.current_steps is None and not self._busy and isinstance(steps, int):
            self.current_steps = steps

    @property
    def progress(self) -> RestartProgress | None:
        """The latest restart, as of now (None before the first)."""
        a = self._attempt
        if a is None:
            return None
        return self._view(a)

    # -- plans ----------------------------------------------------------------------------

    def plan_for(self, steps: int, dims: dict[str, int | str] | None = None) -> CommandPlan:
        """Build the plan that restarts with ``steps`` (the next one :meth:`run` accepts).

        ``dims`` sets a sweep's other dimensions (``topk``, ...; see :mod:`specmon.control.dims`).

        Raises:
            LaunchError: ``steps`` is not allowed; the message is for the user.
            RestartError: a restart is running.
        """
        if self._busy:
            raise RestartError("a restart is already in progress")
        plan = build_plan(self.profile, steps, host=self.host, adopted=self.adopted, dims=dims)
        self._offered = plan
        self._shown = False
        return plan

    def go_back_plan(self) -> CommandPlan:
        """The plan back to the configuration before the last restart (shown and confirmed like any).

        Raises:
            RestartError: nothing to go back to, or a restart is running.
            LaunchError: the profile cannot start that step count.
        """
        if self.previous_steps is None:
            raise RestartError("no earlier configuration to go back to")
        return self.plan_for(self.previous_steps)

    def describe(self, plan: CommandPlan, *, exact: bool = False) -> str:
        """The text to show before ``plan`` runs; marks it as shown.

        Raises:
            RestartError: ``plan`` is not the last plan built here.
        """
        if plan is not self._offered:
            raise RestartError("this plan was not built by this controller (or a newer one was)")
        self._shown = True
        return plan.describe(exact=exact)

    def withdraw(self, plan: CommandPlan | None = None) -> None:
        """Forget the offered plan (the user cancelled): it can no longer run."""
        if plan is None or plan is self._offered:
            self._offered = None
            self._shown = False

    # -- running -----------------------------------------------------------------------

    async def run(self, plan: CommandPlan, on_progress: ProgressCallback | None = None) -> RestartProgress:
        """Run ``plan`` — the last one built here, after it was shown — and follow it to ready.

        Expected failures (a command failing, a crash, a timeout, the connection
        lost) end in a progress view saying so; they are not raised.

        Args:
            plan: The plan returned by :meth:`plan_for` / :meth:`go_back_plan`.
            on_progress: Called with every new view (phase changes, progress).

        Returns:
            The final view: ``READY``, ``CRASHED``, ``TIMEOUT`` or ``FAILED``.

        Raises:
            RestartError: read-only mode, busy, or ``plan`` was not built here, not shown, or already run.
        """
        if read_only_reason() is not None:
            self.withdraw(plan)
            raise RestartError(read_only_message("restart the server"))
        if self._busy:
            raise RestartError("a restart is already in progress")
        if not isinstance(plan, CommandPlan) or plan is not self._offered:
            raise RestartError("refusing to run a plan this controller did not build")
        if not self._shown:
            raise RestartError("refusing to run a plan that was not shown first")
        self._offered = None
        self._shown = False
        self._busy = True
        before, self.last_plan = self.last_plan, plan
        self.interrupted = False
        await self._stop_tail()
        now = self._clock()
        a = self._attempt = _Attempt(plan=plan, started=now, phase_started=now,
                                     previous_steps=self.current_steps)
        self._tracker = None
        callbacks = [*self.listeners, *([on_progress] if on_progress else [])]

        def emit() -> None:
            view = self._view(a)
            for cb in callbacks:
                cb(view)

        try:
            await self._take_lease()
            await self._run(a, emit, before)
        except LeaseHeld as exc:
            self.last_plan = before  # nothing ran: the server is as it was
            self._finish(a, Phase.FAILED, str(exc))
        except asyncio.CancelledError:
            self.interrupted = True
            self._finish(a, Phase.FAILED, "cancelled (specmon is closing)")
            raise
        except (OSError, asyncssh.Error) as exc:
            self._finish(a, Phase.FAILED, f"connection to {self.host} failed: {exc}")
        finally:
            self._busy = False
            if a.phase is Phase.READY:
                await self._stop_tail()
        emit()
        return self._view(a)

    async def _run(self, a: _Attempt, emit: Callable[[], None], before: CommandPlan | None) -> None:
        plan = a.plan
        emit()
        # A custom start may append to the same log: follow it from its end, before the stop.
        # A managed start moves the old log aside and starts a new file: follow it from the start, after.
        new_file = before is not None and before.log != plan.log
        early = plan.mode == "custom" and plan.log is not None and not new_file

        if early and plan.log:
            await self._follow(plan.log, from_start=False)

        async def on_step(ev: StepEvent) -> None:
            if ev.phase == "started":
                self._set_phase(a, Phase.STOPPING if ev.step.name == "stop" else Phase.STARTING)
            elif ev.outcome is not None:
                a.message = ev.outcome.summary()
                if ev.step.name == "stop" and ev.outcome.ok:
                    # The adopted process is gone: from now on the pidfile names the server.
                    self.adopted = None
                    self.started = None
                if ev.step.name == "start" and ev.outcome.ok:
                    self._note_started(plan, ev.outcome.fields)
            emit()

        report = await execute(plan, self.runner, on_step)
        if not report.ok:
            failed = report.outcomes[-1]
            what = "stop" if failed.step.name == "stop" else "start"
            self._finish(a, Phase.FAILED, f"{what} failed: {failed.summary()}")
            if what == "start":
                # The old server is stopped; what runs now is nothing, go back may help.
                self._settle_steps(a)
            return
        self._settle_steps(a)
        if plan.log and not early:
            await self._follow(plan.log, from_start=True)

        poll = self._poll
        crash_ticks = 0

        async def watch(seconds: float) -> None:
            # wait_ready's pause between checks: look at the log meanwhile.
            nonlocal crash_ticks
            left = seconds if poll is None else min(seconds, poll)
            while left > 0:
                step = min(WATCH_TICK_S, left)
                await self._sleep(step)
                left -= step
                self._track(a, emit)
                emit()
                if self._tracker is not None and self._tracker.crash is not None:
                    # A traceback's last line (the error itself) comes after its header: one more look.
                    crash_ticks += 1
                    if crash_ticks > CRASH_GRACE_TICKS:
                        raise _Crashed(self._tracker.crash)
                    continue
                if self._tracker is not None and self._tracker.reached is Phase.READY:
                    return  # the log says ready: check now, not at the next poll

        try:
            ready = await wait_ready(plan, self.runner, sleep=watch, clock=self._clock)
        except _Crashed as exc:
            self._finish(a, Phase.CRASHED, str(exc))
            return
        self._track(a, emit)
        if ready.state == "ready" and self._tracker is not None and self._tracker.reached is None:
            # Ready before the tail delivered the start-up lines: let it catch up, for the phase times.
            await self._sleep(2 * WATCH_TICK_S)
            self._track(a, emit)
        if ready.state == "ready":
            self._finish(a, Phase.READY, self._ready_message(a))
            self._record_eta(a)
        elif ready.state == "exited":
            await self._last_words(ready)
            detail = self._tracker.crash if self._tracker is not None else None
            self._note_exited(plan, detail or exit_cause(ready.last.stdout if ready.last else ""))
            text = "the server process exited"
            self._finish(a, Phase.CRASHED, f"{text}: {detail}" if detail else f"{text} (no error in its log)")
        elif ready.state == "no-marker":
            self._finish(a, Phase.FAILED, f"the server answers GET {plan.ready.url}, but {plan.log} has not "
                                          f"shown the ready marker {plan.ready.marker!r} in {MARKER_GRACE_S:g} s: "
                                          "check ready_marker (and log) in the profile")
        elif ready.state == "timeout":
            self._finish(a, Phase.TIMEOUT, f"not ready after {plan.ready.timeout_s:g} s "
                                           f"({_last_result(ready.last)})")
        else:
            self._finish(a, Phase.FAILED, f"the readiness check cannot run: {_last_result(ready.last)}")

    async def _last_words(self, ready: ReadyOutcome) -> None:
        """Read the end of an exited server's log into the tracker, whatever the tail delivered.

        A server that exits within a second (a command-line error) is gone before the tail's
        first read, and the tail's new lines arrive a poll later still: the readiness check
        sent the log's last lines with its verdict, numbered, so only the unseen ones are fed.
        """
        words = ready.last_words()
        if words is None or self._tracker is None:
            # No excerpt (a profile without a log): give the tail a moment instead.
            await self._sleep(2 * WATCH_TICK_S)
            return
        await self._stop_tail()  # the process is gone: nothing more comes, and no line twice
        self._tracker.catch_up(*words)

    def _note_started(self, plan: CommandPlan, fields: dict[str, str]) -> None:
        try:
            self.started = ProcessIdentity(int(fields.get("pid", "")), int(fields.get("starttime", "")))
        except ValueError:
            return
        if self.record_servers:
            # At once, not at exit: a terminal that dies with SIGKILL still leaves the record.
            record_started(plan, self.started)

    def _note_exited(self, plan: CommandPlan, cause: str) -> None:
        """The server this controller started is gone: never claimed running, recorded as exited."""
        started, self.started = self.started, None
        if started is not None and self.record_servers and plan.pidfile is not None:
            record_exited(plan.host, plan.pidfile, started.pid, redact_text(cause, self._secrets))

    async def adopt_recorded(self) -> str | None:
        """Look for the server an earlier session left running with this profile; adopt it if it runs.

        Runs the fixed read-only ``alive.sh`` (PID and start time, and the pidfile still naming
        it). A running server becomes the current one (its step count is known, the first
        restart stops it by its pidfile); a gone one is forgotten.

        Returns:
            What to tell the user, or None when nothing was recorded.
        """
        if self.profile.mode != "managed":
            return None
        values = {"port": str(self.profile.port)} if self.profile.port is not None else {}
        pidfile = expand(self.profile.pidfile_template(), values)
        record = load_record(self.host, pidfile)
        if record is None:
            return None
        if record.state == "exited":
            forget(self.host, pidfile)  # said once; a dead PID is never adopted
            return record.exited_text()
        state = await check_record(record, self.runner)
        if state == "running":
            if self.current_steps is None:
                self.current_steps = record.steps
            self.started = record.identity
            return record.adopted_text()
        if state == "unknown":
            return f"could not check the server specmon left running on {self.host} (PID {record.pid})"
        forget(self.host, pidfile)
        if state == "gone":
            return f"the server specmon left running on {self.host} (PID {record.pid}) has exited since"
        return (f"the server specmon left running on {self.host} (PID {record.pid}) still runs, but "
                f"{pidfile} names another process now: not adopted")

    def _settle_steps(self, a: _Attempt) -> None:
        steps = a.plan.steps
        if a.previous_steps is not None and a.previous_steps != steps:
            self.previous_steps = a.previous_steps
        self.current_steps = steps

    async def _follow(self, path: str, *, from_start: bool) -> None:
        await self._stop_tail()
        self._tracker = StartupTracker(engine=_engine(self.profile))
        if self.make_source is not None:
            tail = self._tail = self.make_source(path, from_start)
            tracker = self._tracker

            async def pump() -> None:
                async for batch in tail.batches():
                    tracker.feed(batch)

            self._tail_task = asyncio.ensure_future(pump())
        if self.on_log_switch is not None:
            maybe = self.on_log_switch(path, from_start)
            if inspect.isawaitable(maybe):
                await maybe

    async def _stop_tail(self) -> None:
        tail, task = self._tail, self._tail_task
        self._tail = self._tail_task = None
        await stop_reading(tail, task)

    async def close(self) -> None:
        """Stop following the log and give the server's lease back (the app is closing)."""
        await self._stop_tail()
        if self.lease is not None:
            await self.lease.release()

    async def check_server(self) -> str | None:
        """Is the server still the one the last start launched? None when it is (or when it cannot be
        told: custom commands, nothing started yet, the host unreachable), else why not.

        A sweep asks this at every look (``Sweep(server_check=...)``): the fixed read-only
        ``alive.sh``, PID and start time, and the pidfile still naming it.
        """
        plan, who = self.last_plan, self.started
        if plan is None or who is None or plan.pidfile is None or self._busy:
            return None
        record = ServerRecord(plan.host, plan.pidfile, who.pid, who.starttime, plan.steps, plan.draft_tokens,
                              plan.log, 0.0)
        state, detail = await check_with_cause(record, self.runner, 30.0)
        if state == "gone":
            self._note_exited(plan, detail)
            return f"the server measured (PID {who.pid}) has exited" + (f": {detail}" if detail else "")
        if state == "replaced":
            return (f"the server measured (PID {who.pid}) is no longer the one in {plan.pidfile}: another "
                    "specmon (or someone) restarted it")
        return None

    async def lease_note(self) -> str | None:
        """Who controls this server now, when another specmon does (None: free, or held here).

        A look only: the lease is taken and given back at once when it is free.
        """
        if self.lease is None or self.lease.held:
            return None
        try:
            await self.lease.acquire()
        except LeaseHeld as exc:
            return str(exc)
        except (OSError, asyncssh.Error):
            return None
        await self.lease.release()
        return None

    async def _take_lease(self) -> None:
        """Hold the server's lease before anything changes it (kept once taken: see ``record_servers``).

        Raises:
            LeaseHeld: another specmon controls the server; the message says who, since when, what.
        """
        if self.lease is not None:
            await self.lease.acquire()

    def _track(self, a: _Attempt, emit: Callable[[], None]) -> None:
        """Move the attempt to the phase the log reached; ``emit`` each phase it leaves, as it ends.

        The caller emits the phase reached. The log can pass several phases between two looks
        (a readiness check that took a second on a busy host, a tail that delivered late): each
        is still shown, once more as it ends, with the log's last word on it (the shards loaded).
        """
        t = self._tracker
        if t is None or a.phase not in RUNNING_PHASES:
            return
        target = {Phase.LOADING: Phase.LOADING, Phase.CAPTURING: Phase.CAPTURING,
                  Phase.READY: Phase.CAPTURING}.get(t.reached)  # type: ignore[arg-type]
        if target is None:
            return
        order = RUNNING_PHASES
        # Phases the log skipped (no graph capture) took no time.
        while order.index(a.phase) < order.index(target):
            emit()
            self._set_phase(a, order[order.index(a.phase) + 1])

    def _set_phase(self, a: _Attempt, phase: Phase) -> None:
        if phase is a.phase:
            return
        now = self._clock()
        if a.phase in RUNNING_PHASES:
            a.done.append((a.phase, max(0.0, now - a.phase_started)))
        a.phase = phase
        a.phase_started = now

    def _finish(self, a: _Attempt, phase: Phase, message: str) -> None:
        self._set_phase(a, phase)
        a.message = message
        a.finished_at = self._clock()

    def _ready_message(self, a: _Attempt) -> str:
        cfg = self._tracker.config if self._tracker is not None else None
        text = f"ready: {plan_label(a.plan.steps, a.plan.draft_tokens)} on {self.host}"
        if cfg is not None and cfg.steps is not None and cfg.steps != a.plan.steps and not cfg.is_nospec:
            text += f" — but the log announces {cfg.steps} steps: check the profile's argv"
        return text

    def _record_eta(self, a: _Attempt) -> None:
        if self.eta_store is None:
            return
        durations: dict[str, float] = {}
        for phase, seconds in a.done:
            if phase.value in TIMED_PHASES:
                durations[phase.value] = durations.get(phase.value, 0.0) + seconds
        if all(p in durations for p in TIMED_PHASES):
            self.eta_store.record(self.host, durations)

    def _view(self, a: _Attempt) -> RestartProgress:
        now = a.finished_at if a.finished_at is not None else self._clock()
        t = self._tracker
        eta = None
        phase_elapsed = 0.0 if a.finished_at is not None else max(0.0, now - a.phase_started)
        if a.phase in RUNNING_PHASES and self.eta_store is not None:
            eta = estimate(self.eta_store.medians(self.host), a.phase.value, phase_elapsed,
                           load_progress=t.load_progress if t else None,
                           runs=self.eta_store.count(self.host), host=self.host)
        elif a.phase in RUNNING_PHASES and t is not None and t.load_progress is not None:
            eta = estimate({}, a.phase.value, phase_elapsed, load_progress=t.load_progress, host=self.host)
        return RestartProgress(
            phase=a.phase,
            steps=a.plan.steps,
            label=plan_label(a.plan.steps, a.plan.draft_tokens),
            host=self.host,
            log=a.plan.log,
            elapsed_s=max(0.0, now - a.started),
            phase_elapsed_s=phase_elapsed,
            done=tuple(a.done),
            load_progress=t.load_progress if t else None,
            graph_progress=t.graph_progress if t else None,
            eta=eta,
            # The event log and the recording keep these: a server's tail may repeat its token.
            message=redact_text(a.message, self._secrets),
            last_lines=tuple(redact_text(line, self._secrets) for line in t.last_lines) if t else (),
            previous_steps=self.previous_steps,
            config=t.config.label if t and t.config else None,
        )

    # -- stopping at exit --------------------------------------------------------------

    def stop_step(self) -> PlanStep | None:
        """The stop command for the server the last plan started (by its pidfile), for stopping at exit."""
        plan = self.last_plan
        if plan is None:
            return None
        # The server started by the last plan is the one in the pidfile (an adopted plan's stop
        # names the adopted PID, long gone by then): the pidfile-based stop of the same profile.
        return build_plan(self.profile, plan.steps, host=self.host).stop_only

    async def stop_server(self, show: Callable[[str], None]) -> str | None:
        """Stop the server the last plan started: show the stop command, then run it.

        Args:
            show: Receives the line shown before the command runs.

        Returns:
            The stop script's result line, or None when nothing was started.
        """
        step = self.stop_step()
        if step is None:
            return None
        await self._stop_tail()
        try:
            await self._take_lease()
        except LeaseHeld as exc:
            show(f"stop:  not run: {exc}")
            return f"stop refused: {exc}"
        show(f"stop:  {step.display}")
        result = await self.runner.run(step.command, step.timeout_s)
        fields = parse_result_line(result.stdout, "specmon-stop")
        if fields.get("result") in ("stopped", "killed", "not-running") and self.last_plan is not None \
                and self.last_plan.pidfile is not None:
            forget(self.host, self.last_plan.pidfile)
            self.started = None
        lines = (result.stdout.strip() or result.stderr.strip()).splitlines()
        return lines[-1] if lines else f"exit {result.exit_status}"


def _engine(profile: LaunchProfile) -> Engine:
    try:
        return Engine(profile.engine)
    except ValueError:
        return Engine.UNKNOWN


def _last_result(result: object) -> str:
    stdout = getattr(result, "stdout", "") or ""
    lines = stdout.strip().splitlines()
    return lines[-1] if lines else "no output"


async def controller_for_running_server(
    runner: CommandRunner,
    *,
    host: str = "localhost",
    log: str | None = None,
    pidfile: str | None = None,
    show: Callable[[str], None] | None = None,
    **controller_kwargs: object,
) -> tuple[RestartController, ServerProcess]:
    """Adopt the SGLang/vLLM server running on the host: a controller that restarts it.

    Lists the servers with the fixed probe (:data:`specmon.control.adopt.PROBE_COMMAND`,
    read-only), picks the one that provably writes ``log`` (its stdout/stderr, or a
    log-file argument; with no ``log``, the only one) and refuses any other,
    and builds a managed profile from its own command line with the step flag
    rewritten. The first restart stops it by PID and start time; the plans are
    shown and confirmed like any other.

    Args:
        runner: Where the server runs.
        host: The host label.
        log: The log the dashboard follows: picks the server writing it.
        pidfile: Where later restarts record the PID (default ``~/.cache/specmon/run/specmon-{port}.pid`` on the host).
        show: Told what is about to run on the host before the probe runs (it is read-only,
            but nothing runs unannounced).
        **controller_kwargs: Passed to :class:`RestartController` (eta_store, make_source, ...).

    Returns:
        The controller and the adopted server.

    Raises:
        AdoptError: No server, several and no way to choose, or one that cannot be
            restarted as is; the message says which and what to do.
    """
    if show is not None:
        show(f"probe: list the SGLang/vLLM server processes on {host} (read-only: /proc, filtered environment)")
    servers = await probe_servers(runner)
    if not servers:
        raise AdoptError(f"no SGLang or vLLM server is running on {host}")
    chosen = servers
    if log is not None:
        # Only a server that provably writes the followed log (fd 1/2, or a log-file argument):
        # restarting another one would stop a server the dashboard is not even watching.
        chosen = [s for s in servers if s.writes(log)]
        if not chosen:
            raise AdoptError(not_adopting(servers, log, host))
    if len(chosen) > 1:
        found = ", ".join(f"PID {s.pid}" for s in chosen)
        raise AdoptError(f"{len(chosen)} servers run on {host} ({found}): say which log to follow")
    server = chosen[0]
    if show is not None and log is not None:
        show(f"adopting PID {server.pid} ({_ENGINE_NAMES[server.engine]}): its {server.writes(log)} is {log}")
    extra: dict[str, object] = {"pidfile": pidfile} if pidfile is not None else {}
    profile = profile_from_server(server, log=log if log and server.log_path != log else None,
                                  **extra)  # type: ignore[arg-type]
    controller_kwargs.setdefault("lease", True)  # a real server: one controller at a time
    controller = RestartController(profile, runner, host=host, adopted=server.identity,
                                   current_steps=server.spec.steps, **controller_kwargs)  # type: ignore[arg-type]
    return controller, server


_ENGINE_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}


def not_adopting(servers: list[ServerProcess], log: str, host: str) -> str:
    """What was found when no server provably writes ``log``: one sentence, ending in the refusal.

    ``1 vLLM server found on gpu-box (PID 123) but it writes /x.log, not /y.log: not adopting; ...``
    """
    advice = "not adopting; follow the log it writes, or write a launch profile"
    if len(servers) == 1:
        s = servers[0]
        return (f"1 {_ENGINE_NAMES[s.engine]} server found on {host} (PID {s.pid}) but it {s.output_text()}, "
                f"not {log}: {advice}")
    found = "; ".join(f"{_ENGINE_NAMES[s.engine]} PID {s.pid} {s.output_text()}" for s in servers)
    return f"{len(servers)} servers found on {host} ({found}) but none writes {log}: {advice}"


class ConnectingRunner:
    """Runs commands over SSH on a connection it opens on first use (inside the running app).

    ``specmon connect`` builds everything before the event loop runs, and
    asyncssh connections belong to the loop: this runner connects when the
    first command runs, and again after the connection was lost. A command
    interrupted by a drop is not run again (a restart is not idempotent); the
    error is raised and the restart shows it.

    Args:
        connect: Opens a verified connection: an ``SSHLink`` (``specmon.ssh.connect.connect``)
            or an ``asyncssh`` connection.
    """

    def __init__(self, connect: Callable[[], Awaitable[object]]) -> None:
        self._connect = connect
        self._link: object | None = None

    async def run(self, command: str, timeout: float, *, stdin: str = "") -> Result:
        """Run ``command`` on the host (connecting first if needed), ``stdin`` on its standard input.

        Raises:
            ConnectionError: The connection could not be opened (the message says why).
            asyncssh.Error, OSError: The connection broke during the command.
        """
        if self._link is None:
            try:
                self._link = await self._connect()
            except (OSError, asyncssh.Error) as exc:
                raise ConnectionError(f"cannot connect: {exc}") from exc
            except Exception as exc:
                raise ConnectionError(str(exc)) from exc
        conn = getattr(self._link, "conn", self._link)
        try:
            return await SSHRunner(conn).run(command, timeout, stdin=stdin)  # type: ignore[arg-type]
        except (OSError, asyncssh.Error):
            self.close()
            raise

    async def hold(self, command: str, timeout: float, until: str) -> Held:
        """Start ``command`` on the host and leave it running (a lease): see :class:`~specmon.control.runner.Held`.

        A dropped connection ends it (and so releases what it held); the next hold connects again.
        """
        if self._link is None:
            try:
                self._link = await self._connect()
            except Exception as exc:
                raise ConnectionError(f"cannot connect: {exc}") from exc
        conn = getattr(self._link, "conn", self._link)
        try:
            return await ssh_hold(conn, command, timeout, until)  # type: ignore[arg-type]
        except (OSError, asyncssh.Error):
            self.close()
            raise

    @property
    def connected(self) -> bool:
        """Whether a connection is open now (a command would not have to connect first)."""
        return self._link is not None

    def close(self) -> None:
        """Close the connection (the next command opens a new one)."""
        link, self._link = self._link, None
        close = getattr(link, "close", None)
        if close is not None:
            close()
