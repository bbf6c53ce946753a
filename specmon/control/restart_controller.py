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
(:class:`~specmon.control.startup.StartupTracker`) for the lifecycle and the raw lines, and it tells the
dashboard to follow it too (``on_log_switch``), usually through a
:class:`~specmon.sources.switching.SwitchingSource`, so the run table gains the new run. The log path can
change with the step count (``sglang_{steps}step.log``); a managed start
moves the old one aside (never truncates it), so the new file is read from its start.

Nothing here imports Textual.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import asyncssh

from specmon.control.eta import TIMED_PHASES, EtaStore, estimate
from specmon.control.guard import read_only_message, read_only_reason
from specmon.control.launch import (
    CommandPlan,
    LaunchProfile,
    OnceNotes,
    PlanStep,
    ProcessIdentity,
    build_plan,
    expand,
    inherited_signals_note,
    parse_result_line,
)
from specmon.control.lease import LeaseHeld, ServerLease, lease_for
from specmon.control.restart_progress import RUNNING_PHASES, Phase, RestartProgress, plan_label
from specmon.control.runner import MARKER_GRACE_S, CommandRunner, ReadyOutcome, StepEvent, execute, wait_ready
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
from specmon.control.startup import StartupTracker
from specmon.records import Engine
from specmon.redact import redact_text
from specmon.sources.base import LineSource, stop_reading
from specmon.sources.switching import SourceFactory

#: Told which log to follow now; may be a coroutine function.
LogSwitch = Callable[[str, bool], "None | Awaitable[None]"]

#: Seconds between two looks at the new log while waiting for the readiness check.
WATCH_TICK_S = 0.2
#: Looks at the log after a crash's first line before calling it (the traceback's end follows).
CRASH_GRACE_TICKS = 2


class RestartError(Exception):
    """A restart cannot run (busy, a plan not built or not shown here); the message says why."""


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
        self.warnings = OnceNotes()  # what a start could not do, each said once a session by who takes them
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
            # The process is gone: a pending error (an exception not yet followed by serving) was its end.
            detail = (self._tracker.crash or self._tracker.pending_error) if self._tracker is not None else None
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
        self.warnings.add(inherited_signals_note(fields, plan.host))
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
        self._tracker = StartupTracker(engine=_engine(self.profile), clock=self._clock)
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
