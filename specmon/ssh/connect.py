"""Resolve an SSH destination the way ``ssh`` does and connect with host keys verified.

What is honoured: ``~/.ssh/config`` (``Host`` aliases, ``HostName``, ``User``,
``Port``, ``IdentityFile``, ``ProxyJump``, ``ServerAliveInterval``/``CountMax``,
``UserKnownHostsFile``/``GlobalKnownHostsFile``, ``HostKeyAlias``, ...), the
SSH agent (``SSH_AUTH_SOCK`` / ``IdentityAgent``) and the default keys
(``~/.ssh/id_*``) — all through asyncssh's own OpenSSH-config support. The
command line (``-p``, ``-i``, ``-J``, ``USER@``) overrides the file, as with ssh.

Host keys are verified against known_hosts, always:

* the known_hosts files are resolved here like OpenSSH does (user files
  default to ``~/.ssh/known_hosts{,2}``, global ones to
  ``/etc/ssh/ssh_known_hosts{,2}``; missing files count as empty), loaded, and
  passed to asyncssh explicitly — ``known_hosts=None`` is never passed;
* ``UserKnownHostsFile none`` (which makes asyncssh skip verification) is
  refused before any connection is made;
* an unknown host is refused with its key fingerprint and the exact
  ``ssh-keyscan``/``ssh`` command to trust it; a changed key is refused loudly.
  To show the fingerprint, a second connection fetches the server's key
  without authenticating (``asyncssh.get_server_host_key``); that key is only
  displayed, never trusted.

There is deliberately no option to turn verification off.

``ProxyJump`` chains are opened hop by hop here (not by asyncssh from a string)
so that every hop gets the same known_hosts resolution and checks.
"""

from __future__ import annotations

import asyncio
import ipaddress
import os
import re
import shlex
import socket
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Protocol

import asyncssh

__all__ = [
    "DEFAULT_KEEPALIVE_COUNT_MAX",
    "DEFAULT_KEEPALIVE_INTERVAL",
    "ErrorKind",
    "ResolvedHop",
    "SSHError",
    "SSHLink",
    "SSHTarget",
    "connect",
    "parse_destination",
    "resolve_hop",
    "target_from_options",
]

#: Keepalive used when ~/.ssh/config sets no ServerAliveInterval: a dead peer is
#: noticed within about interval * (count_max + 1) seconds instead of never.
DEFAULT_KEEPALIVE_INTERVAL = 15.0
DEFAULT_KEEPALIVE_COUNT_MAX = 3
_MAX_JUMP_DEPTH = 5
_DEFAULT_USER_KNOWN_HOSTS = ("~/.ssh/known_hosts", "~/.ssh/known_hosts2")
_DEFAULT_GLOBAL_KNOWN_HOSTS = ("/etc/ssh/ssh_known_hosts", "/etc/ssh/ssh_known_hosts2")
_BAD_CHARS = re.compile(r"[\x00-\x20\x7f]")


class ErrorKind(str, Enum):
    """Why a connection attempt failed; decides whether retrying can help."""

    KNOWN_HOSTS_DISABLED = "known_hosts_disabled"
    HOST_KEY_UNKNOWN = "host_key_unknown"
    HOST_KEY_CHANGED = "host_key_changed"
    HOST_KEY_INVALID = "host_key_invalid"  # revoked, bad certificate, ...
    AUTH = "auth"
    CONFIG = "config"
    PROTOCOL = "protocol"
    NETWORK = "network"
    #: The name did not resolve (no such host in DNS or /etc/hosts, or no name server answered): retryable,
    #: because a host that answered before may drop out of DNS for a while; a caller that never reached
    #: it calls it a mistake.
    UNKNOWN_NAME = "unknown_name"


_RETRYABLE = {ErrorKind.NETWORK, ErrorKind.UNKNOWN_NAME}
#: getaddrinfo's answers that mean "no such name" (not "the name server did not answer": EAI_AGAIN), said so.
_NO_SUCH_NAME = {getattr(socket, n) for n in ("EAI_NONAME", "EAI_NODATA", "EAI_ADDRFAMILY") if hasattr(socket, n)}


class SSHError(Exception):
    """A connection failure explained for the user; ``str()`` is the message.

    Attributes:
        kind: What went wrong.
        retryable: True only for network trouble; authentication, host-key and
            configuration problems never fix themselves.
        fingerprint: The server's host key fingerprint, for host-key errors.
    """

    def __init__(self, kind: ErrorKind, message: str, fingerprint: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retryable = kind in _RETRYABLE
        self.fingerprint = fingerprint


def _validate_token(value: str, what: str) -> str:
    """Reject values that could be read as options or break a shell command line."""
    if not value:
        raise ValueError(f"empty {what}")
    if value.startswith("-"):
        raise ValueError(f"{what} must not start with '-': {value!r}")
    if _BAD_CHARS.search(value):
        raise ValueError(f"{what} must not contain spaces or control characters: {value!r}")
    return value


def parse_destination(text: str) -> tuple[str | None, str, int | None]:
    """Split ``[USER@]HOST[:PORT]`` (also ``[IPv6]:PORT`` and ``ssh://...``).

    Returns:
        ``(user, host, port)``; user and port are None when not given.

    Raises:
        ValueError: empty parts, a bad port, or characters that could inject
            options (leading ``-``, whitespace, control characters).
    """
    rest = text
    if rest.startswith("ssh://"):
        rest = rest[len("ssh://") :].rstrip("/")
    user: str | None = None
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        _validate_token(user, "user")
    port: int | None = None
    if rest.startswith("["):
        close = rest.find("]")
        if close < 0:
            raise ValueError(f"unbalanced '[' in {text!r}")
        host, tail = rest[1:close], rest[close + 1 :]
        if tail:
            if not tail.startswith(":"):
                raise ValueError(f"unexpected {tail!r} after ']' in {text!r}")
            port = _parse_port(tail[1:], text)
    elif rest.count(":") == 1:
        host, port_text = rest.split(":")
        port = _parse_port(port_text, text)
    else:
        host = rest  # a bare IPv6 address has several colons and no port
    _validate_token(host, "host")
    return user, host, port


def _parse_port(text: str, whole: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"bad port {text!r} in {whole!r}")
    return int(text)


@dataclass(frozen=True, slots=True)
class SSHTarget:
    """Where to connect, as the user asked; ``~/.ssh/config`` fills in the rest.

    Attributes:
        host: Host name or ``~/.ssh/config`` alias, as typed.
        user: Overrides ``User``.
        port: Overrides ``Port``.
        identity: Key files; override ``IdentityFile`` (the agent still offers its keys).
        jump: Overrides ``ProxyJump`` (``[USER@]HOST[:PORT][,...]``; ``"none"`` = direct).
        config_paths: OpenSSH client config files; None = ``~/.ssh/config`` if readable.
        keepalive_interval: Overrides ``ServerAliveInterval`` (seconds; 0 = off).
        connect_timeout: Seconds for TCP connect plus SSH handshake.
    """

    host: str
    user: str | None = None
    port: int | None = None
    identity: tuple[str, ...] = ()
    jump: str | None = None
    config_paths: tuple[str, ...] | None = None
    keepalive_interval: float | None = None
    connect_timeout: float = 20.0

    @property
    def label(self) -> str:
        """``user@host:port`` as given, for headers and messages."""
        text = f"{self.user}@{self.host}" if self.user else self.host
        return f"{text}:{self.port}" if self.port else text


class HostProfile(Protocol):
    """What connecting reads from a profile (:class:`specmon.config.Profile` has these).

    A protocol, not the config model: the SSH layer sits below the config, which
    also holds launch profiles (control), so it names only the fields it reads.
    """

    @property
    def host(self) -> str | None: ...
    @property
    def user(self) -> str | None: ...
    @property
    def port(self) -> int | None: ...
    @property
    def identity(self) -> str | None: ...
    @property
    def jump(self) -> str | None: ...


def target_from_options(
    destination: str | None,
    *,
    profile: HostProfile | None = None,
    port: int | None = None,
    identity: str | None = None,
    jump: str | None = None,
    ssh_config: str | None = None,
) -> SSHTarget:
    """Build an :class:`SSHTarget` from the CLI's options and an optional profile.

    Precedence: explicit options, then the destination string, then the
    profile, then ``~/.ssh/config`` (applied later, at connect time).

    Args:
        destination: ``[USER@]HOST[:PORT]`` from the command line, or None to
            take the host from the profile.
        profile: A validated :class:`specmon.config.Profile`.
        port: ``-p/--port``.
        identity: ``-i/--identity``.
        jump: ``-J/--jump``.
        ssh_config: ``-F``-like path of an OpenSSH client config file.

    Raises:
        ValueError: no host anywhere, or an invalid value (message for the user).
    """
    text = destination or (profile.host if profile else None)
    if not text:
        raise ValueError("no host: pass [USER@]HOST[:PORT] or a profile with 'host'")
    user, host, dest_port = parse_destination(text)
    if profile is not None and profile.host and destination is None:
        # The profile's own user/port fields fill what its host string left out.
        user = user or profile.user
        dest_port = dest_port or profile.port
    elif profile is not None and destination is not None and profile.host is None:
        user = user or profile.user
        dest_port = dest_port or profile.port
    identity = identity or (profile.identity if profile else None)
    jump = jump or (profile.jump if profile else None)
    if jump and jump.lower() != "none":
        for hop in jump.split(","):
            parse_destination(hop)
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"bad port {port}")
    return SSHTarget(
        host=host,
        user=user,
        port=port or dest_port,
        identity=(str(Path(identity).expanduser()),) if identity else (),
        jump=jump,
        config_paths=(str(Path(ssh_config).expanduser()),) if ssh_config else None,
    )


@dataclass(slots=True)
class ResolvedHop:
    """One SSH hop with its options resolved from config and overrides.

    Attributes:
        alias: Host as typed (used for ``Host`` matching).
        host: ``HostName`` after config.
        port: Port after config.
        username: User after config.
        options: asyncssh options (config, keys, agent) — without known_hosts.
        known_hosts: The loaded known_hosts entries passed to asyncssh.
        known_hosts_files: The user files then the global files, expanded.
        proxy_jump: ``ProxyJump`` from config (None = direct).
        keepalive_interval: Seconds between keepalives (0 = off).
        keepalive_count_max: Unanswered keepalives before the link is declared dead.
    """

    alias: str
    host: str
    port: int
    username: str
    options: asyncssh.SSHClientConnectionOptions
    known_hosts: asyncssh.SSHKnownHosts
    known_hosts_files: list[str]
    proxy_jump: str | None
    keepalive_interval: float
    keepalive_count_max: int

    @property
    def label(self) -> str:
        """``user@host:port`` after config, for messages."""
        return f"{self.username}@{self.host}:{self.port}"

    @property
    def known_hosts_name(self) -> str:
        """How OpenSSH writes this host in known_hosts (``[h]:p`` unless port 22)."""
        name = self.options.host_key_alias or self.host
        return name if self.port == 22 else f"[{name}]:{self.port}"


@dataclass(slots=True)
class SSHLink:
    """An authenticated connection plus the jump-host connections it runs through."""

    conn: asyncssh.SSHClientConnection
    tunnels: list[asyncssh.SSHClientConnection] = field(default_factory=list)

    def close(self) -> None:
        """Close the connection, then its jump hosts (innermost first)."""
        self.conn.close()
        for tunnel in reversed(self.tunnels):
            tunnel.close()

    async def wait_closed(self) -> None:
        """Wait until every connection of the link has closed."""
        await self.conn.wait_closed()
        for tunnel in reversed(self.tunnels):
            await tunnel.wait_closed()


def _tilde(path: str) -> str:
    """Show a path under HOME with ``~`` (shorter, and what users type)."""
    home = os.path.expanduser("~")
    if home not in ("", "/", "~") and (path == home or path.startswith(home + os.sep)):
        return "~" + path[len(home) :]
    return path


def _expand_known_hosts(paths: list[str], *, host: str, port: int, user: str) -> list[str]:
    """Expand ``~`` and the ``%`` tokens OpenSSH allows in known_hosts paths."""
    home = os.path.expanduser("~")
    tokens = {"d": home, "h": host, "p": str(port), "r": user, "u": os.environ.get("USER", user), "%": "%"}
    out = []
    for path in paths:
        path = re.sub(r"%(.)", lambda m: tokens.get(m.group(1), m.group(0)), path)
        out.append(os.path.expanduser(path))
    return out


def _load_known_hosts(files: list[str]) -> asyncssh.SSHKnownHosts:
    """Read the files that exist (OpenSSH treats missing ones as empty)."""
    known = asyncssh.SSHKnownHosts()
    for name in files:
        try:
            text = Path(name).read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise SSHError(ErrorKind.CONFIG, f"cannot read known_hosts file {_tilde(name)}: {exc.strerror}") from None
        try:
            known.load(text)
        except ValueError as exc:
            raise SSHError(ErrorKind.CONFIG, f"invalid known_hosts file {_tilde(name)}: {exc}") from None
    return known


async def resolve_hop(
    alias: str,
    *,
    user: str | None = None,
    port: int | None = None,
    identity: tuple[str, ...] = (),
    config_paths: tuple[str, ...] | None = None,
    keepalive_interval: float | None = None,
    connect_timeout: float = 20.0,
) -> ResolvedHop:
    """Apply ``~/.ssh/config`` and overrides to one host; resolve its known_hosts.

    Raises:
        SSHError: ``CONFIG`` for unreadable config or key files,
            ``KNOWN_HOSTS_DISABLED`` for ``UserKnownHostsFile none``.
    """
    # config=() means "~/.ssh/config if readable" (asyncssh's default for connect();
    # the options class alone defaults to no config at all).
    kwargs: dict[str, object] = {
        "host": alias,
        "connect_timeout": connect_timeout,
        "config": list(config_paths) if config_paths is not None else (),
    }
    if user:
        kwargs["username"] = user
    if port:
        kwargs["port"] = port
    if identity:
        kwargs["client_keys"] = list(identity)
    try:
        options = await asyncssh.SSHClientConnectionOptions.construct(**kwargs)
    except (OSError, ValueError, asyncssh.Error) as exc:
        # Bad config syntax, a missing -i file, an undecryptable key, ...
        hint = ""
        if "passphrase" in str(exc).lower():
            # A TUI cannot prompt; the agent is how ssh users avoid prompts anyway.
            hint = " (specmon does not prompt for passphrases: load the key into ssh-agent with ssh-add)"
        raise SSHError(ErrorKind.CONFIG, f"cannot use the SSH settings for {alias}: {exc}{hint}") from None
    config = options.config
    resolved_port = int(options.port)
    user_files = config.get("UserKnownHostsFile")
    if user_files == [] or options.known_hosts is None:
        raise SSHError(
            ErrorKind.KNOWN_HOSTS_DISABLED,
            f"refusing to connect to {alias}: the SSH config sets 'UserKnownHostsFile none', "
            "which would turn off host key verification. specmon always verifies host keys: "
            "remove that line for this host or point it at a real known_hosts file.",
        )
    if user_files and all(os.path.realpath(os.path.expanduser(str(f))) == os.devnull for f in user_files):
        raise SSHError(
            ErrorKind.KNOWN_HOSTS_DISABLED,
            f"refusing to connect to {alias}: the SSH config sets 'UserKnownHostsFile /dev/null', "
            "so no host key can ever be trusted. specmon always verifies host keys: "
            "remove that line for this host or point it at a real known_hosts file.",
        )
    global_files = config.get("GlobalKnownHostsFile")
    files = _expand_known_hosts(
        list(user_files or _DEFAULT_USER_KNOWN_HOSTS)
        + list(_DEFAULT_GLOBAL_KNOWN_HOSTS if global_files is None else global_files),
        host=options.host,
        port=resolved_port,
        user=options.username,
    )
    if keepalive_interval is None:
        configured = config.get("ServerAliveInterval")
        keepalive_interval = float(configured) if configured is not None else DEFAULT_KEEPALIVE_INTERVAL
    count_max = config.get("ServerAliveCountMax")
    proxy_jump = options.tunnel if isinstance(options.tunnel, str) else None
    return ResolvedHop(
        alias=alias,
        host=options.host,
        port=resolved_port,
        username=options.username,
        options=options,
        known_hosts=_load_known_hosts(files),
        known_hosts_files=files,
        proxy_jump=proxy_jump,
        keepalive_interval=keepalive_interval,
        keepalive_count_max=int(count_max) if count_max is not None else DEFAULT_KEEPALIVE_COUNT_MAX,
    )


async def connect(target: SSHTarget) -> SSHLink:
    """Open an authenticated, host-key-verified connection to ``target``.

    Jump hosts (``target.jump`` or the config's ``ProxyJump``) are connected
    first, each verified the same way.

    Raises:
        SSHError: every failure, classified (see :class:`ErrorKind`).
    """
    final = await resolve_hop(
        target.host,
        user=target.user,
        port=target.port,
        identity=target.identity,
        config_paths=target.config_paths,
        keepalive_interval=target.keepalive_interval,
        connect_timeout=target.connect_timeout,
    )
    jump = target.jump if target.jump is not None else final.proxy_jump
    tunnels: list[asyncssh.SSHClientConnection] = []
    try:
        await _open_jumps(jump, target, tunnels, depth=0)
        conn = await _connect_hop(final, tunnels[-1] if tunnels else None, via=jump)
    except BaseException:
        for tunnel in reversed(tunnels):
            tunnel.close()
        raise
    return SSHLink(conn, tunnels)


async def _open_jumps(
    jump: str | None, target: SSHTarget, tunnels: list[asyncssh.SSHClientConnection], depth: int
) -> None:
    """Connect the hops of a ProxyJump list in order, appending to ``tunnels``.

    Like OpenSSH, the first hop's own ``ProxyJump`` is honoured (recursively,
    to a small depth); later hops are reached through the previous one.
    """
    if not jump or jump.lower() == "none":
        return
    if depth >= _MAX_JUMP_DEPTH:
        raise SSHError(ErrorKind.CONFIG, f"ProxyJump nests deeper than {_MAX_JUMP_DEPTH} hops (a loop?)")
    for index, text in enumerate(jump.split(",")):
        try:
            user, host, port = parse_destination(text)
        except ValueError as exc:
            raise SSHError(ErrorKind.CONFIG, f"bad jump host {text!r}: {exc}") from None
        hop = await resolve_hop(
            host,
            user=user,
            port=port,
            config_paths=target.config_paths,
            keepalive_interval=target.keepalive_interval,
            connect_timeout=target.connect_timeout,
        )
        if index == 0 and not tunnels:
            await _open_jumps(hop.proxy_jump, target, tunnels, depth + 1)
        tunnels.append(await _connect_hop(hop, tunnels[-1] if tunnels else None, via=None, jump_host=True))


async def _connect_hop(
    hop: ResolvedHop,
    tunnel: asyncssh.SSHClientConnection | None,
    *,
    via: str | None,
    jump_host: bool = False,
) -> asyncssh.SSHClientConnection:
    """Connect one hop (directly or through ``tunnel``) and classify failures."""
    what = f"jump host {hop.label}" if jump_host else hop.label
    try:
        return await asyncssh.connect(
            hop.alias,
            port=hop.port,
            username=hop.username,
            options=hop.options,
            tunnel=tunnel,  # None: direct (or the config's ProxyCommand), never a string
            known_hosts=hop.known_hosts,
            keepalive_interval=hop.keepalive_interval,
            keepalive_count_max=hop.keepalive_count_max,
        )
    except asyncssh.HostKeyNotVerifiable as exc:
        raise await _diagnose_host_key(hop, tunnel, via, what, exc) from None
    except asyncssh.PermissionDenied:
        raise SSHError(ErrorKind.AUTH, _auth_message(hop, what)) from None
    except (asyncssh.KeyExchangeFailed, asyncssh.ProtocolNotSupported, asyncssh.ProtocolError) as exc:
        raise SSHError(ErrorKind.PROTOCOL, f"SSH negotiation with {what} failed: {exc.reason}") from None
    except asyncssh.DisconnectError as exc:
        raise SSHError(ErrorKind.NETWORK, f"{what} closed the connection: {exc.reason}") from None
    except asyncssh.ChannelOpenError as exc:
        # The jump host could not reach the target.
        raise SSHError(ErrorKind.NETWORK, f"cannot reach {what} through the jump host: {exc.reason}") from None
    except socket.gaierror as exc:
        via_alias = "" if hop.host == hop.alias else f" (HostName of {hop.alias!r} in the SSH config)"
        how = "does not resolve" if exc.errno in _NO_SUCH_NAME else "could not be resolved"
        raise SSHError(ErrorKind.UNKNOWN_NAME,
                       f"the host name {hop.host!r}{via_alias} {how} ({what}): {exc.strerror}") from None
    except TimeoutError:
        raise SSHError(ErrorKind.NETWORK, f"timed out connecting to {what}") from None
    except OSError as exc:
        reason = exc.strerror or str(exc) or type(exc).__name__
        raise SSHError(ErrorKind.NETWORK, f"cannot connect to {what}: {reason}") from None
    except asyncssh.Error as exc:
        raise SSHError(ErrorKind.NETWORK, f"SSH error with {what}: {exc.reason}") from None


def _auth_message(hop: ResolvedHop, what: str) -> str:
    """Say which identities were offered, so the user knows what to fix."""
    offered: list[str] = []
    if hop.options.agent_path:
        offered.append("the SSH agent's keys")
    configured = hop.options.config.get("IdentityFile")
    identity_files = hop.options.kwargs.get("client_keys") or configured
    if isinstance(identity_files, str | os.PathLike):  # one path given on its own
        identity_files = [identity_files]
    if isinstance(identity_files, list | tuple) and identity_files:
        offered.extend(_tilde(os.path.expanduser(str(p))) for p in identity_files)
    else:
        home_ssh = Path("~/.ssh").expanduser()
        defaults = [p for p in ("id_ed25519_sk", "id_ecdsa_sk", "id_ed448", "id_ed25519", "id_ecdsa", "id_rsa", "id_dsa")
                    if (home_ssh / p).is_file()]
        offered.extend(f"~/.ssh/{p}" for p in defaults)
    user = hop.username
    if offered:
        refused = f"the server accepted none of the keys offered ({', '.join(offered)})"
    else:
        refused = "no key was offered: there is no SSH agent and no ~/.ssh/id_* key file"
    return (
        f"authentication failed for {what}: {refused}. Check the user name ({user!r}: pass "
        "USER@HOST or set User in ~/.ssh/config if it is wrong), -i/--identity or IdentityFile, "
        f"and that the public key is in ~{user}/.ssh/authorized_keys on the server. (Not retried.)"
    )


def _keyscan_type(algorithm: str) -> str:
    """Map a key algorithm name to ``ssh-keyscan -t`` spelling."""
    if algorithm.startswith("ecdsa-"):
        return "ecdsa"
    if algorithm.startswith("ssh-"):
        return algorithm[len("ssh-") :]
    return algorithm


async def _host_address(hop: ResolvedHop, tunnel: object) -> str:
    """The host's IP (known_hosts may list it by address); '' when unknown."""
    try:
        ipaddress.ip_address(hop.host)
        return hop.host
    except ValueError:
        pass
    if tunnel is not None:
        return ""  # resolved by the jump host, not here
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(hop.host, hop.port, type=socket.SOCK_STREAM)
    except OSError:
        return ""
    return str(infos[0][4][0]) if infos else ""


async def _diagnose_host_key(
    hop: ResolvedHop,
    tunnel: asyncssh.SSHClientConnection | None,
    via: str | None,
    what: str,
    exc: asyncssh.HostKeyNotVerifiable,
) -> SSHError:
    """Tell an unknown host from a changed key, with fingerprint and remedy."""
    name = hop.options.host_key_alias or hop.host
    addr = await _host_address(hop, tunnel)
    trusted, _ca, revoked, *_ = hop.known_hosts.match(name, addr, hop.port if hop.port != 22 else None)
    # Ask for the same key types the verification wanted, so we show the key it rejected.
    algs = sorted({alg.decode() for key in trusted for alg in key.sig_algorithms}) if trusted else ()
    try:
        key = await asyncio.wait_for(
            asyncssh.get_server_host_key(
                hop.alias, hop.port, tunnel=tunnel, options=hop.options, server_host_key_algs=algs or ()
            ),
            timeout=20,
        )
    except (TimeoutError, OSError, asyncssh.Error):
        key = None
    user_file = _tilde(hop.known_hosts_files[0])
    if key is None:
        return SSHError(
            ErrorKind.HOST_KEY_INVALID,
            f"host key of {what} could not be verified ({exc.reason}); refusing to connect.",
        )
    fingerprint = key.get_fingerprint()
    algorithm = key.get_algorithm()
    if any(key == bad for bad in revoked):
        return SSHError(
            ErrorKind.HOST_KEY_INVALID,
            f"the host key of {what} ({algorithm} {fingerprint}) is marked @revoked in known_hosts; "
            "refusing to connect.",
            fingerprint,
        )
    if trusted:
        if any(key == good for good in trusted):
            return SSHError(
                ErrorKind.HOST_KEY_INVALID,
                f"host key of {what} could not be verified ({exc.reason}); refusing to connect.",
                fingerprint,
            )
        return SSHError(
            ErrorKind.HOST_KEY_CHANGED,
            f"WARNING: THE HOST KEY OF {what.upper()} HAS CHANGED. The server now presents "
            f"{algorithm} {fingerprint}, which does not match the key recorded for "
            f"{hop.known_hosts_name} in {user_file} (or another known_hosts file). Someone may be "
            "intercepting the connection, or the host was reinstalled. specmon will not connect. "
            "Only after confirming the new key with the host's administrator, remove the old entry: "
            f"{shlex.join(['ssh-keygen', '-R', hop.known_hosts_name, '-f', hop.known_hosts_files[0]])} "
            "and trust the new key.",
            fingerprint,
        )
    ssh_cmd = ["ssh"]
    if hop.port != 22:
        ssh_cmd += ["-p", str(hop.port)]
    if via and via.lower() != "none":
        ssh_cmd += ["-J", via]
    ssh_cmd.append(f"{hop.username}@{hop.alias}")
    keyscan = ""
    if tunnel is None:
        scan = ["ssh-keyscan", "-t", _keyscan_type(algorithm)]
        if hop.port != 22:
            scan += ["-p", str(hop.port)]
        scan.append(hop.host)
        keyscan = f"{shlex.join(scan)} >> {shlex.quote(hop.known_hosts_files[0])}   or connect once with "
    return SSHError(
        ErrorKind.HOST_KEY_UNKNOWN,
        f"unknown host {what}: {hop.known_hosts_name} is not in {user_file}. "
        f"The server offers {algorithm} key {fingerprint}. Check this fingerprint with the "
        f"host's administrator, then trust it with: {keyscan}"
        f"{shlex.join(ssh_cmd)} (and answer 'yes' if the fingerprint matches).",
        fingerprint,
    )
