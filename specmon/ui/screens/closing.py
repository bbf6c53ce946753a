"""Screen work that may run after the app began to close: a screen's Mount, a resize, a fit after a refresh."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any, Concatenate, ParamSpec, TypeVar, cast

from textual.css.query import NoMatches
from textual.screen import Screen

__all__ = ["while_attached"]

P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S", bound=Screen[Any])


def while_attached(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R | None]:
    """Run ``method``; when a widget it queries is gone because its screen is no longer attached, do nothing.

    The app quitting as a screen opens (q, SIGTERM, a closed terminal) prunes the screen's widgets
    before its Mount, a resize or a fit queued after a refresh is handled. Queried then, they raised
    ``NoMatches`` and the app ended on a traceback instead of quitting
    (``tests/pilot/test_quit_as_a_screen_opens.py``). On a screen still attached a ``NoMatches`` is
    a fault, and it is raised.
    """

    @wraps(method)
    def run(self: S, *args: P.args, **kwargs: P.kwargs) -> R | None:
        try:
            return method(self, *args, **kwargs)
        except NoMatches:
            if self.is_attached:
                raise
            return None

    return cast("Callable[Concatenate[S, P], R | None]", run)
