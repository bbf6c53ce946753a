"""The collapse guard: acceptance that falls well below the run's own level, and stays there.

An acceptance that silently collapses is the speculative-decoding user's worst case: the
server keeps serving, slower than without speculation (TensorRT-LLM issue 16888, llama.cpp
issue 27117: a drafter out of step with the target after a weight reload, a cache bug, a
prompt mix the drafter never saw). Nothing crashes, so nothing else in a dashboard says so.

The rule, per run (one configuration, one launch), on the drafter's *gain*: the accepted draft
tokens per step (accept length − 1; the acceptance rate where the engine logs no length):

- the run's own level is a slow exponential mean of the samples that left the recent window
  (time constant :data:`REFERENCE_TAU_S` of log time), armed once it has
  :data:`REFERENCE_MIN_SAMPLES` samples over at least :data:`REFERENCE_MIN_S`; it does not
  learn while the guard is raised, so a collapse cannot become the new normal;
- the recent level is the mean of the samples in the last :data:`WINDOW_S` seconds (at least
  :data:`MIN_RECENT` of them: one vLLM interval of 10 s is never enough on its own);
- raised when the recent level is below :data:`DROP` × the run's level, by more than its own
  noise allows (:data:`Z`), for :data:`HOLD_S` seconds; lowered when it is back above
  :data:`RECOVER` × the level.

A drop to half is below 0.6 once about 80% of the window is past it: at SGLang's rate (a
decode line every 1-2 s) that is ~10-14 s, at vLLM's 10 s intervals two intervals plus the
hold, under 30 s (bench/bench_collapse.py measures both). A 25% dip that the noise of a
12-second mean can make is not: no real log in the repository raises it (a test reads
them all). Samples without a log time count one second each (llama.cpp's lines have none).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

__all__ = ["CollapseGuard", "CollapseState"]

#: Raised below this fraction of the run's own level.
DROP = 0.6
#: Lowered again above this fraction.
RECOVER = 0.8
#: The recent level: the mean of the samples in this many seconds of log time ...
WINDOW_S = 12.0
#: ... and at least this many samples.
MIN_RECENT = 2
#: Where lines come every 1.5-4 s the window grows to hold about this many (a 12-second mean of six
#: lines dipped below the line by noise alone), up to :data:`WINDOW_MAX_S`.
WINDOW_SAMPLES = 8
WINDOW_MAX_S = 20.0
#: An engine that logs its acceptance this seldom (vLLM: one line per 10 s interval, itself a mean over
#: the interval) is judged on the mean of its last two intervals, raised at once: a 12-second window
#: and a hold of two would take 30-40 s to see two post-drop intervals.
SLOW_S = 4.0
#: Below the line for this long (log seconds, consecutive samples) before the guard is raised: a single
#: bad look, or a dip the window's noise makes for a moment, is not a collapse.
HOLD_S = 3.0
#: ... and the drop must stand out of the run's own noise: level − recent ≥ Z × (the samples' spread /
#: √ samples in the window). A noisy stream (n-gram drafting: CV 0.25-0.4 per line) then needs a
#: deeper or longer drop before it is called a collapse, instead of raising false alarms.
Z = 4.5
#: A sample teaches the level this long after it arrived (log seconds): longer than a collapse takes to call.
LAG_S = 60.0
#: The run's own level: an exponential mean with this time constant (log seconds).
REFERENCE_TAU_S = 120.0
#: Armed once the level rests on this many samples ...
REFERENCE_MIN_SAMPLES = 10
#: ... over at least this many seconds.
REFERENCE_MIN_S = 30.0
#: No alarm on a level this small (accepted drafts per step): a drafter that never helped has nothing to lose.
MIN_LEVEL = 0.05


@dataclass(frozen=True, slots=True)
class CollapseState:
    """A change of the guard: raised (``collapsed``) or lowered, with the numbers that made it."""

    collapsed: bool
    recent: float
    level: float
    t: float
    #: The seconds of log time the recent level is the mean of.
    span: float = WINDOW_S

    @property
    def drop_pct(self) -> float:
        return 100.0 * (self.recent / self.level - 1.0) if self.level else 0.0


class CollapseGuard:
    """Watches one run's acceptance; :meth:`add` returns a :class:`CollapseState` when the guard changes."""

    __slots__ = ("_below", "_below_since", "_clock", "_dt", "_first_t", "_last_learn", "_level", "_n_level",
                 "_pending", "_recent", "_sum",
                 "_var", "collapsed", "state")

    def __init__(self) -> None:
        self._recent: deque[tuple[float, float]] = deque()
        self._pending: deque[tuple[float, float]] = deque()  # left the window, not learned yet
        self._sum = 0.0
        self._level: float | None = None
        self._var = 0.0  # the samples' spread around the level (an exponential mean of squared deviations)
        self._n_level = 0
        self._first_t: float | None = None
        self._below = 0
        self._below_since: float | None = None
        self._clock = 0.0
        self._last_learn = 0.0
        self._dt: float | None = None  # the typical time between samples (a mean of the recent gaps)
        self.collapsed = False
        #: The last change (None before any).
        self.state: CollapseState | None = None

    @property
    def level(self) -> float | None:
        """The run's own gain level, once armed (None before)."""
        return self._level if self.armed else None

    @property
    def armed(self) -> bool:
        if self._level is None or self._first_t is None or self._n_level < REFERENCE_MIN_SAMPLES:
            return False
        return self._clock - self._first_t >= REFERENCE_MIN_S

    @property
    def recent(self) -> float | None:
        return self._sum / len(self._recent) if self._recent else None

    def add(self, t: float | None, gain: float) -> CollapseState | None:
        """One sample: its log time (None: one second after the last) and the drafter's gain."""
        if gain != gain or gain < 0:  # NaN or nonsense: not a sample
            return None
        now = self._clock + 1.0 if t is None else max(t, self._clock)
        if self._first_t is None:
            self._first_t = now
        elif now > self._clock:
            gap = now - self._clock
            self._dt = gap if self._dt is None else 0.9 * self._dt + 0.1 * min(gap, 10 * self._dt + 1.0)
        self._clock = now
        slow = self._dt is not None and self._dt >= SLOW_S
        if slow and self._dt is not None:
            span = 1.5 * self._dt
        else:  # at least WINDOW_SAMPLES samples in the window where the engine logs every 1.5-4 s
            span = min(WINDOW_MAX_S, max(WINDOW_S, WINDOW_SAMPLES * (self._dt or 0.0)))
        self._recent.append((now, gain))
        self._sum += gain
        while self._recent and self._recent[0][0] < now - span:
            t_old, old = self._recent.popleft()
            self._sum -= old
            self._pending.append((t_old, old))
        # The level learns a sample only :data:`LAG_S` after it arrived, and never while raised: a
        # collapse is called within 30 s, so its samples never teach the level (learning them while
        # it was still being held lowered the level and widened the noise until it never was called).
        while self._pending and self._pending[0][0] < now - LAG_S:
            t_old, old = self._pending.popleft()
            if not self.collapsed:
                self._learn(t_old, old)
        if not self.armed or len(self._recent) < MIN_RECENT:
            return None
        level = self._level
        assert level is not None
        if level < MIN_LEVEL:
            return None
        recent = self._sum / len(self._recent)
        if not self.collapsed:
            noise = Z * math.sqrt(self._var / len(self._recent))
            if recent < DROP * level and level - recent >= noise:
                self._below += 1
                if self._below_since is None:
                    self._below_since = now
            else:
                self._below, self._below_since = 0, None
            held = self._below_since is not None and now - self._below_since >= HOLD_S and self._below >= 2
            if held or (slow and self._below >= 1):
                self.collapsed = True
                self._pending.clear()
                self.state = CollapseState(True, recent, level, now, span)
                return self.state
        elif recent > RECOVER * level:
            self.collapsed = False
            self._below, self._below_since = 0, None
            self.state = CollapseState(False, recent, level, now, span)
            return self.state
        return None

    def _learn(self, t: float, value: float) -> None:
        if self._level is None:
            self._level, self._n_level, self._last_learn = value, 1, t
            return
        # Per-sample weight from the time since the last learned sample: the level's memory is in
        # seconds of log time, whatever the engine's rate.
        dt = max(0.0, t - self._last_learn)
        self._last_learn = t
        alpha = -math.expm1(-dt / REFERENCE_TAU_S) if dt > 0 else 1.0 / REFERENCE_TAU_S
        if self._n_level < REFERENCE_MIN_SAMPLES:
            alpha = max(alpha, 1.0 / (self._n_level + 1))  # a plain mean while it arms
        dev = value - self._level
        self._level += alpha * dev
        self._var += alpha * (dev * dev - self._var) if self._n_level > 1 else dev * dev
        self._n_level += 1
