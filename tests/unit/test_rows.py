"""Rows (specmon/model/rows.py): equal-width tuples of floats in one array read as the list they stand for."""

from __future__ import annotations

import pickle
import struct
from array import array
from itertools import chain

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.model.rows import Rows

_F = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e300, max_value=1e300)


@st.composite
def _rows(draw: st.DrawFn) -> list[tuple[float, ...]]:
    width = draw(st.integers(1, 5))
    return draw(st.lists(st.tuples(*[_F] * width), min_size=1, max_size=30))


def _pack(column: list[tuple[float, ...]]) -> Rows:
    """The column as the C pass packs it (test_scan checks that side)."""
    return Rows(len(column[0]), array("d", chain.from_iterable(column)))


def _bits(values: object) -> list[bytes]:
    return [struct.pack("d", v) for row in values for v in row]  # type: ignore[attr-defined]


@settings(max_examples=200, deadline=None)
@given(_rows(), st.data())
def test_rows_read_as_the_list_they_stand_for(column: list[tuple[float, ...]], data: st.DataObject) -> None:
    rows = _pack(column)
    assert rows.width == len(column[0])
    assert len(rows) == len(column) and list(rows) == column and rows == column
    assert _bits(rows) == _bits(column)  # every value bit for bit (-0.0 too)
    i = data.draw(st.integers(-len(column), len(column) - 1))
    assert rows[i] == column[i] and type(rows[i]) is tuple
    a, b = data.draw(st.integers(-40, 40)), data.draw(st.integers(-40, 40))
    part = rows[a:b]
    assert isinstance(part, Rows) and list(part) == column[a:b]
    assert pickle.loads(pickle.dumps(rows, -1)) == rows
    assert None not in rows and column[i] in rows and (*column[i], 7.0) not in rows


@pytest.mark.parametrize("flat", [[1.0], [1.0, 2.0, 3.0]])
def test_values_that_are_not_whole_rows_are_refused(flat: list[float]) -> None:
    with pytest.raises(ValueError):
        Rows(2, array("d", flat))
    with pytest.raises(ValueError):
        Rows(0, array("d"))


def test_an_index_past_the_end_and_a_step_are_refused() -> None:
    rows = _pack([(1.0, 2.0), (3.0, 4.0)])
    with pytest.raises(IndexError):
        rows[2]
    with pytest.raises(IndexError):
        rows[-3]
    with pytest.raises(ValueError):
        rows[::2]


@settings(max_examples=300, deadline=None)
@given(_rows(), st.data())
def test_sums_are_the_running_sums_of_the_line_path_to_the_bit(column: list[tuple[float, ...]],
                                                               data: st.DataObject) -> None:
    width = len(column[0])
    start = data.draw(st.lists(_F, min_size=width, max_size=width + 2))
    want = list(start)
    for row in column:  # what the session does line by line
        for j, v in enumerate(row):
            want[j] += v
    got = list(start)
    rows = _pack(column)
    rows.add_to(got)
    assert [struct.pack("d", v) for v in got] == [struct.pack("d", v) for v in want]
    with pytest.raises(ValueError):
        rows.add_to([0.0] * (width - 1))
