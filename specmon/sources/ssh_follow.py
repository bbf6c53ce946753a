"""What following a remote log can end in: a :class:`Loss` of bytes destroyed on the host before they were
read, and the exceptions that steer :class:`~specmon.sources.ssh.SSHTailSource`'s follow loop (fatal, lost,
follow again at once), with the file facts it compares (:class:`_FileInfo`)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Loss"]


@dataclass(slots=True)
class _FileInfo:
    dev: int
    inode: int
    size: int
    mtime: float  # seconds since the epoch, on the host's clock


@dataclass(frozen=True, slots=True)
class Loss:
    """Bytes that were on the host but are gone before the source could read them.

    Attributes:
        path: The file they were written to (the name it was followed by).
        identity: ``(device, inode)`` of that file, if known.
        offset: Everything before this byte offset was delivered.
        size: How many bytes were lost, when the host could still tell; None
            when it cannot be known (the file was destroyed while disconnected).
        reason: One sentence for the event log.
    """

    path: str
    identity: tuple[int, int] | None
    offset: int
    size: int | None
    reason: str


class _Fatal(Exception):
    """A problem reconnecting cannot fix (missing ``sh``, no log found, a directory)."""


class _Lost(Exception):
    """The follow channel ended; reconnect."""


class _Restart(Exception):
    """Follow again at once with the current position (e.g. the file was replaced)."""
