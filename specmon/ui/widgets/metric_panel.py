"""One metric: the value now, the rolling mean, a sparkline, and the difference to the baseline."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.content import Content
from textual.widgets import Sparkline, Static

from specmon.ui.literal import literal, plain
from specmon.ui.views import MetricView

__all__ = ["MetricPanel", "delta_text", "value_text"]


def _num(x: float | None, decimals: int) -> str:
    return "—" if x is None else f"{x:.{decimals}f}"


def value_text(view: MetricView, width: int = 80) -> Content:
    """``94.3 tok/s  mean 93.8 (20)``; accept length shows its ceiling: ``2.31 /3``.

    The unit and the window size are left out when ``width`` is too small for them.
    """
    if view.current is None:
        return Content.assemble(("—", "bold"), "  ", (plain(view.note), "$text-muted"))
    now, mean = _num(view.current, view.decimals), _num(view.mean, view.decimals)
    suffix = f" /{view.ceiling:g}" if view.ceiling is not None else (f" {view.unit}" if view.unit else "")
    window = f" ({view.window})"
    if len(now) + len(suffix) + 7 + len(mean) + len(window) > width:
        window = ""
        if view.ceiling is None:
            suffix = ""
    parts: list[str | tuple[str, str]] = [(now, "bold"), (suffix, "$text-muted"), "  ",
                                          ("mean ", "$text-muted"), (mean, "bold"), (window, "$text-muted")]
    return Content.assemble(*parts)


def delta_text(view: MetricView, width: int) -> Content:
    """The comparison with the baseline, coloured by sign when it is outside the noise.

    ``+5.9% vs baseline 88.8 tok/s`` (or a shorter form when ``width`` is small);
    muted when the 95% interval of the difference includes zero or is not known yet.
    """
    if view.is_baseline:
        return Content.styled("this is the baseline", "$accent")
    if view.baseline is None:
        if view.key == "accept_len" and view.ceiling is not None:
            text = f"max {view.ceiling:g} = steps + bonus token"
            if len(text) > width:
                text = f"max {view.ceiling:g} = steps + 1"
            return Content.styled(text, "$text-muted")
        if view.baseline_without:
            # A baseline without speculation drafts nothing: there is no rate to compare with.
            text = f"baseline {plain(view.baseline_without)}: no drafts"
            if len(text) > width:
                text = "baseline has no drafts"
            return Content.styled(text, "$text-muted")
        return Content.styled("no baseline yet", "$text-muted")
    base = f"{view.baseline:.{view.decimals}f}"
    if view.delta is None:
        return Content.styled(f"baseline {base}" + (f" {view.unit}" if view.unit else ""), "$text-muted")
    if view.delta_is_pct:
        delta = f"{view.delta:+.1f}%"
    else:
        delta = f"{view.delta:+.{view.decimals}f}"
    if view.significant:
        style = "bold $success" if view.delta > 0 else "bold $error"
    else:
        style = "$text-muted"
    unit = f" {view.unit}" if view.unit and view.delta_is_pct else ""
    long = f" vs baseline {base}{unit}"
    tail = long if len(delta) + len(long) <= width else f" vs {base}"
    note = "" if view.significant else (" ~noise" if view.significant is False else " (no CI yet)")
    if len(delta) + len(tail) + len(note) > width:
        note = ""
    return Content.assemble((delta, style), (tail, "$text-muted"), (note, "$text-muted"))


class MetricPanel(Vertical):
    """A bordered panel for one metric; :meth:`show` takes a fresh view."""

    def __init__(self, key: str, title: str, *, id: str | None = None) -> None:
        super().__init__(id=id, classes="metric")
        self.key = key
        self.border_title = literal(title)
        self._view: MetricView | None = None
        self._width = 0

    def compose(self) -> ComposeResult:
        # Kept as attributes: a refresh may arrive while the app shuts down and queries fail.
        self._value = Static(Content.styled("—", "bold"), classes="value", markup=False)
        self._spark = Sparkline((), classes="spark")
        self._delta = Static("", classes="delta", markup=False)
        yield self._value
        yield self._spark
        yield self._delta

    def show(self, view: MetricView, *, sparkline: bool) -> None:
        """Display a view; the sparkline only moves when ``sparkline`` (it refreshes at a lower rate).

        Args:
            view: The metric's latest view.
            sparkline: Whether to update the sparkline this time.
        """
        old = self._view
        width = max(10, self.content_size.width)
        resized = width != self._width
        self._width = width
        if resized or old is None or (old.current, old.mean, old.window, old.note, old.ceiling) != (
                view.current, view.mean, view.window, view.note, view.ceiling):
            self._value.update(value_text(view, width))
        if resized or old is None or (old.baseline, old.delta, old.significant, old.is_baseline,
                                      old.ceiling, old.baseline_without) != (
                view.baseline, view.delta, view.significant, view.is_baseline, view.ceiling,
                view.baseline_without):
            self._delta.update(delta_text(view, width))
        if sparkline or old is None:
            spark = self._spark
            # A new tuple: reactives repaint only when the value compares unequal.
            spark.data = view.series
            # An empty sparkline draws a flat line that reads as "zero": show nothing instead.
            spark.visible = bool(view.series)
            # One cell per sample until the samples fill the width: a Sparkline stretches four
            # samples over the whole panel, which reads as a solid bar.
            spark.styles.width = len(view.series) if 0 < len(view.series) < width else "1fr"
        if old is None or old.source != view.source:
            self.border_subtitle = literal(view.source)  # which source the numbers come from (empty: the only one)
        self._view = view

    def on_resize(self) -> None:
        """Fit the texts to the new width now, not at the next :meth:`show`.

        A view shown before the first layout was fitted to no width (the short forms:
        no window size, ``steps + 1``); without this it stayed so until the view
        changed or the next tick, and what a snapshot showed depended on which came first.
        """
        view = self._view
        width = max(10, self.content_size.width)
        if view is None or width == self._width:
            return
        self._width = width
        self._value.update(value_text(view, width))
        self._delta.update(delta_text(view, width))
