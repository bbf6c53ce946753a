"""Rows: a column of equal-width tuples of floats held as one array (issue 10).

vLLM's and llama.cpp's spec lines each give an acceptance rate per draft position. The bulk
workers sent them as a list of tuples (one float object per value to pickle and unpickle)
and the feeding process summed them per position through ``zip(*rows)``: 10 ms a piece of
llama.cpp's lines, on the one process every piece goes through. Packed, they cross as one
buffer and are summed a column at a time.

A ``Rows`` reads as the list it stands for: ``len``, an index gives the tuple, a slice gives
``Rows``, iteration gives the tuples in order.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, overload

import numpy as np


class Rows:
    """``len(flat) // width`` rows of ``width`` floats, row after row in ``flat``."""

    __slots__ = ("flat", "width")

    def __init__(self, width: int, flat: array[float]) -> None:
        if width < 1 or len(flat) % width:
            raise ValueError(f"{len(flat)} values are not rows of {width}")
        self.width = width
        self.flat = flat

    @classmethod
    def pack(cls, column: Sequence[Any]) -> Rows | Sequence[Any]:
        """``column`` as Rows when it is non-empty tuples of floats, all of one width; else as it is."""
        if not column:
            return column
        first = column[0]
        if type(first) is not tuple or not first or None in column:
            return column
        width = len(first)
        if set(map(len, column)) != {width}:
            return column
        try:
            flat = array("d", chain.from_iterable(column))
        except TypeError:  # (a value that is not a float)
            return column
        return cls(width, flat)

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
        grid = np.frombuffer(self.flat, dtype=np.float64).reshape(-1, self.width)
        for j in range(self.width):
            running = np.add.accumulate(np.concatenate(([sums[j]], grid[:, j])))
            sums[j] = float(running[-1])
