"""The one way tests build the dashboard: frozen data, a fixed clock, no animations, no user themes.

Test modules import the ``isolated_home`` fixture from here (pytest picks up
fixtures imported into a test module), and build apps with :func:`sweep_app`,
:func:`build_app` or :func:`source_app`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from specmon.sources.base import ConnectionState, SourceStatus
from specmon.ui.app import DashboardOptions, SpecmonApp
from specmon.ui.factories import make_app, replay_app

#: The repository; tests run from it so log paths in headers are the same on every machine.
ROOT = Path(__file__).resolve().parents[2]
DATA = Path("tests") / "data" / "dashboard"
SWEEP_ORDER = ("nospec", "1step", "2step", "3step", "5step", "10step")
SWEEP = [DATA / "sweep" / f"sim_eagle3_{name}.log" for name in SWEEP_ORDER]
CRASH = DATA / "crash_3step.log"
#: Real vLLM runs (the project's CPU kit, n-gram speculation): per-position acceptance is logged.
VLLM_KIT = [Path("tests") / "data" / "real_logs" / "vllm_cpu_kit" / name for name in ("nospec.log", "ngram_k3.log")]
#: The wall clock every test app sees (2026-02-12 12:00:00 UTC).
FIXED_NOW = 1_770_897_600.0


@pytest.fixture
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and XDG folders in a temp dir: nobody's own config or themes leak in.

    The working directory is the repository: test logs are named by relative paths,
    so the source shown in the header (and in snapshots) does not depend on the checkout.
    """
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(ROOT)
    return home


class FakeMonotonic:
    """A monotonic clock that moves only when a test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def options(**kw: Any) -> DashboardOptions:
    """Dashboard options for tests: animations off."""
    kw.setdefault("animations", False)
    return DashboardOptions(**kw)


def build_app(files: Sequence[Path], *, speed: float | None = None, export_dir: Path | None = None,
              monotonic: FakeMonotonic | None = None, baseline_files: Sequence[Path] = (),
              controller: Any = None, **opts: Any) -> SpecmonApp:
    """A replay app over frozen test logs, fixed clock, max speed unless told otherwise."""
    return replay_app(files, speed=speed, baseline_files=baseline_files, options=options(**opts),
                      clock=lambda: FIXED_NOW, user_themes=None, export_dir=export_dir,
                      monotonic=monotonic or FakeMonotonic(), controller=controller)


def sweep_app(**kw: Any) -> SpecmonApp:
    """The whole simulated sweep (no speculation, 1, 2, 3, 5, 10 steps) at max speed."""
    return build_app(SWEEP, **kw)


class StaticSource:
    """A LineSource that delivers fixed batches, then ends or stays open with a given status.

    Args:
        batches: Lists of lines to deliver.
        status: The status to show once delivered (default: live).
        stay_open: Keep the source open after the last batch (a live tail with nothing new).
        fail_with: Raise this from ``batches()`` after delivering (an unexpected failure).
    """

    def __init__(self, batches: Sequence[Sequence[str]], *, name: str = "gpu-host:/var/log/sglang.log",
                 status: SourceStatus | None = None, stay_open: bool = True,
                 fail_with: BaseException | None = None) -> None:
        self.name = name
        self.status = SourceStatus(state=ConnectionState.CONNECTING)
        self._final = status or SourceStatus(state=ConnectionState.LIVE)
        self._batches = [list(b) for b in batches]
        self._stay_open = stay_open
        self._fail = fail_with
        self._closed = asyncio.Event()
        self.delivered = asyncio.Event()
        self.more: asyncio.Queue[list[str]] = asyncio.Queue()

    async def batches(self) -> AsyncIterator[list[str]]:
        for batch in self._batches:
            self.status.state = ConnectionState.LIVE
            self.status.lines += len(batch)
            yield batch
        # Only the final status fields: keep the line count.
        lines = self.status.lines
        self.status = self._final
        self.status.lines = lines
        self.delivered.set()
        if self._fail is not None:
            raise self._fail
        if not self._stay_open:
            self.status.state = ConnectionState.ENDED
            return
        while not self._closed.is_set():
            getter = asyncio.ensure_future(self.more.get())
            closer = asyncio.ensure_future(self._closed.wait())
            done, _ = await asyncio.wait({getter, closer}, return_when=asyncio.FIRST_COMPLETED)
            getter.cancel()
            closer.cancel()
            if getter in done:
                batch = getter.result()
                self.status.lines += len(batch)
                yield batch

    async def close(self) -> None:
        self._closed.set()


def source_app(source: StaticSource, **kw: Any) -> SpecmonApp:
    """The dashboard on an already-constructed source (as ``specmon connect`` will build it)."""
    export_dir = kw.pop("export_dir", None)
    controller = kw.pop("controller", None)
    return make_app(source, options=options(**kw), clock=lambda: FIXED_NOW, user_themes=None,
                    export_dir=export_dir, controller=controller)


def head_lines(path: Path, n: int) -> list[str]:
    """The first ``n`` lines of a test log."""
    with open(path, encoding="utf-8") as f:
        return [next(f).rstrip("\n") for _ in range(n)]


async def settle(app: SpecmonApp, pilot: Any) -> None:
    """Wait until the feeder consumed every input, then refresh every view once, synchronously."""
    await app.feeder.wait_finished()
    app.refresh_now()
    await pilot.pause()


async def settle_source(app: SpecmonApp, source: StaticSource, pilot: Any) -> None:
    """Wait until a StaticSource delivered its batches and they were ingested, then refresh."""
    await source.delivered.wait()
    while app.feeder.lines < source.status.lines:
        await pilot.pause()
    app.refresh_now()
    await pilot.pause()


async def wait_for(pilot: Any, condition: Any, what: str, rounds: int = 400) -> None:
    """Let the app run until ``condition()`` holds (a bounded number of short pauses).

    Not a timing assertion: the bound only turns a hang into a clear failure.
    """
    for _ in range(rounds):
        if condition():
            return
        await pilot.pause(0.02)
    raise AssertionError(f"never happened: {what}")


def header_text(app: SpecmonApp) -> str:
    """The two header lines as plain text."""
    from specmon.ui.widgets.status_header import StatusHeader

    return app.query_one(StatusHeader).render().plain
