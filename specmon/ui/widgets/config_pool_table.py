"""The fleet's configuration table: each configuration pooled over the replicas running it."""

from __future__ import annotations

from typing import ClassVar

from textual.binding import Binding, BindingType

from specmon.model.fleet import ConfigPool
from specmon.ui.widgets.fleet_table import Column, FittedTable, interval_text, number_text

__all__ = ["ConfigPoolTable"]


class ConfigPoolTable(FittedTable):
    """One row per configuration (:class:`~specmon.model.fleet.ConfigPool`), in step order."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Its replicas", key_display="enter", tooltip="filter the replicas to it")]

    COLUMNS: ClassVar[tuple[Column, ...]] = (
        Column("engine", "engine", lambda p: p.engine, lambda p: p.engine),
        Column("config", "config", lambda p: p.label, lambda p: p.label),
        Column("replicas", "replicas", lambda p: str(p.replicas), lambda p: p.replicas, True, descending=True),
        # Each replica one launch of the two-level model; what the interval covers is said beside it.
        Column("tps", "tok/s ± CI (replica)", lambda p: interval_text(p.tps_mean, p.tps_half), lambda p: p.tps_mean, True,
               descending=True),
        Column("covers", "CI covers", lambda p: p.covers, lambda p: p.pooled),
        Column("acc_len", "acc len", lambda p: number_text(p.accept_len, 2), lambda p: p.accept_len, True,
               descending=True),
        Column("acc_rate", "acc rate", lambda p: number_text(p.accept_rate, 2), lambda p: p.accept_rate, True,
               descending=True),
        Column("outliers", "outliers", lambda p: str(p.outliers) if p.outliers else "", lambda p: p.outliers, True,
               descending=True),
    )
    DROP_ORDER: ClassVar[tuple[str, ...]] = ("engine", "acc_rate", "replicas", "acc_len")

    COMPONENT_CLASSES: ClassVar[set[str]] = {"config-pool-table--outlier"}

    DEFAULT_CSS = """
    ConfigPoolTable > .config-pool-table--outlier { color: $warning; }
    """

    def row_style(self, row: ConfigPool) -> str:
        """A configuration with an outlier among its replicas in the warning colour."""
        return "config-pool-table--outlier" if row.outliers else ""
