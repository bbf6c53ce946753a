"""A broken theme is skipped with one message, never a crash: at start and when ``t`` cycles
(issue 34, item 7). ``luminosity_spread = 1e308`` used to end the app with a traceback and exit 0."""

from __future__ import annotations

import os
from pathlib import Path

from textual.widgets._toast import Toast

from specmon.ui.factories import make_app
from tests.support.app_factory import FIXED_NOW, StaticSource, isolated_home, options, wait_for

__all__ = ["isolated_home"]

BASE = 'name = "{name}"\nprimary = "#3388ff"\n'


async def test_t_cycles_past_broken_themes_without_a_crash(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "themes"
    folder.mkdir()
    (folder / "huge.toml").write_text(BASE.format(name="huge") + "luminosity_spread = 1e308\n")
    (folder / "nan.toml").write_text(BASE.format(name="nan") + "text_alpha = nan\n")
    (folder / "css.toml").write_text(BASE.format(name="css") + '[variables]\nx = "red; } Screen { display: none"\n')
    os.mkfifo(folder / "fifo.toml")
    app = make_app(StaticSource([["x"]]), options=options(), clock=lambda: FIXED_NOW, user_themes=folder)
    async with app.run_test(size=(100, 30), notifications=True) as pilot:
        await wait_for(pilot, lambda: len(app.screen.query(Toast)) >= 4, "the theme messages")
        messages = [t.render().plain for t in app.screen.query(Toast)]
        assert len([m for m in messages if m.startswith("theme")]) == 4, messages  # one each
        assert set(app.specmon_themes) >= {"specmon-dark", "specmon-light"}
        assert not {"huge", "nan", "css"} & set(app.specmon_themes)
        seen = set()
        for _ in range(len(app.specmon_themes) + 1):
            await pilot.press("t")
            await pilot.pause()
            seen.add(app.theme)
        assert seen == set(app.specmon_themes) and app.is_running
