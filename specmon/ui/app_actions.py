"""The dashboard's actions: what each key does, and why it cannot run now.

One list of actions (:mod:`specmon.ui.keys`) gives the keys, the footer, the help
and the command palette; here each action's body, the greying out
(``check_action``) and the sentence a key that cannot run says instead.
:class:`~specmon.ui.app.SpecmonApp` mixes this in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual import on
from textual.app import SystemCommand
from textual.screen import Screen
from textual.widgets import DataTable

from specmon import paths
from specmon.control.guard import ReadOnlyError, read_only_reason, refuse
from specmon.output.files import write_files_atomically
from specmon.output.tables import to_csv, to_json, to_markdown
from specmon.sources.replay import speed_text
from specmon.ui.base import SpecmonAppBase
from specmon.ui.flows import navigation
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.keys import ACTIONS, by_action
from specmon.ui.literal import markup_escaped

if TYPE_CHECKING:
    from specmon.ingest.live import Feeder
    from specmon.ui.app_options import DashboardController, DashboardOptions
    from specmon.ui.flows.sweep import SweepFlow
    from specmon.ui.views import SnapshotBuilder
    from specmon.ui.widgets.restart_progress import RestartProgressPanel

__all__ = ["AppActions"]

#: (action, palette title, palette help) for the command palette: the same source as the keys and help.
_COMMANDS = tuple((a.action, a.title, a.help) for a in ACTIONS if a.title is not None)
#: Textual's own palette entries that specmon has its own command for ("Theme" would be a second theme command).
_REPLACED_SYSTEM_COMMANDS = frozenset({"Theme", "Quit"})


#: Actions that say why when their key is pressed but they cannot run (escape/d with nothing to
#: dismiss stays silent: there is nothing to explain).
_SAY_WHY = frozenset(a.action for a in ACTIONS) - {"dismiss"}


class AppActions(SpecmonAppBase):
    """The key actions of :class:`~specmon.ui.app.SpecmonApp` and their availability (a mixin)."""

    if TYPE_CHECKING:
        # Set by SpecmonApp's constructor, or defined by its other parts.
        feeder: Feeder
        builder: SnapshotBuilder
        options: DashboardOptions
        clock: Callable[[], float]
        controller: RestartFlow | DashboardController | None
        restart_flow: RestartFlow | None
        sweeper: SweepFlow | None
        export_dir: Path | None
        last_export: list[Path]
        display_paused: bool
        _availability: tuple[object, ...]

        def _add_event(self, level: str, text: str, at: float | None = None) -> None: ...
        def _tick(self, *, sparklines: bool | None = None) -> None: ...
        def _maybe_analyze(self, *, force: bool = False) -> None: ...
        def _write_failed(self, sentence: str) -> None: ...
        async def _close_sources(self) -> None: ...


    def _refresh_availability(self) -> None:
        state = tuple(self.check_action(a, ()) for a, _, _ in _COMMANDS)
        if state != self._availability:
            self._availability = state
            self.refresh_bindings()

    def _unavailable_reason(self, action: str) -> str | None:
        """Why an action cannot run now, or None when it can."""
        rc = self.feeder.replay_clock
        if action == "mark_baseline":
            row = self.builder.row_for(self.feeder.session.current)
            if row is None or row.throughput is None:
                return "the current run has no counted throughput samples yet"
        elif action == "export":
            if self._read_only():
                return f"read-only mode ({self._read_only()}): nothing is written"
            if self.builder.analysis is None or not self.builder.analysis.rows:
                return "the run table is empty"
        elif action in ("faster", "slower"):
            if rc is None:
                return "only a replay has a speed"
            if self.feeder.done:
                return "the replay has finished"
            if action == "faster" and rc.speed is None:
                return "already at max speed"
            if action == "slower" and rc.speed is not None and rc.speed <= 0.25:
                return "already at the slowest speed"
        elif action in ("go_back", "dismiss"):
            panel = self._restart_panel()
            if panel is None:
                return "no restart ran in this session"
            if not panel.check_action(action, ()):
                return ("only after a failed restart with a previous configuration" if action == "go_back"
                        else "nothing to dismiss")
        elif action in ("restart", "sweep"):
            if self._read_only():
                return f"read-only mode ({self._read_only()}): the server is not restarted"
            if self.controller is None:
                if rc is not None:
                    return "a replay shows saved logs: there is no server to restart"
                return "no launch profile configured for this server"
            if self.sweeper is not None:
                if action == "sweep":
                    return self.sweeper.unavailable_reason()
                if self.sweeper.running:
                    return "a sweep is running (s offers to stop it)"
            return self.controller.unavailable_reason(action)
        return None

    def _read_only(self) -> str | None:
        """Why actions are off: the process-wide switch (``--read-only``) or these options."""
        return read_only_reason() or ("--read-only" if self.options.read_only else None)

    async def run_action(self, action: Any, default_namespace: Any = None, namespaces: Any = None) -> bool:
        """Run an action; a key that cannot run now says why instead of doing nothing."""
        handled = await super().run_action(action, default_namespace, namespaces)
        if not handled and action in _SAY_WHY and (default_namespace in (None, self)):
            reason = self._unavailable_reason(action)
            if reason is not None:
                title = by_action(action).title or action
                self.notify(reason, title=f"{title}: unavailable", severity="warning", timeout=6)
        return handled

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Grey out (None) actions that cannot run now; hide keys that do not apply here (False).

        Hidden: the speed keys when not replaying (or the replay ended), ``g`` without a failed restart to go back
        from, ``d``/escape with nothing to dismiss (the footer has room for what applies).
        """
        if action in ("faster", "slower") and (self.feeder.replay_clock is None or self.feeder.done):
            return False  # no speed to change: not in the footer (the palette says why)
        if action in ("go_back", "dismiss"):
            return self._unavailable_reason(action) is None
        return None if self._unavailable_reason(action) else True

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """The palette lists every dashboard action; those that cannot run now say why."""
        for command in super().get_system_commands(screen):
            if command.title not in _REPLACED_SYSTEM_COMMANDS:
                yield command
        for action, title, help_text in _COMMANDS:
            reason = self._unavailable_reason(action)
            if reason is None:
                yield SystemCommand(title, help_text, partial(self.run_action, action))
            else:
                # The palette reads its entries as markup: the reason may quote a host or a log.
                yield SystemCommand(f"{title} (unavailable)", markup_escaped(f"{help_text} — {reason}"),
                                    partial(self.notify, reason, title=f"{title}: unavailable",
                                            severity="warning"))

    def _restart_panel(self) -> RestartProgressPanel | None:
        """The restart flow's progress panel, when the controller is a restart flow."""
        return self.restart_flow.panel if self.restart_flow is not None else None

    def _in_flight(self) -> str | None:
        """What quitting now would interrupt: a sweep or a restart, or None."""
        if self.sweeper is not None and self.sweeper.running:
            return "a sweep is running"
        restart = self.restart_flow.controller if self.restart_flow is not None else None
        if restart is not None and restart.busy:
            return "a restart is in progress"
        return None

    async def action_quit(self) -> None:
        """Close the source (an SSH channel, a file) and leave; asks first while a restart or sweep runs."""
        from specmon.ui.screens.quit_confirm import QuitConfirmScreen

        busy = self._in_flight()
        if busy is None or isinstance(self.screen, QuitConfirmScreen):
            # Pressed again on the question: the user means it.
            await self._close_sources()
            self.exit(0)
            return

        async def answered(quit_now: bool | None) -> None:
            if quit_now:
                await self._close_sources()
                self.exit(0)

        self.push_screen(QuitConfirmScreen(busy), callback=answered)

    def action_go_back(self) -> None:
        """After a failed restart: back to the previous configuration (the commands are shown first)."""
        if self.restart_flow is not None and not self._unavailable_reason("go_back"):
            self.restart_flow.go_back()

    def action_dismiss(self) -> None:
        """Hide the restart panel once its restart ended (``d`` or escape, whatever has the focus)."""
        if self.restart_flow is not None and not self._unavailable_reason("dismiss"):
            self.restart_flow.dismiss()

    def action_toggle_pause(self) -> None:
        """Pause or resume the replay; for a live source, freeze or unfreeze the view."""
        rc = self.feeder.replay_clock
        if rc is not None:
            rc.toggle()
        else:
            self.display_paused = not self.display_paused
        self._tick()

    def action_faster(self) -> None:
        """Replay faster."""
        rc = self.feeder.replay_clock
        if rc is not None and not self._unavailable_reason("faster"):
            self.notify(f"replay speed {speed_text(rc.faster())}", timeout=2)
            self._tick()

    def action_slower(self) -> None:
        """Replay slower."""
        rc = self.feeder.replay_clock
        if rc is not None and not self._unavailable_reason("slower"):
            self.notify(f"replay speed {speed_text(rc.slower())}", timeout=2)
            self._tick()

    def action_mark_baseline(self) -> None:
        """Make the current configuration the baseline; pressed again, back to automatic."""
        reason = self._unavailable_reason("mark_baseline")
        if reason:
            self.notify(f"cannot mark a baseline: {reason}", severity="warning")
            return
        row = self.builder.row_for(self.feeder.session.current)
        assert row is not None
        self.builder.pinned = None  # a sweep's table has its own baseline: back to the live one
        if self.builder.baseline_key == row.key:
            self.builder.baseline_key = None
            self.notify("baseline: automatic (the run without speculation, or as given)", timeout=3)
        else:
            self.builder.baseline_key = row.key
            self.notify(f"baseline: {row.label}", timeout=3)
        self._maybe_analyze(force=True)

    def action_export(self) -> None:
        """Write the run table as CSV, JSON and Markdown; the notification gives the paths."""
        try:
            refuse("write the export")  # the action layer refuses even when the key was not greyed
        except ReadOnlyError as exc:
            self.notify(str(exc), severity="warning")
            return
        session = self.feeder.session
        analysis = self.builder.analyze(session.runs)  # exactly the data seen so far
        if not analysis.rows:
            self.notify("nothing to export yet: the run table is empty", severity="warning")
            return
        folder = self.export_dir if self.export_dir is not None else paths.export_dir()
        stamp = datetime.fromtimestamp(self.clock(), tz=UTC).strftime("%Y%m%d-%H%M%S")
        base = folder / f"specmon-runs-{stamp}"
        n = 2
        while any(base.with_name(base.name + ext).exists() for ext in (".csv", ".json", ".md")):
            base = folder / f"specmon-runs-{stamp}-{n}"
            n += 1
        outputs = {
            ".csv": to_csv(analysis),
            ".json": json.dumps(to_json(session, analysis), indent=2) + "\n",
            ".md": to_markdown(analysis),
        }
        try:
            # 0600 files in a 0700 folder (specmon's own), all of them or none (each written aside,
            # then renamed): a full disk leaves no partial export.
            paths.private_dir(folder)
            written = write_files_atomically({base.with_name(base.name + ext): text for ext, text in outputs.items()})
        except OSError as exc:
            # Nothing is left behind (each file is written aside, then renamed): say so, loudly.
            self._write_failed(f"export failed: cannot write to {folder}: {exc.strerror or exc}; no file was written")
            return
        self.last_export = written
        # The folder is specmon's data directory unless --out says otherwise: say where, in full,
        # and put the path on the clipboard (OSC 52) so it can be pasted into a shell.
        self.copy_to_clipboard(str(written[-1]))
        self._add_event("info", f"run table written to {base}.csv, .json and .md")
        self.notify(f"run table written to {base}.csv, .json and .md\n(the .md path is on the clipboard)",
                    title="export", timeout=10)

    def action_help(self) -> None:
        """Open the help screen."""
        from specmon.ui.screens.help import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())

    def action_restart(self) -> None:
        """Open the controller's restart screen; on a highlighted run-table row, restart on that row's
        configuration (its commands shown first)."""
        if self.controller is None or self._unavailable_reason("restart"):
            return
        if self.restart_flow is not None:
            self.restart_flow.restart(navigation.row_steps(self))
        elif not isinstance(self.controller, RestartFlow):
            self.push_screen(self.controller.restart_screen())

    def action_events(self) -> None:
        """The whole event log: full lines, filter, levels."""
        navigation.open_events(self)

    @on(DataTable.RowSelected, "#runs")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        """Enter on a run-table row: what its numbers rest on."""
        if event.row_key.value is not None:
            navigation.open_details(self, str(event.row_key.value))

    def action_sweep(self) -> None:
        """Open the sweep screen (or, during a sweep, offer to stop it)."""
        if self.controller is None or self._unavailable_reason("sweep"):
            return
        if self.sweeper is not None:
            self.sweeper.open()
        elif not isinstance(self.controller, RestartFlow):
            self.push_screen(self.controller.sweep_screen())
