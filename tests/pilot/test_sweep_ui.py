"""The dashboard's sweep (``s``), session recordings and ``--prometheus-port``, driven like a user would.

The sweep test runs the real simulated server (a real process) at a high time
scale with tiny budgets: ``s``, type ``0,2``, the commands of both restarts on
one screen, ``y``; the sweep restarts the server twice, measures, says its
verdict in the event log and writes a Markdown report.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
from pathlib import Path

import pytest

from specmon.commands.demo import build_demo_app, register
from specmon.control.counts import parse_step_list
from specmon.control.demo import stop_demo_server
from specmon.model.analysis import analyze
from specmon.model.stopping import StoppingRule
from specmon.output.recording import Recorder
from specmon.output.recording_reader import is_recording
from specmon.ui.flows.sweep import SweepFlow
from specmon.ui.screens.sweep_screen import (
    SweepConfirmScreen,
    SweepScreen,
    SweepStopScreen,
    sweep_progress_text,
)
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from tests.support.app_factory import (
    DATA,
    FIXED_NOW,
    StaticSource,
    build_app,
    options,
    source_app,
    wait_for,
)

SIZE = (120, 40)
LOG = DATA / "sweep" / "sim_eagle3_2step.log"


def demo_args(folder: Path, *extra: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="specmon")
    register(p.add_subparsers())
    return p.parse_args(["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5",
                         "--dir", str(folder), *extra])


def test_parse_step_list() -> None:
    assert parse_step_list("0,1,2,3,5", 0, 16) == (0, 1, 2, 3, 5)
    assert parse_step_list(" 2 , 0  4", 0, 16) == (2, 0, 4)
    for bad, why in (("", "type step counts"), ("1,,x", "empty item"), ("1,-2", "not a whole number"),
                     ("3,17", "out of range"), ("2,2", "twice"), ("1.5", "not a whole number")):
        with pytest.raises(ValueError, match=why):
            parse_step_list(bad, 0, 16)


def test_progress_text() -> None:
    snap = {"current": "2@1", "finished": False, "cells": [
        {"key": "0@1", "label": "no speculation", "status": "done", "samples": 40, "next_look": None, "mean": 88.8},
        {"key": "2@1", "label": "2 steps", "status": "active", "samples": 12, "next_look": 40, "mean": 90.0},
        {"key": "5@1", "label": "", "status": "pending", "samples": 0, "next_look": 40, "mean": None}]}
    text = sweep_progress_text(snap)
    assert text.startswith("sweep 1/3 settings")
    assert "measuring 2 steps: 12 samples, next look at 40" in text
    assert "done: no speculation 88.8 tok/s" in text


async def test_s_is_greyed_without_a_controller(isolated_home: Path) -> None:
    app = source_app(StaticSource([["x"]]))
    async with app.run_test(size=SIZE) as pilot:
        assert app.sweeper is None
        assert app.check_action("sweep", ()) is None
        await pilot.press("s")
        await pilot.pause()
        assert not isinstance(app.screen, SweepScreen)


async def test_sweep_from_the_dashboard_writes_a_report(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    exports = tmp_path / "exports"
    exports.mkdir()
    args = demo_args(folder)
    folder.mkdir()
    rule = StoppingRule(looks=1, min_samples=10, max_samples=10)

    recording = tmp_path / "demo.jsonl"
    recorder = Recorder(recording, meta={"command": "demo"})
    app, setup = build_demo_app(args, folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None, export_dir=exports, recorder=recorder,
                                sweeper=None)
    # Tiny budgets: ten samples per setting.
    assert isinstance(app.sweeper, SweepFlow)
    # One launch per setting (--order given): this test is about the flow, not the launch design.
    app.sweeper.plan_options.update(rule=rule, max_minutes=0.5, poll_s=0.05, settle=1, stall_s=20.0,
                                    attach_s=20.0, order="given")
    c = setup.controller
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            assert app.check_action("sweep", ()) is True
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the step list")
            steps = app.screen.query_one("#sweep-steps")
            assert steps.value == "0,1,2,5,10"
            steps.value = "0,2"
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands")
            shown = app.screen.text
            assert "no speculation" in shown and "2 steps" in shown and shown.count("start:") == 2
            assert app.sweeper.sweep is None  # nothing runs before the confirmation
            await pilot.press("y")
            # (On a loaded machine the tiny sweep may run to its end before the next look.)
            await wait_for(pilot, lambda: app.sweeper.running or app.sweeper.result is not None,
                           "the sweep to start")
            if app.sweeper.running:
                assert app.check_action("restart", ()) is None  # r greyed while the sweep runs
                assert app.check_action("sweep", ()) is True  # s offers to stop it
                await pilot.press("s")
                # If the sweep ends first, the verdict replaces the (moot) offer.
                await wait_for(pilot, lambda: isinstance(app.screen, SweepStopScreen) or not app.sweeper.running,
                               "the stop offer")
                if isinstance(app.screen, SweepStopScreen):
                    await pilot.press("escape")  # keep going
            await wait_for(pilot, lambda: app.sweeper.report_path is not None or any(
                "report not written" in e.text or "sweep failed" in e.text for e in app.feeder.session.events),
                "the sweep to end and its report", rounds=3000)
            result = app.sweeper.result
            assert result is not None and result.finished
            assert {cell.steps for cell in result.cells if cell.status == "done"} == {0, 2}
            # (The event log's lines travel as messages: on a loaded machine they may trail the report.)
            await wait_for(pilot, lambda: any(e.text.startswith("sweep finished: ") for e in app.feeder.session.events),
                           "the verdict in the event log")
            texts = [e.text for e in app.feeder.session.events]
            assert any("--steps 2" in t for t in texts)  # each restart's commands went to the event log
            report = app.sweeper.report_path
            assert report is not None and report.parent == exports
            body = report.read_text(encoding="utf-8")
            assert "## Verdict" in body and "## Configurations" in body
            outcome = app.sweeper.outcome
            assert result.verdict is not None and outcome is not None
            # (the report wraps its text at 80 columns and escapes Markdown: compared word by word)
            assert " ".join(outcome.sentence.split()) in " ".join(body.replace("\\", "").split())
            # Every start is in the report's list: the demo's first one too, and "1 step", not "1 steps".
            restarts = body.split("## Restarts", 1)[1]
            assert "first start → 1 step — ready" in restarts
            assert "sweep restart → no speculation — ready" in restarts and "sweep restart → 2 steps" in restarts
            # A row's details name the command the sweep ran for it.
            ran = app.controller.command_for(2)
            assert ran is not None and ran.startswith("the start command specmon ran for it") and "--steps 2" in ran
            # The end of the sweep is a panel (it stays until dismissed: test_sweep_end), with the report's path.
            await wait_for(pilot, lambda: app.sweeper.last_verdict is not None, "the verdict panel")
            panel = app.sweeper.last_verdict
            assert isinstance(panel, SweepVerdictScreen)
            assert str(report) in panel.text and outcome.headline in panel.text
            if app.screen is panel:  # (an escape meant for the stop offer may have closed it already)
                await pilot.press("escape")
            await wait_for(pilot, lambda: not isinstance(app.screen, SweepVerdictScreen), "the panel closed")
            await pilot.press("q")
        # Taken after quitting: the server logs on until then, and every line read is recorded.
        live = [(r.label, r.samples) for r in analyze(app.feeder.session.runs).rows]
    finally:
        await stop_demo_server(c, lambda _: None)
        recorder.close()
    # The recording replays to the same table (the log switches begin the same inputs).
    assert is_recording(recording)
    replay = build_app([recording])
    async with replay.run_test(size=SIZE):
        await replay.feeder.wait_finished()
        replayed = [(r.label, r.samples) for r in analyze(replay.feeder.session.runs).rows]
    assert replayed == live


async def test_watch_records_and_replay_reproduces_the_table(isolated_home: Path, tmp_path: Path) -> None:
    from specmon.ui.factories import watch_app

    log = tmp_path / "server.log"
    shutil.copy(LOG, log)
    recording = tmp_path / "rec.jsonl"
    recorder = Recorder(recording, meta={"command": "watch"})
    app = watch_app(log, options=options(), clock=lambda: FIXED_NOW, user_themes=None, recorder=recorder)
    total = sum(1 for _ in open(log, encoding="utf-8"))
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines >= total, "the whole log", rounds=1500)
        live = [(r.label, r.samples, r.throughput.mean if r.throughput else None)
                for r in analyze(app.feeder.session.runs).rows]
        assert any(e.text == f"recording to {recording}" for e in app.feeder.session.events)
        await pilot.press("q")
    assert recorder.closed
    replay = build_app([recording])
    async with replay.run_test(size=SIZE):
        await replay.feeder.wait_finished()
        replayed = [(r.label, r.samples, r.throughput.mean if r.throughput else None)
                    for r in analyze(replay.feeder.session.runs).rows]
    assert live and replayed == live


async def test_prometheus_endpoint_answers_while_the_dashboard_runs(isolated_home: Path) -> None:
    app = build_app([LOG], prometheus_port=0)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.exporter is not None, "the exporter")
        await app.feeder.wait_finished()
        reader, writer = await asyncio.open_connection("127.0.0.1", app.exporter.port)
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        await writer.drain()
        body = (await reader.read()).decode()
        writer.close()
        assert body.startswith(("HTTP/1.0 200", "HTTP/1.1 200"))
        assert "specmon_speculative_steps 2" in body
        exporter = app.exporter
    # Closed with the app: the port no longer answers.
    assert app.exporter is None and exporter._server is None


async def test_second_s_stops_the_sweep(isolated_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "demo"
    folder.mkdir()
    app, setup = build_demo_app(demo_args(folder), folder.resolve(), options=options(), clock=lambda: FIXED_NOW,
                                user_themes=None, export_dir=tmp_path)
    app.sweeper.plan_options.update(rule=StoppingRule(looks=1, min_samples=10, max_samples=5000), max_minutes=5.0,
                                    poll_s=0.05, settle=1, stall_s=20.0, attach_s=20.0, order="given")
    c = setup.controller
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(pilot, lambda: c.progress is not None and not c.busy, "the first start", rounds=1500)
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepScreen), "the step list")
            app.screen.query_one("#sweep-steps").value = "0,3"
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepConfirmScreen), "the commands")
            await pilot.press("y")
            sweep = None

            def measuring() -> bool:
                nonlocal sweep
                sweep = app.sweeper.sweep
                return sweep is not None and sweep.current is not None and sweep.current.n > 0

            await wait_for(pilot, measuring, "the first setting to be measured", rounds=1500)
            await pilot.press("s")
            await wait_for(pilot, lambda: isinstance(app.screen, SweepStopScreen), "the stop offer")
            await pilot.press("y")
            await wait_for(pilot, lambda: app.sweeper.report_path is not None, "the stopped sweep's report",
                           rounds=1500)
            result = app.sweeper.result
            assert result is not None and not result.finished
            assert any(cell.status == "pending" for cell in result.cells)  # 3 steps never ran
            assert any(e.text.startswith("sweep stopped: ") for e in app.feeder.session.events)
            assert not app.sweeper.running and app.check_action("restart", ()) is True
            await pilot.press("q")
    finally:
        await stop_demo_server(c, lambda _: None)


def test_session_options_on_the_commands() -> None:
    from specmon.cli import build_parser

    parser = build_parser()
    for argv in (["watch", "x.log"], ["connect", "host", "--log", "/x.log"], ["demo"]):
        args = parser.parse_args([*argv, "--prometheus-port", "9400", "--no-record"])
        assert (args.prometheus_port, args.no_record) == (9400, True)
        args = parser.parse_args([*argv, "--record", "/tmp/r.jsonl"])
        assert (args.record, args.no_record, args.prometheus_port) == ("/tmp/r.jsonl", False, None)
    args = parser.parse_args(["replay", "a.jsonl", "--prometheus-port", "0"])
    assert args.prometheus_port == 0
    with pytest.raises(SystemExit):
        parser.parse_args(["watch", "x.log", "--record", "r.jsonl", "--no-record"])
    with pytest.raises(SystemExit):
        parser.parse_args(["watch", "x.log", "--prometheus-port", "70000"])


def test_replay_takes_the_recorded_warmup(tmp_path: Path) -> None:
    from specmon.commands.dashboard import _recorded_warmup

    path = tmp_path / "rec.jsonl"
    with Recorder(path, warmup=3) as recorder:
        recorder.line("x.log", 1, "a line")  # a recording of nothing but meta is not kept
    assert _recorded_warmup(str(path)) == 3
    assert _recorded_warmup(str(LOG)) is None  # a plain log: the engine's default
