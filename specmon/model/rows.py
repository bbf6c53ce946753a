"""Rows: a column of equal-width tuples of floats held as one array (issue 10).

vLLM's and llama.cpp's spec lines each give an acceptance rate per draft position. The bulk
workers sent them as a list of tuples, a float object per value to make, pickle and unpickle,
and the feeding process summed them per position through ``zip(*rows)``: on a llama.cpp log,
where every tenth line is a spec line, that was the largest part of the feeding process's
time per piece, on the one process every piece goes through. The C pass now writes them as
rows of one buffer (scan.PACKED on a list of floats), they cross as that buffer and are
summed a position at a time.

A ``Rows`` reads as the list it stands for: ``len``, an index gives the tuple, a slice gives
``Rows``, iteration gives the tuples in order; it never holds a None.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import overload

import numpy as np


class Rows:
    """``len(flat) // width`` rows of ``width`` floats, row after row in ``flat``."""

    __slots__ = ("flat", "width")

    def __init__(self, width: int, flat: array[float]) -> None:
        if width < 1 or len(flat) % width:
            raise ValueError(f"{len(flat)} values are not rows of {width}")
        self.width = width
        self.flat = flat

    def __len__(self) -> int:
        return len(self.flat) // self.width

    @overload
    def __getitem__(self, i: int) -> tuple[float, ...]: ...

    @overload
    def __getitem__(self, i: slice) -> Rows: ...

    def __getitem__(self, i: int | slice) -> tuple[float, ...] | Rows:
        w = self.width
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                raise ValueError("Rows are sliced with a step of 1")
            return Rows(w, self.flat[a * w:max(a, b) * w])
        n = len(self)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("Rows index out of range")
        return tuple(self.flat[i * w:(i + 1) * w])

    def __iter__(self) -> Iterator[tuple[float, ...]]:
        w, flat = self.width, self.flat
        return (tuple(flat[k:k + w]) for k in range(0, len(flat), w))

    def __contains__(self, item: object) -> bool:
        return item is not None and any(row == item for row in self)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Rows):
            return self.width == other.width and self.flat == other.flat
        return isinstance(other, list | tuple) and list(self) == list(other)

    __hash__ = None  # type: ignore[assignment]  # (mutable, like the list it stands for)

    def __repr__(self) -> str:
        return f"Rows({self.width}, {len(self)} rows)"

    def add_to(self, sums: list[float]) -> None:
        """Add each position's values to ``sums[j]``, one row after another: the bits of
        ``sums[j] += row[j]`` for each row in order (a running sum, not numpy's pairwise one)."""
        if len(sums) < self.width:
            raise ValueError("one sum per position")
        if not self.flat:
            return
        grid = np.frombuffer(self.flat, dtype=np.float64).reshape(-1, self.width)
        # One running sum down each column, each starting from its sum so far.
        running = np.add.accumulate(np.vstack((np.asarray(sums[:self.width], dtype=np.float64), grid)), axis=0)
        for j in range(self.width):
            sums[j] = float(running[-1, j])
