"""Scripted runners, clocks and sources for restart-controller tests."""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from pathlib import Path

from specmon.control.eta import EtaStore
from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.runner import LocalRunner, Result
from specmon.sim.logwriter import format_line, startup_script
from specmon.sim.model import SpecConfig
from specmon.sources.base import ConnectionState, SourceStatus


def startup_lines(steps: int = 2, crash: bool = False, seed: int = 3) -> list[str]:
    """A realistic SGLang start-up, as the simulator prints it."""
    script = startup_script(SpecConfig.make(steps), random.Random(seed), 60.0, crash_at=0.4 if crash else None)
    return [format_line(1_770_000_000.0 + s.at, s.message, s.ranks) for s in script]


def profile(tmp_path: Path, **kw: object) -> LaunchProfile:
    fields: dict[str, object] = dict(
        argv=["server", "--steps", "{steps}"], log=str(tmp_path / "s_{steps}.log"),
        pidfile=str(tmp_path / "s.pid"), ready_marker="ready to roll", engine="sglang", start_timeout_s=30)
    fields.update(kw)
    return LaunchProfile.model_validate(fields)


# --------------------------------------------------------------------------- fakes


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class QueueSource:
    """A LineSource fed by the test: ``put(lines)`` delivers a batch."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.status = SourceStatus(state=ConnectionState.LIVE)
        self.queue: asyncio.Queue[list[str] | None] = asyncio.Queue()
        self.closed = False

    async def batches(self) -> AsyncIterator[list[str]]:
        while True:
            batch = await self.queue.get()
            if batch is None:
                return
            yield batch

    async def close(self) -> None:
        self.closed = True
        self.queue.put_nowait(None)


class ScriptedRunner:
    """Answers a plan's commands: stop/start results, and the ready check's answers in turn."""

    def __init__(self, plan_steps: dict[str, Result], ready: list[Result]) -> None:
        self.steps = plan_steps
        self.ready = list(ready)
        self.calls: list[str] = []
        self.kinds: list[str] = []

    async def run(self, command: str, timeout: float) -> Result:
        self.calls.append(command)
        for kind in ("specmon-stop", "specmon-start", "specmon-ready"):
            if f" {kind} " in command:
                self.kinds.append(kind)
                if kind == "specmon-ready":
                    return self.ready.pop(0) if len(self.ready) > 1 else self.ready[0]
                return self.steps[kind]
        raise AssertionError(f"unexpected command: {command[:80]}")


STOPPED = Result(0, "specmon-stop result=stopped pid=10 signal=INT\n", "")
STARTED = Result(0, "specmon-start result=started pid=11 starttime=5\n", "")
WAITING = Result(1, "specmon-ready result=waiting reason=marker\n", "")
READY = Result(0, "specmon-ready result=ready\n", "")
EXITED = Result(3, "specmon-ready result=exited\n", "")


class Harness:
    """A controller with a scripted runner, a fake clock and a log the test feeds."""

    def __init__(self, tmp_path: Path, runner: ScriptedRunner, **kw: object) -> None:
        self.clock = FakeClock()
        self.sources: list[QueueSource] = []
        self.switches: list[tuple[str, bool]] = []
        self.script: list[tuple[float, list[str]]] = []  # (seconds after the start step, lines)
        self.runner = runner
        prof = kw.pop("profile", None) or profile(tmp_path)
        self.controller = RestartController(
            prof, runner, host="gpu-box", eta_store=EtaStore(tmp_path / "eta.json"),
            make_source=self._make, on_log_switch=self._switch, clock=self.clock, sleep=self._sleep,
            ready_poll_s=1.0, **kw)  # type: ignore[arg-type]
        self._t0: float | None = None

    def _make(self, path: str, from_start: bool) -> QueueSource:
        src = QueueSource(path)
        self.sources.append(src)
        self._t0 = self.clock.now
        return src

    def _switch(self, path: str, from_start: bool) -> None:
        self.switches.append((path, from_start))

    async def _sleep(self, seconds: float) -> None:
        self.clock.now += seconds
        # Deliver the scripted lines that are due, then let the pump take them.
        if self._t0 is not None and self.sources:
            due = [s for s in self.script if s[0] <= self.clock.now - self._t0]
            self.script = [s for s in self.script if s not in due]
            for _, lines in due:
                self.sources[-1].queue.put_nowait(lines)
        for _ in range(3):
            await asyncio.sleep(0)


def recording_runner() -> tuple[list[str], object]:
    calls: list[str] = []
    local = LocalRunner()

    class Recording:
        async def run(self, command: str, timeout: float) -> Result:
            calls.append(command)
            return await local.run(command, timeout)

    return calls, Recording()


# --------------------------------------------------------------------------- plan rules
