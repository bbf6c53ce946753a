"""The engine's own controller, watched: which setting it runs now, how often it switches.

SGLang's adaptive speculative decoding (``--speculative-adaptive``) moves between
pre-captured step tiers as it runs and exports the active one as the gauges
``sglang:spec_num_steps`` / ``sglang:spec_num_draft_tokens``; users report it flipping
between two tiers several times a second, which costs a tier switch each time and
leaves no tier warm. :class:`SettingTracker` is fed the setting a scrape sees and says:

- the setting now, and the share of the last minute spent in each;
- switches per minute over the last minute;
- *flip-flop*: at least :data:`FLIP_MIN_SWITCHES` switches in :data:`WINDOW_S` seconds with
  at least :data:`FLIP_MIN_REVERSALS` of them straight back to the setting before
  (A → B → A): the controller is undecided, not following a change of load.

What a scrape sees is one value a second: switches between two scrapes are not seen, so
the counts are lower bounds (the text says "seen").

Pure: no I/O, no clock of its own (times are the scraper's).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

#: The window the rates and shares cover, seconds.
WINDOW_S = 60.0
#: Switches in the window, at least, for a flip-flop.
FLIP_MIN_SWITCHES = 6
#: Of them, switches straight back to the setting held before the previous one.
FLIP_MIN_REVERSALS = 3

Setting = tuple[int, int]  # (steps, draft tokens)


@dataclass(frozen=True, slots=True)
class ControllerView:
    """What the dashboard says about the engine's controller."""

    now: Setting
    switches_per_min: float
    flip_flop: bool
    #: (setting, share of the window's time) for each setting seen in the window, most first.
    shares: tuple[tuple[Setting, float], ...]
    settings_seen: int

    def short(self) -> str:
        """The header's: ``adaptive: 3 steps now · 4 switches/min ⚠ flip-flop``."""
        steps = self.now[0]
        n = round(self.switches_per_min)
        out = f"adaptive: {steps} step{'' if steps == 1 else 's'} now · {n} switch{'' if n == 1 else 'es'}/min"
        return out + (" ⚠ flip-flop" if self.flip_flop else "")

    def text(self) -> str:
        """The event log's: the short text, then where the last minute went (switches seen at each scrape)."""
        out = self.short() + " (seen at each scrape: more may happen between two)"
        if len(self.shares) > 1:
            out += "; the last minute: " + ", ".join(
                f"{s[0]} step{'' if s[0] == 1 else 's'} {p:.0%}" for s, p in self.shares[:4])
        return out


@dataclass(slots=True)
class SettingTracker:
    """Settings seen over time (see the module docstring)."""

    current: Setting | None = None
    since: float | None = None
    #: (time, from, to) of every switch in the last window.
    switches: deque[tuple[float, Setting, Setting]] = field(default_factory=deque)
    #: (start, end, setting) spans of the last window, the current one open (end None).
    _spans: deque[tuple[float, float | None, Setting]] = field(default_factory=deque)
    seen: set[Setting] = field(default_factory=set)
    _last_t: float | None = None

    def observe(self, t: float, setting: Setting | None) -> bool:
        """Take what a scrape at ``t`` saw (None: no setting exported yet). True on a switch."""
        if setting is None or (self._last_t is not None and t < self._last_t):
            return False  # a clock that went back: a new scraper's, not news
        self._last_t = t
        self.seen.add(setting)
        switched = False
        if self.current is None:
            self.current, self.since = setting, t
            self._spans.append((t, None, setting))
        elif setting != self.current:
            self.switches.append((t, self.current, setting))
            start, _, held = self._spans.pop()
            self._spans.append((start, t, held))
            self._spans.append((t, None, setting))
            self.current, self.since = setting, t
            switched = True
        self._trim(t)
        return switched

    def _trim(self, now: float) -> None:
        edge = now - WINDOW_S
        while self.switches and self.switches[0][0] <= edge:
            self.switches.popleft()
        while self._spans and self._spans[0][1] is not None and self._spans[0][1] <= edge:
            self._spans.popleft()

    def flip_flop(self) -> bool:
        """Whether the controller is undecided over the last window (see the module docstring)."""
        if len(self.switches) < FLIP_MIN_SWITCHES:
            return False
        moves = list(self.switches)
        reversals = sum(1 for a, b in zip(moves, moves[1:], strict=False) if b[2] == a[1])
        return reversals >= FLIP_MIN_REVERSALS

    def view(self, now: float | None = None) -> ControllerView | None:
        """The controller's state; None until it has run more than one setting (a fixed one says nothing)."""
        if self.current is None or len(self.seen) < 2:
            return None
        now = self._last_t if now is None else now
        assert now is not None
        self._trim(now)
        edge = now - WINDOW_S
        share: dict[Setting, float] = {}
        for start, end, setting in self._spans:
            lo, hi = max(start, edge), (now if end is None else end)
            if hi > lo:
                share[setting] = share.get(setting, 0.0) + (hi - lo)
        total = sum(share.values())
        shares = tuple(sorted(((s, v / total) for s, v in share.items()), key=lambda x: -x[1])) if total > 0 else ()
        # Over the time actually watched when that is shorter than the window (a new scraper).
        first = self._spans[0][0] if self._spans else now
        span = min(WINDOW_S, max(now - first, 1.0))
        return ControllerView(self.current, len(self.switches) * 60.0 / span, self.flip_flop(), shares,
                              len(self.seen))
