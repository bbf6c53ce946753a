"""Adopt a server that is already running on the host (of an engine whose module reads and
rewrites its speculative flags: SGLang and vLLM today, :data:`ADOPTABLE`).

No profile needed: a fixed, reviewed probe script (:data:`PROBE_COMMAND`)
lists the server processes on the host from ``/proc`` — argv, working
directory, where stdout goes (the log), and the launch-relevant part of the
environment. The environment is filtered *on the host*, by an allow-list of
names, and anything whose name looks like a secret (``*TOKEN*``, ``*KEY*``,
``*SECRET*``, ...) is dropped before output: secret values never cross the
wire; only their names are reported, so the UI can warn that they will not be
passed on.

The rest is pure functions on data: :func:`parse_probe` reads the probe's
output, :func:`current_spec` reads the step count from an argv,
:func:`rewrite_steps` rewrites it, and :func:`profile_from_server` turns an
adopted server into a managed :class:`~specmon.control.launch.LaunchProfile`.
The first restart stops the adopted process by its PID and start time
(``build_plan(..., adopted=server.identity)``); later restarts use the pidfile.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from pydantic import ValidationError

from specmon.control.launch import (
    SECRET_NAME_GLOBS,
    LaunchError,
    LaunchProfile,
    ProcessIdentity,
    check_int,
    check_text,
    is_secret_name,
)
from specmon.control.runner import CommandRunner
from specmon.engines import ADAPTERS, EngineAdapter, by_name
from specmon.engines.argv import ArgvError, flag_values, strip_flags
from specmon.engines.argv import SpecSettings as SpecSettings

#: An engine's name (``sglang``): one of :data:`ADOPTABLE`.
EngineName = str
#: The engines whose servers can be adopted: their modules read and rewrite the spec flags.
ADOPTABLE: tuple[EngineName, ...] = tuple(a.engine.value for a in ADAPTERS if a.adoptable)

#: Environment variables copied from an adopted server (besides these, nothing): what every
#: engine's stack reads, and each adoptable engine's own (its module's ``env_prefixes``).
ENV_ALLOW_PREFIXES: tuple[str, ...] = (
    "NCCL_", "CUDA_", "TORCH_", "PYTORCH_", "TORCHINDUCTOR_",
    "TRITON_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "OMP_", "MKL_", "NVIDIA_",
    "NVSHMEM_", "UCX_", "GLOO_", "FLASHINFER_",
    *(p for a in ADAPTERS if a.adoptable for p in a.env_prefixes),
)
ENV_ALLOW_NAMES: tuple[str, ...] = (
    "PATH", "LD_LIBRARY_PATH", "PYTHONPATH", "VIRTUAL_ENV", "CONDA_PREFIX", "CONDA_DEFAULT_ENV",
    "MASTER_ADDR", "MASTER_PORT", "DO_NOT_TRACK", "TP_SOCKET_IFNAME",
)

#: The line each engine's start ends with, and its port when the command names none (the
#: engines' own facts, in specmon.engines).
READY_MARKERS: dict[str, str] = {a.engine.value: a.ready_marker for a in ADAPTERS if a.ready_marker}
DEFAULT_PORTS: dict[str, int] = {a.engine.value: a.default_port for a in ADAPTERS if a.default_port}


class AdoptError(ValueError):
    """The running server cannot be adopted as is; the message says why."""


def env_name_allowed(name: str) -> bool:
    """True when an adopted server's variable ``name`` is copied to the restart."""
    if is_secret_name(name):
        return False
    return name in ENV_ALLOW_NAMES or name.startswith(ENV_ALLOW_PREFIXES)


def _command_words() -> tuple[str, ...]:
    """Words an adoptable server's command line holds (its scripts, modules' packages and
    binaries): the probe's cheap first filter; :func:`classify` decides."""
    words: list[str] = []
    for a in ADAPTERS:
        if a.adoptable:
            ep = a.entry_points
            words += [s for s, _ in ep.scripts] + [m.split(".")[0] for m, _ in ep.modules] + list(ep.binaries)
    return tuple(dict.fromkeys(words))


def _probe_script() -> str:
    # The case patterns come from the constants above and the engines' entry points; check
    # they are plain names so the generated script is exactly as reviewed.
    for item in ENV_ALLOW_PREFIXES + ENV_ALLOW_NAMES:
        assert re.fullmatch(r"[A-Z_]+", item), item
    for glob in SECRET_NAME_GLOBS:
        assert re.fullmatch(r"[*A-Z_]+", glob), glob
    words = _command_words()
    for word in words:
        assert re.fullmatch(r"[A-Za-z0-9_.-]+", word), word
    allowed = "|".join([p + "*" for p in ENV_ALLOW_PREFIXES] + list(ENV_ALLOW_NAMES))
    secret = "|".join(SECRET_NAME_GLOBS)
    servers = "|".join(f"*{w}*" for w in words)
    return (
        r"""
secret() { local u=${1^^}; case $u in SECRET_PATTERNS) return 0;; esac; return 1; }
allowed() { case $1 in ALLOWED_PATTERNS) return 0;; esac; return 1; }
self=$$
for d in /proc/[0-9]*; do
  pid=${d#/proc/}
  [[ $pid == "$self" ]] && continue
  argv=()
  mapfile -d '' -t argv < "$d/cmdline" 2>/dev/null || continue
  (( ${#argv[@]} )) || continue
  case "${argv[*]}" in SERVER_PATTERNS) ;; *) continue;; esac
  stat=
  { read -r stat < "$d/stat"; } 2>/dev/null || continue
  read -r -a f <<< "${stat##*) }"
  [[ ${f[0]} == Z ]] && continue
  printf 'specmon-proc\0%s\0%s\0%s\0%s\0' "$pid" "${f[19]}" "${f[1]}" "${f[2]}"
  printf '%s\0' "$(readlink "$d/cwd" 2>/dev/null)" "$(readlink "$d/fd/1" 2>/dev/null)"
  printf 'argv\0%s\0' "${#argv[@]}"
  printf '%s\0' "${argv[@]}"
  ok=() held=() envv=()
  if { mapfile -d '' -t envv < "$d/environ"; } 2>/dev/null; then
    for kv in "${envv[@]}"; do
      k=${kv%%=*}
      [[ $kv == *=* && $k =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
      if secret "$k"; then held+=("$k"); continue; fi
      allowed "$k" || continue
      if [[ $kv == *[[:cntrl:]]* ]]; then held+=("$k"); continue; fi
      ok+=("$kv")
    done
    printf 'env\0%s\0' "${#ok[@]}"
    (( ${#ok[@]} )) && printf '%s\0' "${ok[@]}"
  else
    printf 'env\0-1\0'
  fi
  printf 'withheld\0%s\0' "${#held[@]}"
  (( ${#held[@]} )) && printf '%s\0' "${held[@]}"
  printf 'stderr\0%s\0' "$(readlink "$d/fd/2" 2>/dev/null)"
  printf 'end\0'
done
printf 'specmon-done\0'
""".replace("SECRET_PATTERNS", secret).replace("ALLOWED_PATTERNS", allowed).replace("SERVER_PATTERNS", servers)
    )


#: The fixed bash script that lists candidate server processes (see module doc).
PROBE_SCRIPT: str = _probe_script()
#: What runs on the host to find servers; read-only.
PROBE_COMMAND: str = shlex.join(["bash", "-c", PROBE_SCRIPT])


# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class ServerProcess:
    """A running SGLang or vLLM server found on the host.

    Attributes:
        pid: Its PID.
        starttime: Its start time (``/proc/PID/stat`` field 22).
        ppid: Parent PID.
        pgid: Process group.
        engine: ``sglang`` or ``vllm``.
        argv: Its command line.
        cwd: Its working directory (``None`` when unreadable).
        stdout: Where its stdout goes (``/proc/PID/fd/1``): a file path, or
            something like ``pipe:[123]``; ``None`` when unreadable.
        stderr: The same for its stderr (``/proc/PID/fd/2``).
        env: The allow-listed, non-secret part of its environment.
        env_readable: False when its environment could not be read (another user).
        withheld_env: Names (only) of variables not copied: secret-looking
            names, or values with control characters.
    """

    pid: int
    starttime: int
    ppid: int
    pgid: int
    engine: EngineName
    argv: tuple[str, ...]
    cwd: str | None
    stdout: str | None
    stderr: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    env_readable: bool = True
    withheld_env: tuple[str, ...] = ()

    @property
    def identity(self) -> ProcessIdentity:
        """What a safe stop checks: PID and start time."""
        return ProcessIdentity(self.pid, self.starttime)

    @property
    def spec(self) -> SpecSettings:
        """Its current speculative settings, read from its argv."""
        return current_spec(self.argv, self.engine)

    @property
    def port(self) -> int:
        """The port it listens on (``--port``, else the engine's default)."""
        value = flag_values(self.argv, "--port")
        if value and value[-1].isdigit() and 0 < int(value[-1]) < 65536:
            return int(value[-1])
        return DEFAULT_PORTS[self.engine]

    @property
    def log_path(self) -> str | None:
        """Its stdout when that is a plain file path (not a pipe, tty or /dev/null)."""
        return _file_path(self.stdout)

    def writes(self, log: str) -> str | None:
        """How this server provably writes ``log``, or None when nothing shows it does.

        Proof is its stdout or stderr resolving to that path, or a log-file argument
        (``--log-file PATH``, ``--log=PATH``: any flag with ``log`` in its name) naming
        it, relative paths taken from its working directory.

        Returns:
            ``"stdout"``, ``"stderr"``, ``"--log-file"`` (the flag), or None.
        """
        want = posixpath.normpath(log)
        for name, where in (("stdout", self.stdout), ("stderr", self.stderr)):
            path = _file_path(where)
            if path is not None and posixpath.normpath(path) == want:
                return name
        argv = self.argv
        for i, token in enumerate(argv):
            flag, eq, value = token.partition("=")
            if not _LOG_FLAG.fullmatch(flag):
                continue
            values = [value] if eq else ([argv[i + 1]] if i + 1 < len(argv) else [])
            for v in values:
                full = v if v.startswith("/") or not self.cwd else posixpath.join(self.cwd, v)
                if posixpath.normpath(full) == want:
                    return flag
        return None

    def output_text(self) -> str:
        """Where its output goes, for a message: ``writes /x.log``, ``writes to a pipe``."""
        path = self.log_path or _file_path(self.stderr)
        if path is not None:
            return f"writes {path}"
        where = self.stdout or ""
        if where.startswith("pipe:"):
            return "writes to a pipe"
        if where.startswith("socket:"):
            return "writes to a socket (journald?)"
        if where.startswith("/dev/"):
            return f"writes to {where}"
        return "writes nowhere specmon can read"


#: A command-line flag that names a log file (``--log-file``, ``--log``, ``--uvicorn-log-path``, ...).
_LOG_FLAG = re.compile(r"--[a-z0-9-]*log[a-z0-9-]*")


def _file_path(where: str | None) -> str | None:
    if not where or not where.startswith("/") or where.startswith("/dev/") or where.endswith(" (deleted)"):
        return None
    return where


# --------------------------------------------------------------------------- probe


async def probe_servers(runner: CommandRunner, timeout: float = 30.0) -> list[ServerProcess]:
    """Run :data:`PROBE_COMMAND` on the host and return the servers it found.

    Args:
        runner: Where to look.
        timeout: Seconds to wait for the probe.

    Returns:
        The servers, main processes only (their worker children are left out).

    Raises:
        AdoptError: The probe could not run (no bash, timeout, ...).
    """
    result = await runner.run(PROBE_COMMAND, timeout)
    if not result.ok:
        why = "timed out" if result.timed_out else f"exit {result.exit_status}: {result.stderr.strip()[:200]}"
        raise AdoptError(f"could not list processes on the host ({why})")
    return parse_probe(result.stdout)


def parse_probe(output: str) -> list[ServerProcess]:
    """Parse the probe's NUL-separated output into server processes.

    Args:
        output: What :data:`PROBE_SCRIPT` printed.

    Returns:
        SGLang / vLLM main processes, in PID order; processes whose command
        line only mentions an engine (a tail, an editor, a worker child) are
        left out.

    Raises:
        AdoptError: The output is not the probe's (truncated, mangled).
    """
    items = output.split("\0")
    if "specmon-done" not in items:
        raise AdoptError("the process listing from the host is incomplete")
    found: list[ServerProcess] = []
    i = 0

    def take() -> str:
        nonlocal i
        if i >= len(items):
            raise AdoptError("the process listing from the host is truncated")
        i += 1
        return items[i - 1]

    def take_int() -> int:
        text = take()
        if not re.fullmatch(r"-?[0-9]+", text):
            raise AdoptError(f"unexpected field in the process listing: {text[:40]!r}")
        return int(text)

    def expect(word: str) -> None:
        got = take()
        if got != word:
            raise AdoptError(f"unexpected field in the process listing: {got[:40]!r} (wanted {word})")

    while i < len(items):
        head = take()
        if head == "specmon-done":
            break
        if head != "specmon-proc":
            raise AdoptError(f"unexpected field in the process listing: {head[:40]!r}")
        pid, starttime, ppid, pgid = take_int(), take_int(), take_int(), take_int()
        cwd, stdout = take(), take()
        expect("argv")
        argv = tuple(take() for _ in range(take_int()))
        expect("env")
        count = take_int()
        env_readable = count >= 0
        env: dict[str, str] = {}
        withheld: list[str] = []
        for _ in range(max(count, 0)):
            key, _, value = take().partition("=")
            # Defence in depth: the host already filtered; filter again.
            if env_name_allowed(key) and not _has_control(value):
                env[key] = value
            else:
                withheld.append(key)
        expect("withheld")
        withheld += [take() for _ in range(take_int())]
        stderr = None
        if i < len(items) and items[i] == "stderr":  # where fd 2 goes (older probes did not say)
            take()
            stderr = take() or None
        expect("end")
        engine = classify(argv)
        if engine is None:
            continue
        found.append(
            ServerProcess(
                pid=pid,
                starttime=starttime,
                ppid=ppid,
                pgid=pgid,
                engine=engine,
                argv=argv,
                cwd=cwd or None,
                stdout=stdout or None,
                stderr=stderr,
                env=env,
                env_readable=env_readable,
                withheld_env=tuple(sorted(set(withheld))),
            )
        )
    pids = {s.pid for s in found}
    # A server's own children (multiprocessing workers re-running the entry
    # point) are not separate servers.
    return sorted((s for s in found if s.ppid not in pids), key=lambda s: s.pid)


def _has_control(text: str) -> bool:
    try:
        check_text(text, "value")
    except LaunchError:
        return True
    return False


_PYTHON_RE = re.compile(r"python[0-9.]*")
_PYTHON_OPTS_WITH_ARG = {"-X", "-W", "-Q"}


def classify(argv: Sequence[str]) -> EngineName | None:
    """Say which server an argv starts, if any.

    Only real entry points count (``python -m sglang.launch_server``,
    ``sglang serve`` — SGLang 0.5's recommended one, a console script that runs
    ``sglang.cli.main`` — ``python -m sglang.cli.main serve``, ``vllm serve``, ``python .../bin/vllm serve``,
    ``python -m vllm.entrypoints.openai.api_server``); a command that merely
    mentions an engine (``tail -F sglang.log``, ``pgrep -f vllm``) does not.

    Args:
        argv: A process's command line.

    Returns:
        One of :data:`ADOPTABLE` (``"sglang"``), or ``None``.
    """
    if not argv:
        return None
    rest = _after_interpreter(argv)
    if rest is None:
        return None
    for ad in ADAPTERS:
        if ad.adoptable and ad.serves(rest):
            return ad.engine.value
    return None


def _after_interpreter(argv: Sequence[str]) -> list[str] | None:
    """The command from the script or ``-m`` on (the interpreter and its options left out).

    ``["python3", "-X", "dev", "-m", "vllm", "serve"]`` → ``["-m", "vllm", "serve"]``; a
    command that is no interpreter stays whole; ``python -c ...`` and ``python -`` are None.
    """
    if not _PYTHON_RE.fullmatch(os.path.basename(argv[0])):
        return list(argv)
    i = 1
    while i < len(argv):
        tok = argv[i]
        if tok == "-m":
            return list(argv[i:])
        if tok in ("-c", "-"):
            return None
        if tok in _PYTHON_OPTS_WITH_ARG:
            i += 2
            continue
        if tok.startswith("-"):
            i += 1
            continue
        return list(argv[i:])
    return None


# --------------------------------------------------------------------------- argv


_T = TypeVar("_T")


def _as_adopt_error(fn: Callable[[], _T]) -> _T:
    """``fn()``, its :class:`~specmon.engines.argv.ArgvError` said as an :class:`AdoptError`."""
    try:
        return fn()
    except ArgvError as exc:
        raise AdoptError(str(exc)) from None


def _adapter(argv: Sequence[str], engine: EngineName | None) -> EngineAdapter:
    name = engine or classify(argv)
    found = by_name(name) if name else None
    if found is None or not found.adoptable:
        labels = " or ".join(a.label for a in ADAPTERS if a.adoptable)
        raise AdoptError(f"not an {labels} server command line")
    return found


def current_spec(argv: Sequence[str], engine: EngineName | None = None) -> SpecSettings:
    """Read the speculative settings from a server's argv (the engine module's rule).

    Args:
        argv: The command line.
        engine: ``sglang`` / ``vllm``; found with :func:`classify` when None.

    Returns:
        The settings (steps 0 when speculation is off).

    Raises:
        AdoptError: The argv is not a known server, or a value is unreadable.
    """
    ad = _adapter(argv, engine)
    return _as_adopt_error(lambda: ad.read_spec(argv))


#: Every adoptable engine's speculative flags: a no-speculation restart drops them all.
_SPEC_FLAG_RE = re.compile("--(" + "|".join(a.spec_flags for a in ADAPTERS if a.spec_flags) + ")")


def strip_spec(argv: Sequence[str]) -> list[str]:
    """Remove every speculative-decoding flag (and its value): the no-speculation argv.

    Args:
        argv: A server command line.

    Returns:
        The same command line without the engines' speculative flags (``--speculative*``,
        ``--num-speculative-tokens``, ``--ngram-prompt-lookup-*``, ``--spec-decoding-*``).
    """
    return strip_flags(argv, _SPEC_FLAG_RE)


def rewrite_steps(
    argv: Sequence[str], steps: int, draft_tokens: int | None = None, *, engine: EngineName | None = None
) -> list[str]:
    """Return ``argv`` with the speculative step count set to ``steps``.

    SGLang: ``--speculative-num-steps``, ``--speculative-num-draft-tokens``
    (default ``steps+1`` at top-k 1; must be <= ``steps*topk+1``) and
    ``--speculative-eagle-topk`` are set (added when missing; ``--flag=value``
    and ``--flag value`` both kept in their form). vLLM: ``num_speculative_tokens``
    in ``--speculative-config`` JSON (re-serialised), its dotted form, or the
    old ``--num-speculative-tokens``. Steps 0 removes speculation altogether.

    Args:
        argv: The running server's command line.
        steps: The new step count, a real int in 0..64.
        draft_tokens: SGLang draft tokens; needed when top-k > 1.
        engine: Found with :func:`classify` when None.

    Returns:
        The new command line.

    Raises:
        AdoptError: The argv cannot be rewritten (not a server, no speculation
            configured, invalid values).
    """
    ad = _adapter(argv, engine)
    try:
        check_int(steps, "steps", 0, 64)
    except LaunchError as exc:
        raise AdoptError(str(exc)) from None
    if steps == 0:
        return strip_spec(argv)
    draft_text, topk_text = _as_adopt_error(lambda: ad.spec_texts(argv, steps, draft_tokens))
    return _as_adopt_error(lambda: ad.write_spec(argv, str(steps), draft_text, topk_text))


# --------------------------------------------------------------------------- profile


def profile_from_server(
    server: ServerProcess,
    *,
    log: str | None = None,
    pidfile: str | None = None,
    steps_max: int = 16,
    stop_grace_s: int = 30,
    start_timeout_s: float = 1800,
) -> LaunchProfile:
    """Build a managed launch profile that restarts ``server`` with other step counts.

    The profile's argv is the server's own command line with the step values
    replaced by ``{steps}`` / ``{draft_tokens}`` / ``{topk}``; ``nospec_argv``
    is the same without speculative flags (steps 0); env, cwd and the log path
    come from the running process.

    Args:
        server: The adopted server.
        log: Log path template; default: the file its stdout goes to now
            (a restart moves it aside to LOG.<UTC time> and starts a new one).
        pidfile: Pidfile template; default ``~/.cache/specmon/run/specmon-{port}.pid`` on the host.
        steps_max: Largest step count offered.
        stop_grace_s: Seconds between SIGINT and SIGKILL.
        start_timeout_s: Seconds a start may take to become ready.

    Returns:
        A validated profile. Stop the adopted process on the first restart with
        ``build_plan(profile, steps, adopted=server.identity)``.

    Raises:
        AdoptError: Something needed is missing or unsafe; the message says what.
    """
    spec = server.spec
    if spec.steps == 0:
        raise AdoptError(
            "the server runs without speculative decoding; specmon cannot guess the drafter: write a launch profile"
        )
    for i, token in enumerate(server.argv):
        for name in re.findall(r"\{([A-Za-z_][A-Za-z0-9_]*)\}", token):
            raise AdoptError(f"argument {i} holds {{{name}}}, which a launch profile would read as a placeholder")
    topk = spec.topk or 1
    ad = _adapter(server.argv, server.engine)
    argv = _as_adopt_error(lambda: ad.write_spec(server.argv, "{steps}", "{draft_tokens}", "{topk}"))
    draft_rule: str | int = "steps+1"
    if topk != 1:  # (a draft tree: only an engine with a top-k has one)
        current = spec.steps
        if spec.draft_tokens is None or (current is not None and spec.draft_tokens == current * topk + 1):
            draft_rule = "steps*topk+1"
        else:
            draft_rule = spec.draft_tokens
    log_path = log if log is not None else server.log_path
    if log_path is None:
        raise AdoptError(
            f"the server's output does not go to a file ({server.stdout or 'unreadable'}); give a log path"
        )
    port = server.port
    host = _health_host(server.argv)
    fields: dict[str, object] = {
        "mode": "managed",
        "engine": server.engine,
        "argv": argv,
        "nospec_argv": strip_spec(server.argv),
        "env": dict(server.env),
        "cwd": server.cwd if server.cwd and server.cwd.startswith("/") else None,
        "log": log_path,
        "port": port,
        "topk": topk,
        "draft_tokens": draft_rule,
        "steps_min": 0,
        "steps_max": max(steps_max, spec.steps or 1),
        "ready_marker": READY_MARKERS[server.engine],
        "health_url": f"http://{host}:{{port}}/health" if host else None,
        "stop_grace_s": stop_grace_s,
        "start_timeout_s": start_timeout_s,
    }
    if pidfile is not None:
        fields["pidfile"] = pidfile
    try:
        return LaunchProfile.model_validate(fields)
    except ValidationError as exc:
        problems = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        raise AdoptError(f"cannot build a launch profile from this server: {problems}") from None


_HOST_RE = re.compile(r"[A-Za-z0-9.-]+|\[[0-9A-Fa-f:]+\]")


def _health_host(argv: Sequence[str]) -> str | None:
    """Where to reach the server from its own host (``--host``; wildcard -> loopback)."""
    values = flag_values(argv, "--host")
    host = values[-1] if values else None
    if host in (None, "", "0.0.0.0", "::", "localhost", "127.0.0.1"):
        return "127.0.0.1"
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return host if _HOST_RE.fullmatch(host) else None


__all__ = [
    "PROBE_COMMAND",
    "AdoptError",
    "ServerProcess",
    "SpecSettings",
    "classify",
    "current_spec",
    "env_name_allowed",
    "parse_probe",
    "probe_servers",
    "profile_from_server",
    "rewrite_steps",
    "strip_spec",
]
