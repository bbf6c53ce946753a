"""``specmon demo``: the newcomer's path, for real (the simulated server is a real process).

The main test drives the dashboard headless exactly as the README tells a
newcomer: wait for the first start, press ``r``, type 2, confirm, watch the
weights load, see the new row. Another checks that the server is stopped by
its pidfile when specmon fails. Start-ups are short and the simulated clock
fast; every server is stopped in a finally, by its PID if all else fails.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest

from specmon.commands.demo import build_demo_app, register, run_demo
from specmon.control.demo import DEMO_HOST, demo_profile, stop_demo_server
from specmon.control.launch import build_plan
from specmon.control.restart_progress import Phase
from specmon.model.session import ServerState
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.restart_dialog import RestartDialog
from tests.support.app_factory import FIXED_NOW, options, wait_for

SIZE = (110, 34)


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="specmon")
    register(p.add_subparsers())
    return p.parse_args(["demo", *argv])


def fast(folder: Path, *extra: str) -> argparse.Namespace:
    return parse("--time-scale", "50", "--startup-seconds", "1.5", "--seed", "7", "--dir", str(folder), *extra)


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(") ", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def pid_in(folder: Path) -> int | None:
    try:
        return int((folder / "sim.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def kill_left_over(folder: Path) -> None:
    pid = pid_in(folder)
    if pid is not None and alive(pid):
        os.kill(pid, signal.SIGKILL)


def test_command_line() -> None:
    args = parse()
    assert (args.steps, args.time_scale, args.dir) == (1, None, None)
    for bad in (["--steps", "17"], ["--steps", "1.5"], ["--time-scale", "0"], ["--startup-seconds", "-1"]):
        with pytest.raises(SystemExit):
            parse(*bad)


def test_demo_profile_plans(tmp_path: Path) -> None:
    prof = demo_profile(tmp_path, time_scale=10, startup_s=8, seed=3)
    plan = build_plan(prof, 2, host=DEMO_HOST)
    assert plan.log == str(tmp_path / "sim_2step.log")
    assert plan.argv is not None and plan.argv[-6:] == ("--steps", "2", "--draft-tokens", "3", "--topk", "1")
    tree = build_plan(prof, 2, host=DEMO_HOST, dims={"topk": 4, "draft_tokens": 6})  # a sweep's dimensions
    assert tree.argv is not None and tree.argv[-6:] == ("--steps", "2", "--draft-tokens", "6", "--topk", "4")
    assert "--seed" in plan.argv and "--append" in plan.argv
    nospec = build_plan(prof, 0)
    assert nospec.argv is not None and nospec.argv[-2:] == ("--steps", "0") and "--draft-tokens" not in nospec.argv
    assert nospec.log == str(tmp_path / "sim_0step.log")


async def test_newcomer_restarts_to_two_steps_and_sees_a_new_row(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    app, setup = build_demo_app(fast(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None)
    c = setup.controller
    session = app.feeder.session
    try:
        async with app.run_test(size=SIZE) as pilot:
            # The first start: its commands in the event log, then the server up at 1 step.
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            assert c.progress is not None and c.progress.phase is Phase.READY, c.progress.message
            texts = [e.text for e in session.events]
            assert any(t.strip().startswith("start: cd ") and "--steps 1 " in t for t in texts)
            assert any(t.strip().startswith("stop:") for t in texts)
            await wait_for(pilot, lambda: (r := session.current) is not None and r.config is not None
                           and r.config.steps == 1 and len(r.throughput) > 0, "counted samples at 1 step",
                           rounds=1500)
            first_pid = pid_in(folder)
            app.refresh_now()

            await pilot.press("r")
            await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
            assert app.screen.current_steps == 1
            assert any(m.label == "EAGLE3 1 step" for m in app.screen.measured)
            await pilot.press("2", "enter")
            await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands")
            shown = app.screen.text
            assert "--steps 2 --draft-tokens 3" in shown and str(folder.resolve() / "sim_2step.log") in shown
            # Loading progress is on screen while the weights load: every view the panel is given
            # is kept, so a loading phase shorter than a poll of a busy machine is seen too; and
            # restart is greyed out at that moment.
            loading: list[bool | None] = []

            def shown(v: Any) -> None:
                if v is not None and v.load_progress is not None and v.phase is Phase.LOADING:
                    loading.append(app.check_action("restart", ()))

            app.watch(app.controller.panel, "view", shown, init=False)
            await pilot.press("y")
            await wait_for(pilot, lambda: bool(loading), "loading progress", rounds=1500)
            assert loading[0] is None  # greyed out while it runs
            await wait_for(pilot, lambda: not c.busy, "the restart to end", rounds=1500)
            final = c.progress
            assert final is not None and final.phase is Phase.READY, (final.message, final.last_lines)
            assert [p for p, _ in final.done] == [Phase.STOPPING, Phase.STARTING, Phase.LOADING, Phase.CAPTURING]

            await wait_for(pilot, lambda: (r := session.current) is not None and r.config is not None
                           and r.config.steps == 2 and r.state is ServerState.SERVING and len(r.throughput) > 0,
                           "counted samples at 2 steps", rounds=1500)
            app.refresh_now()
            labels = [row.label for row in app.builder.table(session).rows]
            assert "EAGLE3 1 step" in labels and "EAGLE3 2 steps" in labels
            assert app.feeder.source.name == str(folder.resolve() / "sim_2step.log")
            second_pid = pid_in(folder)
            assert second_pid is not None and second_pid != first_pid and not alive(first_pid or 0)
            # The controller's messages reach the event log on the app's next tick: wait for it.
            await wait_for(pilot, lambda: any("ready: 2 steps, 3 draft tokens" in e.text for e in session.events),
                           "the ready message in the event log", rounds=1500)
            await pilot.press("q")
        outcome = await stop_demo_server(c, lambda _: None)
        assert outcome is not None and "result=stopped" in outcome
        assert not alive(second_pid)
    finally:
        kill_left_over(folder)


def test_server_is_stopped_when_specmon_fails(isolated_home: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """specmon dies with the server up: the finally stops it by its pidfile; a temp folder is removed."""
    folder = tmp_path / "demo"
    seen: dict[str, Any] = {}

    def run_app(app: Any) -> None:
        async def drive() -> None:
            async with app.run_test(size=SIZE) as pilot:
                c = app.controller.controller
                await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start",
                               rounds=1500)
                seen["pid"] = pid_in(folder)
                raise RuntimeError("specmon crashed")

        asyncio.run(drive())

    try:
        with pytest.raises(RuntimeError, match="specmon crashed"):
            run_demo(fast(folder), run_app, options=options(), clock=lambda: FIXED_NOW, user_themes=None)
        pid = seen.get("pid")
        assert pid is not None and not alive(pid)
        err = capsys.readouterr().err
        assert "stop:  SIGTERM the server recorded in" in err and "result=stopped" in err
        assert folder.exists()  # --dir given: kept
    finally:
        kill_left_over(folder)


def readme_tour_keys() -> list[str]:
    """The keys of the README's demo tour, in order, as the README gives them (``Press `r`, ...``)."""
    import re

    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    start = readme.index("Press `r`")
    sentence = readme[start:readme.index("\n\n", start)]
    keys: list[str] = []
    for token in re.findall(r"`([^`]+)`", sentence):
        keys.extend([token] if len(token) == 1 or token.isalpha() else list(token))  # `12`: typed key by key
    return keys


async def test_the_readme_tour_keys_restart_the_demo_as_it_says(isolated_home: Path, tmp_path: Path) -> None:
    """The README's key sequence, pressed as written (one settle between keys, as a person types),
    brings the 2-step row; then its last key quits. "r, 2, y" left `2y` in the field."""
    keys = readme_tour_keys()
    assert keys and keys[-1] == "q", keys  # the tour ends by quitting; the rest is pressed as written
    folder = tmp_path / "demo"
    folder.mkdir()
    app, setup = build_demo_app(fast(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None)
    c = setup.controller
    session = app.feeder.session
    try:
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            for key in keys[:-1]:
                await pilot.press(key)
                for _ in range(20):  # let the screen the key opens mount before the next key
                    await pilot.pause(0.02)
            await wait_for(pilot, lambda: (r := session.current) is not None and r.config is not None
                           and r.config.steps == 2 and len(r.throughput) > 0,
                           f"the 2-step row after the README's keys {keys[:-1]}", rounds=1500)
            # The restart ends when the host says the server is ready; its decode lines can arrive
            # before that look does on a loaded machine, and q while a restart runs rightly asks
            # first (CI, 2026-12-04). The README's q comes once the panel says ready, as a person sees it.
            await wait_for(pilot, lambda: not c.busy, "the restart's end (the panel says ready)", rounds=1500)
            assert c.progress is not None and c.progress.phase is Phase.READY, c.progress
            await pilot.press(keys[-1])
            await wait_for(pilot, lambda: not app.is_running, "q to quit", rounds=500)
    finally:
        kill_left_over(folder)
