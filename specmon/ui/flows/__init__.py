"""The dashboard's multi-step flows: restart (``r``) and sweep (``s``).

A flow opens screens, runs its work in a worker on the widget it owns, and posts
past-tense messages (:mod:`specmon.ui.messages`) that the app handles; what it
reads from the dashboard is handed over once, in ``attach``, as a
:class:`Dashboard`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from textual.screen import Screen

    from specmon.ingest.live import Feeder
    from specmon.output.recording import Recorder
    from specmon.ui.views import RowView, TableView

__all__ = ["Dashboard", "event_time"]


@dataclass(frozen=True)
class Dashboard:
    """What a flow reads from the dashboard it runs on (the app builds it on mount).

    Attributes:
        screen: The base screen, where the flow mounts its widget (under ``#header``).
        feeder: The feeder: its session, its source, the log's time.
        clock: Wall clock (``time.time`` scale).
        export_dir: Where reports go (None: :func:`specmon.paths.export_dir`).
        recorder: The recording of this session, if any.
        table_rows: The run table's rows now (the restart dialog shows what was measured).
        pin_table: Show this table (a sweep's verdict) instead of the live one until the next run
            begins; None: the live one again.
        baseline_to_nospec: Make the run without speculation the baseline; returns what was done,
            in words ("" when nothing changed).
    """

    screen: Screen[Any]
    feeder: Feeder
    clock: Callable[[], float]
    export_dir: Path | None
    recorder: Recorder | None
    table_rows: Callable[[], list[RowView]]
    pin_table: Callable[[TableView | None], None] | None = None
    baseline_to_nospec: Callable[[], str] | None = None


def event_time(dashboard: Dashboard) -> float:
    """When a flow's event happened: the wall clock (``time.time`` scale).

    Specmon's own events are on the wall clock, never on the log's: the log's clock may run
    at another pace (the demo's simulated server) or be set wrong (a remote host), and the
    event log must not run backwards where the two meet.
    """
    return dashboard.clock()
