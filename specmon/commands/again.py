"""The exact command that continues a stopped sweep: what the user typed, less what would start it afresh.

A sweep's state file is found again by the same profile and plan, so running the same command
continues it; the advice names that command whole (with the program as it was run, since a bare
``specmon`` may not be on the PATH) instead of "run the same command again". What running it again
does is said in one place, :func:`again_advice`, wherever a sweep stops (a signal, Ctrl+C, a lost
server): a demo sweep and a parallel one are not resumed.
"""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # annotations only
    from specmon.experiment.plan import ExperimentPlan

__all__ = ["again_advice", "continue_command", "program"]

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


def again_advice(exp: ExperimentPlan) -> str:
    """What running the command again does, for a sweep that stopped: the command that continues a
    one-server sweep; a parallel sweep or a demo is not resumed, and that is said instead."""
    if exp.parallel:
        return "a parallel sweep is not resumed: running the same command again starts its rounds afresh"
    if exp.demo:
        return "a demo sweep is not resumed: running it again starts afresh"
    command = continue_command(exp.argv)
    return (f"continue it where it stopped with: {command}" if command else
            "run the same command again to continue where it stopped")
