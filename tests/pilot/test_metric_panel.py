"""A metric panel's texts follow its width, whenever the width arrives (not only at the next view).

The two snapshots that differed from run to run (``max 3 = steps + 1`` instead of
``... + bonus token``; a panel without its window count) had a view shown before the
first layout had given the panel its width: the texts were fitted to no width, and
only a later :meth:`MetricPanel.show` (the next 4 Hz tick, if it came before the
snapshot) fixed them.
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.content import Content
from textual.widgets import Static

from specmon.ui.views import MetricView
from specmon.ui.widgets.metric_panel import MetricPanel

VIEW = MetricView(key="accept_len", title="accept length", unit="tokens/step", decimals=2, current=2.31,
                  mean=2.28, window=20, series=(2.1, 2.3, 2.31), ceiling=3.0)


class PanelApp(App[None]):
    CSS = "MetricPanel { width: 40; height: 5; }"

    def compose(self) -> ComposeResult:
        yield MetricPanel("accept_len", "accept length", id="panel")

    def on_mount(self) -> None:
        # As the dashboard's first tick may: before the layout has sized the panel.
        self.query_one(MetricPanel).show(VIEW, sparkline=True)


def texts(app: PanelApp) -> tuple[str, str]:
    """The value line and the delta line, as plain text."""
    value, delta = (app.query_one(f"#panel .{name}", Static).content for name in ("value", "delta"))
    return (value.plain if isinstance(value, Content) else str(value),
            delta.plain if isinstance(delta, Content) else str(delta))


async def test_texts_are_fitted_to_the_width_the_layout_gives() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        value, delta = texts(app)
        assert delta == "max 3 = steps + bonus token"
        assert value == "2.31 /3  mean 2.28 (20)"


async def test_a_narrower_panel_gets_the_short_forms_without_a_new_view() -> None:
    app = PanelApp()
    async with app.run_test(size=(80, 10)) as pilot:
        await pilot.pause()
        app.query_one(MetricPanel).styles.width = 20
        await pilot.pause()
        value, delta = texts(app)
        assert delta == "max 3 = steps + 1"
        assert value == "2.31 /3  mean 2.28"
        app.query_one(MetricPanel).styles.width = 40
        await pilot.pause()
        assert texts(app) == ("2.31 /3  mean 2.28 (20)", "max 3 = steps + bonus token")
