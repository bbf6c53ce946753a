"""What the dashboard's flows tell the app: past-tense Textual messages.

Each flow defines its own nested messages (``RestartFlow.Finished``,
``SweepFlow.Started``, ... in the style of Textual's ``Switch.Changed``) on
these bases, so the app handles every flow's kind with one ``@on`` handler.
A flow posts them from the widget it owns (the restart panel, the sweep
progress line); they bubble to the app. A flow never calls into the app.
"""

from __future__ import annotations

from textual.message import Message

__all__ = ["FlowChanged", "FlowLogged", "FlowProgressed"]


class FlowLogged(Message):
    """A flow has something to say in the event log.

    Args:
        level: ``info``, ``warning`` or ``error``.
        text: One line.
        ts: When, wall time (``time.time`` scale; stamped when it happened, not when handled).
    """

    def __init__(self, level: str, text: str, ts: float | None) -> None:
        super().__init__()
        self.level = level
        self.text = text
        self.ts = ts


class FlowChanged(Message):
    """A flow's state changed (started, finished, adopted a server): what ``r`` and ``s`` can do may differ."""


class FlowProgressed(Message):
    """A flow's panel shows a newer moment (a restart's phase moved): the header must show it too, now."""
