"""Read-only mode: the one switch every action of the control layer checks before it acts.

``--read-only`` (on every command) turns it on for the whole process. Then the
actions that change something are refused *here*, where they would run, not
only hidden in the UI: running a restart plan (:func:`specmon.control.runner.execute`,
:meth:`specmon.control.restart_controller.RestartController.run`), a sweep
(:meth:`specmon.experiment.sweep_run.Sweep.run`), the load driver
(:meth:`specmon.control.load.BackgroundLoad.start`) and export writes (the
dashboard's ``e`` and ``report -o``). Reading a log, the read-only adoption
probe and the session's own recording still work.

Nothing here imports anything heavy: the command line sets it at start-up.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["ReadOnlyError", "read_only", "read_only_reason", "refuse", "set_read_only"]

_reason: str | None = None


class ReadOnlyError(RuntimeError):
    """An action was refused because specmon runs read-only; the message says which."""


def set_read_only(reason: str | None = "--read-only") -> None:
    """Turn read-only mode on (with what turned it on, for the messages) or off (None)."""
    global _reason
    _reason = reason


def read_only_reason() -> str | None:
    """Why actions are refused (``"--read-only"``), or None when they are allowed."""
    return _reason


def refuse(action: str) -> None:
    """Raise :class:`ReadOnlyError` when read-only mode is on.

    Args:
        action: What was about to happen, as a verb phrase (``"restart the server"``).

    Raises:
        ReadOnlyError: read-only mode is on.
    """
    if _reason is not None:
        raise ReadOnlyError(read_only_message(action))


def read_only_message(action: str) -> str:
    """``refusing to restart the server: specmon runs read-only (--read-only)``."""
    return f"refusing to {action}: specmon runs read-only ({_reason or '--read-only'})"


@contextmanager
def read_only(reason: str = "--read-only") -> Iterator[None]:
    """Read-only mode for the duration of a ``with`` block (tests, embedded use)."""
    before = _reason
    set_read_only(reason)
    try:
        yield
    finally:
        set_read_only(before)
