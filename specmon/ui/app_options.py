"""What the dashboard is given: the command line's settings, and an embedder's restart/sweep screens.

Apart from the app (:mod:`specmon.ui.app`): an embedding program names these types without
building the app; the app imports them from here, and both names are importable from it too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

from textual.screen import Screen

from specmon.ui.views import DEFAULT_WINDOW

__all__ = ["DashboardController", "DashboardOptions"]


class DashboardController(Protocol):
    """Restart and sweep as screens of someone else's (an embedding program, a test's stand-in).

    ``r`` and ``s`` push the screens it builds; the dashboard's own restart is a
    :class:`~specmon.ui.flows.restart.RestartFlow`, which the app drives directly.
    """

    def unavailable_reason(self, action: str) -> str | None:
        """Why ``restart`` or ``sweep`` cannot run now (greys its key out), or None."""
        ...

    def restart_screen(self) -> Screen[Any]:
        """The screen that restarts the server with another configuration."""
        ...

    def sweep_screen(self) -> Screen[Any]:
        """The screen that sweeps step counts."""
        ...


@dataclass
class DashboardOptions:
    """Settings from the command line.

    Attributes:
        theme: Theme name (None: the default, specmon-dark).
        baseline_tps: A given baseline throughput.
        warmup: Samples excluded at the start of each run, per rank (None: engine default).
        window: Batches in the rolling means.
        loop: Replay the inputs again and again.
        read_only: Never offer restart or sweep, even with a controller.
        animations: Textual animations (tests and snapshots turn them off).
        prometheus_port: Serve Prometheus metrics on 127.0.0.1:PORT while the app runs (0: any free port).
    """

    theme: str | None = None
    baseline_tps: float | None = None
    warmup: int | None = None
    window: int = DEFAULT_WINDOW
    loop: bool = False
    read_only: bool = False
    animations: bool = True
    prometheus_port: int | None = None
