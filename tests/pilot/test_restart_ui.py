"""Pilot and snapshot tests of the restart dialogs and the restart progress panel.

Screens and the panel are hosted either by a tiny app with the specmon theme
(snapshots: nothing else on screen can change them) or by the dashboard
itself (the flow ``r`` → dialog → confirmation). Runners here record every
command; the real commands run in ``test_restart_sim.py`` and ``test_demo.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App, ComposeResult
from textual.widgets import Input, Static

from specmon.control.launch import LaunchProfile
from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase, RestartProgress
from specmon.control.runner import LocalRunner, Result
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
from specmon.ui.screens.restart_dialog import MeasuredStep, RestartDialog, parse_steps
from specmon.ui.theming import load_themes, theme_folders
from specmon.ui.widgets.restart_progress import RestartProgressPanel, progress_bar
from tests.support.app_factory import StaticSource, header_text, source_app, wait_for
from tests.support.dialogs import crashed_view, loading_view
from tests.support.logtext import ready, server_args

SIZE = (110, 34)


def fixed_profile(**kw: object) -> LaunchProfile:
    """A profile with fixed paths: plans built from it look the same on every machine."""
    fields: dict[str, object] = dict(
        engine="sglang",
        argv=["python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5", "--tp", "8",
              "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "{steps}",
              "--speculative-num-draft-tokens", "{draft_tokens}", "--api-key", "s3cret", "--port", "{port}"],
        env={"NCCL_PROTO": "LL", "HF_TOKEN": "hf_abc"}, cwd="/srv/sglang",
        log="/srv/sglang/logs/sglang_{steps}step.log", pidfile="/run/specmon/sglang.pid", port=30000,
        ready_marker="The server is fired up and ready to roll!", steps_min=0,
        nospec_argv=["python3", "-m", "sglang.launch_server", "--model-path", "moonshotai/Kimi-K2.5"])
    fields.update(kw)
    return LaunchProfile.model_validate(fields)


class RecordingRunner:
    """LocalRunner that records every command it is asked to run."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self._local = LocalRunner()

    async def run(self, command: str, timeout: float) -> Result:
        self.calls.append(command)
        return await self._local.run(command, timeout)


class Host(App[None]):
    """A bare app with the specmon theme, for a screen or the panel alone."""

    def __init__(self, *, screen: Any = None, panel: RestartProgressPanel | None = None) -> None:
        super().__init__()
        self._screen = screen
        self._panel = panel
        self.results: list[object] = []
        self.animation_level = "none"

    def compose(self) -> ComposeResult:
        yield Static("the dashboard is here", id="bg")
        if self._panel is not None:
            yield self._panel

    def on_mount(self) -> None:
        themes, _ = load_themes(theme_folders(None))
        for theme in themes.values():
            self.register_theme(theme)
        self.theme = "specmon-dark"
        if self._screen is not None:
            self.push_screen(self._screen, callback=self.results.append)


# --------------------------------------------------------------------------- the step-count dialog


def test_parse_steps_accepts_only_plain_digits_in_range() -> None:
    assert parse_steps(" 2 ", 0, 16) == 2
    for bad, why in [("4; reboot", "not a whole number"), ("1.5", "not a whole number"), ("-1", "not a whole"),
                     ("+2", "not a whole"), ("0x10", "not a whole"), ("17", "out of range"), ("", "type a step"),
                     ("２", "not a whole"), ("2 3", "not a whole")]:
        try:
            parse_steps(bad, 0, 16)
        except ValueError as exc:
            assert why in str(exc), (bad, str(exc))
        else:
            raise AssertionError(f"accepted {bad!r}")


async def test_dialog_rejects_bad_input_and_accepts_a_valid_count() -> None:
    dialog = RestartDialog(host="gpu-box", lo=1, hi=16, current_steps=1, rule="draft tokens = steps+1")
    app = Host(screen=dialog)
    async with app.run_test(size=SIZE) as pilot:
        error = dialog.query_one("#restart-error", Static)
        for bad, why in [("4; reboot", "not a whole number"), ("1.5", "not a whole number"),
                         ("99", "out of range"), ("0", "out of range")]:
            dialog.query_one(Input).value = ""
            await pilot.press(*bad)
            await pilot.press("enter")
            await pilot.pause()
            assert app.screen is dialog, bad  # still open: nothing chosen
            assert why in str(error.render()), (bad, str(error.render()))
        dialog.query_one(Input).value = ""
        await pilot.press("1")
        await pilot.pause()
        assert "same as now" in str(error.render())
        dialog.query_one(Input).value = ""
        await pilot.press("2", "enter")
        await pilot.pause()
        assert app.screen is not dialog
        assert app.results == [2]  # the count is handed back once: as the screen's result


async def test_dialog_shows_what_was_measured_and_escape_cancels() -> None:
    rows = [MeasuredStep(0, "no speculation", 240, "88.8 ± 1.2", "baseline", "1.00", is_baseline=True),
            MeasuredStep(1, "EAGLE3 1 step", 200, "85.1 ± 1.5", "-4.2%", "1.61"),
            MeasuredStep(2, "EAGLE3 2 steps", 180, "94.0 ± 1.4", "+5.9%", "2.10", current=True, best=True,
                         mark="☆")]
    dialog = RestartDialog(host="gpu-box", lo=0, hi=16, current_steps=2, measured=rows)
    app = Host(screen=dialog)
    async with app.run_test(size=SIZE) as pilot:
        text = str(dialog.query_one("#restart-measured", Static).render())
        assert "no speculation" in text and "EAGLE3 1 step" in text and "+5.9%" in text and "94.0 ± 1.4" in text
        # The verdict's mark (☆: leads, undecided), B, ▸: one slot each.
        assert "☆ ▸ EAGLE3 2 steps" in text and " B  no speculation" in text and "★" not in text
        assert "0 = no speculation" in str(dialog.query_one(".hint", Static).render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]


# --------------------------------------------------------------------------- the confirmation screen


async def test_confirm_screen_shows_the_exact_commands_and_host() -> None:
    runner = RecordingRunner()
    c = RestartController(fixed_profile(), runner, host="gpu-box")
    plan = c.plan_for(2)
    screen = ConfirmCommandsScreen(c, plan, now_steps=1)
    app = Host(screen=screen)
    async with app.run_test(size=SIZE) as pilot:
        shown = str(screen.query_one("#confirm-commands", Static).render())
        assert shown == plan.describe()
        assert plan.stop.display in shown and plan.start.display in shown and "gpu-box" in shown
        assert "s3cret" not in shown and "hf_abc" not in shown  # secrets redacted
        title = str(screen.query_one("#confirm-title", Static).render())
        assert title == "Restart on gpu-box: 1 step → 2 steps, 3 draft tokens"
        await pilot.press("x")
        await pilot.pause()
        exact = str(screen.query_one("#confirm-exact", Static).render())
        assert plan.start.command in exact and plan.stop.command in exact
        assert screen.text == plan.describe(exact=True)  # what the screen holds is what it shows
        await pilot.press("escape")
        await pilot.pause()
    assert app.results == [False] and runner.calls == []


async def test_enter_on_the_confirm_screen_cancels() -> None:
    """The focus starts on Cancel: an enter carried over from the dialog cannot run anything."""
    c = RestartController(fixed_profile(), RecordingRunner(), host="gpu-box")
    screen = ConfirmCommandsScreen(c, c.plan_for(3))
    app = Host(screen=screen)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("enter")
        await pilot.pause()
    assert app.results == [False]


async def test_y_confirms() -> None:
    c = RestartController(fixed_profile(), RecordingRunner(), host="gpu-box")
    screen = ConfirmCommandsScreen(c, c.plan_for(3))
    app = Host(screen=screen)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("y")
        await pilot.pause()
    assert app.results == [True]


# --------------------------------------------------------------------------- in the dashboard


def live_source() -> StaticSource:
    return StaticSource([[server_args(1), ready(1)]], name="/srv/sglang/logs/sglang_1step.log")


async def test_r_is_greyed_without_a_controller_and_in_read_only(isolated_home: Path) -> None:
    app = source_app(live_source())
    async with app.run_test(size=SIZE):
        assert app.check_action("restart", ()) is None
    flow = RestartFlow(RestartController(fixed_profile(), RecordingRunner(), host="gpu-box"))
    app = source_app(live_source(), controller=flow, read_only=True)
    async with app.run_test(size=SIZE):
        assert app.check_action("restart", ()) is None
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE):
        assert app.check_action("restart", ()) is True


# Keys typed before the dialog's input has the focus: on a busy host the dialog mounts late and
# keys typed right after ``r`` reach the screen; they go into the input (enter submits it), never
# lost (a CI pass lost them and waited). ``unfocus`` takes the focus away as before it took it.
@pytest.mark.parametrize(("typed", "unfocus"), [(("2", "enter"), False), (("3", "enter"), True),
                                                (("1", "2", "enter"), True)])
async def test_r_then_escape_on_the_commands_runs_nothing(isolated_home: Path, typed: tuple[str, ...],
                                                          unfocus: bool) -> None:
    runner = RecordingRunner()
    c = RestartController(fixed_profile(steps_max=12), runner, host="gpu-box")
    flow = RestartFlow(c)
    source = live_source()
    app = source_app(source, controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        await source.delivered.wait()
        await pilot.press("r")
        await wait_for(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog")
        dialog = app.screen
        assert dialog.current_steps == 1  # read from the log
        assert dialog.focused is dialog.query_one(Input)  # from its first frame
        if unfocus:
            dialog.set_focus(None)
        await pilot.press(*typed)
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the confirmation screen")
        plan = app.screen.plan
        assert plan.steps == int("".join(typed[:-1])) and plan.host == "gpu-box"
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmCommandsScreen), "back to the dashboard")
        assert any("cancelled: nothing was run" in e.text for e in app.feeder.session.events)
        assert not flow.panel.display or flow.panel.view is None
    assert runner.calls == []


async def test_crash_panel_offers_go_back_with_the_commands_first(isolated_home: Path, tmp_path: Path) -> None:
    """After a crash the panel shows why and the last lines; ``g`` opens the go-back confirmation."""
    from tests.support.restarting import (
        EXITED,
        STARTED,
        STOPPED,
        WAITING,
        ScriptedRunner,
    )

    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING, EXITED])
    c = RestartController(fixed_profile(), runner, host="gpu-box", current_steps=1, ready_poll_s=0.05)
    flow = RestartFlow(c)
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        flow.start_now(2)
        await wait_for(pilot, lambda: flow.panel.view is not None and flow.panel.view.failed, "the crash")
        await pilot.pause()
        text = str(flow.panel.render())
        assert "crashed during start-up" in text and "g: go back to 1 step" in text
        assert app.check_action("restart", ()) is True  # not busy any more
        await pilot.press("g")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the go-back confirmation")
        assert app.screen.plan.steps == 1 and "Go back on gpu-box" in str(
            app.screen.query_one("#confirm-title", Static).render())
        await pilot.press("escape")
        await pilot.pause()
    # Shown in the event log before it ran: the demo-style start logs its commands first.
    assert runner.kinds[:2] == ["specmon-stop", "specmon-start"]


async def test_r_is_greyed_while_a_restart_runs(isolated_home: Path) -> None:
    import asyncio

    gate = asyncio.Event()

    class Held:
        calls: list[str] = []

        async def run(self, command: str, timeout: float) -> Result:
            self.calls.append(command)
            await gate.wait()
            return Result(2, "specmon-stop result=refused reason=test\n", "")

    c = RestartController(fixed_profile(), Held(), host="gpu-box", current_steps=1)
    flow = RestartFlow(c)
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        flow.start_now(2)
        await wait_for(pilot, lambda: c.busy, "the restart to start")
        assert flow.unavailable_reason("restart") == "a restart is in progress"
        app._tick()
        assert app.check_action("restart", ()) is None  # greyed out while it runs
        assert "restart → 2 steps: stopping" in header_text(app)
        assert flow.panel.view is not None and flow.panel.view.phase is Phase.STOPPING
        gate.set()
        await wait_for(pilot, lambda: not c.busy, "the restart to end")
        assert flow.unavailable_reason("restart") is None and app.check_action("restart", ()) is True


# --------------------------------------------------------------------------- the panel


def test_progress_bar() -> None:
    assert progress_bar(0.5, 10) == "━━━━━─────"
    assert progress_bar(0.55, 10) == "━━━━━╸────"
    assert progress_bar(1.0, 10) == "━" * 10
    assert progress_bar(None, 10) == "─" * 10


async def test_loading_panel_text() -> None:
    panel = RestartProgressPanel()
    app = Host(panel=panel)
    async with app.run_test(size=SIZE) as pilot:
        panel.view = loading_view()
        await pilot.pause()
        text = str(panel.render())
        assert "restart → 2 steps, 3 draft tokens on gpu-box" in text and "elapsed 4m 42s" in text
        assert "✓ stopping 12s" in text and "✓ starting 37s" in text
        assert "▸ loading weights 29/64 3m 53s" in text and "· capturing CUDA graphs" in text
        assert " 45%" in text and "ETA ~" in text and "2 earlier restarts on gpu-box and the shard rate" in text
        assert panel.check_action("go_back", ()) is None and panel.check_action("dismiss", ()) is None


def with_panel(view: RestartProgress) -> Any:
    async def run_before(pilot: Any) -> None:
        panel = pilot.app.query_one(RestartProgressPanel)
        panel.view = view
        await pilot.pause()

    return run_before


def test_snapshot_loading_progress(snap_compare: Any) -> None:
    """Loading weights 29/64 with the phases done, the bar and an ETA from earlier restarts."""
    assert snap_compare(Host(panel=RestartProgressPanel()), terminal_size=(110, 12),
                        run_before=with_panel(loading_view()))


def test_snapshot_crashed(snap_compare: Any) -> None:
    """A crash while loading: the reason, the last log lines, the go-back key."""
    assert snap_compare(Host(panel=RestartProgressPanel()), terminal_size=(110, 20),
                        run_before=with_panel(crashed_view()))


def test_snapshot_confirmation(snap_compare: Any) -> None:
    """The exact stop and start commands and the host, secrets redacted, before anything runs."""
    c = RestartController(fixed_profile(), RecordingRunner(), host="gpu-box")
    screen = ConfirmCommandsScreen(c, c.plan_for(2), now_steps=1,
                                   eta_text="usually 11m 39s on gpu-box, from 2 earlier restarts")
    assert snap_compare(Host(screen=screen), terminal_size=(130, 30))


async def test_header_text_follows_the_running_restart(isolated_home: Path) -> None:
    import asyncio

    gate = asyncio.Event()

    class Held:
        async def run(self, command: str, timeout: float) -> Result:
            await gate.wait()
            return Result(2, "specmon-stop result=refused reason=test\n", "")

    c = RestartController(fixed_profile(), Held(), host="gpu-box", current_steps=1)
    flow = RestartFlow(c)
    assert flow.header_text() == "" and flow.header_state() is None
    app = source_app(live_source(), controller=flow)
    async with app.run_test(size=SIZE) as pilot:
        flow.start_now(2)
        await wait_for(pilot, lambda: c.busy, "the restart to start")
        state = flow.header_state()
        assert state is not None and state[0] == "restart → 2 steps: stopping"
        # The header says what the panel says: one view of the restart, not two.
        await wait_for(pilot, lambda: app.dashboard._header.view is not None
                       and app.dashboard._header.view.state_text == "restart → 2 steps: stopping", "the header")
        # Its time in the phase is the panel's (the restart's own wall clock, not the log's).
        assert app.dashboard._header.view.since.endswith("s") and app.dashboard._header.view.state_level == "busy"
        gate.set()
        await wait_for(pilot, lambda: not c.busy, "the restart to end")
        assert flow.header_text() == "" and flow.header_state() is None


async def test_the_flow_tells_the_app_with_past_tense_messages(isolated_home: Path) -> None:
    """``RestartFlow.Started`` then ``.Finished`` (with the failure) reach the app; ``.Logged`` lines land in the log."""
    from textual.message import Message

    from tests.support.restarting import EXITED, STARTED, STOPPED, WAITING, ScriptedRunner

    runner = ScriptedRunner({"specmon-stop": STOPPED, "specmon-start": STARTED}, [WAITING, EXITED])
    c = RestartController(fixed_profile(), runner, host="gpu-box", current_steps=1, ready_poll_s=0.05)
    flow = RestartFlow(c)
    app = source_app(live_source(), controller=flow)
    seen: dict[int, Message] = {}  # a bubbling message passes the panel, the screen and the app: once each

    def hook(message: Message) -> None:
        if isinstance(message, RestartFlow.Started | RestartFlow.Finished | RestartFlow.Logged):
            seen.setdefault(id(message), message)

    async with app.run_test(size=SIZE, message_hook=hook) as pilot:
        flow.start_now(2)
        await wait_for(pilot, lambda: any(isinstance(m, RestartFlow.Finished) for m in seen.values()),
                       "RestartFlow.Finished")
        await pilot.pause()
        messages = list(seen.values())
        kinds = [type(m).__name__ for m in messages if not isinstance(m, RestartFlow.Logged)]
        assert kinds == ["Started", "Finished"]
        started, finished = (m for m in messages if not isinstance(m, RestartFlow.Logged))
        assert isinstance(started, RestartFlow.Started) and started.plan.steps == 2
        assert isinstance(finished, RestartFlow.Finished)
        assert finished.progress is not None and finished.progress.failed
        logged = [m.text for m in messages if isinstance(m, RestartFlow.Logged)]
        assert any(t.startswith("restart to 2 steps") for t in logged)
        texts = [e.text for e in app.feeder.session.events]
        assert [t for t in texts if t in logged] == logged  # every line, in the order posted
        assert app.check_action("restart", ()) is True
