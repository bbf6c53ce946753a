"""Named profiles from a TOML file, validated with pydantic.

The file lives at ``~/.config/specmon/config.toml`` (XDG: ``$XDG_CONFIG_HOME``)
unless ``--config`` names another one::

    default_profile = "kimi"

    [profiles.kimi]
    host = "gpu-box"                 # [USER@]HOST[:PORT] or an ~/.ssh/config alias
    log = "/data/logs/sglang.log"
    engine = "sglang"
    baseline_tps = 88.8

    [profiles.kimi.launch]           # how `r` restarts it: specmon.control.launch.LaunchProfile
    argv = ["python3", "-m", "sglang.launch_server", "--speculative-num-steps", "{steps}", "..."]
    log = "/data/logs/sglang_{steps}step.log"
    ready_marker = "The server is fired up and ready to roll!"

    [profiles.replicas]              # a fleet of replicas, each log tailed over SSH (docs/fleet.md)
    log = "/data/logs/vllm.log"      # each replica's log unless it names its own
    identity = "~/.ssh/id_ed25519"   # SSH settings shared by every replica
    [[profiles.replicas.replicas]]
    host = "gpu-1"
    [[profiles.replicas.replicas]]
    host = "gpu-2"
    log = "/scratch/vllm.log"

    [profiles.fleet]                 # a fleet read through its Prometheus (docs/fleet.md)
    prometheus = "http://127.0.0.1:9090"
    selector = '{job="vllm"}'        # label matchers only: specmon writes the queries
    rate_window = "1m"

Unknown keys are errors: a typo must not silently fall back to a default.
``tomllib`` reports line numbers for syntax errors only, so for validation
errors :func:`load_config` finds the line by scanning the TOML text for the
offending key under its table header (see :func:`locate_key`). That scan
understands ``[a.b]`` headers, ``key = value`` and dotted ``a.b = value`` keys,
and quoted keys; for anything it cannot place it falls back to the table's
header line, then to no line at all.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from specmon import paths
from specmon.control.launch import LaunchProfile
from specmon.records import Engine
from specmon.smallfile import SmallFileError, read_small_text

__all__ = [
    "Config",
    "ConfigError",
    "Profile",
    "ReplicaEntry",
    "load_config",
    "locate_key",
    "split_destination",
]

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


#: Bytes a config file may have (a real one is a few kilobytes).
CONFIG_LIMIT = 1 << 20
#: Replicas a profile may list: each is one SSH connection and one session in this process.
MAX_REPLICAS = 256

class ConfigError(Exception):
    """A config file that cannot be used; ``str()`` is the message for the user.

    Attributes:
        path: The config file.
        line: 1-based line of the problem, when known.
    """

    def __init__(self, message: str, path: Path | None = None, line: int | None = None) -> None:
        self.path = path
        self.line = line
        where = ""
        if path is not None:
            where = f"{path}:{line}: " if line is not None else f"{path}: "
        super().__init__(where + message)


def _check_text(value: str | None, what: str) -> str | None:
    """Reject empty values and control characters (they would reach a remote shell)."""
    if value is None:
        return None
    if not value.strip():
        raise ValueError(f"{what} must not be empty")
    if _CONTROL.search(value):
        raise ValueError(f"{what} must not contain control characters")
    return value


def _check_metrics_url(value: str | None) -> str | None:
    """An engine's ``/metrics`` URL as the host sees it, or ``off``."""
    if value is None or value == "off":
        return value
    from urllib.parse import urlsplit

    _check_text(value, "metrics_url")
    parts = urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
        raise ValueError('metrics_url must be an http(s) URL such as "http://127.0.0.1:8000/metrics", or "off"')
    try:
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise ValueError(f"metrics_url has a bad port: {value!r}") from None
    return value


class ReplicaEntry(BaseModel):
    """One replica of a fleet profile: where its log is (the profile's SSH settings apply to it).

    A replica without ``host`` runs on this machine (its log is read here, no SSH); a replica
    without ``log`` or ``log_glob`` has the profile's.
    """

    model_config = ConfigDict(extra="forbid")

    name: str | None = None  # what the fleet view calls it (default: what differs between the replicas)
    host: str | None = None  # [USER@]HOST[:PORT] or an ~/.ssh/config alias; None = this machine
    log: str | None = None
    log_glob: str | None = None
    # Its engine's /metrics as its host sees it (through an SSH port forward for a replica on a
    # host): a replica whose engine stops answering is shown down at once, not quiet 30 s later.
    metrics_url: str | None = None
    # The port its server listens on, for the profile's shared [launch] section ({port}) and the
    # load a parallel sweep drives to it (unset: the launch section's own port).
    launch_port: int | None = Field(default=None, ge=1, le=65535)

    @field_validator("name", "host", "log", "log_glob")
    @classmethod
    def _no_control_chars(cls, value: str | None, info: Any) -> str | None:
        return _check_text(value, info.field_name)

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url(cls, value: str | None) -> str | None:
        return _check_metrics_url(value)

    @field_validator("host")
    @classmethod
    def _no_option_lookalike(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("-") or any(c.isspace() for c in value)):
            raise ValueError("host must not start with '-' or contain spaces")
        return value


def _check_shared_launch(launch: LaunchProfile, replicas: list[ReplicaEntry]) -> None:
    """A [launch] section the replicas share: each has a port, and replicas on one host never share one.

    Two servers on one host with one port, pidfile or log would stop each other's server or
    write into each other's log: refused here, with the template that needs ``{port}``.
    """
    from specmon.control.launch_profile import PLACEHOLDERS, expand

    seen: dict[tuple[str, str, str], int] = {}
    for i, replica in enumerate(replicas, start=1):
        port = replica.launch_port or launch.port
        if port is None:
            raise ValueError(f"replica {replica.name or i} has no launch_port, and [launch] no port: the restarts "
                             "and the load need the port its server listens on")
        where = replica.host or "this machine"
        # Only {port} differs between the replicas: the other placeholders are kept as they are.
        values = {name: "{" + name + "}" for name in PLACEHOLDERS} | {"port": str(port)}
        things = [("port", "launch_port", str(port))]
        if launch.mode == "managed":
            own = launch.model_copy(update={"port": port})
            things.append(("pidfile", "the launch's pidfile", expand(own.pidfile_template(), values)))
        if launch.log is not None:
            things.append(("log", "the launch's log", expand(launch.log, values)))
        if launch.mode == "custom" and launch.stop:
            things.append(("stop", "the launch's stop command", " ".join(expand(t, values) for t in launch.stop)))
        for kind, what, value in things:
            key = (where, kind, value)
            if key in seen:
                hint = "give each its own launch_port" if kind == "port" else "put {port} in it"
                raise ValueError(f"replicas {seen[key]} and {replica.name or i} on {where} would share "
                                 f"{what} {value!r}: {hint}")
            seen[key] = replica.name or i  # type: ignore[assignment]


class Profile(BaseModel):
    """One named target: where the server runs and where its log is.

    Every field is optional so a profile can hold only what differs from the
    command line; the CLI's explicit options win over the profile.
    """

    model_config = ConfigDict(extra="forbid")

    host: str | None = None  # [USER@]HOST[:PORT] or an ~/.ssh/config alias; None = this machine
    user: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    log: str | None = None  # path of the server log on the host
    log_glob: str | None = None  # used when log is unset: the newest match is tailed
    engine: Engine | None = None  # None = detect from the log
    baseline_tps: float | None = Field(default=None, gt=0)  # no-speculation tok/s
    baseline_file: str | None = None  # a saved log of a no-speculation run
    identity: str | None = None  # like ssh -i
    jump: str | None = None  # like ssh -J: [USER@]HOST[:PORT][,...]
    lines: int | None = Field(default=None, ge=0)  # history lines shown on connect
    # Longest log line kept, in bytes or with a unit ("1MiB", "512KiB"); longer ones are cut and counted.
    line_cap: int | None = None
    launch: LaunchProfile | None = None  # how to restart the server; validated at load like the rest
    # The engine's Prometheus endpoint as seen from the host ("off": never read it). Unset: the
    # launch port's /metrics (vLLM and SGLang --enable-metrics serve it on the API port).
    metrics_url: str | None = None
    # A fleet read through its Prometheus: the server's base URL, the replicas' label matchers
    # ('{job="vllm"}', checked and written again by specmon.sources.promql) and the rate window.
    prometheus: str | None = None
    selector: str | None = None
    rate_window: str | None = None
    # A fleet whose replicas' logs are tailed (over SSH, or here for a replica without a host).
    replicas: list[ReplicaEntry] | None = Field(default=None, min_length=1, max_length=MAX_REPLICAS)
    # The sweep's plan ([profiles.NAME.sweep]) and its load ([profiles.NAME.load]): the fields of
    # specmon.experiment.plan.ExperimentPlan, so that `specmon sweep NAME -y` needs no other option.
    # Their names and values are checked here, at load; the rules between them when a sweep resolves them.
    sweep: dict[str, Any] | None = None
    load: dict[str, Any] | None = None

    @field_validator("sweep", "load")
    @classmethod
    def _plan_tables(cls, value: dict[str, Any] | None, info: Any) -> dict[str, Any] | None:
        from specmon.experiment.plan_sources import check_profile_table

        if value is not None:
            check_profile_table(info.field_name, value)  # a PlanError is a ValueError: one sentence
        return value

    @field_validator("host", "user", "identity", "jump", "log", "log_glob", "baseline_file")
    @classmethod
    def _no_control_chars(cls, value: str | None, info: Any) -> str | None:
        return _check_text(value, info.field_name)

    @field_validator("line_cap", mode="before")
    @classmethod
    def _line_cap(cls, value: object) -> int | None:
        from specmon.sources.lines import parse_line_cap

        if value is None:
            return None
        if not isinstance(value, (str, int)):
            raise ValueError(f"line_cap must be a size such as \"1MiB\" or a number of bytes, not {value!r}")
        return parse_line_cap(value)

    @field_validator("metrics_url")
    @classmethod
    def _metrics_url(cls, value: str | None) -> str | None:
        return _check_metrics_url(value)

    @field_validator("prometheus")
    @classmethod
    def _prometheus(cls, value: str | None) -> str | None:
        if value is None:
            return None
        from urllib.parse import urlsplit

        _check_text(value, "prometheus")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() for c in value):
            raise ValueError('prometheus must be an http(s) URL such as "http://127.0.0.1:9090"')
        if parts.query or parts.fragment:
            raise ValueError("prometheus is the server's base URL: no '?' query or '#' part (specmon adds /api/v1/query)")
        try:
            parts.port  # noqa: B018  (raises on a bad port)
        except ValueError:
            raise ValueError(f"prometheus has a bad port: {value!r}") from None
        return value

    @field_validator("selector")
    @classmethod
    def _selector(cls, value: str | None) -> str | None:
        from specmon.sources.promql import parse_selector

        if value is None:
            return None
        # Kept as written again from its parsed parts: only that text ever reaches a query.
        return parse_selector(value).promql()

    @field_validator("rate_window")
    @classmethod
    def _rate_window(cls, value: str | None) -> str | None:
        from specmon.sources.promql import parse_duration

        if value is not None:
            parse_duration(value)
        return value

    @model_validator(mode="before")
    @classmethod
    def _port_from_replicas(cls, data: Any) -> Any:
        """A [launch] the replicas share may leave ``port`` out when every replica gives its launch_port.

        The launch section is checked as one server's (``{port}`` needs a port); the first
        replica's stands in, and is never used for a replica, since each has its own.
        """
        if not isinstance(data, dict):
            return data
        launch, replicas = data.get("launch"), data.get("replicas")
        if isinstance(launch, dict) and "port" not in launch and isinstance(replicas, list) and replicas:
            for i, r in enumerate(replicas, start=1):
                if isinstance(r, dict) and r.get("launch_port") is None:
                    raise ValueError(f"replica {r.get('name') or i} has no launch_port, and [launch] no port: the "
                                     "restarts and the load need the port its server listens on")
            if isinstance(replicas[0], dict) and isinstance(replicas[0].get("launch_port"), int):
                data = {**data, "launch": {**launch, "port": replicas[0]["launch_port"]}}
        return data

    @model_validator(mode="after")
    def _replica_fields(self) -> Profile:
        """A replicas profile: each replica has a log to read, a name of its own; no one-server host."""
        if self.replicas is None:
            return self
        if self.prometheus is not None:
            raise ValueError("a profile reads its fleet either through prometheus or from its replicas' logs, "
                             "not both: put them in two profiles")
        one_server = [name for name in ("host", "metrics_url", "baseline_file") if getattr(self, name) is not None]
        if one_server:
            raise ValueError(f"{', '.join(one_server)} belong{'s' if len(one_server) == 1 else ''} to a one-server "
                             "profile, and this one lists replicas (each replica names its own host)")
        if self.launch is not None:
            _check_shared_launch(self.launch, self.replicas)
        seen: dict[str, int] = {}
        for i, replica in enumerate(self.replicas, start=1):
            if not (replica.log or replica.log_glob or self.log or self.log_glob):
                raise ValueError(f"replica {i} has no log: give it log = \"/path/to/server.log\" (or log_glob), "
                                 "or set log in the profile for every replica")
            if replica.name is not None:
                if replica.name in seen:
                    raise ValueError(f"replicas {seen[replica.name]} and {i} are both named {replica.name!r}")
                seen[replica.name] = i
        places = [(r.host or "", r.log or r.log_glob or self.log or self.log_glob) for r in self.replicas]
        twice = next((p for p in places if places.count(p) > 1), None)
        if twice is not None:
            where = f"on {twice[0]}" if twice[0] else "on this machine"
            raise ValueError(f"two replicas read the same log {twice[1]!r} {where}")
        return self

    @model_validator(mode="after")
    def _fleet_fields(self) -> Profile:
        """A Prometheus fleet profile holds the fleet's fields only: a log, a host or a launch is one server's."""
        if self.prometheus is None:
            for name in ("selector", "rate_window"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} belongs to a fleet read through Prometheus: set prometheus = "
                                     '"http://HOST:9090" in the same profile')
            return self
        if self.selector is None:
            raise ValueError("a prometheus profile needs a selector naming its replicas, such as "
                             "selector = '{job=\"vllm\"}'")
        if self.engine is not None and self.engine is not Engine.UNKNOWN:
            from specmon.engines import ADAPTERS, adapter

            if adapter(self.engine).counters is None:
                known = ", ".join(a.engine.value for a in ADAPTERS if a.counters is not None)
                raise ValueError(f"engine {self.engine.value!r} exports no counters specmon reads through "
                                 f"Prometheus (those that do: {known})")
        one_server = [name for name in ("host", "user", "port", "log", "log_glob", "baseline_file", "identity",
                                        "jump", "lines", "line_cap", "launch", "metrics_url")
                      if getattr(self, name) is not None]
        if one_server:
            raise ValueError(f"{', '.join(one_server)} belong{'s' if len(one_server) == 1 else ''} to a one-server "
                             "profile, and this one reads a fleet through prometheus: put them in a profile of "
                             "their own")
        return self

    @field_validator("host", "user", "jump")
    @classmethod
    def _no_option_lookalike(cls, value: str | None, info: Any) -> str | None:
        # A value starting with "-" would read as an option to ssh/ssh-keyscan.
        if value is not None and (value.startswith("-") or any(c.isspace() for c in value)):
            raise ValueError(f"{info.field_name} must not start with '-' or contain spaces")
        return value


class Config(BaseModel):
    """The whole config file."""

    model_config = ConfigDict(extra="forbid")

    default_profile: str | None = None
    profiles: dict[str, Profile] = Field(default_factory=dict)

    @field_validator("profiles")
    @classmethod
    def _profile_names(cls, value: dict[str, Profile]) -> dict[str, Profile]:
        for name in value:
            if not _PROFILE_NAME.match(name):
                raise ValueError(
                    f"profile name {name!r}: use letters, digits, '_', '-', '.' "
                    "(it is typed on the command line)"
                )
        return value

    def profile(self, name: str | None = None) -> Profile:
        """Return the named profile, or the default one when ``name`` is None.

        Raises:
            ConfigError: no such profile (the message lists the known ones).
        """
        wanted = name or self.default_profile
        if wanted is None:
            raise ConfigError("no profile named and no default_profile set")
        try:
            return self.profiles[wanted]
        except KeyError:
            from specmon.suggest import did_you_mean

            known = ", ".join(sorted(self.profiles)) or "none defined"
            near = did_you_mean(wanted, self.profiles)
            raise ConfigError(f"unknown profile {wanted!r}: {near}(known: {known})" if near else
                              f"unknown profile {wanted!r} (known: {known})") from None


def split_destination(
    argument: str | None, config: Config, profile_name: str | None = None
) -> tuple[str | None, Profile | None]:
    """Read ``specmon connect ARG [--profile NAME]``: is ARG a host or a profile?

    ``--profile NAME`` selects that profile and leaves ARG as the destination;
    otherwise an ARG that names a profile selects it (``specmon connect kimi``);
    otherwise ARG is a destination and the default profile (if any) applies.

    Returns:
        ``(destination or None, profile or None)``.

    Raises:
        ConfigError: ``--profile`` names no profile.
    """
    if profile_name is not None:
        return argument, config.profile(profile_name)
    if argument is not None and argument in config.profiles:
        return None, config.profiles[argument]
    if config.default_profile is not None and argument is None:
        return None, config.profile()
    return argument, None


def load_config(path: Path | str | None = None) -> Config:
    """Read and validate a config file.

    Args:
        path: The file; ``None`` means :func:`specmon.paths.config_file`, where a
            missing file is fine (an empty config). A missing explicit path is
            an error.

    Returns:
        The validated config.

    Raises:
        ConfigError: unreadable file, bad TOML, or a value that fails validation;
            the message names the file and, when found, the line.
    """
    explicit = path is not None
    file = Path(path).expanduser() if path is not None else paths.config_file()
    try:
        # Bounded and non-blocking: /dev/zero, a FIFO or a huge file is refused at once.
        text = read_small_text(file, limit=CONFIG_LIMIT, what="config file")
    except FileNotFoundError:
        if explicit:
            raise ConfigError("config file not found", file) from None
        return Config()
    except SmallFileError as exc:  # its sentence names the file
        raise ConfigError(str(exc)) from None
    except UnicodeDecodeError:
        raise ConfigError("cannot read config: not UTF-8 text", file) from None
    except OSError as exc:
        raise ConfigError(f"cannot read config: {exc.strerror or exc}", file) from None
    return parse_config(text, file)


def parse_config(text: str, file: Path | None = None) -> Config:
    """Validate TOML text; ``file`` is only used in error messages.

    Raises:
        ConfigError: as for :func:`load_config`.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        # tomllib's message already ends in "(at line L, column C)".
        match = re.search(r"at line (\d+)", str(exc))
        raise ConfigError(f"invalid TOML: {exc}", file, int(match.group(1)) if match else None) from None
    try:
        return Config.model_validate(data)
    except ValidationError as exc:
        raise _validation_error(exc, text, file) from None


def _validation_error(exc: ValidationError, text: str, file: Path | None) -> ConfigError:
    """Turn pydantic's errors into one message, located at the first error's line."""
    messages: list[str] = []
    first_line: int | None = None
    for error in exc.errors():
        keys = [str(part) for part in error["loc"]]
        line = locate_key(text, keys)
        if line is not None and "control character" in error["msg"]:
            line = control_line(text, line)  # where the character is, not where its table starts
        if first_line is None:
            first_line = line
        dotted = ".".join(keys) or "(top level)"
        if error["type"] == "extra_forbidden":
            what = _unknown_key(keys)
        else:
            # The launch profile's own checks are sentences already: drop pydantic's prefix.
            what = error["msg"].removeprefix("Value error, ")
        prefix = f"line {line}: " if line is not None and len(exc.errors()) > 1 else ""
        messages.append(f"{prefix}{dotted}: {what}")
    return ConfigError("; ".join(messages), file, first_line)


#: Keys people write for a field of another name (other tools' spelling): offered first when present.
_MEANT = {"command": ("argv", "start"), "cmd": ("argv", "start"), "args": ("argv",), "exec": ("argv", "start"),
          "hostname": ("host",), "address": ("host",), "username": ("user",), "ssh_port": ("port",),
          "logfile": ("log",), "log_file": ("log",), "log_path": ("log",), "key": ("identity",),
          "identity_file": ("identity",), "proxyjump": ("jump",), "proxy_jump": ("jump",)}


def _unknown_key(keys: list[str]) -> str:
    """``unknown key 'hots': did you mean 'host'? (valid keys here: ...)``: the keys of the table it is in."""
    from specmon.suggest import close_words

    given = keys[-1]
    valid = valid_keys(keys[:-1])
    if not valid:
        return f"unknown key {given!r}"
    meant = [k for k in _MEANT.get(given.lower(), ()) if k in valid]
    near = list(dict.fromkeys([*meant, *close_words(given, valid)]))[:3]
    hint = f": did you mean {' or '.join(repr(k) for k in near)}?" if near else ""
    return f"unknown key {given!r}{hint} (valid keys here: {', '.join(valid)})"


def valid_keys(loc: list[str]) -> list[str]:
    """The keys the table at ``loc`` (pydantic's path, without the unknown key) accepts, in the model's order.

    Walks the models from :class:`Config`: a profile's name (``profiles.kimi``) and a list's
    index (``replicas.0``) are steps through a dict or a list. Empty when the path leads nowhere known.
    """
    import types
    import typing

    def unwrap(t: Any) -> Any:
        while True:
            origin = typing.get_origin(t)
            if origin is typing.Annotated:
                t = typing.get_args(t)[0]
            elif origin in (typing.Union, types.UnionType):
                args = [a for a in typing.get_args(t) if a is not type(None)]
                t = next((a for a in args if isinstance(a, type) and issubclass(a, BaseModel)
                          or typing.get_origin(a) in (dict, list)), args[0] if args else None)
            else:
                return t

    current: Any = Config
    for part in loc:
        current = unwrap(current)
        if isinstance(current, type) and issubclass(current, BaseModel):
            field = current.model_fields.get(part)
            if field is None:
                return []
            current = field.annotation
        elif typing.get_origin(current) in (dict, list):
            current = typing.get_args(current)[-1]  # a dict's value or a list's item
        else:
            return []
    current = unwrap(current)
    if isinstance(current, type) and issubclass(current, BaseModel):
        return list(current.model_fields)
    return []


_HEADER = re.compile(r"^\s*\[\[?\s*(?P<name>[^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*(?P<key>(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+)(?:\s*\.\s*(?:\"[^\"]*\"|'[^']*'|[A-Za-z0-9_-]+))*)\s*=")
_KEY_PART = re.compile(r"\"([^\"]*)\"|'([^']*)'|([A-Za-z0-9_-]+)")


def _split_dotted(text: str) -> list[str]:
    """Split a TOML dotted key (``a."b.c".d``) into its parts."""
    return [m.group(1) if m.group(1) is not None else m.group(2) if m.group(2) is not None else m.group(3)
            for m in _KEY_PART.finditer(text)]


def _toml_lines(text: str) -> list[str]:
    """The lines as TOML counts them: split at ``\n`` only.

    ``str.splitlines`` also splits at U+0085, U+2028 and U+2029, which TOML allows in strings
    and comments: every line after one was reported one too far down.
    """
    return text.split("\n")


def _depth(full: list[str], wanted: list[str]) -> tuple[int, bool]:
    """How many parts of a definition's path ``full`` match ``wanted`` in order, and whether all of
    ``wanted`` was used. An index in ``wanted`` that the definition does not spell (an inline
    array's item: ``argv.4``) is stepped over; an array of tables' index must be the same."""
    i = j = 0
    while i < len(full) and j < len(wanted):
        if full[i] == wanted[j]:
            i, j = i + 1, j + 1
        elif wanted[j].isdigit() and not full[i].isdigit():
            j += 1
        else:
            break
    while j < len(wanted) and wanted[j].isdigit():
        j += 1
    return i, j == len(wanted)


def locate_key(text: str, keys: list[str]) -> int | None:
    """Find the 1-based line that defines the dotted key path ``keys`` in TOML text.

    Best effort, for error messages only: an exact key line wins; otherwise the
    line of the deepest table header or key that is a prefix of ``keys``
    (a missing key is reported at its table's header). In an array of tables
    (``[[profiles.kimi.replicas]]``) the index in ``keys`` picks its entry.

    Args:
        text: The TOML source.
        keys: Path from pydantic's error ``loc``.

    Returns:
        The line number, or None when nothing matches.
    """
    best_line: int | None = None
    best_depth = 0
    table: list[str] = []
    arrays: dict[tuple[str, ...], int] = {}  # an array of tables (by its resolved path): its current index
    for number, line in enumerate(_toml_lines(text), start=1):
        header = _HEADER.match(line)
        if header:
            name = _split_dotted(header.group("name"))
            table = []
            for part in name[:-1]:  # a parent that is an array of tables: its current entry
                table.append(part)
                if tuple(table) in arrays:
                    table.append(str(arrays[tuple(table)]))
            table.append(name[-1] if name else "")
            if line.lstrip().startswith("[["):
                index = arrays.get(tuple(table), -1) + 1
                arrays[tuple(table)] = index
                table = [*table, str(index)]
            full = table
        else:
            key = _KEY.match(line)
            if not key:
                continue
            full = table + _split_dotted(key.group("key"))
        depth, whole = _depth(full, keys)
        # Only a definition that is itself a prefix of the wanted path counts.
        if depth == len(full) and depth > best_depth:
            best_depth, best_line = depth, number
            if whole:
                return number
    return best_line


#: A control character written as a TOML escape (an even run of backslashes before it is text).
_CONTROL_ESCAPE = re.compile(r"(?<!\\)(?:\\\\)*\\(?:[btnfr]|u00[01][0-9A-Fa-f]|u007[Ff]|U0000(?:[01][0-9A-Fa-f]|7[Ff]))")


#: A raw tab after a quote: inside a string (TOML allows one there; as whitespace it is no value's).
_RAW_TAB = re.compile(r"[\"'][^\"'\t]*\t")


def control_line(text: str, line: int) -> int:
    """The line that holds the control character of an error located at ``line``.

    A key's value may go on over more lines (an ``argv`` array, a multi-line string), and a
    table's own check (the launch profile's) is located at its header: the character itself is
    on the first line from ``line`` on, within that value or that table, that holds one, as a
    TOML escape (``\\u0007``, ``\\t``) or a raw tab in a string. ``line`` when none is found.
    """
    lines = _toml_lines(text)
    if not 1 <= line <= len(lines):
        return line
    header = _HEADER.match(lines[line - 1])
    scope = _split_dotted(header.group("name")) if header else None
    for number in range(line, len(lines) + 1):
        current = lines[number - 1]
        if number > line:
            inner = _HEADER.match(current)
            if inner and (scope is None or _split_dotted(inner.group("name"))[:len(scope)] != scope):
                break  # the next table: the value (or the table) ended
            if scope is None and _KEY.match(current):
                break  # the next key: the value ended
        if _CONTROL_ESCAPE.search(current) or _RAW_TAB.search(current):
            return number
    return line
