"""The dashboard apps as the commands make them: a live source or files (:func:`make_app`), a replay
paced by its timestamps (:func:`replay_app`), a local file followed like ``tail -F`` (:func:`watch_app`)."""


from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specmon import paths
from specmon.ingest.live import FeedInput, recording_inputs
from specmon.sources.base import LineSource
from specmon.sources.replay import ReplayClock, ReplaySource, first_time, time_ordered
from specmon.ui.app_options import DashboardController as DashboardController
from specmon.ui.app_options import DashboardOptions as DashboardOptions
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.theming import theme_folders

if TYPE_CHECKING:
    from specmon.output.recording import Recorder
    from specmon.ui.counters import LiveCounters

__all__ = ["DashboardController", "DashboardOptions", "SpecmonApp", "make_app", "replay_app", "watch_app"]

#: (action, palette title, palette help) for the command palette: the same source as the keys and help.
from specmon.ui.app import USER_THEMES, SpecmonApp


def make_app(
    source: LineSource | Sequence[FeedInput],
    *,
    replay_clock: ReplayClock | None = None,
    options: DashboardOptions | None = None,
    clock: Callable[[], float] = time.time,
    user_themes: Path | None | object = USER_THEMES,
    extra_theme_dirs: Sequence[Traversable | Path] = (),
    export_dir: Path | None = None,
    controller: RestartFlow | DashboardController | None = None,
    recorder: Recorder | None = None,
    sweeper: SweepFlow | None = None,
    counters: LiveCounters | None = None,
) -> SpecmonApp:
    """Build the dashboard for a source (or several inputs): the one factory.

    Args:
        source: An already-constructed :class:`LineSource` (a local tail, an SSH
            tail, a simulator), or a list of :class:`FeedInput` for several files.
        replay_clock: The replay's clock, when replaying.
        options: Command-line settings.
        clock: Wall clock.
        user_themes: The user's theme folder; default: the platform config folder; None: none.
        extra_theme_dirs: More theme folders, read after the shipped ones.
        export_dir: Where exports go (default: :func:`specmon.paths.export_dir`; ``--out DIR``).
        controller: Restart/sweep provider (None: ``r`` and ``s`` greyed out).
        recorder: Records the session (a :class:`~specmon.output.recording.Recorder`; None: not recorded).
        sweeper: Runs sweeps for ``s`` (default: built on the controller's restart flow).
        counters: The engine's ``/metrics`` scraped beside the log (:class:`~specmon.ui.counters.LiveCounters`).
    """
    inputs = [FeedInput(source)] if isinstance(source, LineSource) else list(source)
    user_dir = paths.themes_dir() if user_themes is USER_THEMES else user_themes
    return SpecmonApp(
        inputs, replay_clock=replay_clock, options=options, clock=clock,
        theme_dirs=theme_folders(user_dir if isinstance(user_dir, Path) else None, extra_theme_dirs),
        export_dir=export_dir, controller=controller, recorder=recorder, sweeper=sweeper, counters=counters,
    )


def replay_app(
    files: Sequence[str | Path],
    *,
    speed: float | None = 1.0,
    baseline_files: Sequence[str | Path] = (),
    monotonic: Callable[[], float] = time.monotonic,
    **kwargs: Any,
) -> SpecmonApp:
    """The dashboard replaying log files (baseline files first, read at max speed).

    A specmon recording (:func:`specmon.output.recording.is_recording`) replays its
    recorded lines, input by input, so the table is the one the live session showed.

    Args:
        files: Logs to replay (played in the order of their first timestamps).
        speed: Log seconds per wall second (None: max).
        baseline_files: Logs of the server without speculation.
        monotonic: Clock pacing the replay.
        **kwargs: Passed to :func:`make_app`.
    """
    clock = ReplayClock(speed, monotonic=monotonic)
    wall = kwargs.get("clock", time.time)
    inputs = []
    from specmon.output.recording import is_recording

    for path in baseline_files:
        # The baseline is reference data, not part of the show: read it at once.
        if is_recording(path):
            inputs.extend(recording_inputs(path, ReplayClock(None), wall_clock=wall, baseline=True))
            continue
        src = ReplaySource(path, ReplayClock(None), wall_clock=wall)
        inputs.append(FeedInput(src, baseline=True, year=src.year))
    # Logs play in the order their servers wrote them, whatever order they were named in.
    plain = {str(p) for p in files if not is_recording(p)}
    for path in time_ordered(files, lambda p: first_time(p) if str(p) in plain else None):
        if is_recording(path):
            inputs.extend(recording_inputs(path, clock, wall_clock=wall))
            continue
        src = ReplaySource(path, clock, wall_clock=wall)
        inputs.append(FeedInput(src, year=src.year))
    return make_app(inputs, replay_clock=clock, **kwargs)


def watch_app(path: str | Path, *, lines: int | None = None, max_line: int | None = None,
              **kwargs: Any) -> SpecmonApp:
    """The dashboard following a local log like ``tail -F``.

    Args:
        path: The log (need not exist yet).
        lines: Start with the last ``lines`` lines (None: the whole file).
        max_line: ``--line-cap``: longest line kept, in bytes (None: 1 MiB).
        **kwargs: Passed to :func:`make_app`.
    """
    from specmon.sources.lines import DEFAULT_MAX_LINE
    from specmon.sources.local import LocalTailSource

    source = LocalTailSource(path, lines=lines, clock=kwargs.get("clock", time.time),
                             max_line=max_line or DEFAULT_MAX_LINE)
    return make_app(source, **kwargs)
