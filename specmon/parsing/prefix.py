"""The timestamp and rank of a log line, read from the text before its message.

One tolerant reader serves every engine: SGLang ``[2025-10-22 10:27:56 DP0 TP0]``
(with or without the date, the milliseconds or the opening bracket), SGLang
custom formats (``2025-10-29 02:27:35 INFO 8900 [ DP15 TP15 EP15 file.py:1]``),
vLLM's year-less ``INFO 05-07 04:56:17 [loggers.py:271]``.
"""

from __future__ import annotations

import re

from specmon.parsing.common import parse_datetime, parse_fraction, parse_hms

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


def stamp_value(date: str | None, md: str | None, hms: str, frac: str, year: int) -> float | None:
    """Epoch seconds of a prefix timestamp's parts (the one arithmetic of both parse paths).

    Args:
        date: ``YYYY-MM-DD`` or None; md: vLLM's year-less ``MM-DD`` or None;
        hms: ``HH:MM:SS``; frac: ``.123`` / ``,123`` or ""; year: for ``md``.
    """
    if date:
        return parse_datetime(date, hms, frac)
    if md:
        return parse_datetime(f"{year:04d}-{md}", hms, frac)
    sec = parse_hms(hms)
    return None if sec is None else sec + parse_fraction(frac)


def read_prefix(prefix: str, year: int) -> tuple[float | None, str | None]:
    """Timestamp and rank from the text that precedes a message.

    Args:
        prefix: the line text before the engine marker (already free of outer wrappers).
        year: the year to assume for vLLM's year-less timestamps.

    Returns:
        (epoch seconds or None, ``"DP0 TP0"``-style rank or None: the first run of
        rank tags after the timestamp, whatever their names). A time of day
        with no date gives seconds since midnight of 1970-01-01: ordering and
        intervals stay right within a day, the date is honestly unknown.
    """
    ts: float | None = None
    m = _TS.search(prefix)
    if m is not None:
        ts = stamp_value(m.group("date"), m.group("md"), m.group("hms"), m.group("frac") or "", year)
    rank: str | None = None
    r = _RANK.search(prefix, m.end() if m is not None else 0)
    if r is not None:
        rank = r.group()
    return ts, rank
