"""Exit codes of every command, and the one way a command reports bad input.

0: done; 1: nothing to report (no speculative-decoding lines, an empty sweep);
2: bad input (a missing file, a wrong option, a host that refuses us), said in one
sentence on stderr, never as a traceback; 3: a sweep ran but could not measure every
requested setting (its verdict, if any, covers only the others); 4: the session ran but
something it had to write (the recording, an export) could not be written — a full disk.
"""

from __future__ import annotations

import sys
from typing import Any

from specmon.literal import plain

__all__ = ["EXIT_INCOMPLETE", "EXIT_INPUT", "EXIT_NOTHING", "EXIT_OK", "EXIT_WRITE", "fail", "write_status"]

EXIT_OK = 0
EXIT_NOTHING = 1
EXIT_INPUT = 2
EXIT_INCOMPLETE = 3
EXIT_WRITE = 4


def fail(message: str, code: int = EXIT_INPUT) -> int:
    """Print ``specmon: <message>`` on stderr and return ``code`` (the command returns it).

    Args:
        message: One sentence that says what is wrong and, where it helps, what to do.
        code: The exit code (default: bad input).

    Returns:
        ``code``, so a command can ``return fail("...")``.
    """
    # The sentence often quotes a path, a host or a config value: no escape reaches the terminal.
    print(f"specmon: {plain(message, newlines=True)}", file=sys.stderr)
    return code


def write_status(code: int, app: Any = None, recorder: Any = None) -> int:
    """The exit status once the dashboard closed: ``code``, or :data:`EXIT_WRITE` when a write failed.

    Every failed write (``app.write_failures``, and the recorder's own ``error``, which its
    final flush at close may be the first to meet) is said again on stderr, where it stays
    after the dashboard's screen is gone.
    """
    sentences = list(getattr(app, "write_failures", None) or [])
    error = getattr(recorder, "error", None)
    if error and not any(error in s for s in sentences):
        sentences.append(f"{error}: the recording is incomplete")
    for sentence in sentences:
        try:
            print(f"specmon: {plain(sentence)}", file=sys.stderr, flush=True)
        except (OSError, ValueError):
            pass  # no terminal any more (SIGHUP): the status still says it
    return code if code or not sentences else EXIT_WRITE
