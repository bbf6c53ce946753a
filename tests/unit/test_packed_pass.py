"""The C pass packs the bulk path's numbers as it reads them (issue 10): the same values, bit for bit.

The C pass writes the prefix's parts and plain numbers of the session's columns straight
into arrays (scan.PACKED); the times are then summed a column at a time. The sums must be
the list path's, in its order, to the bit; and a piece of SGLang decode lines must take
the packed path (else the gain is silently gone).
"""

from __future__ import annotations

import calendar
from array import array
from datetime import timedelta
from operator import add

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.ingest import bulk, column_blocks, templates
from specmon.ingest.scan import PACKABLE, PACKED
from specmon.records import Engine
from tests.support import logtext as L

pytest.importorskip("specmon._native")

_floats = st.floats(min_value=0, max_value=1e10, allow_nan=False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_floats, st.floats(0, 86400), st.floats(0, 1)), max_size=40),
       st.booleans(), st.booleans(), _floats)
def test_packed_times_are_the_list_paths_sums_to_the_bit(rows: list[tuple[float, float, float]], dated: bool,
                                                         fractions: bool, day: float) -> None:
    days = array("d", (d for d, _, _ in rows)) if dated else None
    secs = array("d", (h for _, h, _ in rows))
    fracs = array("d", (f for _, _, f in rows)) if fractions else None
    want = list(map(add, days, secs)) if days is not None else list(map(add, secs, [day] * len(secs)))
    if fracs is not None:
        want = list(map(add, want, fracs))
    got = column_blocks._packed_ts(secs, days, fracs, day)
    assert isinstance(got, array) and got.typecode == "d"
    assert [x.hex() for x in got] == [x.hex() for x in want]


def test_sglang_decode_columns_are_packed_by_the_pass() -> None:
    templates._LEARNER.__init__()  # type: ignore[misc]
    lines = [L.decode(10.0 + i, 80.0 + i, 2.0, 0.5) for i in range(200)]
    piece = bulk.bulk_piece(("\n".join(lines) + "\n").encode(), Engine.SGLANG, 2026)
    kinds = {key: k for key, k in templates._LEARNER.kinds.items() if key.endswith("/columns")}
    assert kinds, "no columns pass"
    numbers = [k for ks in kinds.values() for k in ks if k & ~PACKED in PACKABLE]
    assert numbers and all(k & PACKED for k in numbers)
    block = next(item for item in piece.items if isinstance(item, column_blocks.Block))
    assert isinstance(block.ts, array) and isinstance(block.tput, array)
    assert list(block.ts) == [calendar.timegm((L.T0 + timedelta(seconds=10 + i)).timetuple()) for i in range(200)]
    assert list(block.tput) == [80.0 + i for i in range(200)]
