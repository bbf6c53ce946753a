"""Moving around the dashboard like k9s or lazygit: from a run-table row to a restart on its
configuration.

The app's ``r`` calls :func:`row_steps` (the restart flow is the app's); Enter on a row and ``l``
are the dashboard screen's own (:class:`~specmon.ui.screens.dashboard.DashboardScreen`).
"""

from __future__ import annotations

from typing import Any

#: The dashboard app (``specmon.ui.app.SpecmonApp``): flows may not import the app module.
SpecmonApp = Any

__all__ = ["row_steps"]


def _cursor_key(app: SpecmonApp) -> str | None:
    table = app._table
    if not table.row_count or not 0 <= table.cursor_row < table.row_count:
        return None
    value = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
    return None if value is None else str(value)


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
