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
from typing import Any, NoReturn

from specmon.literal import plain

__all__ = ["exit_on_signals", "leave_process", "no_terminal", "say"]

#: Set once a dashboard ran under :class:`exit_on_signals`: the process then ends with
#: :func:`leave_process` (the entry point calls it), not with the interpreter's finalisation.
leave_at_once = False
#: Seconds the atexit handlers get before the process leaves anyway.
ATEXIT_DEADLINE_S = 0.3


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
        if signum == signal.SIGHUP:
            # The terminal is gone: the app must not wait on writes to it while it closes.
            hung_up = getattr(self._get_app(), "terminal_hung_up", None)
            if hung_up is not None:
                hung_up()
        loop = getattr(self._get_app(), "_loop", None)
        if loop is None or loop.is_closed() or len(self.signalled) > 1:
            raise SystemExit(128 + signum)
        loop.call_soon_threadsafe(self._get_app().exit)

    def __enter__(self) -> list[int]:
        global leave_at_once
        leave_at_once = True
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


def leave_process(code: int) -> NoReturn:
    """End the process now, once a dashboard command has cleaned up (``q``, SIGHUP, SIGTERM).

    The command's own clean-up has run by then (the recording closed with its ``end`` entry,
    the demo's server stopped, temporary folders removed). What is left is the interpreter's
    finalisation, which took 0.4 s after a dashboard session (modules and a large heap torn
    down) and can wait for ever on a thread or an executor worker stuck on a dead terminal or
    host: "exit is certain" is kept here. Standard streams are flushed, atexit handlers get
    :data:`ATEXIT_DEADLINE_S` in a daemon thread, then ``os._exit``.
    """
    import atexit
    import os
    import threading

    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    handlers = threading.Thread(target=atexit._run_exitfuncs, name="specmon atexit", daemon=True)
    handlers.start()
    handlers.join(ATEXIT_DEADLINE_S)
    os._exit(code)
