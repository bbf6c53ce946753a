"""Small texts the dashboard's views are made of: durations, clocks, sizes, a connection, a configuration.

Pure functions of numbers and the model's records (no view, no builder), shared by the
views (:mod:`specmon.ui.views`) and the screens and widgets that format the same things.
"""

from __future__ import annotations

import calendar
import math
import time

from specmon.engines import adapter
from specmon.model.session import RunConfig
from specmon.sources.base import ConnectionState, SourceStatus
from specmon.wording import counted

#: Levels a view can carry; widgets map them to theme colours.
OK, BUSY, ERROR, IDLE = "ok", "busy", "error", "idle"


# -- small formatting helpers --------------------------------------------------------------------

def duration_text(seconds: float | None) -> str:
    """``45s``, ``4m 12s``, ``2h 03m``; empty for None or negative."""
    if seconds is None or seconds < 0 or math.isnan(seconds):
        return ""
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s // 3600}h {s % 3600 // 60:02d}m"


def clock_text(ts: float | None) -> str:
    """``09:14:03`` for a naive log timestamp (formatted as UTC, as it was read)."""
    if ts is None:
        return "--:--:--"
    return time.strftime("%H:%M:%S", time.gmtime(ts))


def size_text(count: int) -> str:
    """``512 B``, ``61.2 kB``, ``1.2 MB``."""
    value = float(count)
    for unit in ("B", "kB", "MB"):
        if value < 1000:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"


#: A live source with no new line for this long is called quiet (the server stopped logging).
QUIET_AFTER_S = 30.0


def connection_text(status: SourceStatus, now: float) -> tuple[str, str]:
    """A source's state as the header shows it, with its level.

    Args:
        status: The source's latest status.
        now: Wall time (``time.time()`` scale, like ``retry_at``).

    Returns:
        (text, level) such as ``("live · 12 ms · 1.2 MB · last line 4s ago", "ok")`` or
        ``("reconnecting in 4 s (attempt 2): connection lost", "busy")``.
    """
    state = status.state
    # A source may put its own countdown in the detail; the header says it once, and it moves.
    detail = status.detail.split("; retrying in", 1)[0]
    if state is ConnectionState.LIVE:
        parts = ["live"]
        if status.latency_ms is not None:
            parts.append(f"{status.latency_ms:.0f} ms")
        if status.bytes:
            parts.append(size_text(status.bytes))
        if status.last_line_at is not None:
            age = now - status.last_line_at
            parts.append(f"quiet {duration_text(age)}" if age > QUIET_AFTER_S
                         else f"last line {duration_text(age)} ago")
        if status.lost:  # lines destroyed on the host before they could be read (the event log says where)
            parts.append(f"{status.lost} lost on the host")
        return " · ".join(parts), OK
    if state is ConnectionState.RECONNECTING:
        if status.retry_at is not None:
            text = f"reconnecting in {max(0, math.ceil(status.retry_at - now))} s"
        else:
            text = "reconnecting"
        if status.attempts:
            text += f" (attempt {status.attempts})"
        if detail:
            text += f": {detail}"
        return text, BUSY
    if state is ConnectionState.CONNECTING:
        return ("connecting" + (f": {detail}" if detail else "")), BUSY
    if state is ConnectionState.FAILED:
        return f"failed: {detail or 'unknown error'}", ERROR
    return "ended", IDLE


def config_text(cfg: RunConfig | None) -> str:
    """``EAGLE3 · 2 steps · top-k 1 · draft 3``, ``no speculation`` or ``configuration unknown``."""
    if cfg is None:
        return "configuration unknown"
    if cfg.is_nospec:
        return "no speculation"
    unit = adapter(cfg.engine).steps_unit(cfg.algorithm)
    parts = [cfg.algorithm or "speculative"]
    if cfg.steps is not None:
        parts.append(counted(cfg.steps, unit))
    if cfg.topk is not None:
        parts.append(f"top-k {cfg.topk}")
    if cfg.draft_tokens is not None:
        parts.append(f"draft {cfg.draft_tokens}")
    return " · ".join(parts)


def ceiling_of(cfg: RunConfig | None) -> float | None:
    """The most tokens one verify step can yield: steps + 1 (the bonus token)."""
    if cfg is None or cfg.steps is None or cfg.is_nospec:
        return None
    return float(cfg.steps + 1)


def wall_clock_text(ts: float) -> str:
    """``09:14:03``, local time, for a wall-clock (``time.time``) instant."""
    return time.strftime("%H:%M:%S", time.localtime(ts))


def as_log_scale(ts: float) -> float:
    """A wall-clock instant on the log's scale (log stamps are naive local time, read as UTC)."""
    return calendar.timegm(time.localtime(ts)) + ts % 1.0


def from_log_scale(ts: float) -> float:
    """A log stamp (naive local time read as UTC) as the wall-clock instant it names, if the clock was right."""
    return time.mktime(time.gmtime(ts)) + ts % 1.0


def nice_ceiling(x: float) -> float:
    """The next "round" number at or above ``x`` (1, 2, 2.5, 5 × a power of ten)."""
    if x <= 0:
        return 1.0
    exp = 10.0 ** math.floor(math.log10(x))
    for m in (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10):
        if m * exp >= x:
            return m * exp
    return 10 * exp
