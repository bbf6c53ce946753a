"""Resizing the terminal gives the layout that starting at that size gives (issue 30, item 10)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.app_factory import settle, sweep_app

IDS = ("header", "metrics", "table-box", "runs", "verdict", "bottom", "plot", "side", "positions", "events")


def layout(app) -> dict[str, tuple[object, ...]]:  # type: ignore[no-untyped-def]
    screen = app.screen_stack[0]
    out: dict[str, tuple[object, ...]] = {"classes": tuple(sorted(c for c in screen.classes if c.startswith("-")))}
    for name in IDS:
        node = screen.query(f"#{name}")
        if node:
            w = node.first()
            out[name] = (w.display, tuple(w.region))
    return out


@pytest.mark.parametrize(("start", "end"), [((120, 40), (80, 24)), ((200, 60), (60, 15)), ((80, 24), (120, 40)),
                                            ((60, 15), (200, 60))])
async def test_resizing_gives_the_layout_of_starting_at_that_size(isolated_home: Path, start: tuple[int, int],
                                                                 end: tuple[int, int]) -> None:
    fresh = sweep_app()
    async with fresh.run_test(size=end) as pilot:
        await settle(fresh, pilot)
        await pilot.pause()
        want = layout(fresh)
    resized = sweep_app()
    async with resized.run_test(size=start) as pilot:
        await settle(resized, pilot)
        await pilot.resize_terminal(*end)
        await pilot.pause()
        await pilot.pause()
        assert layout(resized) == want
