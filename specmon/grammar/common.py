"""Helpers shared by the engine parsers: outer-wrapper stripping, timestamps, key-value bodies.

Everything here is on the per-line hot path, so it avoids regexes where a
substring test answers, and caches the date part of timestamps (a log has few
distinct days and millions of lines).
"""

from __future__ import annotations

import math
import re
from calendar import timegm
from functools import lru_cache

#: The longest line text kept in an ``Unparsed`` record; the rest is cut.
MAX_KEPT_TEXT = 2000

# ANSI colour sequences, and the remnants a copy leaves when the ESC byte is lost ("[36m").
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]|\x1b|(?<![\w\]])\[[0-9;]{1,8}m")

# Outer wrappers seen in real captures (FORMATS.md §0), stripped from the left, repeatedly.
_OUTER = re.compile(
    r"""^(?:
        (?P<docker>\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?Z?)\s            # docker logs -t
      | (?P<compose>\d{4}-\d{2}-\d{2}\ \d{2}:\d{2}:\d{2}(?:\.\d+)?)\s\|\s?        # collector "ts | "
      | \((?:[A-Za-z][\w.\-]*)\s+pid=\d+(?:,\s*ip=[^)]*)?\)\s?                     # Ray / vLLM process tag
      | \((?:[A-Za-z][\w.\-]*)\s+(?:rank|TP|DP)\S*\s+pid=\d+\)\s?                 # (VllmWorker rank=0 pid=N)
    )""",
    re.VERBOSE,
)


def strip_ansi(text: str) -> str:
    """Remove ANSI colour codes and their ESC-less remnants."""
    if "\x1b" in text or "m" in text and "[" in text:
        return _ANSI.sub("", text)
    return text


def inner_line(text: str) -> str:
    """``text`` without its docker/collector timestamps and process tags (:func:`strip_outer`'s
    line, without reading the wrapper's time: half its cost, on every line of a head)."""
    for _ in range(4):
        m = _OUTER.match(text)
        if m is None:
            break
        text = text[m.end():]
    return text


def strip_outer(text: str) -> tuple[str, float | None]:
    """Strip docker/collector timestamps and process tags.

    Returns:
        The inner line and the outer timestamp (epoch seconds) if a wrapper carried one.
    """
    outer_ts: float | None = None
    for _ in range(4):  # wrappers nest (docker -t around a Ray tag), but never deeply
        m = _OUTER.match(text)
        if m is None:
            break
        ts_text = m.group("docker") or m.group("compose")
        if ts_text is not None and outer_ts is None:
            outer_ts = parse_datetime(ts_text[:10], ts_text[11:19], ts_text[19:].rstrip("Z"))
        text = text[m.end():]
    return text, outer_ts


@lru_cache(maxsize=4096)
def _day_start(date_text: str) -> float | None:
    # Cached: a log has few distinct days, and timegm per line would dominate.
    try:
        y, mo, d = int(date_text[0:4]), int(date_text[5:7]), int(date_text[8:10])
        if not (1 <= mo <= 12 and 1 <= d <= 31):
            return None
        return float(timegm((y, mo, d, 0, 0, 0, 0, 0, 0)))
    except (ValueError, OverflowError):
        return None


def parse_hms(hms: str) -> float | None:
    """Seconds since midnight of ``HH:MM:SS``; None if it is not a time."""
    if len(hms) != 8 or hms[2] != ":" or hms[5] != ":":
        return None
    try:
        h, m, s = int(hms[0:2]), int(hms[3:5]), int(hms[6:8])
    except ValueError:
        return None
    if h > 23 or m > 59 or s > 60:
        return None
    return float(h * 3600 + m * 60 + s)


def parse_fraction(frac: str) -> float:
    """The fractional-seconds part ``.123`` (or ``.123456789``) as seconds; 0 if absent."""
    if len(frac) > 1 and frac[0] in ".," and frac[1:].isdigit():
        return int(frac[1:]) / 10.0 ** (len(frac) - 1)
    return 0.0


def parse_datetime(date_text: str, hms: str, frac: str = "") -> float | None:
    """``YYYY-MM-DD`` + ``HH:MM:SS`` (+ ``.mmm``) to epoch seconds (naive time read as UTC)."""
    day = _day_start(date_text)
    sec = parse_hms(hms)
    if day is None or sec is None:
        return None
    return day + sec + parse_fraction(frac)


def to_float(text: str) -> float | None:
    """A finite float, or None (``nan``, ``inf``, garbage)."""
    try:
        value = float(text)
    except ValueError:
        return None
    if math.isfinite(value):
        return value
    return None


def to_int(text: str) -> int | None:
    """A non-negative integer, or None."""
    text = text.strip()
    if text.isdigit() and text.isascii():
        return int(text)
    return None


def to_percent_fraction(text: str) -> float | None:
    """``"32.6%"`` → 0.326; None if not a finite percentage."""
    text = text.strip()
    if text.endswith("%"):
        text = text[:-1]
    value = to_float(text)
    return None if value is None else value / 100.0


def to_bool(text: str) -> bool | None:
    """``True``/``False`` as printed by Python; None otherwise."""
    text = text.strip()
    if text == "True":
        return True
    if text == "False":
        return False
    return None


def split_fields(body: str) -> tuple[dict[str, str], list[str], str | None]:
    """Split an SGLang/vLLM ``key: value, key: value`` body.

    Returns:
        The fields (last one wins), the segments inside the body that were not
        ``key: value`` (damage), and the last segment when *it* is not one (a
        line cut at its end: the fields before it are whole). Empty segments
        from a trailing ``", "`` are normal and dropped.
    """
    fields: dict[str, str] = {}
    bad: list[str] = []
    segs = [seg.strip() for seg in body.split(", ")]
    while segs and not segs[-1]:
        segs.pop()
    tail: str | None = None
    for i, seg in enumerate(segs):
        key, sep, value = seg.partition(": ")
        if not sep or not value.strip():
            if i == len(segs) - 1:
                tail = seg
            else:
                bad.append(seg)  # a field cut before its value, or text that is no field
            continue
        fields[key.strip()] = value.strip()
    return fields, bad, tail


def cut(text: str) -> str:
    """The text kept in an Unparsed record: bounded, so a 10 MB line stays cheap."""
    if len(text) <= MAX_KEPT_TEXT:
        return text
    return text[:MAX_KEPT_TEXT] + f"... [{len(text) - MAX_KEPT_TEXT} more characters]"
