"""SSHTailSource and sshconfig against real SSH servers on 127.0.0.1 (no mocks of asyncssh).

Most tests use the in-process asyncssh server (fast, hermetic); the ``sshd``
marked ones use Debian's OpenSSH sshd. HOME is a temp dir in every test.
Waits are bounded polls that turn a hang into a failure; nothing asserts timing.
"""

from __future__ import annotations

import asyncio
import os
import random
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path

import asyncssh
import pytest

from specmon.config import Profile
from specmon.sources.base import ConnectionState, LineSource, SourceStatus
from specmon.sources.ssh import (
    Backoff,
    SSHTailSource,
    helper_script,
    status_line,
    tail_command,
)
from specmon.sources.ssh_options import build_ssh_source
from specmon.ssh.connect import (
    ErrorKind,
    SSHError,
    SSHTarget,
    connect,
    parse_destination,
    target_from_options,
)
from tests.support.sshd import (
    AsyncSSHServer,
    ClientHome,
    OpenSSHServer,
    start_asyncssh_server,
)


async def fast_sleep(_seconds: float) -> None:
    """Backoff without wall-clock waiting (the loop still turns)."""
    await asyncio.sleep(0.01)


class Gate:
    """A sleep that returns only when the test opens the gate (controls reconnect timing)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()
        self.delays: list[float] = []

    async def sleep(self, seconds: float) -> None:
        self.delays.append(seconds)
        await self.event.wait()
        self.event.clear()


async def until(predicate: Callable[[], bool], what: str, source: SSHTailSource | None = None) -> None:
    """Wait for a condition; a generous bound turns a hang into a readable failure."""
    for _ in range(6000):
        if predicate():
            return
        await asyncio.sleep(0.005)
    state = f"; status={source.status!r}" if source else ""
    raise AssertionError(f"timed out waiting for {what}{state}")


class Collector:
    """Consume a source's batches in a task."""

    def __init__(self, source: SSHTailSource) -> None:
        assert isinstance(source, LineSource)
        self.source = source
        self.lines: list[str] = []
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        async for batch in self.source.batches():
            assert batch
            self.lines.extend(batch)

    async def wait_lines(self, count: int) -> None:
        await until(lambda: len(self.lines) >= count, f"{count} lines (have {len(self.lines)})", self.source)

    async def wait_state(self, state: ConnectionState) -> None:
        await until(lambda: self.source.status.state is state, f"state {state.value}", self.source)

    async def stop(self) -> None:
        await self.source.close()
        await asyncio.wait_for(self.task, 20)


def events(source: SSHTailSource) -> str:
    return "\n".join(source.status.events)


def target_for(server: AsyncSSHServer | OpenSSHServer, **kw: object) -> SSHTarget:
    return SSHTarget("127.0.0.1", port=server.port, **kw)  # type: ignore[arg-type]


def append(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)


def numbered(count: int, start: int = 0) -> list[str]:
    return [f"Decode batch {i:06d}, accept len: 2.{i % 97:02d}, gen throughput (token/s): 8{i % 10}.5"
            for i in range(start, start + count)]


async def write_in_pieces(path: Path, data: bytes, rng: random.Random) -> None:
    """Append ``data`` in random-sized chunks that cut lines anywhere."""
    position = 0
    with open(path, "ab", buffering=0) as f:
        while position < len(data):
            size = rng.randint(1, 700)
            f.write(data[position : position + size])
            position += size
            await asyncio.sleep(0.0005)


# -- pure helpers -----------------------------------------------------------------


def test_backoff_is_capped_full_jitter() -> None:
    top = Backoff(rand=lambda: 1.0)
    assert [top.delay(n) for n in range(1, 9)] == [1, 2, 4, 8, 16, 30, 30, 30]
    assert Backoff(rand=lambda: 0.25).delay(3) == 1.0
    rng = random.Random(7)
    jittered = Backoff(rand=rng.random)
    assert all(0 <= jittered.delay(n) <= min(30, 2 ** (n - 1)) for n in range(1, 50))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu-box", (None, "gpu-box", None)),
        ("alice@gpu-box:2222", ("alice", "gpu-box", 2222)),
        ("[::1]:2200", (None, "::1", 2200)),
        ("bob@fe80::1", ("bob", "fe80::1", None)),
        ("ssh://carol@h.example:22/", ("carol", "h.example", 22)),
    ],
)
def test_parse_destination(text: str, expected: tuple[str | None, str, int | None]) -> None:
    assert parse_destination(text) == expected


@pytest.mark.parametrize("text", ["-oProxyCommand=sh", "a b", "h:0", "h:99999", "@h", "u@", "h\n"])
def test_parse_destination_rejects(text: str) -> None:
    with pytest.raises(ValueError):
        parse_destination(text)


def test_target_precedence_cli_over_profile() -> None:
    profile = Profile(host="alice@box:2200", identity="~/k", jump="bastion", log="/x")
    target = target_from_options(None, profile=profile)
    assert (target.user, target.host, target.port, target.jump) == ("alice", "box", 2200, "bastion")
    assert target.identity == (os.path.expanduser("~/k"),)
    target = target_from_options("bob@other", profile=profile, port=22, identity="/id", jump="none")
    assert (target.user, target.host, target.port, target.jump, target.identity) == (
        "bob", "other", 22, "none", ("/id",))
    with pytest.raises(ValueError, match="bad jump|must not"):
        target_from_options("box", jump="-x")


def test_build_source_says_what_to_pass_without_log() -> None:
    with pytest.raises(ValueError, match=r"specmon connect box --log /path/to/server.log"):
        build_ssh_source("box")
    source = build_ssh_source(None, profile=Profile(host="box", log_glob="logs/*.log", lines=5))
    assert source.name == "box:logs/*.log" and source.path is None
    source = build_ssh_source("box:2222", log="/var/log/s.log")
    assert source.name == "box:2222:/var/log/s.log"


def test_status_line_shows_silence_and_countdown() -> None:
    live = SourceStatus(state=ConnectionState.LIVE, detail="following /x", lines=3042, bytes=1_234_567,
                        last_line_at=1000.0, latency_ms=12.4)
    assert status_line(live, now=1004.2) == "live · 12 ms · 1.2 MB · 3,042 lines · last line 4s ago"
    assert "last line 2m05s ago" in status_line(live, now=1125.0)  # a silent server is visible
    waiting = SourceStatus(state=ConnectionState.RECONNECTING, retry_at=1010.0, attempts=3,
                           detail="connection lost: reset; retrying in 9.0s (attempt 3)")
    assert status_line(waiting, now=1003.0) == (
        "reconnecting in 7s (attempt 3) · 0 B · 0 lines · no line yet · connection lost: reset")
    missing = SourceStatus(state=ConnectionState.LIVE, detail="file not found: /x (waiting for it to appear)")
    assert status_line(missing, now=0).endswith("file not found: /x (waiting for it to appear)")


def test_tail_command_quotes_every_argument() -> None:
    argv = shlex.split(tail_command("/logs/it's $(here).log", 41, (2049, 77)))
    assert argv[:3] == ["exec", "sh", "-c"] and argv[3] == helper_script()
    assert argv[4:] == ["specmon-tail", "/logs/it's $(here).log", "2049", "77", "41", "0.2", "", "", ""]
    born = shlex.split(tail_command("/l", 41, (2049, 77), birth="1796137526.958919894"))
    assert born[-1] == "1796137526.958919894"
    chained = shlex.split(tail_command("/l", 0, None, after="1796132945.6029521210", seen=[(1, 2), (1, 3)]))
    assert chained[-4:] == ["0.2", "1796132945.6029521210", "1:2 1:3", ""]
    with pytest.raises(ValueError):
        tail_command("/l", 0, None, after="1; rm -rf /")
    assert "#" not in helper_script().splitlines()[0]  # comments stay in the package


# -- tailing through the in-process server ------------------------------------------


async def test_history_then_follow_with_status(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(line + "\n" for line in numbered(10)))
    source = SSHTailSource(target_for(asyncssh_server), str(log), lines=3, sleep=fast_sleep)
    c = Collector(source)
    await c.wait_lines(3)
    assert c.lines == numbered(3, start=7)
    assert source.status.state is ConnectionState.LIVE
    append(log, ("\n".join(numbered(2, start=10)) + "\n").encode())
    await c.wait_lines(5)
    status = source.status
    assert c.lines == numbered(5, start=7)
    assert status.lines == 5
    assert status.bytes == sum(len(x) + 1 for x in c.lines)  # history + live bytes
    assert status.last_line_at is not None and status.latency_ms is not None
    ino = log.stat().st_ino
    assert f"{ino} from byte {log.stat().st_size - 2 * (len(numbered(1)[0]) + 1)}" in events(source)
    await c.stop()
    assert source.status.state is ConnectionState.ENDED


async def test_whole_file_when_lines_is_none(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(line + "\n" for line in numbered(3000)))
    c = Collector(SSHTailSource(target_for(asyncssh_server), str(log), lines=None, sleep=fast_sleep))
    await c.wait_lines(3000)
    await c.stop()
    assert c.lines == numbered(3000)


async def test_ssh_agent_is_used(asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    socket_path = tmp_path / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL,
                             stdin=subprocess.DEVNULL)
    try:
        await until(socket_path.exists, "ssh-agent socket")
        env = {**os.environ, "SSH_AUTH_SOCK": str(socket_path)}
        subprocess.run(["ssh-add", str(client_home.ssh_dir / "id_ed25519")], env=env, check=True,
                       capture_output=True, timeout=30)
        # The key now lives only in the agent.
        (client_home.ssh_dir / "id_ed25519").unlink()
        (client_home.ssh_dir / "id_ed25519.pub").unlink()
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        log = tmp_path / "server.log"
        log.write_text("via agent\n")
        c = Collector(SSHTailSource(target_for(asyncssh_server), str(log), sleep=fast_sleep))
        await c.wait_lines(1)
        await c.stop()
        assert c.lines == ["via agent"]
    finally:
        agent.terminate()
        agent.wait(10)


async def test_partial_lines_across_packets(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=fast_sleep)
    c = Collector(source)
    await c.wait_state(ConnectionState.LIVE)
    text = "gen throughput (token/s): 88.8 — π\n".encode()
    cut = text.index("π".encode()) + 1  # inside a two-byte character
    append(log, text[:cut])
    await until(lambda: source.status.bytes == cut, "the first packet")
    assert c.lines == []  # held back: not a complete line
    append(log, text[cut:] + b"bad \xff byte\n")
    await c.wait_lines(2)
    await c.stop()
    assert c.lines == ["gen throughput (token/s): 88.8 — π", "bad \ufffd byte"]


async def test_drop_mid_burst_loses_and_repeats_nothing(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"")
    expected = numbered(6000)
    data = [("\n".join(part) + "\n").encode() for part in (expected[:2000], expected[2000:4000], expected[4000:])]
    rng = random.Random(1234)
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=fast_sleep)
    c = Collector(source)
    await c.wait_state(ConnectionState.LIVE)
    writer = asyncio.create_task(write_in_pieces(log, data[0], rng))
    await c.wait_lines(700)
    assert asyncssh_server.drop() == 1  # mid-burst: the writer is still going
    await writer
    writer = asyncio.create_task(write_in_pieces(log, data[1], rng))
    await c.wait_lines(2500)
    assert asyncssh_server.drop() == 1
    await writer
    await write_in_pieces(log, data[2], rng)
    await c.wait_lines(len(expected))
    await asyncio.sleep(0.05)  # a duplicate would show up as extra lines
    await c.stop()
    assert len(c.lines) == len(expected)
    assert c.lines == expected
    assert events(source).count("resuming") == 2
    assert asyncssh_server.authenticated == 3


async def test_rotation_while_connected_is_followed(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\na2\n")
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=fast_sleep)
    c = Collector(source)
    await c.wait_lines(2)
    log.rename(tmp_path / "server.log.1")
    log.write_text("")
    # GNU tail reports this as "has been replaced", "file truncated" or "has become
    # inaccessible" + "has appeared", depending on timing; the source must follow in all cases.
    await until(lambda: source.position == (log.stat().st_ino, 0), "the new file noticed", source)
    append(log, b"b1\nb2\n")
    await c.wait_lines(4)
    # The offset now counts in the new file: a drop resumes in it, not in the old one.
    assert source.position == (log.stat().st_ino, 6)
    asyncssh_server.drop()
    append(log, b"b3\n")
    await c.wait_lines(5)
    await c.stop()
    assert c.lines == ["a1", "a2", "b1", "b2", "b3"]


async def test_rotation_while_disconnected_recovers_old_file(
    asyncssh_server: AsyncSSHServer, tmp_path: Path
) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\na2\n")
    gate = Gate()
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=gate.sleep)
    c = Collector(source)
    await c.wait_lines(2)
    asyncssh_server.drop()
    await c.wait_state(ConnectionState.RECONNECTING)
    assert source.status.retry_at is not None
    append(log, b"a3\na4\n")  # written to the old file while we are away
    log.rename(tmp_path / "server.log.1")
    log.write_text("b1\nb2\n")
    gate.event.set()
    await c.wait_lines(6)
    await c.stop()
    assert c.lines == ["a1", "a2", "a3", "a4", "b1", "b2"]
    assert "was rotated while disconnected: reading the rest of" in events(source)
    assert source.losses == []


async def test_rotation_while_disconnected_old_file_gone(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a1\n")
    gate = Gate()
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=gate.sleep)
    c = Collector(source)
    await c.wait_lines(1)
    asyncssh_server.drop()
    await c.wait_state(ConnectionState.RECONNECTING)
    log.unlink()
    log.write_text("b1\n")
    gate.event.set()
    await c.wait_lines(2)
    await c.stop()
    assert c.lines == ["a1", "b1"]
    assert source.status.lost == 1 and "lost" in events(source)
    assert source.losses[0].offset == 3


async def test_truncation_while_disconnected(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("a long first line that makes the file big\n")
    gate = Gate()
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=gate.sleep)
    c = Collector(source)
    await c.wait_lines(1)
    asyncssh_server.drop()
    await c.wait_state(ConnectionState.RECONNECTING)
    with open(log, "r+b") as f:
        f.truncate(0)
    append(log, b"new\n")
    gate.event.set()
    await c.wait_lines(2)
    await c.stop()
    assert c.lines[1:] == ["new"]
    assert "truncated while disconnected" in events(source)


async def test_missing_file_is_shown_then_followed(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "later.log"
    source = SSHTailSource(target_for(asyncssh_server), str(log), sleep=fast_sleep)
    c = Collector(source)
    await until(lambda: "file not found" in source.status.detail, "file-not-found detail", source)
    log.write_text("hello\n")
    await c.wait_lines(1)
    await until(lambda: source.status.detail.startswith("following"), "detail cleared", source)
    await c.stop()
    assert c.lines == ["hello"]


async def test_path_with_shell_metacharacters(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "it's $(touch pwned) ; a log.log"
    log.write_text("x1\n")
    c = Collector(SSHTailSource(target_for(asyncssh_server), str(log), lines=10, sleep=fast_sleep))
    await c.wait_lines(1)
    append(log, b"x2\n")
    await c.wait_lines(2)
    await c.stop()
    assert c.lines == ["x1", "x2"]
    assert not (asyncssh_server.workdir / "pwned").exists()


async def test_log_glob_picks_newest(asyncssh_server: AsyncSSHServer) -> None:
    logs = asyncssh_server.workdir / "logs"
    logs.mkdir()
    for i, name in enumerate(["old.log", "new.log"]):
        (logs / name).write_text(f"{name}\n")
        os.utime(logs / name, (1_000_000 + i, 1_000_000 + i))
    source = SSHTailSource(target_for(asyncssh_server), None, log_glob="logs/*.log", sleep=fast_sleep)
    c = Collector(source)
    await c.wait_lines(1)
    await c.stop()
    assert c.lines == ["new.log"]
    assert source.path == "logs/new.log" and source.name.endswith(":logs/new.log")


async def test_log_glob_without_match_says_what_to_pass(asyncssh_server: AsyncSSHServer) -> None:
    source = SSHTailSource(target_for(asyncssh_server), None, log_glob="nothing/*.log", sleep=fast_sleep)
    c = Collector(source)
    await c.wait_state(ConnectionState.FAILED)
    await c.stop()
    assert "--log /path/to/server.log" in source.status.detail


async def test_close_while_waiting_to_retry_ends_the_source(client_home: ClientHome) -> None:
    gate = Gate()
    # A port nobody listens on: connection refused, a network error, retried.
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    source = SSHTailSource(SSHTarget("127.0.0.1", port=port), "/x.log", sleep=gate.sleep, clock=lambda: 1000.0,
                           backoff=Backoff(rand=lambda: 0.5))
    c = Collector(source)
    await c.wait_state(ConnectionState.RECONNECTING)
    assert source.status.attempts == 1
    assert source.status.retry_at == 1000.5
    assert "cannot connect" in source.status.detail and "retrying in 0.5s" in source.status.detail
    gate.event.set()
    await until(lambda: source.status.attempts == 2, "second attempt", source)
    assert gate.delays == [0.5, 1.0]
    await c.stop()
    assert source.status.state is ConnectionState.ENDED and c.lines == []


# -- host keys and authentication ---------------------------------------------------


async def fail_once(source: SSHTailSource) -> str:
    c = Collector(source)
    await c.wait_state(ConnectionState.FAILED)
    await asyncio.wait_for(c.task, 20)  # a fatal error ends the iterator by itself
    assert source.status.attempts == 0, "fatal errors are not retried"
    return source.status.detail


async def test_unknown_host_key_refused_with_fingerprint(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    client_home.known_hosts.write_text("")
    detail = await fail_once(SSHTailSource(target_for(asyncssh_server), "/x.log", sleep=fast_sleep))
    fingerprint = asyncssh_server.host_key.get_fingerprint()
    assert "unknown host" in detail and fingerprint in detail
    assert f"ssh-keyscan -t ed25519 -p {asyncssh_server.port} 127.0.0.1 >> {client_home.known_hosts}" in detail
    assert f"ssh -p {asyncssh_server.port} " in detail
    assert asyncssh_server.authenticated == 0


async def test_changed_host_key_refused_loudly(asyncssh_server: AsyncSSHServer, client_home: ClientHome) -> None:
    client_home.known_hosts.write_text("")
    client_home.trust(asyncssh_server.known_hosts_pattern, asyncssh.generate_private_key("ssh-ed25519"))
    with pytest.raises(SSHError) as info:
        await connect(target_for(asyncssh_server))
    assert info.value.kind is ErrorKind.HOST_KEY_CHANGED and not info.value.retryable
    assert "HAS CHANGED" in str(info.value)
    assert info.value.fingerprint == asyncssh_server.host_key.get_fingerprint()
    assert "ssh-keygen -R" in str(info.value)
    assert asyncssh_server.authenticated == 0


async def test_user_known_hosts_none_refused_before_connecting(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome
) -> None:
    client_home.write_config("Host *\n    UserKnownHostsFile none\n")
    detail = await fail_once(SSHTailSource(target_for(asyncssh_server), "/x.log", sleep=fast_sleep))
    assert "UserKnownHostsFile none" in detail
    assert asyncssh_server.accepted == 0


async def test_wrong_client_key_reported_not_retried(client_home: ClientHome, tmp_path: Path) -> None:
    other = asyncssh.generate_private_key("ssh-ed25519")
    server = await start_asyncssh_server(client_home, tmp_path, authorized=[other])
    client_home.trust(server.known_hosts_pattern, server.host_key)
    try:
        detail = await fail_once(SSHTailSource(target_for(server), "/x.log", sleep=fast_sleep))
    finally:
        await server.stop()
    assert "authentication failed" in detail and "~/.ssh/id_ed25519" in detail
    assert server.accepted == 1 and server.authenticated == 0


# -- ~/.ssh/config and jumps ---------------------------------------------------------


async def test_config_alias_hostname_port_identity(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    # The only usable key is at a non-default path named by IdentityFile.
    (client_home.ssh_dir / "id_ed25519").rename(client_home.ssh_dir / "lab_key")
    (client_home.ssh_dir / "id_ed25519.pub").unlink()
    client_home.write_config(
        f"Host gpu\n    HostName 127.0.0.1\n    Port {asyncssh_server.port}\n"
        "    IdentityFile ~/.ssh/lab_key\n    ServerAliveInterval 7\n"
    )
    log = tmp_path / "server.log"
    log.write_text("via alias\n")
    source = build_ssh_source("gpu", log=str(log))
    c = Collector(source)
    await c.wait_lines(1)
    await c.stop()
    assert c.lines == ["via alias"]
    link = await connect(SSHTarget("gpu"))
    try:
        # ServerAliveInterval from the config is honoured.
        assert link.conn._keepalive_interval == 7
    finally:
        link.close()


async def test_identity_override_missing_file_is_a_clear_error(asyncssh_server: AsyncSSHServer) -> None:
    with pytest.raises(SSHError) as info:
        await connect(target_for(asyncssh_server, identity=("/nonexistent/key",)))
    assert info.value.kind is ErrorKind.CONFIG and "/nonexistent/key" in str(info.value)


async def test_encrypted_identity_says_use_the_agent(asyncssh_server: AsyncSSHServer, tmp_path: Path) -> None:
    key_file = tmp_path / "locked_key"
    asyncssh.generate_private_key("ssh-ed25519").write_private_key(
        key_file, format_name="pkcs8-pem", passphrase="s3cret", cipher_name="aes256-cbc")  # no bcrypt needed
    with pytest.raises(SSHError) as info:
        await connect(target_for(asyncssh_server, identity=(str(key_file),)))
    assert info.value.kind is ErrorKind.CONFIG and "ssh-add" in str(info.value)


async def test_proxy_jump_from_config_and_override(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    jump_dir = tmp_path / "jump"
    jump_dir.mkdir()
    jump = await start_asyncssh_server(client_home, jump_dir)
    client_home.trust(jump.known_hosts_pattern, jump.host_key)
    log = tmp_path / "server.log"
    log.write_text("through the jump host\n")
    try:
        client_home.write_config(
            f"Host target\n    HostName 127.0.0.1\n    Port {asyncssh_server.port}\n"
            f"    ProxyJump 127.0.0.1:{jump.port}\n"
        )
        c = Collector(build_ssh_source("target", log=str(log)))
        await c.wait_lines(1)
        await c.stop()
        assert c.lines == ["through the jump host"]
        assert jump.forwards == [("127.0.0.1", asyncssh_server.port)]
        # -J on the command line overrides the config (here: the same jump, spelled explicitly).
        c = Collector(build_ssh_source(f"127.0.0.1:{asyncssh_server.port}", log=str(log),
                                       jump=f"127.0.0.1:{jump.port}"))
        await c.wait_lines(1)
        await c.stop()
        assert len(jump.forwards) == 2
    finally:
        await jump.stop()


async def test_jump_host_with_unknown_key_is_refused(
    asyncssh_server: AsyncSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    jump_dir = tmp_path / "jump"
    jump_dir.mkdir()
    jump = await start_asyncssh_server(client_home, jump_dir)  # its key is NOT trusted
    try:
        with pytest.raises(SSHError) as info:
            await connect(target_for(asyncssh_server, jump=f"127.0.0.1:{jump.port}"))
    finally:
        await jump.stop()
    assert info.value.kind is ErrorKind.HOST_KEY_UNKNOWN
    assert "jump host" in str(info.value) and jump.host_key.get_fingerprint() in str(info.value)
    assert asyncssh_server.accepted == 0 and jump.authenticated == 0


# -- Debian's OpenSSH sshd ----------------------------------------------------------


@pytest.mark.sshd
async def test_openssh_drop_mid_stream_every_line_once(openssh_server: OpenSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text("".join(line + "\n" for line in numbered(50)))
    expected = numbered(3000, start=50)
    parts = [("\n".join(expected[i : i + 1000]) + "\n").encode() for i in range(0, 3000, 1000)]
    rng = random.Random(99)
    source = SSHTailSource(target_for(openssh_server, user=openssh_server.user), str(log), lines=20,
                           sleep=fast_sleep)
    c = Collector(source)
    await c.wait_lines(20)
    assert c.lines == numbered(20, start=30)
    writer = asyncio.create_task(write_in_pieces(log, parts[0], rng))
    await c.wait_lines(20 + 300)
    assert openssh_server.drop() >= 1  # kill the per-connection sshd by PID
    await writer
    await write_in_pieces(log, parts[1], rng)
    await c.wait_lines(20 + 1500)
    assert openssh_server.drop() >= 1
    await write_in_pieces(log, parts[2], rng)
    await c.wait_lines(20 + 3000)
    await asyncio.sleep(0.05)
    await c.stop()
    assert c.lines == numbered(20, start=30) + expected
    assert events(source).count("resuming") == 2


@pytest.mark.sshd
async def test_openssh_unknown_host_printed_command_works(
    openssh_server: OpenSSHServer, client_home: ClientHome, tmp_path: Path
) -> None:
    client_home.known_hosts.write_text("")
    log = tmp_path / "server.log"
    log.write_text("trusted now\n")
    detail = await fail_once(SSHTailSource(target_for(openssh_server, user=openssh_server.user), str(log),
                                           sleep=fast_sleep))
    # Our fingerprint is the one OpenSSH itself shows.
    pub = tmp_path / "hostkey.pub"
    openssh_server.host_key.write_public_key(pub)
    ssh_keygen = subprocess.run(["ssh-keygen", "-l", "-f", str(pub)], capture_output=True, text=True, check=True)
    assert ssh_keygen.stdout.split()[1] in detail
    # Run the exact ssh-keyscan command we printed, then connecting works.
    command = detail.split("trust it with: ", 1)[1].split("   or connect once with", 1)[0]
    assert command.startswith("ssh-keyscan ")
    subprocess.run(["sh", "-c", command], check=True, capture_output=True, timeout=30)
    c = Collector(SSHTailSource(target_for(openssh_server, user=openssh_server.user), str(log), sleep=fast_sleep))
    await c.wait_lines(1)
    await c.stop()
    assert c.lines == ["trusted now"]

