"""The dashboard's multi-step flows: restart (``r``) and sweep (``s``).

Each flow is a hidden widget whose steps are one Textual worker (``@work``) that awaits
``app.push_screen_wait(screen)`` for each dialog in turn, as Textual's own guide writes a
dialog sequence: the code reads in the order the user sees the screens, and a dialog's
result comes back once, as the value of that ``await``. Effects go to the app as past-tense
messages (:mod:`specmon.ui.messages`) or through the few typed methods of :class:`Dashboard`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from specmon.ingest.live import Feeder
    from specmon.output.recording import Recorder
    from specmon.ui.views import RowView, TableView

__all__ = ["Dashboard"]


class Dashboard(Protocol):
    """What a flow reads from, and asks of, the dashboard it runs on (``SpecmonApp`` is one).

    A Protocol, not the app class: flows may not import the app module (the app imports them).
    """

    @property
    def feeder(self) -> Feeder:
        """The feeder: its session, its source, the log's time."""
        ...

    @property
    def clock(self) -> Callable[[], float]:
        """Wall clock (``time.time`` scale): specmon's own events are on it, never on the log's."""
        ...

    @property
    def export_dir(self) -> Path | None:
        """Where reports go (None: :func:`specmon.paths.export_dir`)."""
        ...

    @property
    def recorder(self) -> Recorder | None:
        """The recording of this session, if any."""
        ...

    def table_rows(self) -> list[RowView]:
        """The run table's rows now (the restart dialog shows what was measured)."""
        ...

    def pin_table(self, view: TableView | None) -> None:
        """Show ``view`` (a sweep's verdict) instead of the live table until the next run begins."""
        ...

    def sweep_running(self, running: bool) -> None:
        """A sweep started (True) or ended (False): the live table's own comparison is then not its verdict."""
        ...

    def baseline_to_nospec(self) -> str:
        """Make the run without speculation the baseline; what was done, in words ("": nothing)."""
        ...
