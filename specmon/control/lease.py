"""One controller per server: a lease taken before any restart, stop or sweep.

Two specmon instances driving one server fight: a dashboard's ``r`` stops the
server a headless sweep is measuring, one dashboard's ``g`` kills another's.
So every action that changes a server first takes its lease, and holds it for
as long as the action runs:

- **on the client**, per server (host and pidfile): ``fcntl.flock`` on a file in
  ``<data>/specmon/locks/`` (0600 in 0700). The kernel drops it when the process
  ends, however it ends: nothing goes stale;
- **on the host**, beside the pidfile (``PIDFILE.lock``, in the private run
  folder by default): the fixed ``lease.sh`` ``flock``\\ s it and stays running
  in its own SSH channel (or local process) until specmon closes its stdin; a
  lost connection ends it, and so releases the lease.

Each side writes who holds it (PID, machine, since when, what action): a second
instance is refused with that, and can still watch (reading a log needs no
lease). A host without ``flock`` keeps the client lease only, and says so.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import re
import shlex
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from specmon import paths
from specmon.control.launch import LEASE_SCRIPT, RUN_DIR, LaunchProfile, expand, parse_result_line
from specmon.control.launch_profile import PLACEHOLDERS
from specmon.control.runner import CommandRunner, Held

__all__ = ["Holder", "LeaseHeld", "ServerLease", "lease_for"]

#: Seconds to wait for the host to answer whether the lease is free.
HOST_ANSWER_S = 30.0


@dataclass(frozen=True, slots=True)
class Holder:
    """Who holds a lease: as written into the lock file by the holder."""

    pid: int | None
    machine: str
    since: float | None
    action: str

    def text(self) -> str:
        """``specmon PID 4242 on laptop, since 17:40 UTC, for a sweep``."""
        who = f"specmon PID {self.pid}" if self.pid else "another specmon"
        parts = [who + (f" on {self.machine}" if self.machine else "")]
        if self.since:
            parts.append("since " + time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since)))
        if self.action:
            parts.append(f"for {self.action}")
        return ", ".join(parts)

    def info(self) -> str:
        """The one line written into the lock file (plain characters only: the host script keeps no others)."""
        return (f"pid={self.pid or 0} host={_plain(self.machine)} since={int(self.since or 0)} "
                f"action={_plain(self.action).replace(' ', '_')}")

    @classmethod
    def parse(cls, text: str) -> Holder:
        """Read :meth:`info`'s line back (unknown or damaged fields are left empty)."""
        fields = dict(w.split("=", 1) for w in text.split() if "=" in w)
        pid = int(fields["pid"]) if fields.get("pid", "").isdigit() and int(fields["pid"]) > 0 else None
        since = float(fields["since"]) if fields.get("since", "").isdigit() and int(fields["since"]) > 0 else None
        return cls(pid, _plain(fields.get("host", "")), since, _plain(fields.get("action", "")).replace("_", " "))


def _plain(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._:@-]", "", text.replace(" ", "_"))[:80]


class LeaseHeld(Exception):
    """Another instance holds the server's lease; the message says who, since when and for what."""

    def __init__(self, holder: Holder | None, where: str, host: str) -> None:
        self.holder = holder
        self.where = where
        who = holder.text() if holder is not None else "another specmon"
        place = "on this machine" if where == "client" else f"on {host}"
        super().__init__(f"another specmon controls this server ({who}; lease {place}): refusing to restart or "
                         "stop it while it does; watching still works")


class ServerLease:
    """The lease on one server: client lock and host lock, taken together, held until released.

    Args:
        runner: Where the host lock is held (a runner with ``hold``: local or SSH). A runner
            without it (a scripted one in tests) gives the client lock only.
        host: The host label (the client lock's key, and the messages).
        pidfile: The server's pidfile on the host (``~/...`` allowed): the lock sits beside it.
        action: What the holder is doing (``"sweep"``, ``"dashboard restarts"``), shown to others.
    """

    def __init__(self, runner: CommandRunner, host: str, pidfile: str, action: str) -> None:
        self.runner = runner
        self.host = host
        self.pidfile = pidfile
        self.action = action
        self._fd: int | None = None
        self._held: Held | None = None
        self.since: float | None = None
        #: Why the host lock is not held while the client one is (no flock there), for the messages.
        self.host_note: str | None = None

    @property
    def path(self) -> str:
        """The client's lock file."""
        digest = hashlib.sha256(f"{self.host}\0{self.pidfile}".encode()).hexdigest()[:16]
        return str(paths.locks_dir() / f"{digest}.lock")

    @property
    def held(self) -> bool:
        """Whether this instance holds the lease now (the host side still running, where there is one)."""
        return self._fd is not None and (self._held is None or self._held.running)

    def me(self) -> Holder:
        """This instance, as others will see it."""
        return Holder(os.getpid(), socket.gethostname(), self.since or time.time(), self.action)

    async def acquire(self) -> None:
        """Take the lease (both sides), or keep it when held; a lost host side is taken again.

        Raises:
            LeaseHeld: another instance holds it (here or on the host); nothing is held then.
            ConnectionError, OSError: the host cannot be asked.
        """
        if self.held:
            return
        if self._fd is None:
            self.since = time.time()
            self._lock_client()
        hold = getattr(self.runner, "hold", None)
        if hold is None:
            return
        if self._held is not None:
            await self._held.release()
            self._held = None
        command = shlex.join(["sh", "-c", LEASE_SCRIPT, "specmon-lease", self.pidfile, self.me().info()])
        try:
            held: Held = await hold(command, HOST_ANSWER_S, "specmon-lease ")
        except BaseException:
            self._unlock_client()
            raise
        fields = parse_result_line(held.stdout, "specmon-lease")
        result = fields.get("result")
        if result == "acquired" and held.running:
            self._held = held
            return
        await held.release()
        if result == "unsupported":
            self.host_note = f"{self.host} has no flock: only this machine's instances are kept apart"
            return
        self._unlock_client()
        if result == "held":
            line = held.stdout.strip().splitlines()[-1] if held.stdout.strip() else ""
            raise LeaseHeld(Holder.parse(line.partition("result=held")[2]), "host", self.host)
        why = fields.get("reason") or ("no answer" if held.timed_out else "no lease")
        raise ConnectionError(f"cannot take the lease on {self.host}: {why}")

    async def release(self) -> None:
        """Give the lease back (host side first); idempotent."""
        held, self._held = self._held, None
        if held is not None:
            await held.release()
        self._unlock_client()

    @contextlib.asynccontextmanager
    async def holding(self) -> AsyncIterator[ServerLease]:
        """``async with lease.holding():`` the action runs under the lease, released after."""
        await self.acquire()
        try:
            yield self
        finally:
            await self.release()

    # -- the client side ------------------------------------------------------------------

    def _lock_client(self) -> None:
        paths.private_dir(paths.locks_dir())
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise LeaseHeld(holder, "client", self.host) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(_holder_json(self.me())) + "\n").encode(), 0)
        self._fd = fd

    def _unlock_client(self) -> None:
        fd, self._fd = self._fd, None
        if fd is None:
            return
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor drops the flock


def _holder_json(h: Holder) -> dict[str, Any]:
    return {"pid": h.pid, "machine": h.machine, "since": h.since, "action": h.action}


def _read_holder(fd: int) -> Holder | None:
    try:
        data = json.loads(os.pread(fd, 4096, 0).decode("utf-8", "replace") or "null")
        return Holder(int(data["pid"]), str(data["machine"])[:80], float(data["since"]), str(data["action"])[:80])
    except (OSError, ValueError, TypeError, KeyError):
        return None


def lease_for(profile: LaunchProfile, runner: CommandRunner, host: str, action: str) -> ServerLease:
    """The lease on the server ``profile`` starts on ``host``.

    Managed: beside its pidfile. Custom (no pidfile): a lock in the private run folder named
    for the profile's stop command, which is what names the server there.
    """
    if profile.mode == "managed":
        values = {"port": str(profile.port)} if profile.port is not None else {}
        pidfile = expand(profile.pidfile_template(), values)
    else:
        # With its port: replicas on one host whose stop commands differ only in {port} are two servers.
        keep = {name: "{" + name + "}" for name in PLACEHOLDERS}
        stop = [expand(t, keep | {"port": str(profile.port)}) if profile.port is not None else t
                for t in (profile.stop or [])]
        digest = hashlib.sha256(json.dumps(stop).encode()).hexdigest()[:12]
        pidfile = f"{RUN_DIR}/custom-{digest}"
    return ServerLease(runner, host, pidfile, action)
