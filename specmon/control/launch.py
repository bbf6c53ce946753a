"""Launch profiles and the exact shell commands that restart a server.

A :class:`LaunchProfile` says how to start an inference server with a given
speculative step count: an argv template with the placeholders ``{steps}``,
``{draft_tokens}``, ``{topk}``, ``{log}`` and ``{port}`` (which may stand inside
a token, e.g. vLLM's ``--speculative-config`` JSON), its environment, working
directory, log path, readiness check and timeouts.

:func:`build_plan` turns a profile and a step count into a :class:`CommandPlan`:
the exact strings that will run on the host, in order. Those strings are what
the confirmation screen shows and what :func:`specmon.control.runner.execute`
runs; nothing else is ever run by the control layer.

How commands are made safe:

- every value substituted into a template is a validated ``int`` (``bool``,
  ``float`` and ``str`` are refused) or a validated absolute path;
- control characters (newline, NUL, ESC, ...) are refused everywhere;
- the host-side logic is a handful of fixed POSIX shell scripts (the
  ``scripts/*.sh`` resources beside this module, reviewed once); every variable piece of data reaches them as a positional
  argument, and the whole command is built with :func:`shlex.join`, so no value
  is ever parsed as shell syntax;
- a managed server is stopped only by the PID recorded when specmon started it,
  and only while that PID still belongs to the same process (its start time in
  ``/proc/PID/stat`` must match the one recorded), never by a pattern.

The profile itself and its validation are in :mod:`specmon.control.launch_profile`;
its names are importable from here too.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Literal

from specmon.control.dims import DIMENSIONS, check_point
from specmon.control.launch_profile import DIM_PLACEHOLDERS as DIM_PLACEHOLDERS
from specmon.control.launch_profile import DRAFT_TOKENS_HARD_MAX as DRAFT_TOKENS_HARD_MAX
from specmon.control.launch_profile import PLACEHOLDERS as PLACEHOLDERS
from specmon.control.launch_profile import RUN_DIR as RUN_DIR
from specmon.control.launch_profile import STEPS_HARD_MAX as STEPS_HARD_MAX
from specmon.control.launch_profile import TOPK_HARD_MAX as TOPK_HARD_MAX
from specmon.control.launch_profile import LaunchError as LaunchError
from specmon.control.launch_profile import LaunchProfile as LaunchProfile
from specmon.control.launch_profile import Seconds as Seconds
from specmon.control.launch_profile import check_host_path as check_host_path
from specmon.control.launch_profile import check_int as check_int
from specmon.control.launch_profile import check_path as check_path
from specmon.control.launch_profile import check_template as check_template
from specmon.control.launch_profile import check_text as check_text
from specmon.control.launch_profile import expand as expand
from specmon.control.launch_profile import placeholders_in as placeholders_in
from specmon.engines import adapter
from specmon.redact import SECRET_NAME_GLOBS as SECRET_NAME_GLOBS  # adopt.py reads them here
from specmon.redact import is_secret_name as is_secret_name
from specmon.redact import redact_argv, redact_text
from specmon.wording import counted

# --------------------------------------------------------------------------- plans

#: What a managed start does with the log it starts into (the confirmation says it).
KEEP_LOG_NOTE = "an earlier {log} is kept, moved aside to {name}.<UTC time> (never overwritten)"


@dataclass(frozen=True, slots=True)
class ProcessIdentity:
    """A process on the host, identified for a safe stop.

    The start time (field 22 of ``/proc/PID/stat``, in clock ticks since boot)
    tells a live server from an unrelated process that got the same PID later.
    Unlike the command line, it survives ``exec`` chains (``serve.sh`` execs
    ``vllm``) and process-title rewrites.
    """

    pid: int
    starttime: int

    def __post_init__(self) -> None:
        check_int(self.pid, "pid", 2, 2**22)
        check_int(self.starttime, "starttime", 0, 2**63 - 1)


_SEAL = object()  # only build_plan holds it: a CommandPlan cannot be made by hand


@dataclass(frozen=True, slots=True)
class PlanStep:
    """One command of a plan.

    Attributes:
        name: ``"stop"`` or ``"start"``.
        command: The exact string the runner sends to the host's shell.
        display: What the confirmation screen shows: the same command, readable
            (the fixed scripts summarised, secret flag values redacted).
        timeout_s: How long the runner waits for the command.
        stdin: What the command reads on its standard input: the managed start's
            environment, ``NAME=VALUE`` lines. Never on the command line, where every
            user of the host reads it in ``/proc/PID/cmdline`` while it runs.
    """

    name: Literal["stop", "start"]
    command: str
    display: str
    timeout_s: float
    stdin: str = field(default="", repr=False)


@dataclass(frozen=True, slots=True)
class ReadyCheck:
    """A command that says whether the restarted server is ready, run repeatedly.

    Exit status 0 = ready, 1 = not yet, 3 = the server process is gone,
    anything else = the check itself failed. The last line of stdout is
    ``specmon-ready result=...``.
    """

    command: str
    display: str
    timeout_s: float
    poll_s: float = 2.0
    #: What the check looks for (for the messages): the log's ready line and the health URL.
    marker: str = ""
    url: str = ""


@dataclass(frozen=True)
class CommandPlan:
    """The exact commands one restart runs on one host, in order.

    Only :func:`build_plan` can create one (the constructor checks a private
    seal), so a runner given a plan only ever runs strings built here from a
    validated profile.
    """

    host: str
    mode: Literal["managed", "custom"]
    steps: int
    draft_tokens: int | None
    log: str | None
    pidfile: str | None
    argv: tuple[str, ...] | None
    stop: PlanStep
    start: PlanStep
    ready: ReadyCheck
    _seal: object = field(default=None, repr=False, compare=False)
    #: The other sweep dimensions this plan sets (``(("topk", "4"), ...)``), shown in its description.
    dims: tuple[tuple[str, str], ...] = ()
    #: The stop without the checks for the start that follows it (managed mode): see :attr:`stop_only`.
    stop_alone: PlanStep | None = None

    @property
    def stop_only(self) -> PlanStep:
        """The stop to run when no start follows (at exit, ``--finish none``)."""
        return self.stop_alone if self.stop_alone is not None else self.stop

    def __post_init__(self) -> None:
        if self._seal is not _SEAL:
            raise TypeError("a CommandPlan is only made by build_plan()")

    @property
    def steps_in_order(self) -> tuple[PlanStep, ...]:
        """The commands to run, in order."""
        return (self.stop, self.start)

    def describe(self, exact: bool = False) -> str:
        """What the confirmation screen shows before anything runs.

        Args:
            exact: Also show the exact strings sent to the host (long: they
                hold the fixed stop/start scripts).

        Returns:
            Several lines: host, stop, start, readiness.
        """
        spec = "no speculation" if self.steps == 0 else counted(self.steps, "step")
        if self.draft_tokens is not None and self.steps:
            spec += f", {counted(self.draft_tokens, 'draft token')}"
        for name, value in self.dims:
            spec += f", {name} {value}"
        lines = [f"host:  {self.host}   ({spec})", f"stop:  {self.stop.display}", f"start: {self.start.display}"]
        if self.mode == "managed" and self.log is not None:
            lines.append(f"log:   {KEEP_LOG_NOTE.format(log=self.log, name=self.log.rsplit('/', 1)[-1])}")
        lines.append(f"ready: {self.ready.display}")
        if exact:
            lines += ["", "exact commands:", f"[stop]  {self.stop.command}", f"[start] {self.start.command}"]
        return "\n".join(lines)


# The host-side scripts live in specmon/control/scripts/*.sh (shipped as package
# data, checked with `sh -n` and shellcheck by the tests). They are run as
# `sh -c SCRIPT NAME ARGS...`: data only ever arrives as positional parameters,
# never spliced into script text. They stick to POSIX sh (Debian's dash),
# because the login shell that SSH hands the command to may be anything;
# `sh -c` gives a known one. proc.sh (procinfo, alive, isnum) is prepended to each.

#: The script files, in the order a command is assembled from them.
SCRIPT_FILES: tuple[str, ...] = ("proc.sh", "stop.sh", "start.sh", "ready.sh", "alive.sh", "lease.sh")


def script_text(name: str) -> str:
    """The text of one host-side script resource (``stop.sh``, ...), as shipped."""
    return (resources.files("specmon.control") / "scripts" / name).read_text(encoding="utf-8")


def _script(name: str) -> str:
    return "\n" + script_text("proc.sh") + script_text(name)


STOP_SCRIPT = _script("stop.sh")
START_SCRIPT = _script("start.sh")
READY_SCRIPT = _script("ready.sh")
ALIVE_SCRIPT = _script("alive.sh")
LEASE_SCRIPT = _script("lease.sh")


def build_plan(
    profile: LaunchProfile,
    steps: int,
    *,
    draft_tokens: int | None = None,
    host: str = "localhost",
    adopted: ProcessIdentity | None = None,
    dims: Mapping[str, int | str] | None = None,
) -> CommandPlan:
    """Build the exact commands that restart the server with ``steps`` steps.

    Args:
        profile: A validated launch profile.
        steps: Speculative step count; a real int within the profile's range
            (0 = no speculation, when the profile allows it).
        draft_tokens: Override the profile's draft-token rule for this plan.
        host: Shown on the confirmation screen (the runner decides where the
            commands actually go).
        adopted: Stop this running process (found by :mod:`specmon.control.adopt`)
            instead of the one in the pidfile. Managed mode only.
        dims: Other sweep dimensions for this plan (``topk``, ``draft_tokens``,
            ``prompt_lookup_max``, ``prompt_lookup_min``, ``spec_type``), each
            validated by :mod:`specmon.control.dims`; they override the profile's.

    Returns:
        The plan: stop, then start, then the readiness check.

    Raises:
        LaunchError: A value is invalid; the message says which and why.
    """
    if not isinstance(profile, LaunchProfile):
        raise LaunchError("build_plan needs a LaunchProfile")
    check_int(steps, "steps", profile.steps_min, profile.steps_max)
    check_text(host, "host")
    try:
        point = dict(check_point(dict(dims or {})))
    except ValueError as exc:
        raise LaunchError(str(exc)) from None
    if "draft_tokens" in point:
        if draft_tokens is not None and draft_tokens != point["draft_tokens"]:
            raise LaunchError("draft_tokens is given twice with different values")
        draft_tokens = int(point.pop("draft_tokens"))
    topk = int(point.pop("topk", profile.topk))
    values: dict[str, str] = {}
    dt: int | None = None
    if steps > 0:
        if draft_tokens is None:
            dt = profile.draft_tokens_for(steps, topk)
        else:
            dt = check_int(draft_tokens, "draft_tokens", 1, DRAFT_TOKENS_HARD_MAX)
        # The engine's draft tree, when it has one (SGLang's: steps*topk tokens plus the root).
        limit = adapter(profile.engine).draft_limit(steps, topk)
        if limit is not None and dt > limit:
            raise LaunchError(
                f"draft_tokens {dt} exceeds steps*topk+1 = {limit} (steps {steps}, topk {topk})"
            )
        if draft_tokens is not None:  # a draft-token count given apart from the rule: may its engine take it?
            ad = adapter(profile.engine)
            problem = ad.point_problem(steps, {"topk": topk, "draft_tokens": dt})
            if problem:
                raise LaunchError(f"{ad.label} would not run this as asked: {problem}")
        values |= {"steps": str(steps), "draft_tokens": str(dt), "topk": str(topk)}
    else:
        if draft_tokens is not None:
            raise LaunchError("draft_tokens makes no sense with steps 0 (no speculation)")
        # Only the log template can still use these (nospec templates cannot):
        # "sglang_{steps}step.log" becomes "sglang_0step.log".
        values |= {"steps": "0", "draft_tokens": "0", "topk": str(topk)}
    shown: list[tuple[str, str]] = []
    for name in DIM_PLACEHOLDERS:
        value = point.get(name, getattr(profile, name))
        if value is None:
            continue  # a template using it fails below with "placeholder ... has no value"
        DIMENSIONS[name].check(value)
        values[name] = str(value)
        if name in point and steps > 0:
            shown.append((name, str(value)))
    lo, hi = point.get("prompt_lookup_min", profile.prompt_lookup_min), \
        point.get("prompt_lookup_max", profile.prompt_lookup_max)
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        raise LaunchError(f"prompt_lookup_min {lo} is above prompt_lookup_max {hi}")
    if steps > 0 and topk != profile.topk:
        shown.insert(0, ("topk", str(topk)))
    if profile.port is not None:
        values["port"] = str(profile.port)
    log: str | None = None
    if profile.log is not None:
        log = check_path(expand(profile.log, values), "log")
        values["log"] = log

    if profile.mode == "managed":
        plan = _managed_plan(profile, steps, dt, values, log, host, adopted)
    else:
        if adopted is not None:
            raise LaunchError("an adopted server is restarted in managed mode, not with custom commands")
        plan = _custom_plan(profile, steps, dt, values, log, host)
    return replace(plan, dims=tuple(shown)) if shown else plan


def _expand_argv(tokens: list[str], values: dict[str, str], what: str) -> list[str]:
    out = []
    for i, token in enumerate(tokens):
        out.append(check_text(expand(token, values), f"{what}[{i}]"))
    return out


def _redacted(argv: list[str]) -> list[str]:
    return redact_argv(argv)


def _ready_check(profile: LaunchProfile, values: dict[str, str], log: str | None, pidfile: str | None) -> ReadyCheck:
    url = expand(profile.health_url, values) if profile.health_url else ""
    marker = profile.ready_marker or ""
    command = shlex.join(["sh", "-c", READY_SCRIPT, "specmon-ready", pidfile or "", log or "", marker, url])
    parts = []
    if pidfile:
        parts.append(f"process in {pidfile} alive")
    if marker:
        parts.append(f"{log} contains {marker!r}")
    if url:
        parts.append(f"GET {url} answers 2xx (from the host)")
    display = " and ".join(parts) + f"; give up after {profile.start_timeout_s:g} s"
    return ReadyCheck(command=command, display=display, timeout_s=float(profile.start_timeout_s),
                      marker=marker, url=url)


def _managed_plan(
    profile: LaunchProfile,
    steps: int,
    dt: int | None,
    values: dict[str, str],
    log: str | None,
    host: str,
    adopted: ProcessIdentity | None,
) -> CommandPlan:
    assert profile.argv is not None and log is not None  # guaranteed by the model
    template = profile.nospec_argv if steps == 0 else profile.argv
    assert template is not None  # steps 0 is only in range with nospec_argv
    argv = _expand_argv(template, values, "argv")
    env = [f"{k}={check_text(expand(v, values), f'env {k}')}" for k, v in profile.env.items()]
    shown_env = [
        f"{k}=***" if is_secret_name(k) else f"{k}={expand(v, values)}" for k, v in profile.env.items()
    ]
    pidfile = check_host_path(expand(profile.pidfile_template(), values), "pidfile")
    cwd = profile.cwd or ""

    if adopted is None:
        stop_args = [pidfile, str(profile.stop_grace_s), profile.stop_signal, "", ""]
        target = f"the server recorded in {pidfile}"
    else:
        if not isinstance(adopted, ProcessIdentity):
            raise LaunchError("adopted must be a ProcessIdentity")
        stop_args = [pidfile, str(profile.stop_grace_s), profile.stop_signal, str(adopted.pid), str(adopted.starttime)]
        target = f"PID {adopted.pid} (if it is still the process found, start time {adopted.starttime})"
    display = f"SIG{profile.stop_signal} {target}; SIGKILL its process group after {profile.stop_grace_s} s"
    # A stop on its own (at exit, --finish none) checks nothing a start needs.
    alone = PlanStep(name="stop", command=shlex.join(["sh", "-c", STOP_SCRIPT, "specmon-stop", *stop_args]),
                     display=display, timeout_s=float(profile.stop_grace_s + 30))
    # Before a start, the stop first checks what the start will need: a start refused after the
    # stop (a log planted in /tmp by another user, a missing cwd) would leave no server at all.
    stop = replace(alone, command=shlex.join(["sh", "-c", STOP_SCRIPT, "specmon-stop", *stop_args, log, cwd,
                                              argv[0]]))
    # The environment goes through stdin (NAME=VALUE lines; check_text refused newlines in values),
    # the count on the command line: a token in argv is readable by every user of the host.
    start_cmd = shlex.join(["sh", "-c", START_SCRIPT, "specmon-start", pidfile, log, cwd, str(len(env)), "--",
                            *argv])
    shown = ""
    if cwd:
        shown += f"cd {shlex.quote(cwd)} && "
    if shown_env:
        shown += shlex.join(shown_env) + " "
    # setsid: its own session (no terminal's hang-up reaches it), default signal dispositions (start.sh).
    shown += f"setsid {shlex.join(_redacted(argv))} </dev/null >>{shlex.quote(log)} 2>&1 &"
    shown += f"   (PID recorded in {pidfile})"
    shown = redact_text(shown, profile.secrets())  # a secret given as a plain argument too
    start = PlanStep(name="start", command=start_cmd, display=shown, timeout_s=30.0,
                     stdin="".join(f"{line}\n" for line in env))
    return CommandPlan(
        host=host,
        mode="managed",
        steps=steps,
        draft_tokens=dt,
        log=log,
        pidfile=pidfile,
        argv=tuple(argv),
        stop=stop,
        start=start,
        ready=_ready_check(profile, values, log, pidfile),
        _seal=_SEAL,
        stop_alone=alone,
    )


def _custom_plan(
    profile: LaunchProfile, steps: int, dt: int | None, values: dict[str, str], log: str | None, host: str
) -> CommandPlan:
    assert profile.start is not None and profile.stop is not None  # guaranteed by the model
    template = profile.nospec_start if steps == 0 else profile.start
    assert template is not None
    stop_argv = _expand_argv(profile.stop, values, "stop")
    start_argv = _expand_argv(template, values, "start")
    timeout = float(profile.command_timeout_s)
    known = profile.secrets()
    stop = PlanStep("stop", shlex.join(stop_argv), redact_text(shlex.join(_redacted(stop_argv)), known), timeout)
    start = PlanStep("start", shlex.join(start_argv), redact_text(shlex.join(_redacted(start_argv)), known), timeout)
    return CommandPlan(
        host=host,
        mode="custom",
        steps=steps,
        draft_tokens=dt,
        log=log,
        pidfile=None,
        argv=None,
        stop=stop,
        start=start,
        ready=_ready_check(profile, values, log, None),
        _seal=_SEAL,
    )


def parse_result_line(stdout: str, prefix: str) -> dict[str, str]:
    """Read the last ``<prefix> key=value ...`` line a fixed script printed.

    Args:
        stdout: The command's standard output.
        prefix: ``specmon-stop``, ``specmon-start`` or ``specmon-ready``.

    Returns:
        The key/value pairs of the last such line; empty when there is none.
    """
    for line in reversed(stdout.splitlines()):
        words = line.split()
        if words and words[0] == prefix:
            return dict(w.split("=", 1) for w in words[1:] if "=" in w)
    return {}


def inherited_signals_note(fields: dict[str, str], host: str) -> str | None:
    """What to tell the user when a managed start could not give its server default signal dispositions
    and an empty mask (``start.sh`` says ``signals=dispositions`` or ``signals=inherited`` on its result
    line), or None when it did (``signals=default``, or a start that does not say: a custom command).

    Under ``nohup specmon ... &`` an inherited ignore of SIGHUP, SIGINT and SIGQUIT reaches the server.
    """
    said = fields.get("signals")
    if said == "inherited":
        return (f"the server on {host} was started with the signal dispositions specmon inherited: the host has "
                "neither perl nor python3 (nor an env with --default-signal), so a signal ignored where specmon "
                "runs (under nohup: HUP, INT, QUIT) is ignored by the server too")
    if said == "dispositions":
        return (f"the server on {host} was started with the signal mask specmon inherited: the host has neither "
                "perl nor python3 (env --default-signal reset the dispositions only)")
    return None


class OnceNotes:
    """Notes for the user, each said once however often it comes again (at every restart of a sweep on
    one host): :meth:`add` keeps a new one, :meth:`take` hands over those not taken yet."""

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._new: list[str] = []

    def add(self, note: str | None) -> None:
        """Keep ``note`` to be said, unless it is None or was kept before."""
        if note is not None and note not in self._seen:
            self._seen.add(note)
            self._new.append(note)

    def take(self) -> list[str]:
        """The notes kept since the last take, oldest first."""
        new, self._new = self._new, []
        return new
