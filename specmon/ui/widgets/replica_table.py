"""The fleet's replica table: one row per replica log, its state, its numbers and its outlier flags."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from specmon.model.fleet import ReplicaRow, ReplicaState
from specmon.ui.widgets.fleet_table import Column, FittedTable, interval_text, number_text

__all__ = ["ReplicaTable"]

#: Problems first when sorted by state (the enum's order is the order of the checks).
_STATE_ORDER = {state: i for i, state in enumerate(ReplicaState)}
_BAD = {ReplicaState.UNREADABLE, ReplicaState.UNREACHABLE, ReplicaState.DOWN, ReplicaState.CRASHED}
_IDLE = {ReplicaState.MISSING, ReplicaState.NO_DATA, ReplicaState.QUIET, ReplicaState.STOPPED,
         ReplicaState.STARTING}


class ReplicaTable(FittedTable):
    """One row per replica (:class:`~specmon.model.fleet.ReplicaRow`); ``enter`` opens its dashboard."""

    # DataTable's own enter, shown in the footer under what it does here.
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Open", key_display="enter", tooltip="the replica's dashboard")]

    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("name", "replica", lambda r: r.name, lambda r: r.name, title="replica"),
        Column("engine", "engine", lambda r: r.engine, lambda r: r.engine),
        Column("config", "config", lambda r: r.config, lambda r: (r.engine, r.config)),
        Column("state", "state", lambda r: r.state_text, lambda r: (_STATE_ORDER[r.state], r.state_text)),
        # The recent window's mean, then the run's mean with its 95% interval (within the replica's run).
        Column("tps", "tok/s", lambda r: number_text(r.tps_recent), lambda r: r.tps_recent, True,
               title="tok/s (recent)", descending=True),
        # "(sample)": over this one run's samples, not over launches as the replica's own dashboard (`?`).
        Column("run", "run tok/s ±sample", lambda r: interval_text(r.tps_mean, r.tps_half),
               lambda r: r.tps_mean, True, title="run tok/s", descending=True),
        Column("acc_len", "acc len", lambda r: number_text(r.accept_len, 2), lambda r: r.accept_len, True,
               descending=True),
        Column("acc_rate", "acc rate", lambda r: number_text(r.accept_rate, 2), lambda r: r.accept_rate, True,
               descending=True),
        Column("n", "n", lambda r: f"{r.samples:,}", lambda r: r.samples, True, descending=True),
        Column("source", "src", lambda r: r.source, lambda r: r.source),
        Column("flags", "flags", lambda r: ",".join(r.flags), lambda r: (-len(r.flags), ",".join(r.flags))),
    )
    #: At 80 columns the replica, its configuration, its state, tok/s (recent and run) and the flags stay.
    DROP_ORDER: ClassVar[tuple[str, ...]] = ("source", "n", "engine", "acc_rate", "acc_len", "run")

    COMPONENT_CLASSES: ClassVar[set[str]] = {"replica-table--outlier", "replica-table--bad", "replica-table--idle"}

    DEFAULT_CSS = """
    ReplicaTable > .replica-table--outlier { color: $warning; text-style: bold; }
    ReplicaTable > .replica-table--bad { color: $error; }
    ReplicaTable > .replica-table--idle { color: $text-muted; }
    """

    def row_style(self, row: ReplicaRow) -> str:
        """Outliers in the warning colour, crashed, down or unreadable replicas in the error colour."""
        if row.state in _BAD:
            return "replica-table--bad"
        if row.flags:
            return "replica-table--outlier"
        if row.state in _IDLE:
            return "replica-table--idle"
        return ""
