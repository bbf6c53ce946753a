"""Dashboard commands and their terminal: refused without one, cleaned up when it goes away.

Started from cron, nohup, a pipe or ``&`` in a non-interactive shell, a Textual app has
no terminal to read keys from or draw on and spun a core forever. ``summarize`` and
``sweep`` are the headless commands.

A terminal that goes away (SIGHUP) or a SIGTERM must clean up like ``q``:
:class:`exit_on_signals` is the one mechanism ``demo``, ``watch`` and ``connect`` use.
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from typing import Any

from specmon.literal import plain

__all__ = ["exit_on_signals", "no_terminal", "say"]


def no_terminal(command: str) -> str | None:
    """The refusal for ``specmon COMMAND`` when stdin or stdout is not a terminal, else None."""
    missing = [name for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout))
               if stream is None or not stream.isatty()]
    if not missing:
        return None
    verb = "is" if len(missing) == 1 else "are"
    return (
        f"the {command} dashboard needs a terminal and {' and '.join(missing)} {verb} not one: run it in a "
        "terminal, or use 'specmon summarize FILE...' (the table, no UI) or 'specmon sweep ...' "
        "(a headless sweep) instead"
    )


class exit_on_signals:
    """SIGTERM and SIGHUP (a closed terminal) end the running dashboard the way ``q`` does.

    The handler asks the app to exit from its own loop (``call_soon_threadsafe`` is the
    signal-safe wake-up), so its workers are cancelled, the terminal is restored and
    ``app.run()`` returns; the command's ``finally`` then stops what it started, closes
    the recording (its ``end`` entry) and removes temporary folders, as after ``q``.
    Before the app runs (or on a second signal) it unwinds at once with
    ``SystemExit(128 + signal)``, which runs the same ``finally``.

    Use::

        with exit_on_signals(lambda: app) as signalled:
            code = app.run()
        if signalled: code = 128 + signalled[0]

    Attributes:
        signalled: The signals received, in order.
    """

    def __init__(self, get_app: Callable[[], Any]) -> None:
        self._get_app = get_app
        self.signalled: list[int] = []
        self._previous: dict[int, Any] = {}

    def _leave(self, signum: int, frame: object) -> None:
        self.signalled.append(signum)
        loop = getattr(self._get_app(), "_loop", None)
        if loop is None or loop.is_closed() or len(self.signalled) > 1:
            raise SystemExit(128 + signum)
        loop.call_soon_threadsafe(self._get_app().exit)

    def __enter__(self) -> list[int]:
        self._previous = {sig: signal.signal(sig, self._leave) for sig in (signal.SIGTERM, signal.SIGHUP)}
        return self.signalled

    def __exit__(self, *exc: object) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)

    def exit_code(self, code: int) -> int:
        """``128 + signal`` when a signal ended the app, else ``code``."""
        return 128 + self.signalled[0] if self.signalled else code


def say(text: str) -> None:
    """Print to stderr, or nothing when the terminal is gone (after SIGHUP): clean-up goes on."""
    try:
        print(plain(text, newlines=True), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass
