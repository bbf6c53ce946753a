"""Full-jitter exponential backoff: how long the SSH source waits before its next attempt.

The ceiling doubles per attempt up to a cap, and each wait is drawn uniformly below it, so
many clients that lost one host do not come back at the same instant.
"""

from __future__ import annotations

import random
from collections.abc import Callable

__all__ = ["Backoff"]


class Backoff:
    """Full-jitter exponential backoff: ``uniform(0, min(cap, base * factor**(n-1)))``.

    Args:
        base: Ceiling of the first delay, seconds.
        factor: Growth of the ceiling per attempt.
        cap: Largest ceiling.
        rand: ``random.random``-like function (injected in tests).
    """

    def __init__(
        self,
        base: float = 1.0,
        factor: float = 2.0,
        cap: float = 30.0,
        rand: Callable[[], float] = random.random,
    ) -> None:
        self.base = base
        self.factor = factor
        self.cap = cap
        self._rand = rand

    def ceiling(self, attempt: int) -> float:
        """Largest delay before attempt ``attempt`` (1-based)."""
        return min(self.cap, self.base * self.factor ** max(0, attempt - 1))

    def delay(self, attempt: int) -> float:
        """A random delay in ``[0, ceiling(attempt)]``."""
        return self._rand() * self.ceiling(attempt)
