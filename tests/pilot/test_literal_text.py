"""Untrusted text is shown literally on every surface of the dashboard (issue 34, item 1).

A restart whose server died with a typical NCCL line ended the dashboard with ``MarkupError``:
the failure was shown through a notification, which Textual reads as markup. The class is
"text from a log, a server, a host, a file name or a config value reaches a surface that
interprets it"; the fix is one helper (:mod:`specmon.literal`, wrapped by
:mod:`specmon.ui.literal`) and ``SpecmonApp.notify``, which shows every notification literally
whoever calls it. Tested here:

* the named case for real: a server process that prints the NCCL traceback and exits, started
  by the real start script, followed to its crash by the real restart flow;
* generated text (markup, control characters, bidi overrides, lone surrogates) driven through
  every surface: the header (the source's name), notifications (message and title), the event
  log, the restart panel (reason and the server's last lines), the full-screen views, the
  command palette's entries, border subtitles; and a whole-screen render that must contain no
  raw control or bidi character.

Tests run with ``notifications=True``: Textual's test harness hides toasts by default, which is
how the crash went unseen.
"""

from __future__ import annotations

import dataclasses
import sys
import unicodedata
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from textual.content import Content
from textual.widgets._toast import Toast

from specmon.control.restart_controller import RestartController
from specmon.control.restart_progress import Phase as RestartPhase
from specmon.control.restart_progress import RestartProgress
from specmon.control.runner import LocalRunner
from specmon.literal import BIDI, plain
from specmon.ui.flows.restart import RestartFlow
from specmon.ui.literal import markup_escaped
from specmon.ui.screens.events_screen import EventsScreen
from specmon.ui.screens.text_view import TextViewScreen
from specmon.ui.widgets.event_log import EventLog
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import StaticSource, isolated_home, source_app, wait_for
from tests.support.restarting import profile

__all__ = ["isolated_home"]

SIZE = (160, 40)

NCCL = ("torch.distributed.DistBackendError: [/pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356] "
        "NCCL error, unhandled system error")

#: Pieces an attacker (or an unlucky log) would use: markup tags, actions, variables, escapes.
HOSTILE_PIECES = ["[/pytorch/x.cpp:3356]", "[rank0]:", "[@click=app.quit]", "[/]", "[b]", "[$accent]", "$accent",
                  "[link=http://x]", "\\[", "\\", "\x1b[2J", "\x1b]0;title\x07", "\x9b31m", "\u202e", "\u2066",
                  "\u200f", "\x00", "\r", "\t", "\x7f", "\u2028", "\ud800", "\ufeff", "[on red]", "]"]

hostile = st.lists(st.one_of(st.sampled_from(HOSTILE_PIECES),
                             st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=6)),
                   min_size=1, max_size=8).map("".join)


def forbidden(ch: str, *, newline_ok: bool = False) -> bool:
    """A character that must never reach the terminal raw."""
    if ch == "\n":
        return not newline_ok
    return ch in BIDI or unicodedata.category(ch) in ("Cc", "Cs", "Zl", "Zp")


# --------------------------------------------------------------------------- the helper itself


@settings(max_examples=300, deadline=None)
@given(text=hostile, newlines=st.booleans())
def test_plain_leaves_nothing_active_and_is_idempotent(text: str, newlines: bool) -> None:
    out = plain(text, newlines=newlines)
    assert not any(forbidden(ch, newline_ok=newlines) for ch in out), ascii(out)
    assert plain(out, newlines=newlines) == out
    # Printable text passes unchanged: a literal helper must not reword what it shows.
    printable = "".join(ch for ch in text if ch.isprintable() and not forbidden(ch) and ch not in "\ufeff")
    if printable == text:
        assert out == text


@settings(max_examples=300, deadline=None)
@given(text=hostile)
def test_markup_escaped_round_trips_through_textual_markup(text: str) -> None:
    content = Content.from_markup(markup_escaped(text))
    assert content.plain == plain(text)
    assert not content.spans  # no style, no action, no link came from the text


# --------------------------------------------------------------------------- the named case, for real


async def test_a_restart_that_dies_with_an_nccl_error_keeps_the_dashboard_alive(
        isolated_home: Path, tmp_path: Path) -> None:
    lines = ["[rank0]: Traceback (most recent call last):", '  File "train.py", line 1, in <module>',
             NCCL, "[@click=app.quit] [rank0]: \x1b[31mred\x1b[0m \u202eevil"]
    server = tmp_path / "server.py"
    server.write_text(f"import sys\nfor line in {lines!r}:\n    print(line, flush=True)\nsys.exit(1)\n")
    prof = profile(tmp_path, argv=[sys.executable, str(server), "--steps", "{steps}"], start_timeout_s=20)
    flow = RestartFlow(RestartController(prof, LocalRunner(), host="localhost", ready_poll_s=0.1))
    app = source_app(StaticSource([["a line"]]), controller=flow)
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        flow.start_now(2)
        await wait_for(pilot, lambda: flow.panel.view is not None and flow.panel.view.failed, "the crash", 1500)
        await wait_for(pilot, lambda: bool(app.screen.query(Toast)), "the notification")
        await pilot.pause()
        toasts = [t.render().plain for t in app.screen.query(Toast)]
        assert any(NCCL in t for t in toasts), toasts  # shown whole, brackets and all
        panel = flow.panel.render().plain
        assert "[@click=app.quit] [rank0]: ␛[31mred␛[0m <U+202E>evil" in panel
        assert "[rank0]: Traceback" in panel  # the prefix Textual's markup used to swallow
        app.save_screenshot(str(tmp_path / "shot.svg"))  # the whole screen renders
        assert app.is_running
    assert app.return_code in (None, 0)


# --------------------------------------------------------------------------- every surface, generated


class Unavailable:
    """A controller whose keys are unavailable for a reason that quotes a host's answer."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def restart_screen(self) -> Any:
        raise RuntimeError(self.reason)

    def sweep_screen(self) -> Any:
        raise RuntimeError(self.reason)

    def unavailable_reason(self, action: str) -> str:
        return self.reason


# No shrinking: each example runs the app (about a second), and a failure prints its texts whole.
@settings(max_examples=8, deadline=None, phases=(Phase.explicit, Phase.reuse, Phase.generate),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts=st.lists(hostile, min_size=4, max_size=4))
async def test_generated_text_is_literal_on_every_surface(isolated_home: Path, tmp_path: Path,
                                                          texts: list[str]) -> None:
    source_name, note, event, line = texts
    shown = {t: plain(t) for t in texts}
    lines_kept = {t: plain(t, newlines=True) for t in texts}  # notifications keep line breaks
    app = source_app(StaticSource([["x"]], name=source_name), controller=Unavailable(note))
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await pilot.pause()
        # The header: the source's name (a host and a path).
        app._tick()
        assert shown[source_name][-20:] in app.query_one(StatusHeader).render().plain
        # Notifications: message and title, whoever calls notify.
        app.notify(note, title=event, severity="error")
        app.screen.notify(line)
        await wait_for(pilot, lambda: len(app.screen.query(Toast)) >= 2, "the toasts")
        toasts = [t.render().plain for t in app.screen.query(Toast)]
        assert any(lines_kept[note] in t and shown[event] in t for t in toasts), toasts
        assert any(lines_kept[line] in t for t in toasts), toasts
        # The event log (one line each) and the whole event log screen.
        app._add_event("error", event)
        app._tick()
        assert shown[event][:30] in app.query_one(EventLog).render().plain
        # The command palette's entries: the reason the restart is unavailable.
        helps = [c.help for c in app.get_system_commands(app.screen) if "(unavailable)" in c.title]
        parsed = [Content.from_markup(h) for h in helps]  # every entry parses
        assert sum(shown[note] in c.plain for c in parsed) >= 2  # restart and sweep say why, literally
        # The restart panel: a failure's reason and the server's last lines.
        flow = RestartFlow(RestartController(profile(tmp_path), LocalRunner(), host=source_name))
        await app.screen.mount(flow.panel)
        flow.panel.view = RestartProgress(phase=RestartPhase.CRASHED, steps=2, label="2 steps", host=source_name,
                                          log=source_name, elapsed_s=3.0, phase_elapsed_s=0.0,
                                          done=((RestartPhase.STARTING, 3.0),), message=line, last_lines=(event, line))
        await pilot.pause()
        panel = flow.panel.render().plain
        assert shown[line][:40] in panel and shown[event][:40] in panel
        # Border subtitles (which Textual reads as markup when given a str).
        from specmon.ui.widgets.metric_panel import MetricPanel

        metric = app.query_one("#m-throughput", MetricPanel)
        view = app.builder.live(app.feeder.session, source=source_name, status=app.feeder.source.status,
                                now=0.0, log_now=None, mode="", paused=False, lines=0, state_since=None,
                                restart=None, replay=False, ended=False).throughput
        app.display_paused = True  # the live tick would show its own source next
        metric.show(dataclasses.replace(view, source=note), sparkline=False)
        await pilot.pause()
        stored = metric._border_subtitle  # the getter re-serialises to markup, not faithfully
        assert stored is not None and stored.plain == shown[note] and not stored.spans
        # Full-screen views: a file's path and text; every event, whole.
        app.push_screen(TextViewScreen(source_name, f"{line}\n{event}"))
        await pilot.pause()
        _no_raw_controls(app, tmp_path, texts)
        app.pop_screen()
        app.push_screen(EventsScreen(lambda: app.feeder.session.events))
        await pilot.pause()
        _no_raw_controls(app, tmp_path, texts)
        app.pop_screen()
        await pilot.pause()
        _no_raw_controls(app, tmp_path, texts)
        assert app.is_running


def _no_raw_controls(app: Any, tmp_path: Path, texts: list[str]) -> None:
    """The whole screen renders, and no control or bidi character of the texts reaches it raw."""
    svg = app.export_screenshot()
    raw = {ch for t in texts for ch in t if forbidden(ch)} - {"\t", "\n"}  # the SVG has its own lines
    leaked = {ch for ch in raw if ch in svg}
    assert not leaked, [ascii(ch) for ch in leaked]
