"""``--read-only``: restart, sweep, load and export are refused where they run, and greyed with the reason.

Like nvitop's read-only tests: the dashboard is driven with the keys (``r``,
``s``, ``e``) and nothing may run — the runner records every command, the
export folder must stay empty — while the reason is shown. Then the control
layer is called directly, as if the UI were bypassed, and refuses too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.cli import main
from specmon.control.guard import ReadOnlyError, read_only, read_only_reason
from specmon.control.launch import LaunchProfile, build_plan
from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver
from specmon.control.restart_controller import RestartController, RestartError
from specmon.control.runner import Result, execute
from specmon.experiment.plan_restarter import PlanRestarter
from specmon.experiment.sweep_plan import SweepError, SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.session import Session
from specmon.model.stopping import StoppingRule
from specmon.ui.flows.restart import RestartFlow
from tests.support.app_factory import StaticSource, settle_source, source_app
from tests.support.logtext import campaign

SIZE = (110, 34)


class RecordingRunner:
    """Records every command it is asked to run (and runs none)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def run(self, command: str, timeout: float) -> Result:
        self.calls.append(command)
        raise AssertionError(f"a command ran in read-only mode: {command[:80]}")


def _profile(tmp_path: Path) -> LaunchProfile:
    return LaunchProfile(argv=["server", "--steps", "{steps}"], log=str(tmp_path / "s_{steps}.log"),
                         pidfile=str(tmp_path / "s.pid"), ready_marker="ready to roll", engine="sglang", port=30000)


def _notes(app: object) -> list[str]:
    return [n.message for n in app._notifications]  # type: ignore[attr-defined]


@pytest.fixture
def guard_off() -> object:
    """Every test leaves read-only mode as it found it (off)."""
    yield
    assert read_only_reason() is None


async def test_keys_run_nothing_and_say_why(isolated_home: Path, tmp_path: Path, guard_off: object) -> None:
    runner = RecordingRunner()
    flow = RestartFlow(RestartController(_profile(tmp_path), runner, host="gpu-box"))
    source = StaticSource([campaign(1, 90.0, 30)],
                          name=str(tmp_path / "s_1.log"))
    exports = tmp_path / "exports"
    exports.mkdir()
    with read_only():
        app = source_app(source, controller=flow, export_dir=exports)
        async with app.run_test(size=SIZE) as pilot:
            await settle_source(app, source, pilot)
            for owner, action in ((app, "restart"), (app, "sweep"), (app.dashboard, "export")):
                assert owner.check_action(action, ()) is None  # greyed in the footer and the palette
            await pilot.press("r", "s", "e")
            await pilot.pause()
            notes = _notes(app)
            assert any("read-only mode (--read-only): the server is not restarted" in n for n in notes)
            assert any("read-only mode (--read-only): nothing is written" in n for n in notes)
            # The export action itself refuses, even when called past the greyed key.
            app.dashboard.action_export()
            await pilot.pause()
            assert any("refusing to write the export: specmon runs read-only" in n for n in _notes(app))
            assert app.screen is app.screen_stack[0]  # no dialog opened
    assert runner.calls == []
    assert list(exports.iterdir()) == []


async def test_without_read_only_the_same_keys_are_offered(isolated_home: Path, tmp_path: Path) -> None:
    """The control for the test above: the same app offers the actions when not read-only."""
    flow = RestartFlow(RestartController(_profile(tmp_path), RecordingRunner(), host="gpu-box"))
    source = StaticSource([campaign(1, 90.0, 30)],
                          name=str(tmp_path / "s_1.log"))
    app = source_app(source, controller=flow, export_dir=tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        assert app.check_action("restart", ()) is True and app.dashboard.check_action("export", ()) is True


async def test_the_control_layer_refuses_when_the_ui_is_bypassed(tmp_path: Path, guard_off: object) -> None:
    runner = RecordingRunner()
    profile = _profile(tmp_path)
    with read_only():
        # The restart controller: even a plan built and shown does not run.
        c = RestartController(profile, runner)
        plan = c.plan_for(2)
        c.describe(plan)
        with pytest.raises(RestartError, match="refusing to restart the server: specmon runs read-only"):
            await c.run(plan)
        # The plan runner underneath it.
        with pytest.raises(ReadOnlyError, match="restart the server"):
            await execute(build_plan(profile, 2), runner)
        # A sweep.
        sweep = Sweep(SweepPlan((1, 2), (1,), "given", None, StoppingRule()), session=Session(),
                      restart=PlanRestarter(profile, runner, show=lambda _t: None), load=None,
                      state_path=str(tmp_path / "state.json"), resume=False)
        with pytest.raises(SweepError, match="run a sweep"):
            await sweep.run()
        # The load driver.
        load = BackgroundLoad(LoadDriver(LoadConfig("http://127.0.0.1:9")))
        with pytest.raises(ReadOnlyError, match="drive load"):
            await load.start(1)
        with pytest.raises(ReadOnlyError, match="drive load"):
            await LoadDriver(LoadConfig("http://127.0.0.1:9")).run(1, max_requests=1)
    assert runner.calls == []
    # Off again: the same plan is accepted by the runner (it is asked to run its first command).
    with pytest.raises(AssertionError, match="a command ran"):
        await execute(build_plan(profile, 2), runner)


@pytest.mark.parametrize("argv, words", [
    (["sweep", "--demo", "--read-only"], "cannot run with --read-only"),
    (["demo", "--read-only"], "cannot run with --read-only"),
])
def test_commands_that_only_act_refuse_read_only(argv: list[str], words: str, capsys: pytest.CaptureFixture[str],
                                                 guard_off: object) -> None:
    from specmon.control import guard

    try:
        assert main(argv) == 2
    finally:
        guard.set_read_only(None)
    assert words in capsys.readouterr().err


def test_report_output_is_refused_read_only(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            guard_off: object) -> None:
    from specmon.control import guard
    from specmon.output.recording import Recorder

    rec = tmp_path / "r.jsonl"
    with Recorder(rec, meta={"command": "test"}) as recorder:
        recorder.line("x.log", 1, "a line")  # a recording of nothing but meta is not kept
    out = tmp_path / "report.md"
    try:
        code = main(["report", str(rec), "-o", str(out), "--read-only"])
    finally:
        guard.set_read_only(None)
    assert code == 2 and not out.exists()
    assert "refusing to write" in capsys.readouterr().err


def test_every_command_takes_read_only_and_offers_it_only_where_it_means_something(
        capsys: pytest.CaptureFixture[str]) -> None:
    """Accepted everywhere (a script that passes it never breaks), offered in --help only by the
    commands that can restart, drive load or write an export."""
    from specmon.cli import READ_ONLY_MEANS_NOTHING, build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    for name, command in sub.choices.items():  # type: ignore[union-attr]
        assert any("--read-only" in a.option_strings for a in command._actions), name
        offered = "--read-only" in command.format_help()
        assert offered == (name not in (*READ_ONLY_MEANS_NOTHING, "sweep")), name
    assert {"watch", "connect", "replay", "report"} <= {n for n in sub.choices if n not in READ_ONLY_MEANS_NOTHING}
