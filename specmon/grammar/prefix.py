"""The timestamp and rank of a log line, read from the text before its message.

One tolerant reader serves every engine: SGLang ``[2025-10-22 10:27:56 DP0 TP0]``
(with or without the date, the milliseconds or the opening bracket), SGLang
custom formats (``2025-10-29 02:27:35 INFO 8900 [ DP15 TP15 EP15 file.py:1]``),
vLLM's year-less ``INFO 05-07 04:56:17 [loggers.py:271]``.
"""

from __future__ import annotations

import calendar
import re
from array import array
from collections.abc import Iterable
from itertools import islice
from typing import Any, cast

import numpy as np

from specmon.grammar.common import inner_line, parse_datetime, parse_fraction, parse_hms, strip_ansi

# Date + time (ISO or space), vLLM month-day + time, or a bare time of day.
_TS = re.compile(
    r"(?:(?P<date>\d{4}-\d{2}-\d{2})[ T]|(?<![\d\-:.])(?P<md>\d{2}-\d{2}) )?"
    r"(?P<hms>\d{2}:\d{2}:\d{2})(?P<frac>[.,]\d{1,9})?(?!\d)"
)
#: A run of rank tags (``DP0 TP0``, ``PP0 ATTN_CP7 TP7``, ``EP15``): upper-case names with a
#: number, separated by single spaces, kept whole. Read after the timestamp, so a glog
#: level+date (``I1218 03:35:37``) is no rank.
RANK_RUN = r"(?<![A-Za-z0-9_])[A-Z][A-Z_]*\d+(?: [A-Z][A-Z_]*\d+)*(?![\w])"
_RANK = re.compile(RANK_RUN)
#: What every ``_TS`` match holds, as a pattern that starts with a literal (searched fast).
_HMS_HINT = re.compile(r":\d{2}:\d{2}")


def stamp_value(date: str | None, md: str | None, hms: str, frac: str, year: int,
                day: float = 0.0) -> float | None:
    """Epoch seconds of a prefix timestamp's parts (the one arithmetic of both parse paths).

    Args:
        date: ``YYYY-MM-DD`` or None; md: vLLM's year-less ``MM-DD`` or None;
        hms: ``HH:MM:SS``; frac: ``.123`` / ``,123`` or ""; year: for ``md``;
        day: epoch seconds of the midnight a time of day without a date belongs to.
    """
    if date:
        return parse_datetime(date, hms, frac)
    if md:
        return parse_datetime(f"{year:04d}-{md}", hms, frac)
    sec = parse_hms(hms)
    return None if sec is None else day + sec + parse_fraction(frac)


def clock_mode(lines: Iterable[str], limit: int = 5000) -> str | None:
    """How a log's own stamps lack a date: ``"time"`` (a time of day only), ``"md"`` (no year) or None.

    Read from the first line with a prefix timestamp among the first ``limit``: it decides
    whether a large step back in time means the next day (or year) — see :class:`Rollover`.
    """
    for line in islice(lines, limit):
        text = strip_ansi(line[:300])
        # A stamp holds ":dd:dd", and cutting wrappers off the front cannot make one: a line
        # without it is passed over at C speed, and so is a line whose only one was its
        # wrapper's (_TS, tried at every position, took 40-70 ms over a llama.cpp head).
        if _HMS_HINT.search(text) is None:
            continue
        own = inner_line(text)[:200]  # the line's own stamp, not a wrapper's
        m = _TS.search(own) if _HMS_HINT.search(own) is not None else None
        if m is not None:
            if m.group("date"):
                return None
            return "md" if m.group("md") else "time"
    return None


#: A step back larger than this is a new day (time-only stamps), or a new year (``MM-DD``).
DAY_BACK = 12 * 3600.0
YEAR_BACK = 180 * 86400.0


class Rollover:
    """Keeps day-less (or year-less) stamps of one log in order across midnight (or New Year).

    A log whose stamps carry no date (or no year) repeats its times every day (year):
    a step back of more than half a day (half a year) is the next day (year), and every
    later stamp is moved on by as much. Both parse paths apply it in file order.
    """

    def __init__(self, mode: str | None, year: int) -> None:
        self.mode = mode
        self.year = year
        self.offset = 0.0
        self.last: float | None = None

    def _step(self) -> float:
        if self.mode == "time":
            return 86400.0
        self.year += 1
        return 86400.0 * (366 if calendar.isleap(self.year - 1) else 365)

    def fix(self, ts: float | None) -> float | None:
        """The stamp in the log's own order of days (None stays None)."""
        if ts is None or self.mode is None:
            return ts
        t = ts + self.offset
        if self.last is not None and t < self.last - (DAY_BACK if self.mode == "time" else YEAR_BACK):
            step = self._step()
            self.offset += step
            t += step
        self.last = t
        return t

    def fix_all(self, ts: list[float | None]) -> list[float | None]:
        """:meth:`fix` over a column: in numpy, a stretch between two steps back at a time."""
        if self.mode is None or not ts:
            return ts
        column: Any = ts  # a list, or an array (bulk._as_array) that holds no None
        if not isinstance(column, array) and None in ts:
            return [self.fix(t) for t in ts]
        v = (np.frombuffer(column, dtype=np.float64) if isinstance(column, array) and column.typecode == "d"
             else np.array(column, dtype=np.float64))
        back = DAY_BACK if self.mode == "time" else YEAR_BACK
        stretches: list[np.ndarray] = []
        i = 0
        # The test and sums of fix(), operation for operation, on each stretch at once (a
        # column across a midnight went stamp by stamp: 80 ms of a time-only 2M-line log).
        # A stretch ends where a stamp steps back more than `back`; a column stepping back
        # more often than a real log does ends stamp by stamp.
        while i < len(v) and len(stretches) < 16:
            w = v[i:] + self.offset
            if self.last is not None and w[0] < self.last - back:
                self.offset += self._step()
                w = v[i:] + self.offset
            ends = np.flatnonzero(w[1:] < w[:-1] - back)
            k = int(ends[0]) + 1 if ends.size else len(w)
            stretches.append(w[:k])
            self.last = float(w[k - 1])
            i += k
        if i < len(v):
            stretches.append(np.array([self.fix(t) for t in v[i:].tolist()], dtype=np.float64))
        if len(stretches) == 1 and not self.offset:
            return ts  # (the same doubles: + 0.0 changes none but -0.0)
        out = np.concatenate(stretches)
        return cast("list[float | None]", array("d", out.tobytes()) if isinstance(column, array) else out.tolist())


def read_prefix(prefix: str, year: int, day: float = 0.0) -> tuple[float | None, str | None]:
    """Timestamp and rank from the text that precedes a message.

    Args:
        prefix: the line text before the engine marker (already free of outer wrappers).
        year: the year to assume for vLLM's year-less timestamps.
        day: the midnight (epoch seconds) of a time of day without a date.

    Returns:
        (epoch seconds or None, ``"DP0 TP0"``-style rank or None: the first run of
        rank tags after the timestamp, whatever their names). A time of day
        with no date belongs to ``day`` (the caller infers it from the file).
    """
    ts: float | None = None
    m = _TS.search(prefix)
    if m is not None:
        ts = stamp_value(m.group("date"), m.group("md"), m.group("hms"), m.group("frac") or "", year, day)
    rank: str | None = None
    r = _RANK.search(prefix, m.end() if m is not None else 0)
    if r is not None:
        rank = r.group()
    return ts, rank
