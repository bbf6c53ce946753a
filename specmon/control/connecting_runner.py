"""A command runner that opens its SSH connection on first use, inside the running app (:class:`ConnectingRunner`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import asyncssh

from specmon.control.runner import Held, Result, SSHRunner, ssh_hold


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
