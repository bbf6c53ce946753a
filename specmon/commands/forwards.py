"""An engine's ``/metrics`` on a host, reached through an SSH local port forward.

Used by ``connect`` for one server's counters and by a replicas fleet for each replica on a
host: the server's port stays on the host, and each entry of the opener opens its own verified
SSH connection and a free local port. Only the standard library is imported at module level.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable
    from contextlib import AbstractAsyncContextManager

    from specmon.ssh.connect import SSHTarget

__all__ = ["forwarded_metrics"]


def forwarded_metrics(url: str, target: SSHTarget) -> tuple[Callable[[], AbstractAsyncContextManager[str]], str]:
    """An opener for ``url`` as ``target`` sees it, through an SSH local port forward, and what it reaches in
    words: each entry opens its own verified SSH connection and a free local port (the server's port stays
    on the host)."""
    import contextlib
    from collections.abc import AsyncIterator
    from urllib.parse import urlsplit

    from specmon.control.load import forwarded_base_url
    from specmon.ssh import connect as sshconfig

    parts = urlsplit(url)
    host = parts.hostname or "127.0.0.1"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    path = (parts.path or "/metrics") + (f"?{parts.query}" if parts.query else "")

    @contextlib.asynccontextmanager
    async def opener() -> AsyncIterator[str]:
        link = await sshconfig.connect(target)
        try:
            async with forwarded_base_url(link.conn, port, remote_host=host, scheme=parts.scheme or "http") as base:
                yield base + path
        finally:
            link.close()

    return opener, f"{host}:{port} on {target.label}, through an SSH port forward"
