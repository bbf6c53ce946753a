"""Exit codes of every command, and the one way a command reports bad input.

0: done; 1: nothing to report (no speculative-decoding lines, an empty sweep);
2: bad input (a missing file, a wrong option, a host that refuses us), said in one
sentence on stderr, never as a traceback; 3: a sweep ran but could not measure every
requested setting (its verdict, if any, covers only the others).
"""

from __future__ import annotations

import sys

from specmon.literal import plain

__all__ = ["EXIT_INCOMPLETE", "EXIT_INPUT", "EXIT_NOTHING", "EXIT_OK", "fail"]

EXIT_OK = 0
EXIT_NOTHING = 1
EXIT_INPUT = 2
EXIT_INCOMPLETE = 3


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
