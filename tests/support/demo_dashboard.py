"""The dashboard on a new demo (the simulated server at 200x time) as the sweep panel's tests open it."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from specmon.commands.demo import build_demo_app, register
from tests.support.app_factory import FIXED_NOW, options


def demo_args(folder: Path) -> argparse.Namespace:
    """``specmon demo`` in ``folder``, fast and seeded, as its parser reads it."""
    p = argparse.ArgumentParser(prog="specmon")
    register(p.add_subparsers())
    return p.parse_args(["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5",
                         "--dir", str(folder)])


def demo_dashboard(tmp_path: Path, **app_kwargs: Any) -> tuple[Any, Any]:
    """``(app, setup)``: the dashboard on a demo in ``tmp_path/demo``, at a fixed clock, exporting to
    ``tmp_path``; ``app_kwargs`` go to the app as they are (``recorder``, ``sweeper``)."""
    folder = tmp_path / "demo"
    folder.mkdir()
    return build_demo_app(demo_args(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                          user_themes=None, export_dir=tmp_path, **app_kwargs)
