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
"""

from __future__ import annotations

import hashlib
import json
import shlex
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from specmon import paths
from specmon.control.launch import ALIVE_SCRIPT, CommandPlan, ProcessIdentity, parse_result_line
from specmon.control.runner import CommandRunner

__all__ = ["ServerRecord", "check_record", "forget", "load_record", "record_started", "records_dir"]


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
    """

    host: str
    pidfile: str
    pid: int
    starttime: int
    steps: int
    draft_tokens: int | None
    log: str | None
    started_at: float

    @property
    def identity(self) -> ProcessIdentity:
        """PID and start time."""
        return ProcessIdentity(self.pid, self.starttime)

    def left_running_text(self) -> str:
        """What specmon says on exit."""
        from specmon.control.restart import plan_label

        return (f"the server on {self.host} is left running (PID {self.pid}, "
                f"{plan_label(self.steps, self.draft_tokens)}, log {self.log}); the next connect or sweep with "
                f"this profile adopts it (recorded in {_path(self.host, self.pidfile)})")

    def adopted_text(self) -> str:
        """What the next session says once it checked that the server still runs."""
        from specmon.control.restart import plan_label

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


def load_record(host: str, pidfile: str) -> ServerRecord | None:
    """The record for a host and pidfile, or None (none, or unreadable: then it is ignored)."""
    try:
        data: dict[str, Any] = json.loads(_path(host, pidfile).read_text(encoding="utf-8"))
        record = ServerRecord(**data)
        ProcessIdentity(record.pid, record.starttime)  # validates both
    except (OSError, ValueError, TypeError):
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
    """The fixed, read-only check that the recorded process still runs and the pidfile names it."""
    return shlex.join(["sh", "-c", ALIVE_SCRIPT, "specmon-alive", record.pidfile, str(record.pid),
                       str(record.starttime)])


async def check_record(record: ServerRecord, runner: CommandRunner, timeout: float = 30.0) -> str:
    """Run :func:`alive_command` on the host: ``"running"``, ``"gone"``, ``"replaced"`` or ``"unknown"``.

    ``replaced``: the process runs, but its pidfile names another one now (someone else restarted it).
    """
    result = await runner.run(alive_command(record), timeout)
    fields = parse_result_line(result.stdout, "specmon-alive")
    if result.exit_status == 0 and fields.get("result") == "running":
        return "running"
    if result.exit_status == 3:
        return "gone"
    if result.exit_status == 4:
        return "replaced"
    return "unknown"
