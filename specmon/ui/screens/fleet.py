"""The fleet view: one row per replica, one row per configuration pooled across its replicas.

``specmon watch LOG1 LOG2 ...`` opens it (:mod:`specmon.ui.fleet_app`). The app hands it a
:class:`~specmon.model.fleet.FleetSnapshot` a few times a second (:meth:`FleetScreen.show`);
the tables update their cells in place. Keys: ``o`` cycles the sort column (``O`` reverses
it; a click on a header sorts too), ``/`` filters both tables by a substring of a replica's
name or configuration (``escape`` clears it), ``enter`` on a replica opens its dashboard
(the app pushes it: :class:`FleetScreen.ReplicaChosen`), ``enter`` on a configuration
filters the replicas to it.
"""

from __future__ import annotations

from dataclasses import dataclass

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Input, Static

from specmon.model.fleet import FleetSnapshot, ReplicaRow, ReplicaState
from specmon.ui.literal import literal
from specmon.ui.widgets.config_pool_table import ConfigPoolTable
from specmon.ui.widgets.key_footer import KeyFooter
from specmon.ui.widgets.replica_table import ReplicaTable

__all__ = ["FleetScreen", "matches", "summary_text"]

#: The states the header counts, in the order it names them.
_COUNTED = (ReplicaState.LIVE, ReplicaState.QUIET, ReplicaState.STARTING, ReplicaState.NO_DATA,
            ReplicaState.STOPPED, ReplicaState.CRASHED, ReplicaState.MISSING, ReplicaState.DOWN,
            ReplicaState.UNREACHABLE, ReplicaState.UNREADABLE)


def matches(row: ReplicaRow, text: str) -> bool:
    """Whether a replica passes the filter: a substring of its name, engine or configuration, any case."""
    return not text or text.lower() in f"{row.name}\n{row.engine} {row.config}".lower()


def summary_text(snap: FleetSnapshot) -> str:
    """``fleet · 16 replicas: 14 live, 1 quiet, 1 missing · 2 configurations · 1 outlier``."""
    n = len(snap.replicas)
    states = ", ".join(f"{snap.count(s)} {s.value}" for s in _COUNTED if snap.count(s))
    configs = len(snap.configs)
    text = (f"fleet · {n} replica{'s' if n != 1 else ''}" + (f": {states}" if states else "")
            + f" · {configs} configuration{'s' if configs != 1 else ''}")
    if snap.outliers:
        text += f" · {snap.outliers} outlier{'s' if snap.outliers != 1 else ''}"
    return text


class FleetScreen(Screen[None]):
    """The fleet's two tables, their titles, the highlighted replica's details and the filter."""

    @dataclass
    class ReplicaChosen(Message):
        """Enter on a replica: the app opens that replica's dashboard."""

        key: str

    BINDINGS = [
        Binding("o", "cycle_sort", "Sort", key_display="o", tooltip="sort by the next column"),
        Binding("O", "reverse_sort", "Reverse", show=False, tooltip="reverse the sort"),
        Binding("slash", "filter", "Filter", key_display="/", tooltip="filter by name or configuration"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    DEFAULT_CSS = """
    FleetScreen #fleet-header {
        height: auto; max-height: 3; padding: 0 1; background: $panel; color: $foreground;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    FleetScreen .fleet-title {
        height: 1; padding: 0 1; color: $secondary; text-style: bold; text-wrap: nowrap; text-overflow: ellipsis;
    }
    FleetScreen #replicas { height: 1fr; min-height: 3; background: $surface; }
    FleetScreen #replica-detail { height: auto; max-height: 2; padding: 0 1; color: $text-muted; }
    FleetScreen #configs { height: auto; max-height: 7; background: $surface; }
    FleetScreen #filter { height: 1; border: none; padding: 0 1; display: none; }
    FleetScreen #filter.-open { display: block; }
    """

    def __init__(self, waiting: str = "specmon fleet: reading the logs…") -> None:
        """``waiting``: the header until the first snapshot (what the fleet is read from)."""
        super().__init__()
        self.snapshot = FleetSnapshot()
        self.filter_text = ""
        self._waiting = waiting

    def compose(self) -> ComposeResult:
        yield Static(literal(self._waiting), id="fleet-header", markup=False)
        yield Static("replicas", id="replicas-title", classes="fleet-title", markup=False)
        yield ReplicaTable(id="replicas")
        yield Static("", id="replica-detail", markup=False)
        yield Static("configurations", id="configs-title", classes="fleet-title", markup=False)
        yield ConfigPoolTable(id="configs")
        yield Input(placeholder="filter: part of a replica's name or configuration (escape clears)", id="filter")
        yield KeyFooter(compact=True)

    def on_mount(self) -> None:
        self.replica_table = self.query_one("#replicas", ReplicaTable)
        self.config_table = self.query_one("#configs", ConfigPoolTable)
        self.filter_input = self.query_one("#filter", Input)
        # References, not queries: a refresh that comes while the app shuts down finds them still.
        self._header = self.query_one("#fleet-header", Static)
        self._replicas_title = self.query_one("#replicas-title", Static)
        self._configs_title = self.query_one("#configs-title", Static)
        self._detail = self.query_one("#replica-detail", Static)
        self._configs_title.update(literal("configurations · each replica one launch; CI: 95%, what it covers beside it"))
        self.replica_table.focus()

    # -- showing -------------------------------------------------------------------------------------

    def show(self, snap: FleetSnapshot) -> None:
        """Show a fleet snapshot, filtered and sorted as the user chose (the same one again: nothing to do)."""
        if snap is self.snapshot:
            return
        self.snapshot = snap
        self._show()

    def _show(self) -> None:
        if not self.is_mounted or not hasattr(self, "_detail"):
            return
        snap, text = self.snapshot, self.filter_text
        replicas = [r for r in snap.replicas if matches(r, text)]
        keys = {r.config_key for r in replicas}
        configs = [c for c in snap.configs
                   if not text or c.key in keys or text.lower() in f"{c.engine} {c.label}".lower()]
        with self.app.batch_update():
            self.replica_table.show(replicas)
            self.config_table.show(configs)
            header = summary_text(snap)
            if snap.source:
                # Where a Prometheus-backed fleet is read from, and whether that answers now.
                header += "\n" + snap.source
            if snap.between:
                header += "\n" + snap.between
            self._header.update(literal(header, newlines=True))
            title = "replicas"
            if text:
                title += f" · filter “{text}”: {len(replicas)} of {len(snap.replicas)}"
            if self.replica_table.sort_title():
                title += f" · sorted by {self.replica_table.sort_title()}"
            self._replicas_title.update(literal(title))
            self._show_detail()

    def _show_detail(self) -> None:
        key = self.replica_table.cursor_key()
        row = next((r for r in self.snapshot.replicas if r.key == key), None)
        text = ""
        if row is not None:
            parts = [row.path, row.state_text + (f": {row.detail}" if row.detail else ""), *row.reasons]
            text = " · ".join(p for p in parts if p)
        self._detail.update(literal(text))

    @on(DataTable.RowHighlighted, "#replicas")
    def _highlighted(self, event: DataTable.RowHighlighted) -> None:
        self._show_detail()

    @on(DataTable.RowSelected, "#replicas")
    def _replica_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(self.ReplicaChosen(str(event.row_key.value)))

    @on(DataTable.RowSelected, "#configs")
    def _config_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a configuration: the replicas running it."""
        pool = next((c for c in self.config_table.rows_shown if str(c.key) == str(event.row_key.value)), None)
        if pool is not None:
            self.filter_input.add_class("-open")
            self.filter_input.value = pool.label
            self.set_filter(pool.label)
            self.replica_table.focus()

    # -- keys --------------------------------------------------------------------------------------------

    def action_cycle_sort(self) -> None:
        """Sort the replicas by the next column (after the last: the command line's order)."""
        self.replica_table.cycle_sort()
        self._show()

    def action_reverse_sort(self) -> None:
        """Reverse the replicas' sort."""
        self.replica_table.reverse_sort()
        self._show()

    def action_filter(self) -> None:
        """Open the filter line."""
        self.filter_input.add_class("-open")
        self.filter_input.focus()

    def action_clear_filter(self) -> None:
        """Clear the filter and close its line."""
        self.filter_input.remove_class("-open")
        if self.filter_input.value:
            self.filter_input.value = ""  # (its Changed message clears the filter)
        self.set_filter("")
        self.replica_table.focus()

    def set_filter(self, text: str) -> None:
        """Show only the replicas (and configurations) that match ``text``."""
        self.filter_text = text
        self._show()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.set_filter(event.value)

    @on(Input.Submitted, "#filter")
    def _filter_done(self, event: Input.Submitted) -> None:
        self.replica_table.focus()
