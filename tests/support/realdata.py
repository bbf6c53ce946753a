"""Reading the real log excerpts of tests/data/real_logs the way a tail delivers them."""

from __future__ import annotations

from pathlib import Path

DATA = Path(__file__).parents[1] / "data" / "real_logs"


def read_lines(name: str) -> list[str]:
    """The lines of a data file exactly as a tail would deliver them (split on LF only)."""
    with (DATA / name).open(encoding="utf-8", newline="") as fh:
        lines = fh.read().split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines

