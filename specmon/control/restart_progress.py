"""Where a restart is: :class:`Phase`, :class:`RestartProgress` (one immutable view of a restart, for
the header, the panel and the event log) and :func:`plan_label`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from specmon.control.eta import EtaEstimate
from specmon.wording import counted


class Phase(str, Enum):
    """Where a restart is."""

    IDLE = "idle"
    STOPPING = "stopping"
    STARTING = "starting"
    LOADING = "loading"
    CAPTURING = "capturing"
    READY = "ready"
    CRASHED = "crashed"
    TIMEOUT = "timeout"
    FAILED = "failed"

    @property
    def text(self) -> str:
        """How the header and the panel name it."""
        return _PHASE_TEXT[self]


_PHASE_TEXT = {
    Phase.IDLE: "idle",
    Phase.STOPPING: "stopping",
    Phase.STARTING: "starting",
    Phase.LOADING: "loading weights",
    Phase.CAPTURING: "capturing CUDA graphs",
    Phase.READY: "ready",
    Phase.CRASHED: "crashed during start-up",
    Phase.TIMEOUT: "timed out",
    Phase.FAILED: "failed",
}
#: Phases of a restart in progress, in order.
RUNNING_PHASES: tuple[Phase, ...] = (Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING)
#: How a restart can end badly.
FAILED_PHASES = frozenset({Phase.CRASHED, Phase.TIMEOUT, Phase.FAILED})


def plan_label(steps: int, draft_tokens: int | None = None) -> str:
    """``2 steps, 3 draft tokens``, ``1 step``, ``no speculation``."""
    if steps == 0:
        return "no speculation"
    text = counted(steps, "step")
    if draft_tokens is not None:
        text += f", {counted(draft_tokens, 'draft token')}"
    return text


@dataclass(frozen=True, slots=True)
class RestartProgress:
    """One immutable view of a restart, for the header, the panel and the event log.

    Attributes:
        phase: Where it is.
        steps: The step count being started.
        label: ``2 steps, 3 draft tokens``.
        host: Where (the host label).
        log: The new log.
        elapsed_s: Seconds since the restart began.
        phase_elapsed_s: Seconds in the current phase (0 once finished).
        done: Finished phases and their seconds, in order.
        load_progress: Weight shards ``(done, total)``, once the log shows them.
        graph_progress: CUDA-graph batches ``(done, total)``, where the log shows them.
        eta: What is left, when it can be told (None once finished).
        message: The latest step result, warning or failure reason.
        last_lines: The last relevant raw lines of the new log.
        previous_steps: The step count the server ran before (``go back`` target).
        config: The configuration the new log announced, when read.
    """

    phase: Phase
    steps: int
    label: str
    host: str
    log: str | None
    elapsed_s: float
    phase_elapsed_s: float
    done: tuple[tuple[Phase, float], ...] = ()
    load_progress: tuple[int, int] | None = None
    graph_progress: tuple[int, int] | None = None
    eta: EtaEstimate | None = None
    message: str = ""
    last_lines: tuple[str, ...] = ()
    previous_steps: int | None = None
    config: str | None = None

    @property
    def running(self) -> bool:
        """Whether the restart is still going."""
        return self.phase in RUNNING_PHASES

    @property
    def failed(self) -> bool:
        """Whether it ended badly (crash, timeout, a command failed)."""
        return self.phase in FAILED_PHASES

    @property
    def fraction(self) -> float | None:
        """How far the current phase is, 0..1, where the log tells (shards, graph batches)."""
        prog = None
        if self.phase is Phase.LOADING:
            prog = self.load_progress
        elif self.phase is Phase.CAPTURING:
            prog = self.graph_progress
        elif self.phase is Phase.READY:
            return 1.0
        if prog is None or prog[1] <= 0:
            return None
        return max(0.0, min(1.0, prog[0] / prog[1]))
