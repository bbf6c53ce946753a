"""Real managed servers specmon left running, recorded so the next session finds them.

A sweep or a dashboard that restarted a real server (not the demo) never stops
it when specmon exits, whether by ``q``, SIGTERM or a closed terminal: a
15-minute start-up must not die with a terminal. What was started is recorded
here, in the user data directory (``<data>/specmon/servers/``, platformdirs),
per host and pidfile: PID, start time, step count, log. The next ``connect`` or
``sweep`` with the same launch profile checks that the very process still runs
(PID *and* start time, with the fixed read-only ``alive.sh``), says so and
adopts it: the controller knows its step count, and the first restart stops it
by its pidfile.

Nothing is claimed unchecked: a server whose start ended with its process gone
is recorded as exited, with its cause (:func:`record_exited`), and "left
running" is only said after ``alive.sh`` found that very process (PID *and*
start time) still running (:func:`left_running_note`).
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import asyncssh

from specmon import paths
from specmon.control.launch import ALIVE_SCRIPT, CommandPlan, ProcessIdentity, parse_result_line
from specmon.control.restart_progress import plan_label
from specmon.control.runner import CommandRunner
from specmon.redact import redact_text

__all__ = ["ServerRecord", "check_record", "check_with_cause", "forget", "left_running_note", "load_record", "record_exited",
           "record_started", "records_dir"]


def records_dir() -> Path:
    """Where the records of servers left running are kept: :func:`specmon.paths.servers_dir`."""
    return paths.servers_dir()


def _path(host: str, pidfile: str) -> Path:
    digest = hashlib.sha256(f"{host}\0{pidfile}".encode()).hexdigest()[:16]
    return records_dir() / f"{digest}.json"


@dataclass(frozen=True, slots=True)
class ServerRecord:
    """A server specmon started and left running.

    Attributes:
        host: The host label.
        pidfile: The pidfile on the host.
        pid: Its PID.
        starttime: Its start time (``/proc/PID/stat`` field 22).
        steps: The step count it was started with.
        draft_tokens: Its draft-token count (None: no speculation).
        log: The log it writes.
        started_at: Wall-clock seconds when it was started.
        state: ``running`` (as far as specmon knows) or ``exited`` (checked gone).
        cause: Why it exited, when known (its log's last words, secrets hidden).
        ended_at: Wall-clock seconds when it was found gone.
    """

    host: str
    pidfile: str
    pid: int
    starttime: int
    steps: int
    draft_tokens: int | None
    log: str | None
    started_at: float
    state: str = "running"
    cause: str = ""
    ended_at: float | None = None

    @property
    def identity(self) -> ProcessIdentity:
        """PID and start time."""
        return ProcessIdentity(self.pid, self.starttime)

    def left_running_text(self) -> str:
        """What specmon says on exit."""
        return (f"the server on {self.host} is left running (PID {self.pid}, "
                f"{plan_label(self.steps, self.draft_tokens)}, log {self.log}); the next connect or sweep with "
                f"this profile adopts it (recorded in {_path(self.host, self.pidfile)})")

    def exited_text(self) -> str:
        """What specmon says of a server it started that is gone."""
        why = f": {self.cause}" if self.cause else " (no cause in its log)"
        return f"the server specmon started on {self.host} (PID {self.pid}) has exited{why}"

    def adopted_text(self) -> str:
        """What the next session says once it checked that the server still runs."""
        since = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(self.started_at))
        return (f"the server specmon started on {self.host} at {since} is still running: PID {self.pid} "
                f"({plan_label(self.steps, self.draft_tokens)}); adopted from {self.pidfile}: r restarts it")


def record_started(plan: CommandPlan, identity: ProcessIdentity) -> ServerRecord | None:
    """Record the server ``plan`` started (managed plans only); returns the record.

    A write that fails (read-only home) is not an error: the record is a convenience.
    """
    if plan.mode != "managed" or plan.pidfile is None:
        return None
    record = ServerRecord(host=plan.host, pidfile=plan.pidfile, pid=identity.pid, starttime=identity.starttime,
                          steps=plan.steps, draft_tokens=plan.draft_tokens, log=plan.log, started_at=time.time())
    path = _path(plan.host, plan.pidfile)
    try:
        paths.write_private(path, json.dumps(asdict(record), indent=2) + "\n")
    except OSError:
        return None
    return record


def record_exited(host: str, pidfile: str, pid: int, cause: str = "") -> ServerRecord | None:
    """Mark the record of ``pid`` exited, with its cause; returns it (None: no such record, or not that PID).

    The record stays (the next session says what happened), but it is never adopted.
    """
    record = load_record(host, pidfile)
    if record is None or record.pid != pid:
        return None
    done = replace(record, state="exited", cause=cause[:300], ended_at=time.time())
    try:
        paths.write_private(_path(host, pidfile), json.dumps(asdict(done), indent=2) + "\n")
    except OSError:
        return None
    return done


def load_record(host: str, pidfile: str) -> ServerRecord | None:
    """The record for a host and pidfile, or None (none, or unreadable: then it is ignored)."""
    try:
        data: dict[str, Any] = json.loads(_path(host, pidfile).read_text(encoding="utf-8"))
        record = ServerRecord(**data)
        ProcessIdentity(record.pid, record.starttime)  # validates both
    except (OSError, ValueError, TypeError):
        return None
    if record.state not in ("running", "exited"):
        return None
    if record.host != host or record.pidfile != pidfile:
        return None
    return record


def forget(host: str, pidfile: str) -> None:
    """Drop the record (the server is gone, or specmon stopped it)."""
    try:
        _path(host, pidfile).unlink()
    except OSError:
        pass


def alive_command(record: ServerRecord) -> str:
    """The fixed, read-only check that the recorded process still runs and the pidfile names it.

    When it is gone, the check sends the end of its log (the cause).
    """
    return shlex.join(["sh", "-c", ALIVE_SCRIPT, "specmon-alive", record.pidfile, str(record.pid),
                       str(record.starttime), record.log or ""])


async def check_record(record: ServerRecord, runner: CommandRunner, timeout: float = 30.0) -> str:
    """Run :func:`alive_command` on the host: ``"running"``, ``"gone"``, ``"replaced"`` or ``"unknown"``.

    ``replaced``: the process runs, but its pidfile names another one now (someone else restarted it).
    """
    return (await check_with_cause(record, runner, timeout))[0]


async def check_with_cause(record: ServerRecord, runner: CommandRunner, timeout: float) -> tuple[str, str]:
    """:func:`check_record`, with why a gone server went (its log's last words, secrets hidden)."""
    try:
        result = await runner.run(alive_command(record), timeout)
    except (OSError, asyncssh.Error, ConnectionError) as exc:
        return "unknown", f"cannot reach the host: {exc}"
    fields = parse_result_line(result.stdout, "specmon-alive")
    if result.exit_status == 0 and fields.get("result") == "running":
        return "running", ""
    if result.exit_status == 3:
        return "gone", exit_cause(result.stdout)
    if result.exit_status == 4:
        return "replaced", ""
    said = (result.stderr.strip() or result.stdout.strip()).splitlines()
    return "unknown", redact_text(said[-1]) if said else f"exit {result.exit_status}"


def exit_cause(stdout: str) -> str:
    """The most telling of a gone server's last log lines (sent by ``alive.sh``/``ready.sh``), secrets hidden.

    What ended it (:func:`specmon.model.last_words.death_cause`: the first fatal line of its last
    run, a traceback's exception line, or the first line of a stop such as ``SIGTERM received``);
    when the lines say nothing of an end, the last non-blank line.
    """
    from specmon.control.runner import log_tail_of
    from specmon.model.last_words import death_cause

    tail = log_tail_of(stdout)
    if tail is None:
        return ""
    lines = [line.strip() for line in tail[1] if line.strip()]
    if not lines:
        return ""
    return redact_text(death_cause(lines) or lines[-1])[:300]


async def left_running_note(record: ServerRecord, runner: CommandRunner,
                            timeout: float = 30.0) -> tuple[str, str]:
    """``(state, text)``: what to say at exit of the server ``record`` names, once checked on the host.

    ``running`` (PID and start time, and its pidfile naming it): "left running". ``gone``:
    recorded as exited, with the cause its log ends with, and said so. ``replaced`` (another
    process in its pidfile: someone else restarted it) or ``unknown`` (not checkable): said
    so, never "left running".
    """
    state, detail = await check_with_cause(record, runner, timeout)
    if state == "running":
        return state, record.left_running_text()
    if state == "gone":
        done = record_exited(record.host, record.pidfile, record.pid, detail) or replace(record, cause=detail)
        return state, done.exited_text()
    if state == "replaced":
        forget(record.host, record.pidfile)
        return state, (f"the server specmon started on {record.host} (PID {record.pid}) still runs, but "
                       f"{record.pidfile} names another process now (another specmon restarted it): "
                       "not recorded as left running")
    return state, (f"could not check the server specmon started on {record.host} (PID {record.pid}): {detail}; "
                   "the next connect or sweep with this profile checks it again")
