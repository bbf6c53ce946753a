"""Lists of counts the user types: ``--steps 0,1,2,3,5``, ``--concurrency 1,4``, the sweep dialog.

Pure (no argparse, no Textual): the command line (:mod:`specmon.commands.argtypes`)
and the dashboard's sweep dialog (:mod:`specmon.ui.screens.sweep_screen`) both read
lists with it, and neither may import the other's layer.
"""

from __future__ import annotations

import re

__all__ = ["parse_step_list"]

# ASCII digits only: str.isdigit() also accepts "２" (full width) and "²", which int() reads or chokes on.
_DIGITS = re.compile(r"[0-9]+")
# An item ends at a comma (spaces around it allowed) or at a run of spaces.
_SEPARATOR = re.compile(r"\s*,\s*|\s+")
_LONGEST_ITEM = 6


def parse_step_list(text: str, lo: int = 0, hi: int | None = None, *, what: str = "step counts",
                    where: str = "this profile") -> tuple[int, ...]:
    """Read ``0,1,2,3,5`` (commas and/or spaces): whole numbers in ``[lo, hi]``, each once.

    The one parser of a list of counts, for ``--steps``/``--concurrency`` and the
    dashboard's sweep dialog alike: ASCII digits only, and an empty item
    (``,2``, ``1,,2``, ``1,``) is refused rather than skipped.

    Args:
        text: What the user typed.
        lo: Smallest allowed value.
        hi: Largest allowed value (None: no upper bound here; the profile checks it later).
        what: What the numbers are, for the messages.
        where: Whose range ``hi`` is, for the messages.

    Returns:
        The values, in the order given.

    Raises:
        ValueError: the list is empty, has an empty item, holds something else than
            digits, a value out of range or a value twice; one sentence says which.
    """
    shown_range = f"{lo} to {hi}" if hi is not None else f"{lo} or more"
    if not text.strip():
        raise ValueError(f"type {what} separated by commas, {shown_range}"
                         + (" (0 = no speculation)" if what == "step counts" and lo == 0 else ""))
    values: list[int] = []
    for item in _SEPARATOR.split(text.strip()):
        if not item:
            raise ValueError(f"{text.strip()!r} has an empty item: put one number between two commas")
        if not _DIGITS.fullmatch(item) or len(item) > _LONGEST_ITEM:
            shown = item if len(item) <= 12 else item[:11] + "…"
            raise ValueError(f"{shown!r} is not a whole number: ASCII digits only, {shown_range}")
        value = int(item)
        if value < lo or (hi is not None and value > hi):
            raise ValueError(f"{value} is out of range: {where} allows {shown_range}")
        if value in values:
            raise ValueError(f"{value} is listed twice")
        values.append(value)
    return tuple(values)
