"""Dashboard commands need a terminal: without one they refuse in one sentence.

Started from cron, nohup, a pipe or ``&`` in a non-interactive shell, a Textual app has
no terminal to read keys from or draw on and spun a core forever. ``summarize`` and
``sweep`` are the headless commands.
"""

from __future__ import annotations

import sys

__all__ = ["no_terminal"]


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
