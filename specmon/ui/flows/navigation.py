"""Moving around the dashboard like k9s or lazygit: from a run-table row to its details or a
restart on its configuration, and from the event panel to the whole, searchable log.

The app's keys call these (Enter on a row, ``r`` with the table focused, ``l``); they read the
app's table, builder and controller and push screens.
"""

from __future__ import annotations

from typing import Any

from specmon.model.analysis import ConfigRow

#: The dashboard app (``specmon.ui.app.SpecmonApp``): flows may not import the app module.
SpecmonApp = Any

__all__ = ["config_row", "open_details", "open_events", "row_steps"]


def _cursor_key(app: SpecmonApp) -> str | None:
    table = app._table
    if not table.row_count or not 0 <= table.cursor_row < table.row_count:
        return None
    value = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    return None if value is None else str(value)


def config_row(app: SpecmonApp, key: str) -> ConfigRow | None:
    """The live analysis row a run-table row key (its label) stands for."""
    analysis = app.builder.analysis
    if analysis is None:
        return None
    return next((r for r in analysis.rows if r.label == key), None)


def row_steps(app: SpecmonApp) -> int | None:
    """The step count of the row the user moved the run table's cursor to (``r`` on a row); None
    when they did not (the table has the focus from the start: ``r`` then asks for a step count)."""
    if app.focused is not app._table or not app._table.chosen:
        return None
    key = _cursor_key(app)
    if key is None:
        return None
    view = next((r for r in app.builder.table(app.feeder.session).rows if r.key == key), None)
    return view.steps if view is not None and view.steps is not None else None


def open_details(app: SpecmonApp, key: str) -> None:
    """Enter on a row: what its numbers rest on (samples, histogram, exclusions, server arguments)."""
    from specmon.ui.screens.run_details import RunDetailsScreen

    row = config_row(app, key)
    if row is None:
        app.notify(f"no details for {key} yet: its statistics are being computed", severity="warning")
        return
    flow = app.restart_flow
    command = flow.command_for(row.steps) if flow is not None and row.steps is not None else None
    app.push_screen(RunDetailsScreen(row, command=command))


def open_events(app: SpecmonApp) -> None:
    """``l``: every event kept, full lines, to filter and search."""
    from specmon.ui.screens.events_screen import EventsScreen

    app.feeder.stamp_events()
    app.push_screen(EventsScreen(lambda: list(app.feeder.session.events)))
