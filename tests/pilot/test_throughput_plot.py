"""The throughput plot redraws when it is handed another view, and only then.

Its figure is kept while the view stays the same. The view was once recognised by its id,
which names one object only while that object lives: the plot now holds the view it drew.
"""

from __future__ import annotations

from textual.app import App, ComposeResult

from specmon.ui.views import PlotSegment, PlotView
from specmon.ui.widgets.throughput_plot import ThroughputPlot


class PlotApp(App[None]):
    CSS = "ThroughputPlot { width: 60; height: 12; }"

    def compose(self) -> ComposeResult:
        yield ThroughputPlot(id="plot")


def view(n: int) -> PlotView:
    return PlotView((PlotSegment(1, "run 1", tuple(float(n + i % 7) for i in range(40))),), None, 50.0 + n)


async def test_every_view_handed_over_is_drawn() -> None:
    app = PlotApp()
    async with app.run_test(size=(70, 14)) as pilot:
        plot = app.query_one(ThroughputPlot)
        await pilot.pause()
        n = 0
        for in_a_row in range(1, 40):
            # Views handed over faster than the plot draws (only the last is drawn): each frees
            # the one before, the drawn one first, and a later one may be given its memory.
            for _ in range(in_a_row):
                n += 1
                plot.show(view(n), force=True)
            before = plot.draws
            await pilot.pause()
            assert plot.draws == before + 1, in_a_row
        # Asked to render again with nothing new (Textual does, for reasons of its own): the kept figure.
        drawn = plot.draws
        plot.refresh()
        await pilot.pause()
        assert plot.draws == drawn
