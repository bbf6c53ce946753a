"""The exact command that continues a stopped sweep: what the user typed, less what would start it afresh.

A sweep's state file is found again by the same profile and plan, so running the same command
continues it; the advice names that command whole (with the program as it was run, since a bare
``specmon`` may not be on the PATH) instead of "run the same command again".
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys

__all__ = ["continue_command", "program"]

#: Options that would not continue the sweep: --fresh deletes its state.
_AFRESH = ("--fresh",)


def program(arg0: str | None = None) -> list[str]:
    """How this specmon was started, to be typed again: ``specmon`` when that is the one on the PATH,
    the path as given (``.venv/bin/specmon``) otherwise, ``python -m specmon`` for the module."""
    arg0 = sys.argv[0] if arg0 is None else arg0
    if os.path.basename(arg0) == "__main__.py" and os.path.basename(os.path.dirname(arg0)) == "specmon":
        return [_short(sys.executable), "-m", "specmon"]
    if os.path.basename(arg0) != "specmon":
        return ["specmon"]  # called from Python (the tests): the installed script's name
    found = shutil.which("specmon")
    if found and os.path.realpath(found) == os.path.realpath(arg0):
        return ["specmon"]
    return [arg0]


def _short(path: str) -> str:
    """``path`` relative to the working folder when it lies under it (``.venv/bin/python``), else whole."""
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def continue_command(argv: list[str] | None) -> str | None:
    """The command line that continues this sweep, quoted for a shell; None when the words typed are not known."""
    if not argv:
        return None
    kept = [a for a in argv if a not in _AFRESH]
    return shlex.join([*program(), *kept])
