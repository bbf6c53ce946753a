"""The dashboard's own ``s`` on the demo, as a user presses it: seconds and restarts to the verdict.

``specmon sweep --demo`` is timed by ``bench_demo_default.py``; this times the dashboard's sweep
(the demo's own time scale and start-up, the default steps), headless at 80×24 through Textual's
pilot: the first start, ``s``, enter (the default steps), ``y``, then until the verdict panel.

    python bench/bench_demo_dashboard_sweep.py --seeds 1-3 [--startup-seconds S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specmon.commands.demo import build_demo_app, register
from specmon.control.demo import stop_demo_server
from specmon.ui.screens.sweep_screen import SweepConfirmScreen, SweepScreen
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen


async def _until(pilot: object, test: object, limit_s: float) -> bool:
    end = time.monotonic() + limit_s
    while time.monotonic() < end:
        if test():  # type: ignore[operator]
            return True
        await asyncio.sleep(0.2)  # (not pilot.pause: it gives up on a loaded machine)
    return False


async def one(seed: int, startup: float | None, limit_s: float) -> str:
    folder = Path(tempfile.mkdtemp(prefix="bench-demo-s-"))
    p = argparse.ArgumentParser(prog="specmon")
    register(p.add_subparsers())
    argv = ["demo", "--seed", str(seed), "--dir", str(folder)]
    if startup is not None:
        argv += ["--startup-seconds", f"{startup:g}"]
    app, setup = build_demo_app(p.parse_args(argv), folder.resolve(), user_themes=None, export_dir=folder)
    c = setup.controller
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            steps = [
                (lambda: c.progress is not None and not c.busy, "s", 120, "the first start"),
                (lambda: isinstance(app.screen, SweepScreen), "enter", 30, "the step list"),
                (lambda: isinstance(app.screen, SweepConfirmScreen), "y", 30, "the confirmation"),
            ]
            for test, key, limit, what in steps:
                if not await _until(pilot, test, limit):
                    return f"seed {seed}: {what} did not come within {limit} s"
                await pilot.pause(1.0)  # the screen mounted and focused, as a user's eye would wait
                await pilot.press(key)
            t0 = time.monotonic()
            done = await _until(pilot, lambda: isinstance(app.screen, SweepVerdictScreen), limit_s)
            seconds = time.monotonic() - t0
            result = app.sweeper.result
            won = result.winner() if result is not None else None
            restarts = result.restarts if result is not None else "?"
            named = f"winner {won[0]} steps" if won is not None else "no winner"
            return f"seed {seed}: {'verdict' if done else 'no verdict'} after {seconds:.0f} s, {restarts} restarts: {named}"
    finally:
        await asyncio.wait_for(stop_demo_server(c, lambda _: None), 30)
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    # A home of its own: a sweep stopped earlier on this machine would be offered to continue (s),
    # and this measures a sweep from its start; restart times learnt here stay here too.
    home = tempfile.mkdtemp(prefix="bench-demo-home-")
    for var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
        os.environ[var] = str(Path(home) / var.lower())
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1-3")
    ap.add_argument("--startup-seconds", type=float, default=None)
    ap.add_argument("--limit", type=float, default=900.0, help="seconds to wait for the verdict")
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition("-")
    for seed in range(int(lo), int(hi or lo) + 1):
        print(asyncio.run(one(seed, a.startup_seconds, a.limit)), flush=True)


if __name__ == "__main__":
    main()
