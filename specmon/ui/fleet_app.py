"""The fleet app: ``specmon watch LOG1 LOG2 ...``, several replicas of one deployment side by side.

A small App beside the dashboard's (:mod:`specmon.ui.app`), which stays what ``specmon watch
PATH`` opens for one log. Here an async worker feeds every replica's log into its own session
(:class:`~specmon.ingest.fleet.Fleet`: one local follower and one feeder per log, as watch
builds for one), and every :data:`TICK_S` seconds a timer asks the fleet model
(:class:`~specmon.model.fleet.FleetModel`) for a snapshot and hands it to the fleet screen
(:mod:`specmon.ui.screens.fleet`), whose tables update their cells in place. ``enter`` on a
replica pushes that replica's dashboard (:mod:`specmon.ui.screens.replica`) on the same feeder.

A fleet read through Prometheus (``specmon connect FLEETPROFILE``) is the same view on a
:class:`~specmon.ingest.prom_fleet.PromFleet`: one replica per ``instance`` label, its rates
from Prometheus, no log and so no replica dashboard; the header says where it is read from.

A profile listing ``replicas`` (``specmon connect REPLICASPROFILE``) is the same view on a
:class:`~specmon.ingest.fleet.Fleet` whose followers tail each replica's log over SSH.

Everything non-deterministic (the clock, theme folders) is injected; :func:`fleet_app`,
:func:`followed_fleet_app` and :func:`prometheus_fleet_app` are the factories the command line
and the tests use.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from pathlib import Path

from textual import on
from textual.binding import Binding
from textual.worker import Worker

from specmon import paths
from specmon.ingest.fleet import Fleet
from specmon.ingest.prom_fleet import PromFleet
from specmon.model.fleet import OUTLIER_K, FleetModel
from specmon.ui.base import SpecmonAppBase
from specmon.ui.screens.fleet import FleetScreen
from specmon.ui.theming import theme_folders
from specmon.ui.views import DEFAULT_WINDOW

__all__ = ["FleetApp", "FleetOptions", "fleet_app", "followed_fleet_app", "prometheus_fleet_app"]

#: Seconds between two refreshes of the fleet's tables.
TICK_S = 0.25
#: Use the user's theme folder (the default) unless told otherwise.
USER_THEMES = object()


@dataclass
class FleetOptions:
    """Settings from the command line.

    Attributes:
        theme: Theme name (None: specmon-dark).
        window: Batches in the recent means (and the falling-acceptance window).
        warmup: Samples excluded at the start of each run (None: the engine's).
        baseline_tps: A given baseline throughput (a replica's dashboard compares with it).
        k: The outlier cut, in robust deviations.
        animations: Textual animations (tests turn them off).
    """

    theme: str | None = None
    window: int = DEFAULT_WINDOW
    warmup: int | None = None
    baseline_tps: float | None = None
    k: float = OUTLIER_K
    animations: bool = True


class FleetApp(SpecmonAppBase):
    """The fleet view over several replica logs.

    Args:
        fleet: The replicas: each log with its follower and feeder, or a Prometheus's instances.
        options: Command-line settings.
        clock: Wall clock (``time.time`` scale).
        theme_dirs: Folders of theme files, later ones overriding earlier names.
    """

    CSS_PATH = str(Path(__file__).with_name("specmon.tcss"))
    TITLE = "specmon fleet"

    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
        Binding("ctrl+c", "quit", "Quit", show=False, priority=True),
    ]

    def __init__(self, fleet: Fleet | PromFleet, *, options: FleetOptions | None = None, clock: Callable[[], float] = time.time,
                 theme_dirs: Sequence[Traversable | Path] = ()) -> None:
        super().__init__()
        self.fleet = fleet
        self.options = options or FleetOptions()
        self.clock = clock
        self.model = FleetModel(window=max(1, self.options.window), k=self.options.k)
        self.fleet_screen = FleetScreen() if isinstance(fleet, Fleet) else FleetScreen(
            f"specmon fleet: asking Prometheus at {fleet.source.url}…")
        self._theme_dirs = list(theme_dirs)
        self._closed_fleet = False
        #: Seconds the last refresh took (the model's snapshot and the tables' update), and the most.
        self.last_refresh_s = 0.0
        self.refreshes = 0
        self.refresh_total_s = 0.0
        if not self.options.animations:
            self.animation_level = "none"

    def on_mount(self) -> None:
        self._load_themes()
        self.push_screen(self.fleet_screen)
        # Annotated: Textual's run_worker cannot infer a worker's type from a coroutine function.
        worker: Worker[None] = self.run_worker(self.fleet.run, name="fleet ingest", group="source",
                                               description="read the replicas' logs" if isinstance(self.fleet, Fleet)
                                               else "ask Prometheus", exit_on_error=False)
        self._ingest = worker
        self.set_interval(TICK_S, self.refresh_fleet, name="fleet refresh")
        self.call_after_refresh(self.refresh_fleet)

    def _load_themes(self) -> None:
        self.use_themes(self._theme_dirs, self.options.theme)

    def refresh_fleet(self) -> None:
        """One refresh: the model's snapshot of every replica, into the fleet screen's tables."""
        if self._closed_fleet:
            return
        started = time.perf_counter()
        source = "" if isinstance(self.fleet, Fleet) else self.fleet.status_text()
        snap = self.model.snapshot(self.fleet.inputs(), self.clock(), source)
        self.fleet_screen.show(snap)
        self.last_refresh_s = time.perf_counter() - started
        self.refreshes += 1
        self.refresh_total_s += self.last_refresh_s

    @on(FleetScreen.ReplicaChosen)
    def _open_replica(self, message: FleetScreen.ReplicaChosen) -> None:
        """Enter on a replica: its dashboard, on the feeder the fleet keeps running."""
        from specmon.ui.screens.replica import ReplicaScreen

        if not isinstance(self.fleet, Fleet):
            # Its figures are Prometheus's rates: no log is read, so there is no dashboard to open.
            self.notify("a replica read through Prometheus has no dashboard here (its log is not read): "
                        "specmon connect its host to follow its log", severity="warning")
            return
        replica = self.fleet.replicas[int(message.key)]
        self.push_screen(ReplicaScreen(replica.name, replica.feeder, window=self.options.window,
                                       baseline_tps=self.options.baseline_tps, clock=self.clock))

    def action_help(self) -> None:
        """The fleet view's help: keys, columns, the outlier rules."""
        from specmon.ui.screens.fleet_help import FleetHelpScreen

        if not isinstance(self.screen, FleetHelpScreen):
            self.push_screen(FleetHelpScreen())

    async def action_quit(self) -> None:
        """Stop every follower and leave."""
        await self._close_fleet()
        self.exit(0)

    async def _close_fleet(self) -> None:
        if not self._closed_fleet:
            self._closed_fleet = True
            await self.fleet.close()

    async def on_unmount(self) -> None:
        await self._close_fleet()


def fleet_app(logs: Sequence[str | Path], *, lines: int | None = None, max_line: int | None = None,
              options: FleetOptions | None = None, clock: Callable[[], float] = time.time,
              user_themes: Path | None | object = USER_THEMES, poll_interval: float = 0.2) -> FleetApp:
    """The fleet view following several local logs, one replica each.

    Args:
        logs: The logs (need not exist yet).
        lines: Start each with its last ``lines`` lines (None: the whole file).
        max_line: ``--line-cap``: longest line kept, in bytes (None: 1 MiB).
        options: Command-line settings.
        clock: Wall clock.
        user_themes: The user's theme folder; default: the platform config folder; None: none.
        poll_interval: Seconds between two looks at a quiet log.
    """
    opts = options or FleetOptions()
    fleet = Fleet.local(logs, lines=lines, max_line=max_line, warmup=opts.warmup, clock=clock,
                        poll_interval=poll_interval)
    return followed_fleet_app(fleet, options=opts, clock=clock, user_themes=user_themes)


def followed_fleet_app(fleet: Fleet | PromFleet, *, options: FleetOptions | None = None, clock: Callable[[], float] = time.time,
                       user_themes: Path | None | object = USER_THEMES) -> FleetApp:
    """The fleet view over replicas whose logs are followed (here or over SSH: a replicas profile).

    Args:
        fleet: The replicas with their followers (the clock and warm-up given to it are theirs), or
            a Prometheus's instances.
        options: Command-line settings.
        clock: Wall clock.
        user_themes: The user's theme folder; default: the platform config folder; None: none.
    """
    user_dir = paths.themes_dir() if user_themes is USER_THEMES else user_themes
    return FleetApp(fleet, options=options or FleetOptions(), clock=clock,
                    theme_dirs=theme_folders(user_dir if isinstance(user_dir, Path) else None))


def prometheus_fleet_app(fleet: PromFleet, *, options: FleetOptions | None = None,
                         clock: Callable[[], float] = time.time,
                         user_themes: Path | None | object = USER_THEMES) -> FleetApp:
    """The fleet view over the instances a Prometheus knows for a selector.

    Args:
        fleet: Its poller (:class:`~specmon.ingest.prom_fleet.PromFleet`).
        options: Command-line settings (``window``: non-overlapping rate windows in the recent means).
        clock: Wall clock.
        user_themes: The user's theme folder; default: the platform config folder; None: none.
    """
    return followed_fleet_app(fleet, options=options, clock=clock, user_themes=user_themes)
