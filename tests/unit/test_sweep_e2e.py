"""A sweep end to end against the simulated server: real restarts (managed profile, LocalRunner),
a local tail of its log, the load driver over HTTP, an interruption and a resume.

Every server is started and stopped through the control layer's own commands
(by the PID it recorded); a leftover is stopped by that PID at the end.
"""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import pytest

from specmon.control.launch import LaunchProfile
from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver
from specmon.control.runner import LocalRunner
from specmon.experiment.plan_restarter import LogFollower, PlanRestarter
from specmon.experiment.sweep_plan import SweepEvent, SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.session import Session
from specmon.model.stopping import StoppingRule
from specmon.output.recording import RecordedIngest, Recorder
from specmon.output.recording_reader import read_recording
from specmon.output.recording_replay import replay_recording
from specmon.output.report import load_report, render_report
from specmon.sources.local import LocalTailSource
from tests.support.net import free_port

TIME_SCALE = 200


def sim_profile(tmp: Path, port: int) -> LaunchProfile:
    server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
              "--time-scale", str(TIME_SCALE), "--startup-seconds", "0.3", "--seed", "3"]
    return LaunchProfile(mode="managed", engine="sglang", argv=[*server, "--steps", "{steps}"],
                         nospec_argv=[*server, "--steps", "0"], log=str(tmp / "sim_{steps}.log"),
                         pidfile=str(tmp / "sim.pid"), port=port, cwd=str(tmp),
                         health_url="http://127.0.0.1:{port}/health", steps_min=0, steps_max=8,
                         start_timeout_s=60, stop_grace_s=5, stop_signal="TERM")


class Bench:
    """The real-world parts of one specmon process running a sweep."""

    def __init__(self, tmp: Path, port: int, recording: Path) -> None:
        self.session = Session()
        self.recorder = Recorder(recording, meta={"command": "sweep"})
        self.ingest = RecordedIngest(self.session, self.recorder)
        self.follower = LogFollower(self.ingest, lambda p, end: LocalTailSource(
            p, lines=0 if end else None, poll_interval=0.05))
        self.shown: list[str] = []
        self.restarter = PlanRestarter(sim_profile(tmp, port), LocalRunner(), follower=self.follower,
                                       show=self.shown.append, ready_poll_s=0.1)
        self.load = BackgroundLoad(LoadDriver(LoadConfig(f"http://127.0.0.1:{port}", max_tokens=512,
                                                         time_scale=TIME_SCALE, request_timeout_s=60)))
        self.events: list[SweepEvent] = []

    async def close(self) -> None:
        await self.load.stop()
        await self.follower.stop()
        self.ingest.close()
        self.recorder.close()


def stop_leftover(pidfile: Path) -> None:
    """Stop a server a failed test left behind, by the PID the start script recorded."""
    try:
        pid = int(pidfile.read_text().split()[0])
        os.killpg(pid, signal.SIGKILL)
    except (OSError, ValueError, IndexError):
        pass


async def test_sweep_against_the_simulated_server_with_resume(tmp_path: Path) -> None:
    port = free_port()
    state = tmp_path / "state.json"
    plan = SweepPlan((0, 2), rule=StoppingRule(min_samples=40, max_samples=240, looks=3), max_minutes=2.0,
                     settle=2, stall_s=30.0, attach_s=30.0, poll_s=0.1)
    first = Bench(tmp_path, port, tmp_path / "rec1.jsonl")
    try:
        sweep = Sweep(plan, session=first.session, restart=first.restarter, load=first.load, state_path=state,
                      recorder=first.recorder)

        def on_event(ev: SweepEvent) -> None:
            first.events.append(ev)
            if ev.kind == "done":
                sweep.request_stop()  # "Ctrl-C" once the baseline is measured

        sweep._on_event = on_event
        partial = await sweep.run()
        assert [c.status for c in partial.cells] == ["done", "pending"]
        baseline_n = partial.cells[0].n
        assert baseline_n >= 40
        # The commands were shown before they ran: stop, then a start of the simulated server.
        assert any("specmon.sim.server" in s and "--steps 0" in s for s in first.shown)
        assert any(s.strip().startswith("start: result=started") for s in first.shown)
        client = partial.cells[0].client
        assert client["requests"] > 0 and client["errors"] == 0
    finally:
        await first.close()

    # A new specmon process: new session, new follower; the server is still running from before.
    second = Bench(tmp_path, port, tmp_path / "rec2.jsonl")
    try:
        resumed = Sweep(plan, session=second.session, restart=second.restarter, load=second.load,
                        state_path=state, recorder=second.recorder, on_event=second.events.append)
        assert resumed.resumed
        result = await resumed.run()
    finally:
        await second.restarter.stop_server()
        await second.close()
        stop_leftover(tmp_path / "sim.pid")
    assert result.finished
    restarts = [e.text for e in second.events if e.kind == "restart"]
    assert restarts == ["restarting the server with 2 steps"]  # the baseline was not measured again
    assert result.cells[0].n == baseline_n
    doc = result.to_json()
    v = doc["verdict"]
    # On an idle machine 94.0 vs 88.8 tok/s, 2 steps best; on a loaded one the 200x simulator's log
    # rates are demand-limited (a millisecond between requests is a fifth of a simulated second) and
    # the two come out level, or the client and the log disagree (seen in CI at load 8). So which
    # setting wins is not asked, only that the verdict and its cross-check follow the numbers.
    by = {r["steps"]: r for r in doc["runs"]}
    best = max(by.values(), key=lambda r: r["throughput"]["mean"])
    assert v["best_steps"] == best["steps"]
    assert v["winner_steps"] == (best["steps"] if v["separated"] else None)
    assert v["client_best_steps"] in (0, 2)
    assert v["client_agrees"] is (v["client_best_steps"] == v["best_steps"])
    assert by[2]["accept_len"]["mean"] == pytest.approx(2.1, abs=0.15)
    assert by[0]["accept_len"] is None and by[0]["is_baseline"]
    # The stopped server's log and our recording tell the same story.
    assert (tmp_path / "sim_2.log").exists() and (tmp_path / "sim_0.log").exists()
    entries = list(read_recording(tmp_path / "rec2.jsonl"))
    kinds = {e["type"] for e in entries}
    assert {"line", "record", "run", "restart", "verdict"} <= kinds
    assert [e["verdict"]["verdict"]["best_steps"] for e in entries if e["type"] == "verdict"] == [v["best_steps"]]
    replayed = replay_recording(tmp_path / "rec2.jsonl")
    assert any(r.config is not None and r.config.steps == 2 and len(r.throughput) for r in replayed.runs)
    md = render_report(load_report(tmp_path / "rec2.jsonl"), "markdown")
    assert "## Verdict" in md and "EAGLE3 2 steps" in md


async def test_a_server_that_will_not_start_fails_that_setting_only(tmp_path: Path) -> None:
    port = free_port()
    profile = sim_profile(tmp_path, port)
    broken = profile.model_copy(update={"argv": [sys.executable, "-m", "specmon.sim.server", "--log", "{log}",
                                                 "--port", "{port}", "--crash-on-start", "--startup-seconds", "0.3",
                                                 "--steps", "{steps}"]})
    bench = Bench(tmp_path, port, tmp_path / "rec.jsonl")
    bench.restarter.profile = broken
    plan = SweepPlan((2,), rule=StoppingRule(min_samples=40, max_samples=80, looks=2), max_minutes=1.0,
                     stall_s=20.0, attach_s=20.0, poll_s=0.1)
    try:
        result = await Sweep(plan, session=bench.session, restart=bench.restarter, load=bench.load).run()
    finally:
        await bench.close()
        stop_leftover(tmp_path / "sim.pid")
    cell = result.cells[0]
    assert cell.status == "failed" and cell.reason == "restart"
    assert "not ready (exited" in cell.text
    assert result.verdict is None


async def test_sweep_through_the_dashboards_restart_controller(tmp_path: Path) -> None:
    """The ``s`` key's wiring: the sweep restarts through RestartController, which re-points the log."""
    from specmon.control.restart_controller import RestartController
    from specmon.experiment.plan_restarter import controller_restarter

    port = free_port()
    bench = Bench(tmp_path, port, tmp_path / "rec.jsonl")
    controller = RestartController(
        sim_profile(tmp_path, port), LocalRunner(), host="localhost",
        make_source=lambda p, from_start: LocalTailSource(p, lines=None if from_start else 0, poll_interval=0.05),
        on_log_switch=lambda p, from_start: bench.follower.follow(p, from_end=not from_start), ready_poll_s=0.1)
    shown: list[str] = []
    plan = SweepPlan((0, 2), rule=StoppingRule(min_samples=40, max_samples=120, looks=2), max_minutes=2.0,
                     stall_s=30.0, attach_s=30.0, poll_s=0.1)
    try:
        result = await Sweep(plan, session=bench.session, restart=controller_restarter(controller, shown.append),
                             load=bench.load).run()
    finally:
        await bench.close()
        if controller.last_plan is not None:
            await LocalRunner().run(controller.last_plan.stop.command, controller.last_plan.stop.timeout_s)
        stop_leftover(tmp_path / "sim.pid")
    assert [c.status for c in result.cells] == ["done", "done"]
    assert len(shown) == 2 and "no speculation" in shown[0] and "2 steps" in shown[1]
    fastest = max(result.cells, key=lambda c: c.summary().mean)  # type: ignore[union-attr]
    assert result.verdict is not None and result.verdict.best is not None
    assert result.verdict.best.steps == fastest.steps
