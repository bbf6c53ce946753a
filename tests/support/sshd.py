"""Real SSH servers on 127.0.0.1 for tests: an in-process asyncssh server and Debian's sshd.

Import the fixtures explicitly::

    from tests.support.sshd import asyncssh_server, client_home, openssh_server

* ``client_home``: HOME pointed at a temp dir holding ``~/.ssh/id_ed25519``
  (asyncssh reads HOME); no SSH agent; helpers to write known_hosts and config.
* ``asyncssh_server``: ``asyncssh.listen`` on port 0 with a generated host
  key, accepting the client key; exec requests run as real ``/bin/sh -c``
  subprocesses (so ``tail``/``stat``/``find`` are the real tools), and
  ``drop()`` aborts every live connection (the network going away).
  It also forwards direct TCP/IP, so it can act as a ProxyJump host.
* ``openssh_server``: ``/usr/sbin/sshd -D`` with a temp config and keys (as
  ``/work/shared/recipes/sshd_loopback.sh``); ``drop()`` kills the
  per-connection sshd processes by PID; stopped by PID at the end. Missing
  sshd fails the test under ``CI=true`` and skips it elsewhere.

Every process started here is stopped by its recorded PID or process group.
"""

from __future__ import annotations

import asyncio
import getpass
import os
import pwd
import signal
import socket
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import asyncssh
import pytest

SSHD = Path("/usr/sbin/sshd")

__all__ = [
    "AsyncSSHServer",
    "ClientHome",
    "OpenSSHServer",
    "asyncssh_server",
    "client_home",
    "openssh_server",
    "require_sshd",
]


@dataclass
class ClientHome:
    """The client's HOME for one test."""

    path: Path
    key: asyncssh.SSHKey

    @property
    def ssh_dir(self) -> Path:
        return self.path / ".ssh"

    @property
    def known_hosts(self) -> Path:
        return self.ssh_dir / "known_hosts"

    def public_key_line(self) -> str:
        """The client's public key in authorized_keys format."""
        return self.key.export_public_key().decode().strip()

    def trust(self, host_pattern: str, key: asyncssh.SSHKey) -> None:
        """Append ``host_pattern key`` to ~/.ssh/known_hosts."""
        line = f"{host_pattern} {key.export_public_key().decode().strip()}\n"
        with open(self.known_hosts, "a") as f:
            f.write(line)

    def write_config(self, text: str) -> Path:
        """Write ~/.ssh/config."""
        path = self.ssh_dir / "config"
        path.write_text(text)
        return path


def _make_home(tmp_path: Path) -> ClientHome:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    key = asyncssh.generate_private_key("ssh-ed25519")
    key.write_private_key(home / ".ssh" / "id_ed25519")
    key.write_public_key(home / ".ssh" / "id_ed25519.pub")
    os.chmod(home / ".ssh" / "id_ed25519", 0o600)
    (home / ".ssh" / "known_hosts").write_text("")
    return ClientHome(home, key)


@pytest.fixture
def client_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ClientHome:
    """HOME in tmp with a fresh client key; nobody's own ~/.ssh or agent leaks in."""
    home = _make_home(tmp_path)
    monkeypatch.setenv("HOME", str(home.path))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    return home


# -- in-process asyncssh server -------------------------------------------------


class _Server(asyncssh.SSHServer):
    def __init__(self, owner: AsyncSSHServer) -> None:
        self._owner = owner
        self._conn: asyncssh.SSHServerConnection | None = None

    def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
        self._conn = conn
        self._owner.accepted += 1
        self._owner.connections.add(conn)

    def connection_lost(self, exc: Exception | None) -> None:
        if self._conn is not None:
            self._owner.connections.discard(self._conn)

    def auth_completed(self) -> None:
        self._owner.authenticated += 1

    def connection_requested(self, dest_host: str, dest_port: int, orig_host: str, orig_port: int) -> bool:
        # Plain port forwarding, so this server can serve as a ProxyJump host.
        self._owner.forwards.append((dest_host, dest_port))
        return True


@dataclass
class AsyncSSHServer:
    """Handle on the in-process server."""

    host_key: asyncssh.SSHKey
    workdir: Path
    port: int = 0
    accepted: int = 0  # TCP connections that reached SSH
    authenticated: int = 0
    commands: list[str] = field(default_factory=list)
    forwards: list[tuple[str, int]] = field(default_factory=list)
    connections: set[asyncssh.SSHServerConnection] = field(default_factory=set)
    pids: set[int] = field(default_factory=set)
    handlers: set[asyncio.Task[None]] = field(default_factory=set)
    acceptor: asyncssh.SSHAcceptor | None = None

    @property
    def known_hosts_pattern(self) -> str:
        return f"[127.0.0.1]:{self.port}"

    def drop(self) -> int:
        """Abort every live connection, as a network failure would; returns how many."""
        conns = list(self.connections)
        for conn in conns:
            conn.abort()
        return len(conns)

    async def _handle(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        task = asyncio.current_task()
        assert task is not None
        self.handlers.add(task)
        try:
            await self._run_command(process)
        finally:
            self.handlers.discard(task)

    async def _run_command(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or "true"
        self.commands.append(command)
        proc = await asyncio.create_subprocess_shell(
            command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.workdir,
            start_new_session=True,  # its own process group: stopped as a group by PID
        )
        self.pids.add(proc.pid)

        async def pump(reader: asyncio.StreamReader, writer: asyncssh.SSHWriter[bytes]) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            except (OSError, asyncssh.Error):
                pass  # the channel went away: the finally below stops the process

        async def feed() -> None:
            # The channel's input to the command, then end-of-file, as sshd does.
            assert proc.stdin is not None
            try:
                while data := await process.stdin.read(65536):
                    proc.stdin.write(data if isinstance(data, bytes) else data.encode())
                    await proc.stdin.drain()
            except (OSError, asyncssh.Error):
                pass
            finally:
                proc.stdin.close()

        assert proc.stdout is not None and proc.stderr is not None
        feeding = asyncio.ensure_future(feed())
        pumps = asyncio.gather(pump(proc.stdout, process.stdout), pump(proc.stderr, process.stderr))
        closed = asyncio.ensure_future(process.wait_closed())
        try:
            await asyncio.wait({pumps, closed}, return_when=asyncio.FIRST_COMPLETED)
            if pumps.done() and not closed.done():
                process.exit(await proc.wait())
        except (OSError, asyncssh.Error):
            pass
        finally:
            closed.cancel()
            pumps.cancel()
            feeding.cancel()
            await asyncio.gather(pumps, closed, feeding, return_exceptions=True)
            _kill_group(proc.pid)
            self.pids.discard(proc.pid)
            await proc.wait()

    async def stop(self) -> None:
        self.drop()
        for pid in list(self.pids):
            _kill_group(pid)
        # Let handlers reap their processes before the loop closes.
        if self.handlers:
            await asyncio.wait(set(self.handlers), timeout=10)
        if self.acceptor is not None:
            self.acceptor.close()
            await self.acceptor.wait_closed()


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


async def start_asyncssh_server(
    home: ClientHome, workdir: Path, *, authorized: list[asyncssh.SSHKey] | None = None
) -> AsyncSSHServer:
    """Listen on 127.0.0.1:0; ``authorized`` defaults to the client's own key."""
    server = AsyncSSHServer(host_key=asyncssh.generate_private_key("ssh-ed25519"), workdir=workdir)
    keys = authorized if authorized is not None else [home.key]
    authorized_keys = asyncssh.import_authorized_keys(
        "".join(k.export_public_key().decode() for k in keys)
    )
    server.acceptor = await asyncssh.listen(
        "127.0.0.1",
        0,
        server_factory=lambda: _Server(server),
        server_host_keys=[server.host_key],
        authorized_client_keys=authorized_keys,
        process_factory=server._handle,
        encoding=None,
        allow_scp=False,
        keepalive_interval=0,
    )
    server.port = server.acceptor.get_port()
    return server


@pytest.fixture
async def asyncssh_server(client_home: ClientHome, tmp_path: Path) -> AsyncIterator[AsyncSSHServer]:
    """An in-process SSH server whose host key is already in known_hosts."""
    workdir = tmp_path / "remote"
    workdir.mkdir()
    server = await start_asyncssh_server(client_home, workdir)
    client_home.trust(server.known_hosts_pattern, server.host_key)
    try:
        yield server
    finally:
        await server.stop()


# -- Debian's OpenSSH sshd ------------------------------------------------------


def require_sshd() -> None:
    """Fail under CI (where .ci/run installs it), skip elsewhere, when sshd is missing."""
    if os.access(SSHD, os.X_OK):
        return
    message = f"{SSHD} is missing: apt-get install openssh-server"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    """Direct children of ``pid`` (from /proc; no pattern matching on names)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        # Field 4 is the parent PID; the command name (field 2) may contain spaces.
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            out.append(int(entry))
    return out


def _descendants(pid: int) -> list[int]:
    found = []
    stack = [pid]
    while stack:
        for child in _children(stack.pop()):
            found.append(child)
            stack.append(child)
    return found


@dataclass
class OpenSSHServer:
    """Handle on a running sshd."""

    port: int
    process: subprocess.Popen[bytes]
    directory: Path
    host_key: asyncssh.SSHKey
    user: str

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def known_hosts_pattern(self) -> str:
        return f"[127.0.0.1]:{self.port}"

    def connection_pids(self) -> list[int]:
        """PIDs of the per-connection sshd processes (children of the listener)."""
        return _children(self.pid)

    def drop(self) -> int:
        """Kill every per-connection sshd process tree by PID (a dropped network link).

        The remote shell and tail under them go too, as when a host reboots.
        """
        killed = 0
        rehash = False
        for child in self.connection_pids():
            for pid in [child, *_descendants(child)]:
                rehash = rehash or _is_rehash(pid)
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
                except ProcessLookupError:
                    pass
        if rehash:
            # We killed a session inside its login script's pyenv rehash: the lock it may hold
            # would make every later login here wait pyenv's 60 s. A second rehash overlapping
            # a live one (if it was only waiting) is harmless; a dead lock is not.
            clear_stale_pyenv_lock(max_age_s=0.0)
        return killed

    def log(self) -> str:
        return (self.directory / "sshd.log").read_text(errors="replace")

    def stop(self) -> None:
        for pid in _descendants(self.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)


def _is_rehash(pid: int) -> bool:
    """Whether ``pid`` runs pyenv's rehash (read from /proc; nothing is signalled by name)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read()
    except OSError:
        return False
    return b"pyenv" in argv and b"rehash" in argv


def clear_stale_pyenv_lock(max_age_s: float = 60.0) -> None:
    """Remove a pyenv rehash lock that a killed SSH session left behind.

    On this project's machines root's ``~/.bashrc`` runs ``pyenv init``, which
    rehashes under the lock file ``$PYENV_ROOT/shims/.pyenv-shim``, in every SSH
    session sshd starts. A test that kills a session mid-rehash (the drop tests
    kill the per-connection sshd) leaves the lock, and every later SSH command
    then waits pyenv's 60 s lock timeout before it runs: starts time out, tails
    never begin. A rehash holds the lock well under a second, so an old one is stale.
    """
    real_home = Path(pwd.getpwuid(os.getuid()).pw_dir)  # sshd's sessions use the account's home, not $HOME
    for candidate in {real_home / ".pyenv" / "shims" / ".pyenv-shim",
                      Path(os.environ.get("PYENV_ROOT", real_home / ".pyenv")) / "shims" / ".pyenv-shim"}:
        try:
            age = time.time() - candidate.stat().st_mtime
            if age > max_age_s:
                candidate.unlink()
        except OSError:
            pass


def start_openssh_server(home: ClientHome, directory: Path) -> OpenSSHServer:
    """Start sshd on a free loopback port trusting the client key; wait until it listens."""
    require_sshd()
    clear_stale_pyenv_lock()
    directory.mkdir(parents=True, exist_ok=True)
    Path("/run/sshd").mkdir(parents=True, exist_ok=True)  # privilege separation dir
    host_key = asyncssh.generate_private_key("ssh-ed25519")
    host_key.write_private_key(directory / "hostkey")
    os.chmod(directory / "hostkey", 0o600)
    (directory / "authorized_keys").write_text(home.public_key_line() + "\n")
    port = _free_port()
    config = directory / "sshd_config"
    config.write_text(
        f"ListenAddress 127.0.0.1\nPort {port}\nHostKey {directory / 'hostkey'}\n"
        f"AuthorizedKeysFile {directory / 'authorized_keys'}\n"
        "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\n"
        "StrictModes no\nPermitRootLogin prohibit-password\n"
        f"PidFile {directory / 'sshd.pid'}\n"
    )
    check = subprocess.run([str(SSHD), "-t", "-f", str(config)], capture_output=True, text=True)
    if check.returncode != 0:
        pytest.fail(f"sshd rejected its test config: {check.stderr}")
    log = open(directory / "sshd.log", "wb")
    process = subprocess.Popen([str(SSHD), "-D", "-e", "-f", str(config)], stderr=log, stdin=subprocess.DEVNULL)
    log.close()
    server = OpenSSHServer(port, process, directory, host_key, pwd.getpwuid(os.getuid()).pw_name)
    deadline = time.monotonic() + 20
    while True:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                break
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                server.stop()
                pytest.fail(f"sshd did not start: {server.log()}")
            time.sleep(0.05)
    return server


@pytest.fixture
def openssh_server(client_home: ClientHome, tmp_path: Path) -> Iterator[OpenSSHServer]:
    """sshd on 127.0.0.1 with its host key in known_hosts; stopped by PID afterwards."""
    server = start_openssh_server(client_home, tmp_path / "sshd")
    client_home.trust(server.known_hosts_pattern, server.host_key)
    try:
        yield server
    finally:
        server.stop()


def local_user() -> str:
    """The user sshd will log us in as."""
    return getpass.getuser()
