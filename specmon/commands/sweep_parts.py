"""What the one-server and the parallel sweep commands share: checks, the recording, the load's
options, how the server is left at the end, and a plan builder's runner that never runs.

Only light modules are imported at module level (the CLI imports this when it starts).
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import TYPE_CHECKING, Any

from specmon.commands.sweep_output import _err
from specmon.control.dims import label
from specmon.control.load import BUNDLED_PROMPTS, LoadConfig, load_prompts
from specmon.control.servers import ServerRecord, left_running_note
from specmon.output.recording import Recorder, new_recording_path

if TYPE_CHECKING:  # annotations only
    from collections.abc import Sequence

    from specmon.control.launch import LaunchProfile
    from specmon.control.load import LoadConfig
    from specmon.control.runner import Result
    from specmon.experiment.plan import ExperimentPlan
    from specmon.output.recording import Recorder


def check_steps(profile: LaunchProfile, steps: Sequence[int], whose: str) -> str | None:
    """One sentence when a requested step count is outside the profile's range, before any restart.

    Args:
        profile: The launch profile the sweep restarts with.
        steps: The requested step counts.
        whose: Names the profile in the message (``profile 'kimi'``, ``the demo server``).

    Returns:
        The message, or None when every step count can be started.
    """
    lo, hi = profile.steps_min, profile.steps_max
    bad = [s for s in steps if not lo <= s <= hi]
    if not bad:
        return None
    listed = ", ".join(str(s) for s in bad)
    extra = " (0 needs a no-speculation command)" if 0 in bad and lo > 0 else ""
    return (f"--steps {listed}: {whose} allows step counts {lo} to {hi}{extra}; nothing was restarted")


def _recorder(exp: ExperimentPlan, kind: str, warmup: int | None, meta: dict[str, Any]) -> Recorder | None:
    if exp.no_record:
        return None
    path = exp.record or new_recording_path(kind)
    # The plan that made it, whole (its saved form): `report` names it, `sweep --plan RECORDING` runs it again.
    meta = {**meta, "plan": exp.saved()}
    try:
        rec = Recorder(path, meta=meta, warmup=warmup)
    except OSError as exc:
        _err(f"specmon: not recording: cannot write {path}: {exc.strerror or exc}")
        return None
    _err(f"sweep: recording to {rec.path}")
    _RECORDERS.append(rec)
    return rec


#: The recordings this process opened (``cmd_sweep`` reads their write errors at the end).


_RECORDERS: list[Recorder] = []


def _load_options(exp: ExperimentPlan, base_url: str, time_scale: float = 1.0,
                  max_tokens: int = 512) -> LoadConfig:
    prompts = load_prompts(exp.prompts) if exp.prompts else BUNDLED_PROMPTS
    return LoadConfig(base_url, endpoint=exp.endpoint, prompts=prompts, max_tokens=exp.max_tokens or max_tokens,
                      request_timeout_s=exp.request_timeout, time_scale=time_scale)


async def _left_note(restarter: Any) -> tuple[bool, str] | None:
    """``(running, text)`` about the server the sweep started, once checked on the host (None: none left).

    Only a process alive with the recorded start time is "left running"; a gone one is recorded
    as exited, with its cause; one the host cannot be asked about is said so.
    """
    record = getattr(restarter, "started", None) or _unrecorded(restarter)
    if record is None:
        return None

    state, text = await left_running_note(record, restarter.runner)
    return state == "running", text


def _unrecorded(restarter: Any) -> Any:
    """The server the last start launched when no record was written (a read-only home): from its
    PID and start time, so that it too is checked before anything is said of it (None: none known)."""

    plan, who = getattr(restarter, "last_plan", None), getattr(restarter, "identity", None)
    if plan is None or who is None or not getattr(plan, "pidfile", None):
        return None

    return ServerRecord(plan.host, plan.pidfile, who.pid, who.starttime, plan.steps, plan.draft_tokens, plan.log,
                        time.time())


#: What a sweep ended by a signal says of the server it started, checked on the host after the
#: signal (the command's signal path prints the last one; nothing is said unchecked).
LEFT_ON_SIGNAL: list[str] = []
#: Seconds the check after a signal may take: the process has a second to end.
SIGNAL_CHECK_S = 0.5


async def left_note_on_signal(restarter: Any) -> None:
    """After a signal cancelled the sweep: check the server it started and keep what to say.

    Bounded by :data:`SIGNAL_CHECK_S`; a check that cannot finish in time is said so.
    """

    record = getattr(restarter, "started", None) or _unrecorded(restarter)
    if record is None:
        return
    try:
        note = await asyncio.wait_for(_left_note(restarter), SIGNAL_CHECK_S)
    except (TimeoutError, OSError, ConnectionError):
        LEFT_ON_SIGNAL.append(f"could not check the server specmon started on {record.host} (PID {record.pid}) "
                              "in time; the next connect or sweep with this profile checks it")
        return
    if note is not None:
        LEFT_ON_SIGNAL.append(note[1])


def _finish_choice(exp: ExperimentPlan, winner: tuple[int, Any] | None) -> str:
    """``--finish``, or the answer at a terminal; ``last`` without a terminal (nothing unasked happens)."""

    if exp.finish is not None:
        return str(exp.finish)
    if not sys.stdin.isatty():
        return "last"
    what = f"restart on the winner ({_steps_text(winner)})" if winner is not None else "no winner declared"
    try:
        answer = input(f"Sweep done; {what}. Leave the server on [w]inner / [l]ast / [n]one (stop it)? "
                       f"[{'W' if winner is not None else 'L'}] ").strip().lower()
    except EOFError:
        return "last"
    if not answer:
        return "winner" if winner is not None else "last"
    return {"w": "winner", "l": "last", "n": "none"}.get(answer[0], "last")


def _steps_text(setting: int | tuple[int, Any] | None) -> str:
    if isinstance(setting, tuple):
        steps, point = setting
        if point:
            return label(steps, point)
        setting = steps
    return "no speculation" if setting == 0 else f"{setting} speculative steps"


class _NoRunner:
    """A runner for building plans up front only (never runs anything)."""

    async def run(self, command: str, timeout: float) -> Result:
        raise RuntimeError("not for running")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
