"""A host name that never resolved is a mistake, said at once; one that answered before is a drop, retried.

Against the in-process asyncssh server on 127.0.0.1, reached through an ``~/.ssh/config`` alias
whose HostName the test changes: the name stops resolving after the host answered once.
"""

from __future__ import annotations

from pathlib import Path

from specmon.sources.base import ConnectionState
from specmon.sources.ssh import SSHTailSource
from specmon.ssh.connect import ErrorKind, SSHTarget
from tests.ssh.test_ssh_source import Collector, fast_sleep, until
from tests.support.sshd import AsyncSSHServer, ClientHome

#: Reserved by RFC 2606: never resolves, on any network.
NO_SUCH_NAME = "nosuchhost.invalid"


async def test_a_name_that_never_resolved_fails_at_once_with_the_name_whole(
        client_home: ClientHome, tmp_path: Path) -> None:
    source = SSHTailSource(SSHTarget(NO_SUCH_NAME), str(tmp_path / "x.log"), sleep=fast_sleep)
    c = Collector(source)
    await c.wait_state(ConnectionState.FAILED)
    await c.stop()
    assert source.status.attempts == 0  # not one retry
    assert source.failure_kind is ErrorKind.UNKNOWN_NAME
    assert f"'{NO_SUCH_NAME}'" in source.status.detail
    assert "check the spelling" in source.status.detail


async def test_a_name_that_answered_once_is_retried_when_it_stops_resolving(
        asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("first line\n")
    alias = f"Host box\n    HostName {{}}\n    Port {asyncssh_server.port}\n    HostKeyAlias 127.0.0.1\n"
    client_home.write_config(alias.format("127.0.0.1"))
    source = SSHTailSource(SSHTarget("box"), str(log), sleep=fast_sleep)
    c = Collector(source)
    await c.wait_lines(1)
    client_home.write_config(alias.format(NO_SUCH_NAME))  # the name drops out of DNS
    assert asyncssh_server.drop() == 1
    await until(lambda: "resolve" in source.status.detail and source.status.attempts > 0,
                "a retry on the unresolved name", source)
    assert source.status.state is ConnectionState.RECONNECTING
    client_home.write_config(alias.format("127.0.0.1"))  # back: the tail goes on
    with log.open("a") as f:
        f.write("second line\n")
    await c.wait_lines(2)
    await c.stop()
    assert c.lines == ["first line", "second line"]
    assert source.failure_kind is None
