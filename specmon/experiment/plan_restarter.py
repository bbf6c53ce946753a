"""The sweep's restarts in the real world: :class:`PlanRestarter` (a launch profile's plan, shown,
run and followed to ready), :func:`controller_restarter` (the dashboard's restart controller), and
:class:`LogFollower`, which follows the server's log into the session across restarts.
"""

from __future__ import annotations

import asyncio
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any

from specmon.control.launch import (
    CommandPlan,
    LaunchError,
    LaunchProfile,
    OnceNotes,
    ProcessIdentity,
    build_plan,
    inherited_signals_note,
    parse_result_line,
)
from specmon.control.runner import CommandRunner, StepEvent, execute, wait_ready
from specmon.control.servers import (
    ServerRecord,
    check_with_cause,
    exit_cause,
    forget,
    record_exited,
    record_started,
)
from specmon.experiment.sweep_plan import Restarter, RestartOutcome
from specmon.redact import redact_text
from specmon.sources.base import stop_reading


def stderr_show(text: str) -> None:
    """Print what is about to run on stderr (the default for headless commands)."""
    print(text, file=sys.stderr, flush=True)


#: Raw log lines a :class:`LogFollower` keeps, and how many of them a failed start-up shows.
RECENT_LINES, TAIL_SHOWN = 40, 12


def log_tail(lines: Sequence[str], limit: int = TAIL_SHOWN) -> list[str]:
    """The lines that say why a start-up failed: from the last ``Traceback`` on, else the last few.

    Args:
        lines: The log's last raw lines, oldest first.
        limit: At most this many lines (the end of a long traceback: the error is last).

    Returns:
        Non-blank lines, oldest first.
    """
    kept = [line.rstrip() for line in lines if line.strip()]
    for i in range(len(kept) - 1, -1, -1):
        if "Traceback (most recent call last)" in kept[i]:
            kept = kept[i:]
            break
    return kept[-limit:]


class LogFollower:
    """Follows the server's log into a session, switching files at every restart.

    Args:
        ingest: A :class:`~specmon.output.recording.RecordedIngest` (feeds and records).
        make_source: ``(path, from_end) -> LineSource`` (a local or SSH tail).
    """

    def __init__(self, ingest: Any, make_source: Callable[[str, bool], Any]) -> None:
        self.ingest = ingest
        self._make = make_source
        self._source: Any = None
        self._task: asyncio.Task[None] | None = None
        #: The last raw lines of the file followed now: a failed start-up shows them.
        self.recent: deque[str] = deque(maxlen=RECENT_LINES)

    async def follow(self, path: str, *, from_end: bool = False) -> None:
        """Stop following the old file; follow ``path`` (from its start, or its current end)."""
        await self.stop()
        self.recent.clear()
        self._source = self._make(path, from_end)
        self.ingest.begin_source(getattr(self._source, "name", path))
        self._task = asyncio.ensure_future(self._pump(self._source))

    async def _pump(self, source: Any) -> None:
        async for batch in source.batches():
            self.ingest.feed(batch)
            self.recent.extend(batch)

    async def stop(self) -> None:
        """Stop following."""
        source, task = self._source, self._task
        self._source = self._task = None
        await stop_reading(source, task)


def controller_restarter(controller: Any, show: Callable[[str], None] | None = None) -> Restarter:
    """The sweep's ``restart`` made from the dashboard's :class:`~specmon.control.restart_controller.RestartController`.

    Each restart builds the plan, shows it (``show`` gets the text the
    controller marks as shown: the event log, or stderr), runs it and follows
    it to ready; the controller's ``on_log_switch`` points the dashboard's
    source at the new log, so the session the sweep reads gains the new run.
    The user confirms the sweep once, for all its step counts, beforehand.

    Args:
        controller: A ``RestartController`` (typed loosely: the sweep does not depend on it).
        show: Receives each plan's description before it runs.
    """

    async def restart(steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
        plan = controller.plan_for(steps, dims=dims) if dims else controller.plan_for(steps)  # LaunchError / RestartError: the sweep fails this setting
        text = controller.describe(plan)
        if show is not None:
            show(text)
        view = await controller.run(plan)
        phase = getattr(view.phase, "value", str(view.phase))
        return RestartOutcome(phase == "ready", view.message or phase, view.log)

    return restart


class PlanRestarter:
    """The sweep's ``restart`` for a launch profile: build the plan, show it, run it, wait for ready.

    Args:
        profile: A validated launch profile (steps 0 needs its no-speculation command).
        runner: Where commands run (``LocalRunner``, ``SSHRunner``).
        host: Shown in the plan.
        follower: Re-pointed at the plan's log around each restart.
        show: Receives the plan's description before anything runs (stderr by default).
        ready_poll_s: Seconds between readiness checks (None: the plan's own).
    """

    def __init__(self, profile: LaunchProfile, runner: CommandRunner, *, host: str = "localhost",
                 follower: LogFollower | None = None, show: Callable[[str], None] = stderr_show,
                 ready_poll_s: float | None = None, record_servers: bool = False) -> None:
        self.profile = profile
        self.runner = runner
        self.host = host
        self.follower = follower
        self.show = show
        self.ready_poll_s = ready_poll_s
        self.last_plan: CommandPlan | None = None
        #: Record each server started in the user data dir (real servers, left running at the end).
        self.record_servers = record_servers
        self.started: Any = None  # the last start's ServerRecord, when recorded
        #: PID and start time of the server the last start launched (managed mode), for :meth:`check_server`.
        self.identity: Any = None
        #: A start step is running (or was cut short in its middle): its pidfile may come late.
        self.starting = False
        #: What a start could not do (its signal dispositions), each said once, not at every restart.
        self.notes = OnceNotes()

    def plan_for(self, steps: int, dims: dict[str, int | str] | None = None) -> CommandPlan:
        """The plan a restart with ``steps`` (and the other dimensions ``dims``) would run.

        Raises:
            LaunchError: the profile cannot restart with ``steps`` (message for the user).
        """
        return build_plan(self.profile, steps, host=self.host, dims=dims)

    async def __call__(self, steps: int, dims: dict[str, int | str] | None = None) -> RestartOutcome:
        """Restart with ``steps`` and ``dims``; never raises for an expected failure."""
        try:
            plan = self.plan_for(steps, dims)
        except LaunchError as exc:
            return RestartOutcome(False, str(exc))
        self.show(plan.describe())
        # Custom commands may append to the log: follow from its current end, before the restart.
        # A managed start moves the old log aside and starts a new file: follow it from the start, after.
        if self.follower is not None:
            if plan.mode == "custom" and plan.log:
                await self.follower.follow(plan.log, from_end=True)
            else:
                await self.follower.stop()

        def on_step(ev: StepEvent) -> None:
            if ev.step.name == "start":
                # Between these two a start may record a server the stop cannot see yet.
                self.starting = ev.phase == "started"
            if ev.phase == "finished" and ev.outcome is not None:
                self.show(f"  {ev.outcome.summary()}")
                if ev.step.name == "stop" and ev.outcome.ok:
                    self.identity = None
                if ev.step.name == "start" and ev.outcome.ok:
                    self.notes.add(inherited_signals_note(ev.outcome.fields, plan.host))
                    for note in self.notes.take():
                        self.show(f"  warning: {note}")
                    try:
                        who = ProcessIdentity(int(ev.outcome.fields["pid"]), int(ev.outcome.fields["starttime"]))
                    except (KeyError, ValueError):
                        return
                    self.identity = who
                    if self.record_servers:
                        self.started = record_started(plan, who)

        # Recorded before it runs: a sweep stopped half-way through this start still stops its server.
        self.last_plan = plan
        report = await execute(plan, self.runner, on_step)
        if not report.ok:
            return RestartOutcome(False, redact_text("; ".join(o.summary() for o in report.outcomes),
                                                     self.profile.secrets()), plan.log)
        if self.follower is not None and plan.mode == "managed" and plan.log:
            await self.follower.follow(plan.log, from_end=False)
        poll = self.ready_poll_s

        async def sleep(seconds: float) -> None:
            await asyncio.sleep(seconds if poll is None else min(seconds, poll))

        ready = await wait_ready(plan, self.runner, sleep=sleep)
        if ready.state == "exited" and self.started is not None:
            # Gone at once (a bad flag, out of memory): recorded as exited with its cause, never
            # "left running", and never adopted by the next session.
            record_exited(plan.host, self.started.pidfile, self.started.pid,
                          redact_text(exit_cause(ready.last.stdout if ready.last else ""), self.profile.secrets()))
            self.started = None
        if ready.state != "ready":
            last = ready.last.stdout.strip().splitlines()[-1:] if ready.last else []
            text = f"server not ready ({ready.state}{': ' + last[0] if last else ''})"
            if self.follower is not None:
                await asyncio.sleep(0.4)  # its last words may still be on their way through the tail
                tail = log_tail(self.follower.recent)
                if tail:
                    text += f"; {plan.log} ends with:\n" + "\n".join(f"    {line}" for line in tail)
            return RestartOutcome(False, redact_text(text, self.profile.secrets()), plan.log)
        return RestartOutcome(True, f"ready after {ready.checks} check(s)", plan.log)

    async def check_server(self) -> str | None:
        """Is the server being measured still the one the last start launched? None when it is (or
        when it cannot be told: custom commands, the host unreachable), else why not.

        The fixed read-only ``alive.sh``: the PID alive with its recorded start time, and the
        pidfile still naming it (else another specmon, or someone, restarted it).
        """
        plan, who = self.last_plan, self.identity
        if plan is None or who is None or plan.pidfile is None:
            return None
        record = ServerRecord(plan.host, plan.pidfile, who.pid, who.starttime, plan.steps, plan.draft_tokens,
                              plan.log, 0.0)
        state, detail = await check_with_cause(record, self.runner, 30.0)
        if state == "gone":
            self.identity = None
            return f"the server measured (PID {who.pid}) has exited" + (f": {detail}" if detail else "")
        if state == "replaced":
            self.identity = None
            return (f"the server measured (PID {who.pid}) is no longer the one in {plan.pidfile}: another "
                    "specmon (or someone) restarted it")
        return None

    async def stop_server(self) -> str | None:
        """Stop the server the last restart started (its plan's stop command, shown first)."""
        plan = self.last_plan
        if plan is None:
            return None
        stop = plan.stop_only
        self.show(f"stop:  {stop.display}")
        result = await self.runner.run(stop.command, stop.timeout_s)
        line = (result.stdout.strip().splitlines() or [""])[-1]
        # A start cut short (a signal during it) may record its server a moment later: looked for
        # every 0.1 s for a second, not once after a fixed second (most of a SIGTERM'd sweep's exit),
        # and only then: after a stop with no start begun there is nothing to wait for.
        # A local start ended by specmon's SIGTERM has settled (it ended before launching, or
        # recorded what it launched) unless it had to be killed (LocalRunner.killed_on_cancel).
        settled = self.starting and getattr(self.runner, "killed_on_cancel", True) is False
        for _ in range(10):
            if "no-pidfile" not in line or not self.starting or settled:
                break
            await asyncio.sleep(0.1)
            result = await self.runner.run(stop.command, stop.timeout_s)
            line = (result.stdout.strip().splitlines() or [""])[-1]
        if self.follower is not None:
            await self.follower.stop()
        fields = parse_result_line(result.stdout, "specmon-stop")
        if fields.get("result") in ("stopped", "killed", "not-running") and plan.pidfile is not None:
            forget(plan.host, plan.pidfile)  # stopped as asked: nothing is left running
            self.started = None
        return line
