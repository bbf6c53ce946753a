"""Argument types and checks shared by every subcommand (argparse only: imported at start-up)."""

from __future__ import annotations

import argparse
import re


def positive_float(text: str) -> float:
    """A finite number > 0 (``--baseline-tps 88.8``, ``--speed 60``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


# ASCII digits only: str.isdigit() also accepts "２" (full width) and "²", which int() reads or chokes on.
_DIGITS = re.compile(r"[0-9]+")
# An item ends at a comma (spaces around it allowed) or at a run of spaces.
_SEPARATOR = re.compile(r"\s*,\s*|\s+")
_LONGEST_ITEM = 6


def whole_number(text: str) -> int:
    """An integer ≥ 0 (``--warmup 0``)."""
    if not _DIGITS.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 0: {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """An integer ≥ 1."""
    if not _DIGITS.fullmatch(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1: {text!r}")
    return int(text)


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


def step_list(text: str) -> list[int]:
    """``--steps 0,1,2,3,5``: step counts ≥ 0 (the profile's range is checked before any restart)."""
    try:
        return list(parse_step_list(text, 0, None))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def concurrency_list(text: str) -> list[int]:
    """``--concurrency 1,4``: requests in flight, ≥ 1."""
    try:
        return list(parse_step_list(text, 1, None, what="concurrency levels"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def check_theme(name: str | None) -> str | None:
    """An error message when the theme does not exist, before any screen opens or host is reached."""
    if name is None:
        return None
    from specmon.ui.theming import load_themes, theme_folders, user_theme_dir

    themes, _ = load_themes(theme_folders(user_theme_dir()))
    if name in themes:
        return None
    return f"unknown theme {name!r}; available: {', '.join(sorted(themes))}"
