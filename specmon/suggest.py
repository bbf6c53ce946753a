""""Did you mean": the valid words nearest to a mistyped one, for every error sentence that lists choices.

One rule for commands (``summarise``), profile keys (``hots``), profile names (``kimi``) and
option values, so each mistake is answered the same way. Imports nothing of specmon: every
layer may use it.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["close_words", "did_you_mean"]

#: difflib's ratio a valid word needs to be offered (its own default: 'hots' → 'host', 'kimi' → 'kimi-prod').
CUTOFF = 0.6


def close_words(given: str, valid: Iterable[str], *, n: int = 3) -> list[str]:
    """The valid words nearest to ``given``, best first, at most ``n`` (case-insensitive; a prefix counts).

    A valid word that starts with ``given`` (``kimi`` for ``kimi-prod``) is offered even when the
    ratio is below the cutoff: a short name typed for a longer one is the commonest slip.
    """
    words = list(dict.fromkeys(valid))
    lowered = {w.lower(): w for w in words}
    key = given.lower()
    found = difflib.get_close_matches(key, list(lowered), n=n, cutoff=CUTOFF)
    if key:
        found += [w for w in lowered if w.startswith(key) and w != key and w not in found]
    return [lowered[w] for w in found[:n]]


def did_you_mean(given: str, valid: Iterable[str]) -> str:
    """``"did you mean 'host'? "`` when a valid word is near ``given``, else ``""`` (to put before a list)."""
    near = close_words(given, valid)
    if not near:
        return ""
    return f"did you mean {' or '.join(repr(w) for w in near)}? "
