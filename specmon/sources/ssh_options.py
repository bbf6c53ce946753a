"""The SSH tail source for ``specmon connect``, from its command-line options and a profile."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from specmon.sources.lines import DEFAULT_MAX_LINE
from specmon.sources.ssh import DEFAULT_LINES, SSHTailSource
from specmon.ssh.connect import target_from_options

if TYPE_CHECKING:
    from specmon.sources.base import LogProfile
    from specmon.ssh.connect import HostProfile

    class RemoteLogProfile(HostProfile, LogProfile, Protocol):
        """Where the host is and where its log is: what ``specmon connect`` reads."""

__all__ = ["build_ssh_source"]


def build_ssh_source(
    destination: str | None,
    *,
    log: str | None = None,
    profile: RemoteLogProfile | None = None,
    port: int | None = None,
    identity: str | None = None,
    jump: str | None = None,
    ssh_config: str | None = None,
    lines: int | None = None,
    line_cap: int | None = None,
) -> SSHTailSource:
    """Build the source for ``specmon connect`` from CLI options and a profile.

    Options win over the profile. Nothing is connected here.

    Args:
        destination: ``[USER@]HOST[:PORT]`` or an ssh alias; None = the profile's host.
        log: ``--log PATH``; else the profile's ``log``; else its ``log_glob``.
        profile: The selected profile, if any.
        port: ``-p/--port``.
        identity: ``-i/--identity``.
        jump: ``-J/--jump``.
        ssh_config: An OpenSSH client config file instead of ``~/.ssh/config``.
        lines: History lines to show first (default: profile's, else 1000).
        line_cap: ``--line-cap``: longest line kept, bytes (default: profile's, else 1 MiB).

    Raises:
        ValueError: no host, no log and no glob, or invalid values; the message
            says exactly what to pass.
    """
    target = target_from_options(
        destination, profile=profile, port=port, identity=identity, jump=jump, ssh_config=ssh_config
    )
    path = log or (profile.log if profile else None)
    glob = profile.log_glob if profile else None
    if not path and not glob:
        raise ValueError(
            f"which log? pass it: specmon connect {target.label} --log /path/to/server.log "
            "(or set 'log' or 'log_glob' in a profile)"
        )
    if path is not None and (not path.strip() or any(ord(c) < 32 or c == "\x7f" for c in path)):
        raise ValueError(f"invalid log path {path!r}")
    if lines is None:
        lines = profile.lines if profile and profile.lines is not None else DEFAULT_LINES
    if line_cap is None:
        line_cap = profile.line_cap if profile and profile.line_cap is not None else DEFAULT_MAX_LINE
    return SSHTailSource(target, path, log_glob=None if path else glob, lines=lines, max_line=line_cap)
