"""Adopting the SGLang/vLLM server already running on a host: :func:`controller_for_running_server`
builds the :class:`~specmon.control.restart_controller.RestartController` that restarts it, and
:func:`not_adopting` says why none was adopted.
"""

from __future__ import annotations

from collections.abc import Callable

from specmon.control.adopt import AdoptError, ServerProcess, probe_servers, profile_from_server
from specmon.control.restart_controller import RestartController
from specmon.control.runner import CommandRunner
from specmon.engines import ADAPTERS


async def controller_for_running_server(
    runner: CommandRunner,
    *,
    host: str = "localhost",
    log: str | None = None,
    pidfile: str | None = None,
    show: Callable[[str], None] | None = None,
    **controller_kwargs: object,
) -> tuple[RestartController, ServerProcess]:
    """Adopt the SGLang/vLLM server running on the host: a controller that restarts it.

    Lists the servers with the fixed probe (:data:`specmon.control.adopt.PROBE_COMMAND`,
    read-only), picks the one that provably writes ``log`` (its stdout/stderr, or a
    log-file argument; with no ``log``, the only one) and refuses any other,
    and builds a managed profile from its own command line with the step flag
    rewritten. The first restart stops it by PID and start time; the plans are
    shown and confirmed like any other.

    Args:
        runner: Where the server runs.
        host: The host label.
        log: The log the dashboard follows: picks the server writing it.
        pidfile: Where later restarts record the PID (default ``~/.cache/specmon/run/specmon-{port}.pid`` on the host).
        show: Told what is about to run on the host before the probe runs (it is read-only,
            but nothing runs unannounced).
        **controller_kwargs: Passed to :class:`RestartController` (eta_store, make_source, ...).

    Returns:
        The controller and the adopted server.

    Raises:
        AdoptError: No server, several and no way to choose, or one that cannot be
            restarted as is; the message says which and what to do.
    """
    if show is not None:
        show(f"probe: list the SGLang/vLLM server processes on {host} (read-only: /proc, filtered environment)")
    servers = await probe_servers(runner)
    if not servers:
        raise AdoptError(f"no SGLang or vLLM server is running on {host}")
    chosen = servers
    if log is not None:
        # Only a server that provably writes the followed log (fd 1/2, or a log-file argument):
        # restarting another one would stop a server the dashboard is not even watching.
        chosen = [s for s in servers if s.writes(log)]
        if not chosen:
            raise AdoptError(not_adopting(servers, log, host))
    if len(chosen) > 1:
        found = ", ".join(f"PID {s.pid}" for s in chosen)
        raise AdoptError(f"{len(chosen)} servers run on {host} ({found}): say which log to follow")
    server = chosen[0]
    if show is not None and log is not None:
        show(f"adopting PID {server.pid} ({_ENGINE_NAMES[server.engine]}): its {server.writes(log)} is {log}")
    extra: dict[str, object] = {"pidfile": pidfile} if pidfile is not None else {}
    profile = profile_from_server(server, log=log if log and server.log_path != log else None,
                                  **extra)  # type: ignore[arg-type]
    controller_kwargs.setdefault("lease", True)  # a real server: one controller at a time
    controller = RestartController(profile, runner, host=host, adopted=server.identity,
                                   current_steps=server.spec.steps, **controller_kwargs)  # type: ignore[arg-type]
    return controller, server


_ENGINE_NAMES = {a.engine.value: a.label for a in ADAPTERS}


def not_adopting(servers: list[ServerProcess], log: str, host: str) -> str:
    """What was found when no server provably writes ``log``: one sentence, ending in the refusal.

    ``1 vLLM server found on gpu-box (PID 123) but it writes /x.log, not /y.log: not adopting; ...``
    """
    advice = "not adopting; follow the log it writes, or write a launch profile"
    if len(servers) == 1:
        s = servers[0]
        return (f"1 {_ENGINE_NAMES[s.engine]} server found on {host} (PID {s.pid}) but it {s.output_text()}, "
                f"not {log}: {advice}")
    found = "; ".join(f"{_ENGINE_NAMES[s.engine]} PID {s.pid} {s.output_text()}" for s in servers)
    return f"{len(servers)} servers found on {host} ({found}) but none writes {log}: {advice}"
