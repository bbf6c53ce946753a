"""How view levels ("ok", "busy", "error", "idle") map to theme variables, for every widget."""

from __future__ import annotations

from specmon.ui.views import BUSY, ERROR, IDLE, OK

#: Level -> Textual style using theme variables only (no colours in code).
LEVEL_STYLE = {
    OK: "$success",
    BUSY: "$warning",
    ERROR: "$error bold",
    IDLE: "$text-muted",
}
#: Event-log level -> style.
EVENT_STYLE = {
    "info": "",
    "warning": "$warning",
    "error": "$error bold",
}
