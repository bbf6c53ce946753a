"""Throughput per batch over the latest runs: fixed y-range, the baseline as a line, run changes marked.

Unlike a sparkline (scaled to its own min/max), this plot keeps one y-range that
only grows, so runs can be compared by eye against the horizontal baseline. A
plotext redraw costs tens of milliseconds: the app hands it a view at most once
a second, and it redraws only when the view changed or the widget was resized.
"""

from __future__ import annotations

import math
import time

from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot

from specmon.ui.literal import plain
from specmon.ui.views import PlotView

__all__ = ["MIN_INTERVAL_S", "ThroughputPlot", "downsample", "y_ticks"]

#: Least time between two redraws (a little under the app's 1 s cadence, for timer jitter).
MIN_INTERVAL_S = 0.95


def downsample(values: tuple[float, ...], points: int) -> list[float]:
    """Bucket means down to at most ``points`` values (a plot needs no more than its width)."""
    n = len(values)
    if points <= 0:
        return []
    if n <= points:
        return list(values)
    out = []
    for i in range(points):
        lo, hi = i * n // points, (i + 1) * n // points
        chunk = values[lo:hi] or values[lo:lo + 1]
        out.append(sum(chunk) / len(chunk))
    return out


class ThroughputPlot(PlotextPlot):
    """A plotext plot drawn from a :class:`~specmon.ui.views.PlotView`."""

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._view: PlotView | None = None
        self.draws = 0  # how many times the figure was rebuilt (the bench reports it)
        # The view itself, not its id: a collected view's id may be lent to the next one.
        self._cache: tuple[object, object, RenderResult] | None = None
        self._shown_at = -MIN_INTERVAL_S

    def show(self, view: PlotView, *, force: bool = False) -> None:
        """Take a new view; redraws only if it differs, and at most about once a second.

        A view arriving sooner is dropped: the next one (the app offers one every
        second) supersedes it. ``force`` draws at once (a final refresh, tests).
        """
        if view == self._view:
            return
        now = time.monotonic()
        if not force and now - self._shown_at < MIN_INTERVAL_S:
            return
        self._shown_at = now
        self._view = view
        self.refresh()

    def _rgb(self, variable: str) -> tuple[int, int, int]:
        # Plot colours come from the theme, like everything else.
        value = self.app.theme_variables.get(variable) or self.app.theme_variables.get("foreground", "white")
        return Color.parse(value).rgb

    def render(self) -> RenderResult:
        """Rebuild the figure when the view, the size or the theme changed; else reuse the last one.

        Textual may ask for a render for reasons of its own (a screen on top closing, a
        style update); the expensive plotext build happens only when the picture changes.
        """
        key = (self.size, self.app.theme)
        if self._cache is not None and self._cache[0] is self._view and self._cache[1] == key:
            return self._cache[2]
        self._draw()
        self.draws += 1
        result = super().render()
        self._cache = (self._view, key, result)
        return result

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        view = self._view
        width = max(10, self.size.width - 8)  # the y-axis labels take a few columns
        if view is None or not view.segments:
            plt.title("waiting for decode batches")
            plt.ylim(0, 100)
            plt.xticks([], [])
            return
        total = sum(len(s.values) for s in view.segments)
        # Points per segment in proportion to its length: no more points than columns (x2: braille).
        budget = max(len(view.segments), width * 2)
        x0 = 0
        line = self._rgb("primary")
        marks = self._rgb("secondary")
        labels: list[tuple[str, float]] = []
        for k, seg in enumerate(view.segments):
            n = len(seg.values)
            pts = downsample(seg.values, max(1, budget * n // total))
            if pts:
                step = n / len(pts)
                xs = [x0 + (i + 0.5) * step for i in range(len(pts))]
                plt.plot(xs, pts, marker="braille", color=line)
            if k > 0:
                plt.vertical_line(x0, color=marks)
            # Columns this run gets on screen: its label must fit, or shrink to the step count.
            cols = width * n / total
            # plotext writes ANSI codes that are read back: a run's label (from the log) is made inert.
            label = _short(plain(seg.label))
            if len(label) > cols:
                label = label.split()[0] if label != "no spec" else "0"
            labels.append((label if len(label) < cols else "", x0 + n / 2))
            x0 += n
        if view.baseline is not None:
            plt.horizontal_line(view.baseline, color=self._rgb("accent"))
        # Run names are written inside the plot, not as x tick labels: plotext drops colliding
        # tick labels in an order that depends on Python's hash seed, which would make
        # the picture differ from one process to the next.
        for text, x in labels:
            if text:
                plt.text(text, x, view.y_max * 0.97, alignment="center", color=marks)
        plt.ylim(0, view.y_max)
        ticks = y_ticks(view.y_max, max(2, (self.size.height - 3) // 2))
        plt.yticks(ticks, [f"{t:g}" for t in ticks])
        plt.xlim(0, max(1, x0))
        plt.xticks([], [])


def y_ticks(top: float, most: int) -> list[float]:
    """Round tick values from 0 to ``top`` (itself round): at most ``most`` intervals, at least 2."""
    if top <= 0:
        return [0.0]
    for intervals in range(min(most, 6), 1, -1):
        step = top / intervals
        exp = 10 ** math.floor(math.log10(step))
        # A step of 1, 2, 2.5 or 5 times a power of ten reads well ("0 50 100 150").
        if any(abs(step - m * exp) < 1e-9 * top for m in (1, 2, 2.5, 5, 10)):
            return [step * i for i in range(intervals + 1)]
    return [0.0, top / 2, top]


def _short(label: str) -> str:
    """``EAGLE3 2 steps`` -> ``2 steps``; ``no speculation`` -> ``no spec``."""
    if label == "no speculation":
        return "no spec"
    parts = label.split()
    if len(parts) >= 3 and parts[2].startswith(("step", "token")):
        return " ".join(parts[1:3])
    return label[:12]
