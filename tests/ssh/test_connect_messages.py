"""connect()'s refusal messages against Debian's real OpenSSH sshd on 127.0.0.1."""

from __future__ import annotations

import pytest

from specmon.ssh.connect import ErrorKind, SSHError, SSHTarget, connect
from tests.support.sshd import ClientHome, OpenSSHServer

pytestmark = pytest.mark.sshd


async def refused(target: SSHTarget) -> SSHError:
    with pytest.raises(SSHError) as info:
        link = await connect(target)
        link.close()
    assert not info.value.retryable
    return info.value


async def test_known_hosts_dev_null_is_refused_not_advised(
    openssh_server: OpenSSHServer, client_home: ClientHome
) -> None:
    client_home.write_config("Host *\n    UserKnownHostsFile /dev/null\n")
    error = await refused(SSHTarget("127.0.0.1", port=openssh_server.port, user=openssh_server.user))
    assert error.kind is ErrorKind.KNOWN_HOSTS_DISABLED
    assert "UserKnownHostsFile /dev/null" in str(error) and ">> /dev/null" not in str(error)
    assert "Accepted" not in openssh_server.log() and "Connection from" not in openssh_server.log()


async def test_no_key_at_all_says_so_in_plain_words(openssh_server: OpenSSHServer, client_home: ClientHome) -> None:
    (client_home.ssh_dir / "id_ed25519").unlink()
    (client_home.ssh_dir / "id_ed25519.pub").unlink()
    error = await refused(SSHTarget("127.0.0.1", port=openssh_server.port, user=openssh_server.user))
    assert error.kind is ErrorKind.AUTH
    assert "no key was offered: there is no SSH agent and no ~/.ssh/id_* key file" in str(error)
    assert "none of no keys" not in str(error)


async def test_wrong_user_is_named_as_a_possible_cause(openssh_server: OpenSSHServer) -> None:
    error = await refused(SSHTarget("127.0.0.1", port=openssh_server.port, user="nosuchuser"))
    assert error.kind is ErrorKind.AUTH
    assert "the server accepted none of the keys offered (~/.ssh/id_ed25519)" in str(error)
    assert "Check the user name ('nosuchuser'" in str(error)
