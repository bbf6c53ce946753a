"""One line for the dashboard's header from any source's status: state, latency, bytes, last line."""

from __future__ import annotations

from specmon.sources.base import ConnectionState, SourceStatus

__all__ = ["status_line"]


def _size(count: int) -> str:
    value = float(count)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{count} B"  # unreachable; keeps type checkers calm


def _ago(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 60:
        return f"{seconds:.0f}s"
    if seconds < 3600:
        return f"{seconds // 60:.0f}m{seconds % 60:02.0f}s"
    return f"{seconds // 3600:.0f}h{seconds % 3600 // 60:02.0f}m"


def status_line(status: SourceStatus, now: float) -> str:
    """One line for the header: state, latency, bytes, time since the last line.

    Works for any source's :class:`SourceStatus` (pure; the UI calls it on its
    timer with ``now = time.time()``), e.g.
    ``live · 12 ms · 1.2 MB · 3,042 lines · last line 4s ago`` or
    ``reconnecting in 7s (attempt 3) · connection lost: ...``.
    """
    parts: list[str] = []
    state = status.state
    if state is ConnectionState.RECONNECTING and status.retry_at is not None:
        parts.append(f"reconnecting in {max(0.0, status.retry_at - now):.0f}s (attempt {status.attempts})")
    else:
        parts.append(state.value)
    if state is ConnectionState.LIVE and status.latency_ms is not None:
        parts.append(f"{status.latency_ms:.0f} ms")
    parts.append(_size(status.bytes))
    parts.append(f"{status.lines:,} lines")
    if status.lost:
        # The one way lines go missing (destroyed on the host before they could be read):
        # counted where it is always in sight; the event log says which file and where.
        parts.append(f"{status.lost} loss{'es' if status.lost > 1 else ''} on the host (see events)")
    if status.overlong:
        parts.append(f"{status.overlong:,} over-long line{'s' if status.overlong > 1 else ''} cut")
    if status.last_line_at is None:
        parts.append("no line yet")
    else:
        parts.append(f"last line {_ago(now - status.last_line_at)} ago")
    if (state is not ConnectionState.LIVE or not status.detail.startswith("following")) and status.detail:
        # The reason (countdown already shown) or a warning such as a missing file.
        parts.append(status.detail.split("; retrying in", 1)[0])
    return " · ".join(parts)
