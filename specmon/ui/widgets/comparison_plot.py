"""The sweep's comparison as a picture in the terminal: tok/s ± its 95% interval per setting.

The verdict panel's ``p``: the same numbers as its table (each group's
:class:`~specmon.output.tables.SweepOutcome`), drawn with plotext as the HTML report draws them
with matplotlib: one column per setting in step order, a vertical bar for the interval and a
mark at the mean, the baseline as a line, one colour per group (concurrency, workload). The y axis
spans the data with its intervals (:func:`axis_limits`), not 0 to the top.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot

from specmon.output.tables import OutcomeRow, SweepOutcome
from specmon.ui.literal import plain

__all__ = ["TITLE", "ComparisonPlot", "axis_limits", "settings_of"]

#: The plot's title: its intervals are the sweep table's, over launches (``CI (launch)``, as `?` says).
TITLE = "tok/s ± 95% CI (launch) per setting"

#: Theme variables the groups are drawn in, in turn.
GROUP_COLOURS = ("primary", "accent", "success", "warning", "secondary", "error")


def _key(row: OutcomeRow) -> tuple[int, str]:
    return (row.steps if row.steps is not None else 1 << 20, row.label)


def settings_of(groups: Sequence[SweepOutcome]) -> list[str]:
    """Every setting measured in any group, in step order (the x axis)."""
    seen: dict[str, tuple[int, str]] = {}
    for g in groups:
        for r in g.rows:
            seen.setdefault(r.label, _key(r))
    return sorted(seen, key=lambda label: seen[label])


def _tick(label: str) -> str:
    """A short x label: the step count (``0`` for no speculation), else the label's first word."""
    if label == "no speculation":
        return "0"
    words = label.split()
    for i, w in enumerate(words):
        if w.isdigit() and i + 1 < len(words) and words[i + 1].startswith(("step", "token")):
            return w + "".join(f" {x}" for x in words[i + 2:])
    return words[0] if words else "?"


def nice_step(raw: float) -> float:
    """The round step (1, 2, 2.5 or 5 times a power of ten) at or above ``raw`` (> 0)."""
    exp = 10.0 ** math.floor(math.log10(raw))
    return float(next(m * exp for m in (1, 2, 2.5, 5, 10) if m * exp >= raw * (1 - 1e-12)))


def axis_limits(values: Sequence[float], intervals: int = 4) -> tuple[float, float, list[float]]:
    """The y axis for ``values`` (every interval's ends and the means): ``(bottom, top, ticks)``.

    The axis spans the data, not 0 to the top: 85-94 tok/s filled a sixth of a 0-100 axis and
    sat flat on one line; here they take most of it. The bottom and the top are round ticks
    (1, 2, 2.5 or 5 times a power of ten apart, at most ``intervals`` of them), with a margin of
    5% of the data's span each side (a span of at least 2% of the top), never below 0 (a throughput is not negative).
    """
    lo, hi = min(values), max(values)
    # One value, or values a hair apart: a window of at least 2% of the top around them (0.1 when
    # everything is 0; never under 1e-8, which the ticks' ten decimals still tell apart). A fixed 0.1
    # floor at every scale left 0.98-1.02 in less than a fifth of a 0.9-1.1 axis.
    span = max(max(hi - lo, 0.02 * abs(hi)) or 0.1, 1e-8)
    if hi - lo < span:
        lo, hi = lo - (span - (hi - lo)) / 2, hi + (span - (hi - lo)) / 2
    lo, hi = max(0.0, lo - 0.05 * span), hi + 0.05 * span
    step = nice_step((hi - lo) / max(1, intervals))
    while True:
        bottom = math.floor(lo / step + 1e-9) * step
        top = math.ceil(hi / step - 1e-9) * step
        count = round((top - bottom) / step)
        if count <= max(1, intervals):
            break
        step = nice_step(step * 1.0001)  # the next round step up
    top = max(top, bottom + step)
    count = max(1, round((top - bottom) / step))
    ticks = [round(bottom + i * step, 10) for i in range(count + 1)]
    return ticks[0], ticks[-1], ticks


class ComparisonPlot(PlotextPlot):
    """tok/s ± 95% interval per setting, one colour per group; drawn once per size and theme."""

    def __init__(self, groups: Sequence[SweepOutcome], *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.groups = tuple(groups)
        self.draws = 0
        self._cache: tuple[object, RenderResult] | None = None

    def _rgb(self, variable: str) -> tuple[int, int, int]:
        value = self.app.theme_variables.get(variable) or self.app.theme_variables.get("foreground", "white")
        return Color.parse(value).rgb

    def render(self) -> RenderResult:
        key = (self.size, self.app.theme)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        self._draw()
        self.draws += 1
        result = super().render()
        self._cache = (key, result)
        return result

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        labels = settings_of(self.groups)
        n = len(self.groups)
        # What is drawn: every interval's ends and mean, and the baseline's line when there is one.
        values = [v for g in self.groups for r in g.rows if r.tps_mean is not None
                  for v in (max(0.0, r.tps_mean - (r.tps_half or 0.0)), r.tps_mean + (r.tps_half or 0.0))]
        values += [g.baseline.tps_mean for g in self.groups
                   if n == 1 and g.baseline is not None and g.baseline.tps_mean is not None]
        if not labels or not values or max(values) <= 0:
            plt.title("nothing measured")
            return
        width = 0.5 / max(1, n)  # groups side by side within a setting's column
        for gi, group in enumerate(self.groups):
            colour = self._rgb(GROUP_COLOURS[gi % len(GROUP_COLOURS)])
            xs, ys = [], []
            for row in group.rows:
                if row.tps_mean is None:
                    continue
                x = labels.index(row.label) + 1 + (gi - (n - 1) / 2) * width
                half = row.tps_half or 0.0
                plt.plot([x, x], [max(0.0, row.tps_mean - half), row.tps_mean + half], color=colour,
                         marker="braille")
                xs.append(x)
                ys.append(row.tps_mean)
            # Plotext reads its labels back through ANSI parsing: text from the sweep is made inert.
            name = plain(group.group_text.strip() or "the sweep")
            plt.scatter(xs, ys, color=colour, marker="●", label=name if n > 1 else None)
            if group.baseline is not None and group.baseline.tps_mean is not None and n == 1:
                plt.horizontal_line(group.baseline.tps_mean, color=self._rgb("secondary"))
        most = max(2, min(5, (self.size.height - 4) // 2))
        bottom, top, ticks = axis_limits(values, most)
        plt.ylim(bottom, top)
        plt.yticks(ticks, [f"{t:g}" for t in ticks])
        plt.xlim(0.4, len(labels) + 0.6)
        plt.xticks(list(range(1, len(labels) + 1)), [plain(_tick(label)) for label in labels])
        plt.xlabel("steps")
        plt.title(TITLE)
