"""How long a pending error waits for serving to resume before what waits on the server ends on it.

A run's crash is *pending* (:attr:`specmon.model.run.Run.crash_pending`) while it rests only on
exceptions (a traceback, an out-of-memory error): a server also logs those for one request it
fails and goes on serving. The next request answered or stats sample makes it an error the server
caught; an engine's word of a death, a signal or an abort makes it certain. A sweep's launch, a
restart's start and the fleet view wait :data:`PENDING_WAIT_S` for one of those before they call
it the end of serving.
"""

from __future__ import annotations

from specmon.model.run import Run, ServerState

#: 30 s: three of vLLM's 10 s stats intervals (the longest an engine stays silent while serving
#: under load; SGLang logs a decode line every few hundred ms, llama.cpp one per request), so one
#: late interval ends nothing, while a server that is gone is called so within half a minute (a
#: check of its process, where there is one, says so sooner).
PENDING_WAIT_S = 30.0


class PendingWatch:
    """Whether a run's crash ends what waits on it: a certain one at once, a pending one once it has
    stood ``wait_s`` (on the caller's clock) with nothing served since it came."""

    def __init__(self, wait_s: float = PENDING_WAIT_S) -> None:
        self.wait_s = wait_s
        #: When the caller first saw the pending error (None: none pending now).
        self.since: float | None = None

    def ended(self, run: Run | None, now: float) -> bool:
        """True once ``run`` crashed for certain, or its pending error has waited ``wait_s``."""
        if run is None or run.state is not ServerState.CRASHED:
            self.since = None
            return False
        if not run.crash_pending:
            return True
        if self.since is None:
            self.since = now
        return now - self.since >= self.wait_s


def waiting(run: Run, last_served_at: float | None, now: float) -> bool:
    """Whether ``run``'s crash is pending and its wait, counted from the last sign of serving seen
    before it (the fleet's last sample: the error came after it), is not over yet."""
    return run.crash_pending and last_served_at is not None and now - last_served_at < PENDING_WAIT_S
