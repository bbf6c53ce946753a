"""Launch profiles: how to start an inference server at a given step count, checked before anything runs.

A :class:`LaunchProfile` holds an argv template with the placeholders ``{steps}``,
``{draft_tokens}``, ``{topk}``, ``{log}`` and ``{port}`` (which may stand inside a
token, e.g. vLLM's ``--speculative-config`` JSON), its environment, working directory,
log path, readiness check and timeouts. Every value is validated here: integers that are
integers, absolute paths, no control characters, only known placeholders. The commands
built from a profile are in :mod:`specmon.control.launch`.
"""

from __future__ import annotations

import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, StrictFloat, StrictInt, model_validator

from specmon.control.dims import LLAMACPP_SPEC_TYPES
from specmon.engines import NAMES as ENGINE_NAMES
from specmon.engines import adapter
from specmon.redact import is_secret_name, redact_argv

#: Every placeholder a template may use. Anything else that looks like
#: ``{identifier}`` is an error; any other brace (JSON) is kept verbatim.
PLACEHOLDERS: tuple[str, ...] = ("steps", "draft_tokens", "topk", "prompt_lookup_max", "prompt_lookup_min",
                                 "spec_type", "log", "port")
#: The placeholders a sweep can vary besides ``{steps}`` (see :mod:`specmon.control.dims`).
DIM_PLACEHOLDERS: tuple[str, ...] = ("prompt_lookup_max", "prompt_lookup_min", "spec_type")

_ALL = frozenset(PLACEHOLDERS)
_EXPAND_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
_NAMELIKE_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
# C0 controls (incl. TAB, LF, CR, NUL, ESC), DEL and C1 controls (0x9b is a CSI
# introducer on some terminals): none belongs in a command line or a path.
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_ENV_KEY_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

STEPS_HARD_MAX = 64
TOPK_HARD_MAX = 64
DRAFT_TOKENS_HARD_MAX = STEPS_HARD_MAX * TOPK_HARD_MAX + 1


class LaunchError(ValueError):
    """A plan cannot be built: the message says why, in words for the user."""


# --------------------------------------------------------------------------- values


def check_int(value: object, name: str, lo: int, hi: int) -> int:
    """Return ``value`` if it is a real ``int`` within ``[lo, hi]``.

    Args:
        value: The candidate; ``bool``, ``float`` and ``str`` are refused even
            when they look like numbers (``True``, ``4.5``, ``"4; reboot"``).
        name: What the value is, for the error message.
        lo: Smallest allowed value.
        hi: Largest allowed value.

    Returns:
        The value, unchanged.

    Raises:
        LaunchError: The value is not an int or is out of range.
    """
    # type() and not isinstance(): bool is a subclass of int.
    if type(value) is not int:
        raise LaunchError(f"{name} must be an integer, not {type(value).__name__} {value!r}")
    if not lo <= value <= hi:
        raise LaunchError(f"{name} must be between {lo} and {hi}, not {value}")
    return value


def check_text(value: str, what: str) -> str:
    """Refuse control characters (newline, NUL, ESC, ...) in ``value``.

    Args:
        value: Text that will end up in a command line or on screen.
        what: What the text is, for the error message.

    Returns:
        The value, unchanged.

    Raises:
        LaunchError: The text holds a control character.
    """
    match = _CONTROL_RE.search(value)
    if match:
        raise LaunchError(f"{what} contains a control character ({match.group()!r}): {value!r}")
    return value


def check_path(value: str, what: str) -> str:
    """Return ``value`` if it is an absolute path free of control characters.

    Args:
        value: The path.
        what: What the path is, for the error message.

    Returns:
        The path, unchanged.

    Raises:
        LaunchError: The path is relative, empty or holds a control character.
    """
    check_text(value, what)
    if not value.startswith("/"):
        raise LaunchError(f"{what} must be an absolute path, not {value!r}")
    return value


def check_host_path(value: str, what: str) -> str:
    """Like :func:`check_path`, but ``~/...`` (the home of the user on the host) is allowed too."""
    if value.startswith("~/"):
        check_text(value, what)
        if "/../" in value + "/" or value.rstrip("/") == "~":
            raise LaunchError(f"{what} must name a file in the home folder, not {value!r}")
        return value
    return check_path(value, what)


def check_template(value: str, allowed: frozenset[str], what: str) -> str:
    """Validate a template: no control characters, only known placeholders.

    Args:
        value: The template text.
        allowed: Placeholder names this template may use.
        what: What the template is, for the error message.

    Returns:
        The template, unchanged.

    Raises:
        LaunchError: A control character, or a ``{name}`` that is not allowed here.
    """
    check_text(value, what)
    for match in _NAMELIKE_RE.finditer(value):
        name = match.group(1)
        if name not in allowed:
            known = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS if p in allowed) or "none"
            raise LaunchError(f"unknown placeholder {{{name}}} in {what} {value!r} (allowed here: {known})")
    return value


def placeholders_in(value: str) -> set[str]:
    """Return the placeholder names ``value`` uses."""
    return set(_EXPAND_RE.findall(value))


def expand(template: str, values: dict[str, str]) -> str:
    """Replace exactly ``{steps}``, ``{draft_tokens}``, ``{topk}``, ``{log}``, ``{port}``.

    Everything else, including JSON braces, is kept verbatim, and substituted
    text is never scanned again (a log path holding ``{steps}`` stays as is).

    Args:
        template: A validated template.
        values: The text for each placeholder the template uses.

    Returns:
        The expanded text.

    Raises:
        LaunchError: The template uses a placeholder with no value.
    """

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise LaunchError(f"placeholder {{{name}}} has no value here")
        return values[name]

    return _EXPAND_RE.sub(replace, template)


# --------------------------------------------------------------------------- profile

Seconds = Annotated[StrictInt | StrictFloat, Field(gt=0, le=86400)]


class LaunchProfile(BaseModel):
    """How to (re)start one inference server with a given step count.

    Two modes. ``managed``: specmon starts ``argv`` detached on the host
    (``setsid``, default signal dispositions), records its PID and start time in ``pidfile`` and stops
    it by that PID. ``custom``: the user's own ``stop`` and ``start`` commands
    (systemd, docker), with the same placeholders.

    Step count 0 means "no speculation" and is only allowed when the profile
    says how: ``nospec_argv`` (managed) or ``nospec_start`` (custom), which may
    use ``{log}`` and ``{port}`` but no speculative placeholder.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["managed", "custom"] = "managed"
    #: One of :data:`specmon.engines.NAMES` (checked below: the engines' module lists them).
    engine: str = "unknown"
    argv: list[str] | None = None
    nospec_argv: list[str] | None = None
    start: list[str] | None = None
    nospec_start: list[str] | None = None
    stop: list[str] | None = None
    env: dict[str, str] = Field(default_factory=dict)
    cwd: str | None = None
    log: str | None = None
    pidfile: str | None = None
    port: Annotated[StrictInt, Field(ge=1, le=65535)] | None = None
    topk: Annotated[StrictInt, Field(ge=1, le=TOPK_HARD_MAX)] = 1
    #: A rule ("steps+1", "steps*topk+1") or a fixed number.
    draft_tokens: Literal["steps+1", "steps*topk+1"] | Annotated[
        StrictInt, Field(ge=1, le=DRAFT_TOKENS_HARD_MAX)
    ] = "steps+1"
    #: Defaults of the other sweep dimensions, for templates that use them (a sweep may vary them).
    prompt_lookup_max: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    prompt_lookup_min: Annotated[StrictInt, Field(ge=1, le=64)] | None = None
    spec_type: Literal[LLAMACPP_SPEC_TYPES] | None = None  # type: ignore[valid-type]
    steps_min: Annotated[StrictInt, Field(ge=0, le=STEPS_HARD_MAX)] = 1
    steps_max: Annotated[StrictInt, Field(ge=0, le=STEPS_HARD_MAX)] = 16
    ready_marker: str | None = None
    health_url: str | None = None
    start_timeout_s: Seconds = 1800
    stop_grace_s: Annotated[StrictInt, Field(ge=1, le=3600)] = 30
    stop_signal: Literal["INT", "TERM"] = "INT"
    command_timeout_s: Seconds = 120

    @model_validator(mode="after")
    def _validate(self) -> LaunchProfile:
        try:
            self._check()
        except LaunchError as exc:
            # pydantic turns ValueError into a ValidationError with this text.
            raise ValueError(str(exc)) from None
        return self

    def _check(self) -> None:
        if self.engine not in ENGINE_NAMES:
            raise LaunchError(f"`engine` must be one of {', '.join(ENGINE_NAMES)}, not {self.engine!r}")
        managed = self.mode == "managed"
        if managed:
            if not self.argv:
                raise LaunchError("a managed profile needs `argv`, the server's command line")
            for name in ("start", "stop", "nospec_start"):
                if getattr(self, name) is not None:
                    raise LaunchError(f"`{name}` belongs to custom mode; a managed profile uses `argv`")
            if not self.log:
                raise LaunchError("a managed profile needs `log`, where the server's output goes")
        else:
            if not self.start or not self.stop:
                raise LaunchError("a custom profile needs both `start` and `stop` commands")
            for name in ("argv", "nospec_argv", "pidfile", "cwd"):
                if getattr(self, name) is not None:
                    raise LaunchError(f"`{name}` belongs to managed mode; custom mode runs `start`/`stop`")
            if self.env:
                raise LaunchError("`env` belongs to managed mode; put variables in your own start command")

        lists: list[tuple[str, list[str] | None, frozenset[str]]] = [
            ("argv", self.argv, _ALL),
            ("nospec_argv", self.nospec_argv, frozenset({"log", "port"})),
            ("start", self.start, _ALL),
            ("nospec_start", self.nospec_start, frozenset({"log", "port"})),
            ("stop", self.stop, frozenset({"log", "port"})),
        ]
        used: set[str] = set()
        for name, tokens, allowed in lists:
            if tokens is None:
                continue
            if not tokens or not tokens[0] or tokens[0].startswith("-"):
                raise LaunchError(f"`{name}` must start with a program name, not {tokens[:1]!r}")
            for i, token in enumerate(tokens):
                check_template(token, allowed, f"{name}[{i}]")
                used |= placeholders_in(token)
        for key, value in self.env.items():
            if not _ENV_KEY_RE.fullmatch(key):
                raise LaunchError(f"environment name {key!r} is not a valid variable name")
            check_template(value, _ALL, f"env {key}")
            used |= placeholders_in(value)
        if self.cwd is not None:
            check_path(self.cwd, "cwd")
            check_template(self.cwd, frozenset(), "cwd")
        if self.log is not None:
            check_template(self.log, _ALL - {"log"}, "log")
            used |= placeholders_in(self.log)
            check_path(expand(self.log, _SAMPLE), "log")
        if self.pidfile is not None:
            # The pidfile must not depend on the step count: the next restart
            # has to find the server this one started.
            check_template(self.pidfile, frozenset({"port"}), "pidfile")
            used |= placeholders_in(self.pidfile)
            check_host_path(expand(self.pidfile, _SAMPLE), "pidfile")
        if self.ready_marker is not None:
            check_text(self.ready_marker, "ready_marker")
            if not self.ready_marker.strip():
                raise LaunchError("ready_marker must not be blank")
        if self.health_url is not None:
            check_template(self.health_url, frozenset({"port"}), "health_url")
            used |= placeholders_in(self.health_url)
            _check_url(expand(self.health_url, _SAMPLE))
        if self.ready_marker is None and self.health_url is None:
            raise LaunchError("say how to tell the server is ready: `ready_marker` and/or `health_url`")
        if self.ready_marker is not None and self.log is None:
            raise LaunchError("`ready_marker` is looked for in `log`: give `log` too")
        if "port" in used and self.port is None:
            raise LaunchError("the profile uses {port}: give `port`")

        if (self.prompt_lookup_min is not None and self.prompt_lookup_max is not None
                and self.prompt_lookup_min > self.prompt_lookup_max):
            raise LaunchError(f"prompt_lookup_min {self.prompt_lookup_min} is above prompt_lookup_max "
                              f"{self.prompt_lookup_max}")
        if self.steps_min > self.steps_max:
            raise LaunchError(f"steps_min {self.steps_min} is above steps_max {self.steps_max}")
        nospec = self.nospec_argv if managed else self.nospec_start
        if self.steps_min == 0 and nospec is None:
            what = "nospec_argv" if managed else "nospec_start"
            raise LaunchError(f"steps 0 (no speculation) needs `{what}`; otherwise set steps_min >= 1")
        if isinstance(self.draft_tokens, int):
            lowest = max(self.steps_min, 1)
            if self.draft_tokens > lowest * self.topk + 1:
                raise LaunchError(
                    f"draft_tokens {self.draft_tokens} exceeds steps*topk+1 = {lowest * self.topk + 1} "
                    f"at steps {lowest}; raise steps_min or use the rule \"steps+1\""
                )

    # ------------------------------------------------------------------ helpers

    def draft_tokens_for(self, steps: int, topk: int | None = None) -> int:
        """The draft-token count this profile uses at ``steps`` (>= 1), at ``topk`` (default the profile's)."""
        if self.draft_tokens == "steps+1" and not adapter(self.engine).draft_tokens_count_root:
            # vLLM's num_speculative_tokens *is* the number of draft tokens (its bonus
            # token is not drafted); SGLang's steps+1 counts the verified root too.
            return steps
        if self.draft_tokens == "steps+1":
            return steps + 1
        if self.draft_tokens == "steps*topk+1":
            return steps * (self.topk if topk is None else topk) + 1
        return int(self.draft_tokens)

    def secrets(self) -> tuple[str, ...]:
        """The literal secret values this profile holds: its secret-named ``env`` values and the
        values of secret flags in its commands (hidden wherever specmon shows or keeps text)."""
        found = [v for k, v in self.env.items() if is_secret_name(k)]
        for tokens in (self.argv, self.nospec_argv, self.start, self.nospec_start, self.stop):
            if not tokens:
                continue
            for shown, real in zip(redact_argv(tokens), tokens, strict=True):
                if shown != real:
                    found.append(real.partition("=")[2] if "=" in real and real.startswith("-") else real)
        return tuple(v for v in found if v)

    def pidfile_template(self) -> str:
        """The pidfile template, with the default when none was given.

        The default is in the user's home on the host, in a folder the host scripts create
        0700 and check is theirs (:data:`RUN_DIR`): a predictable name in a shared folder
        (``/tmp/specmon-8000.pid``) can be planted by any user of the host.
        """
        if self.pidfile is not None:
            return self.pidfile
        return f"{RUN_DIR}/specmon-{{port}}.pid" if self.port is not None else f"{RUN_DIR}/specmon-server.pid"


#: The per-user folder on the host for pidfiles and lock files: ``~`` is the home of the SSH user
#: there (the host scripts expand it), created 0700; not ``$XDG_RUNTIME_DIR``, which logind
#: removes with the user's last session while the server it names runs on.
RUN_DIR = "~/.cache/specmon/run"

_SAMPLE = {"steps": "1", "draft_tokens": "2", "topk": "1", "port": "1", "log": "/x", "prompt_lookup_max": "1",
           "prompt_lookup_min": "1", "spec_type": "none"}


def _check_url(url: str) -> None:
    check_text(url, "health_url")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise LaunchError(f"health_url must be an http(s) URL with a host, not {url!r}")
    if any(c.isspace() for c in url):
        raise LaunchError(f"health_url must not contain spaces: {url!r}")
