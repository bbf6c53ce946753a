"""The sweep's comparison as a picture in the terminal: tok/s ± its 95% interval per setting.

The verdict panel's ``p``: the same numbers as its table (each group's
:class:`~specmon.output.tables.SweepOutcome`), drawn with plotext as the HTML report draws them
with matplotlib: one column per setting in step order, a vertical bar for the interval and a
mark at the mean, the baseline as a line, one colour per group (concurrency, workload).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from textual.app import RenderResult
from textual.color import Color
from textual_plotext import PlotextPlot

from specmon.output.tables import OutcomeRow, SweepOutcome
from specmon.ui.literal import plain
from specmon.ui.widgets.throughput_plot import y_ticks

__all__ = ["ComparisonPlot", "settings_of"]

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


def round_up(value: float, intervals: int = 4) -> float:
    """A top for the axis at or above ``value``: a whole number of round steps (1, 2, 2.5 or 5 times a
    power of ten), about ``intervals`` of them (120 for 111, not 200: the differences stay visible)."""
    if value <= 0:
        return 1.0
    raw = value / max(1, intervals)
    exp = 10.0 ** math.floor(math.log10(raw))
    step = float(next(m * exp for m in (1, 2, 2.5, 5, 10) if m * exp >= raw - 1e-12))
    return math.ceil(value / step - 1e-9) * step


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
        top = max((r.tps_mean + (r.tps_half or 0.0) for g in self.groups for r in g.rows if r.tps_mean is not None),
                  default=0.0)
        if not labels or top <= 0:
            plt.title("nothing measured")
            return
        n = len(self.groups)
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
        ymax = round_up(top * 1.05, most)
        ticks = y_ticks(ymax, most)
        plt.ylim(0, ymax)
        plt.yticks(ticks, [f"{t:g}" for t in ticks])
        plt.xlim(0.4, len(labels) + 0.6)
        plt.xticks(list(range(1, len(labels) + 1)), [plain(_tick(label)) for label in labels])
        plt.xlabel("steps")
        plt.title("tok/s ± 95% CI per setting")
