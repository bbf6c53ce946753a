"""Run a :class:`~specmon.control.launch.CommandPlan` on a host, locally or over SSH.

A :class:`CommandRunner` runs one shell command string and returns its exit
status and output. The control layer itself offers no free-form "run this
string" call: :func:`execute` and :func:`wait_ready` only accept a sealed
``CommandPlan``, whose strings were built from a validated profile and shown to
the user first.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import re
import signal
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

import asyncssh

from specmon.control.guard import refuse
from specmon.control.launch import CommandPlan, PlanStep, parse_result_line
from specmon.redact import redact_text


@dataclass(frozen=True, slots=True)
class Result:
    """What one command did.

    Attributes:
        exit_status: The exit status; ``None`` when it timed out or was killed
            by a signal.
        stdout: Standard output, decoded as UTF-8 with replacement.
        stderr: Standard error, decoded the same way.
        timed_out: The runner gave up waiting.
    """

    exit_status: int | None
    stdout: str
    stderr: str
    timed_out: bool = False

    @property
    def ok(self) -> bool:
        """True when the command exited with status 0."""
        return self.exit_status == 0 and not self.timed_out


@runtime_checkable
class CommandRunner(Protocol):
    """Runs one command string on one host."""

    async def run(self, command: str, timeout: float) -> Result:
        """Run ``command`` through the host's shell and wait up to ``timeout`` seconds.

        Runners that can also feed standard input take ``stdin: str`` as a keyword
        (:class:`LocalRunner`, :class:`SSHRunner`): a plan step with input (a managed
        start's environment) is run that way, never with its input on the command line.
        """
        ...


def default_signals() -> None:
    """In a child of specmon, between fork and exec: every signal's default disposition, an empty mask.

    A signal specmon inherited ignored (``nohup specmon sweep ... &``: HUP, INT and QUIT) stays
    ignored across exec, and Python's ``restore_signals`` only resets PIPE, XFZ and XFSZ: what
    specmon starts would inherit it, and a server started that way could not be stopped by
    SIGINT. A server manager starts what it runs with the defaults; so does specmon. Only
    ``signal.signal`` and ``pthread_sigmask`` run here (no allocation of locks another thread
    may hold at the fork).
    """
    for number in range(1, signal.NSIG):
        try:
            signal.signal(number, signal.SIG_DFL)
        except (OSError, ValueError, RuntimeError):
            pass  # SIGKILL, SIGSTOP and the C library's own real-time signals cannot be set
    signal.pthread_sigmask(signal.SIG_SETMASK, ())


#: Seconds a command gets to end on SIGTERM when specmon is ending, before SIGKILL (see :meth:`LocalRunner.run`).
CANCEL_GRACE_S = 0.8


class LocalRunner:
    """Runs commands on this machine with ``bash -c`` (``specmon watch``, ``demo``, tests)."""

    #: A cancelled command had to be killed (it did not end on SIGTERM): a start may yet record a server.
    killed_on_cancel = False

    def close(self) -> None:
        """Nothing to close (each command is its own process); as :class:`ConnectingRunner`'s."""

    async def run(self, command: str, timeout: float, *, stdin: str = "") -> Result:
        """Run ``command`` with ``bash -c``; on timeout kill it and what it started in the foreground.

        Args:
            command: The command string.
            timeout: Seconds to wait.
            stdin: Written to its standard input, which is then closed (else it reads /dev/null).

        Returns:
            The result; ``timed_out`` set when the timeout expired.
        """
        creating = asyncio.ensure_future(asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            stdin=asyncio.subprocess.PIPE if stdin else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            # Its own process group, so a timeout can end it and its helpers
            # (sleep, grep) by the PID we just got, and nothing else. A server
            # it detached (setsid) lives in another group and is not touched.
            start_new_session=True,
            preexec_fn=default_signals,
        ))
        try:
            proc = await asyncio.shield(creating)
        except asyncio.CancelledError:
            # Cancelled while asyncio was still connecting its pipes (the command may be running
            # already: on a loaded machine it had started its work): its own clean-up then waits
            # for every pipe to close, which a helper holding one delayed for as long as it ran
            # (30 s of `sleep`). Made first, then ended as any cancelled command is: SIGTERM, the
            # grace, its group killed (SIGKILL at once here let a start script die mid-record).
            proc = await creating
            await self._end_cancelled(proc, [])
            raise
        out, err = bytearray(), bytearray()
        pumps: list[asyncio.Future[None]] = []
        timed_out = False
        try:
            if stdin:
                assert proc.stdin is not None
                proc.stdin.write(stdin.encode("utf-8"))
                try:
                    await proc.stdin.drain()
                except (BrokenPipeError, ConnectionResetError):
                    pass  # it exited without reading: its status says why
                proc.stdin.close()
            assert proc.stdout is not None and proc.stderr is not None
            pumps = [asyncio.ensure_future(_pump(proc.stdout, out)), asyncio.ensure_future(_pump(proc.stderr, err))]
            try:
                await asyncio.wait_for(proc.wait(), timeout)
            except TimeoutError:
                timed_out = True
                _end_group(proc.pid)
                await proc.wait()
        except asyncio.CancelledError:
            # specmon is ending (SIGTERM, a closed terminal): the command and its helpers end with
            # it, not left to run unattended (a start script went on to start a server after
            # specmon's stop had looked, and the stop waited a second for its pidfile). SIGTERM
            # first: start.sh then ends before it launches the server, or finishes and records the
            # one it launched (a detached server is its own group: not signalled). SIGKILL after
            # CANCEL_GRACE_S; only then may a start's pidfile still come late (killed_on_cancel).
            await self._end_cancelled(proc, pumps)
            raise
        # Something the command left running may hold the pipes open: keep what
        # arrived, but do not wait for it forever.
        _, pending = await asyncio.wait(pumps, timeout=2.0)
        for task in pending:
            task.cancel()
        if timed_out:
            return Result(None, _decode(bytes(out)), _decode(bytes(err)), timed_out=True)
        status = proc.returncode if proc.returncode is not None and proc.returncode >= 0 else None
        return Result(status, _decode(bytes(out)), _decode(bytes(err)))

    async def _end_cancelled(self, proc: asyncio.subprocess.Process, pumps: list[asyncio.Future[None]]) -> None:
        """End a cancelled command: SIGTERM to its group, CANCEL_GRACE_S to end, then SIGKILL to the group."""
        _end_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(asyncio.shield(proc.wait()), CANCEL_GRACE_S)
        except (TimeoutError, asyncio.CancelledError):
            pass
        for task in pumps:
            task.cancel()
        if proc.returncode is None:
            self.killed_on_cancel = True
        _end_group(proc.pid)  # and any helper of it that outlived it (a group id is not reused while it has one)
        await _reaped(proc)

    async def hold(self, command: str, timeout: float, until: str) -> Held:
        """Start ``command`` and leave it running: see :class:`Held` (a lease held on this machine)."""
        proc = await asyncio.create_subprocess_exec(
            "bash", "-c", command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL, start_new_session=True, preexec_fn=default_signals)
        assert proc.stdout is not None and proc.stdin is not None
        stdin, pid = proc.stdin, proc.pid

        async def readline() -> str:
            assert proc.stdout is not None
            return _decode(await proc.stdout.readline())

        async def release() -> None:
            stdin.close()
            try:
                await asyncio.wait_for(proc.wait(), 5.0)
            except TimeoutError:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                await proc.wait()

        return await _first_answer(readline, release, lambda: proc.returncode is None, timeout, until)


def _end_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Signal the process group ``pid`` leads (a command run with ``start_new_session``); SIGKILL by default."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


async def _reaped(proc: asyncio.subprocess.Process) -> None:
    """Wait a moment for a killed command to be reaped and its pipes closed (nothing left open)."""
    try:
        await asyncio.wait_for(asyncio.shield(proc.wait()), 1.0)
        await asyncio.sleep(0)  # its pipes' end-of-file closes the transport
    except (TimeoutError, asyncio.CancelledError):
        pass


async def _first_answer(readline: Callable[[], Awaitable[str]], release: Callable[[], Awaitable[None]],
                        running: Callable[[], bool], timeout: float, until: str) -> Held:
    """Read a held command's output up to its answer line (``until`` ...); give up after ``timeout``."""
    said: list[str] = []
    try:
        async with asyncio.timeout(timeout):
            while True:
                line = await readline()
                if not line:
                    break  # it ended without answering
                said.append(line)
                if line.startswith(until):
                    break
    except TimeoutError:
        await release()
        return Held("".join(said), release, lambda: False, timed_out=True)
    except BaseException:
        await release()
        raise
    held = Held("".join(said), release, running)
    if not held.running:
        await release()
    return held


@dataclass(frozen=True, slots=True)
class Held:
    """A command left running on a host, holding something (a lease) until released.

    Attributes:
        stdout: What it printed up to its answer line.
        release: Closes its standard input (it exits) and waits for it; idempotent.
        is_running: Whether it still runs (a lost connection ends it).
        timed_out: It gave no answer in time (it was ended).
    """

    stdout: str
    release: Callable[[], Awaitable[None]]
    is_running: Callable[[], bool]
    timed_out: bool = False

    @property
    def running(self) -> bool:
        """Whether the command still runs."""
        return self.is_running()


async def _pump(stream: asyncio.StreamReader, into: bytearray) -> None:
    while chunk := await stream.read(65536):
        into += chunk


class SSHRunner:
    """Runs commands on a remote host over an open asyncssh connection."""

    def __init__(self, conn: asyncssh.SSHClientConnection) -> None:
        """Use ``conn`` (opened and host-key-checked by specmon.ssh) for every command."""
        self._conn = conn

    async def run(self, command: str, timeout: float, *, stdin: str = "") -> Result:
        """Run ``command`` in a new session channel (the login shell runs it).

        Args:
            command: The command string.
            timeout: Seconds to wait; on expiry the channel is closed.
            stdin: Sent on the channel, then end-of-file (else nothing is sent).

        Returns:
            The result; ``timed_out`` set when the timeout expired.

        Raises:
            asyncssh.Error: The connection failed (not the command).
        """
        try:
            done = await self._conn.run(
                command, check=False, timeout=timeout, encoding="utf-8", errors="replace",
                **({"input": stdin} if stdin else {"stdin": asyncssh.DEVNULL}),
            )
        except asyncssh.TimeoutError as exc:
            return Result(None, _text(exc.stdout), _text(exc.stderr), timed_out=True)
        # returncode is the negated signal number when the command was killed.
        status = done.returncode if done.returncode is not None and done.returncode >= 0 else None
        return Result(status, _text(done.stdout), _text(done.stderr))

    async def hold(self, command: str, timeout: float, until: str) -> Held:
        """Start ``command`` in its own channel and leave it running: see :class:`Held`."""
        return await ssh_hold(self._conn, command, timeout, until)


async def ssh_hold(conn: asyncssh.SSHClientConnection, command: str, timeout: float, until: str) -> Held:
    """:meth:`SSHRunner.hold` on an open connection: the command runs in its own channel, held open."""
    proc = await conn.create_process(command, encoding="utf-8", errors="replace")

    async def readline() -> str:
        return str(await proc.stdout.readline())

    async def release() -> None:
        try:
            proc.stdin.write_eof()
        except (OSError, asyncssh.Error, BrokenPipeError):
            pass
        try:
            await asyncio.wait_for(proc.wait_closed(), 5.0)
        except (TimeoutError, OSError, asyncssh.Error):
            proc.close()

    return await _first_answer(readline, release, lambda: proc.exit_status is None and not proc.is_closing(),
                               timeout, until)


def _decode(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", errors="replace")


def _text(data: str | bytes | None) -> str:
    if isinstance(data, bytes):
        return _decode(data)
    return data or ""


# --------------------------------------------------------------------------- plans


@dataclass(frozen=True, slots=True)
class StepOutcome:
    """How one plan step went.

    Attributes:
        step: The step that ran.
        result: What the command returned.
        fields: The ``key=value`` pairs of its ``specmon-<step> ...`` result
            line (managed mode; empty for custom commands).
    """

    step: PlanStep
    result: Result

    @property
    def fields(self) -> dict[str, str]:
        """The parsed result line of the fixed script."""
        return parse_result_line(self.result.stdout, f"specmon-{self.step.name}")

    @property
    def ok(self) -> bool:
        """True when the step succeeded."""
        return self.result.ok

    def summary(self) -> str:
        """One line for the event log: what happened, or why it failed (secret values hidden)."""
        return redact_text(self._summary())

    def _summary(self) -> str:
        f = self.fields
        if self.result.timed_out:
            return f"{self.step.name}: timed out after {self.step.timeout_s:g} s"
        if f:
            return f"{self.step.name}: " + " ".join(f"{k}={v}" for k, v in f.items())
        tail = (self.result.stderr.strip() or self.result.stdout.strip()).splitlines()[-1:] or [""]
        return f"{self.step.name}: exit {self.result.exit_status} {tail[0]}".rstrip()


@dataclass(frozen=True, slots=True)
class StepEvent:
    """Reported to ``on_step`` before (``outcome`` None) and after each step."""

    step: PlanStep
    phase: Literal["started", "finished"]
    outcome: StepOutcome | None = None


@dataclass(frozen=True, slots=True)
class ExecutionReport:
    """What :func:`execute` did: one outcome per step run, in order."""

    outcomes: tuple[StepOutcome, ...]

    @property
    def ok(self) -> bool:
        """True when every step ran and succeeded."""
        return len(self.outcomes) == 2 and all(o.ok for o in self.outcomes)

    @property
    def server_pid(self) -> int | None:
        """The PID the start step reported (managed mode)."""
        for o in self.outcomes:
            if o.step.name == "start" and o.fields.get("pid", "").isdigit():
                return int(o.fields["pid"])
        return None


StepCallback = Callable[[StepEvent], None | Awaitable[None]]


async def execute(plan: CommandPlan, runner: CommandRunner, on_step: StepCallback | None = None) -> ExecutionReport:
    """Run the plan's steps (stop, then start) in order; stop at the first failure.

    A failed stop never leads to a start: two servers on one port or one set of
    GPUs is worse than none.

    Args:
        plan: A plan from :func:`specmon.control.launch.build_plan`.
        runner: Where the commands run.
        on_step: Called with a :class:`StepEvent` before and after each step
            (may be a coroutine function).

    Returns:
        The outcomes of the steps that ran.

    Raises:
        TypeError: ``plan`` is not a CommandPlan.
        ReadOnlyError: specmon runs read-only (``--read-only``).
    """
    if not isinstance(plan, CommandPlan):
        raise TypeError("execute() runs only a CommandPlan built by build_plan()")
    refuse("restart the server")  # read-only: not one command of the plan runs
    outcomes: list[StepOutcome] = []
    for step in plan.steps_in_order:
        await _notify(on_step, StepEvent(step, "started"))
        result = await run_step(runner, step)
        outcome = StepOutcome(step, result)
        outcomes.append(outcome)
        await _notify(on_step, StepEvent(step, "finished", outcome))
        if not outcome.ok:
            break
    return ExecutionReport(tuple(outcomes))


async def run_step(runner: CommandRunner, step: PlanStep) -> Result:
    """Run one plan step, its input (a managed start's environment) on stdin.

    A runner that cannot feed stdin (a scripted one in tests) gets the command alone: the
    start script then refuses for want of its environment (``reason=env-missing``), loudly,
    rather than anything moving the environment onto a command line.
    """
    if step.stdin and _takes_stdin(runner):
        return await runner.run(step.command, step.timeout_s, stdin=step.stdin)  # type: ignore[call-arg]
    return await runner.run(step.command, step.timeout_s)


def _takes_stdin(runner: CommandRunner) -> bool:
    try:
        params = inspect.signature(runner.run).parameters
    except (TypeError, ValueError):
        return False
    return "stdin" in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


async def _notify(callback: StepCallback | None, event: StepEvent) -> None:
    if callback is None:
        return
    maybe = callback(event)
    if maybe is not None:
        await maybe


@dataclass(frozen=True, slots=True)
class ReadyOutcome:
    """How waiting for readiness ended.

    Attributes:
        state: ``ready``; ``exited`` (the server process is gone: look at its
            log); ``timeout``; or ``error`` (the check itself cannot run).
        checks: How many times the check ran.
        last: The last check's result.
    """

    state: Literal["ready", "exited", "timeout", "error", "no-marker"]
    checks: int
    last: Result | None

    def last_words(self) -> tuple[int, tuple[str, ...]] | None:
        """The end of the log the readiness check sent with ``exited``: (first line's number, lines).

        Line numbers count from 1, as the log tail counts the lines it delivers; None when
        the check sent no log (no log in the profile, or an older check).
        """
        return log_tail_of(self.last.stdout if self.last is not None else "")


_LOG_TAIL = re.compile(r"^specmon-(?:ready|alive) log-tail lines=(\d+) partial=([01])$", re.MULTILINE)


def log_tail_of(stdout: str) -> tuple[int, tuple[str, ...]] | None:
    """Parse ``ready.sh``'s ``log-tail`` block: the log's last lines and the number of the first.

    The block says how many newlines the log holds and whether its last line is unfinished,
    then gives the last lines themselves; so the first one's number is exact, and a reader
    that has already seen the first N lines knows which of these are new.
    """
    m = _LOG_TAIL.search(stdout)
    if m is None:
        return None
    lines = tuple(stdout[m.end() + 1:].splitlines())
    total = int(m.group(1)) + int(m.group(2))
    return max(1, total - len(lines) + 1), lines


#: A server answering its health URL is up; its log should show the ready marker within
#: seconds (SGLang logs it after one warm-up request, which a JIT-compiling kernel can make
#: slow). Two minutes of health without the marker: the marker (or the log) is wrong.
MARKER_GRACE_S = 120.0


async def wait_ready(
    plan: CommandPlan,
    runner: CommandRunner,
    *,
    sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    clock: Callable[[], float] = time.monotonic,
    marker_grace_s: float = MARKER_GRACE_S,
) -> ReadyOutcome:
    """Run the plan's readiness check every ``plan.ready.poll_s`` until it decides.

    Args:
        plan: The plan whose server was just started.
        runner: Where the check runs.
        sleep: Injected for tests.
        clock: Injected for tests (monotonic seconds).
        marker_grace_s: How long the server may answer its health URL without its
            log showing the ready marker before the wait ends as ``no-marker``.

    Returns:
        The outcome; never raises for an expected failure.
    """
    if not isinstance(plan, CommandPlan):
        raise TypeError("wait_ready() checks only a CommandPlan built by build_plan()")
    check = plan.ready
    deadline = clock() + check.timeout_s
    checks = 0
    last: Result | None = None
    healthy_since: float | None = None
    while True:
        last = await runner.run(check.command, timeout=30.0)
        checks += 1
        if last.exit_status == 0:
            return ReadyOutcome("ready", checks, last)
        if last.exit_status == 1 and "reason=marker health=ok" in (last.stdout or ""):
            healthy_since = clock() if healthy_since is None else healthy_since
            if clock() - healthy_since >= marker_grace_s:
                return ReadyOutcome("no-marker", checks, last)
        else:
            healthy_since = None
        if last.exit_status == 3:
            return ReadyOutcome("exited", checks, last)
        if last.exit_status not in (1, None):
            return ReadyOutcome("error", checks, last)
        if clock() >= deadline:
            return ReadyOutcome("timeout", checks, last)
        await sleep(check.poll_s)
