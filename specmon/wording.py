"""How counts read in what specmon prints: ``1 step``, ``2 steps``, ``1 draft token``.

One rule for every label and message, so no place forgets the singular (vLLM's
one-token n-gram restart once read "1 step, 1 draft tokens"). Imports nothing of
specmon: every layer may use it.
"""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``noun`` is the singular; plurals add ``s``)."""
    return f"{n} {noun}{'' if n == 1 else 's'}"
