"""Snapshot tests of the screens of the sweep's end and of navigation, at 80×24 and 120×40.

The verdict panel (over the replayed sweep, from a seeded simulated sweep's verdict), a row's
details, the whole event log and the report view. Built like every snapshot: fixed clock,
animations off, the replay consumed and refreshed before the picture.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specmon.model.stopping import StoppingRule
from specmon.output.tables import sweep_outcome
from specmon.ui.screens.events_screen import EventsScreen
from specmon.ui.screens.run_details import RunDetailsScreen
from specmon.ui.screens.sweep_verdict import SweepVerdictScreen
from specmon.ui.screens.text_view import TextViewScreen
from tests.support.app_factory import settle, sweep_app
from tests.support.sweepsim import run_sweep

SIZES = [(80, 24), (120, 40), (60, 15), (200, 60)]  # every screen at the four sizes of issue 30
REPORT = Path("/home/me/.local/share/specmon/exports/specmon-sweep-20260212-120000.md")


def pushing(make: Any) -> Any:
    """A run_before: settle the replay, push the screen ``make(app)`` builds, settle again."""

    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await settle(app, pilot)
        app.clear_notifications()
        app.push_screen(make(app))
        await pilot.pause()
        await pilot.pause()

    return run_before


@pytest.fixture(scope="module")
def outcome() -> Any:
    doc = run_sweep(4, steps=(0, 1, 2, 3), rule=StoppingRule(looks=2, min_samples=20, max_samples=120)).to_json()
    result = sweep_outcome(doc)
    assert result is not None
    return result


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_verdict_panel(snap_compare: Any, isolated_home: Path, outcome: Any, size: tuple[int, int]) -> None:
    """The end of a sweep: speed-up and interval, runner-up, source, the table, report and keys."""
    note = "baseline: now no speculation, which the sweep measured (b marks another)"
    assert snap_compare(sweep_app(), terminal_size=size, run_before=pushing(
        lambda app: SweepVerdictScreen(outcome, report=REPORT, baseline_note=note)))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_run_details(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """Enter on the 2-step row: summary, samples over time, histogram, exclusions, arguments."""
    command = ("the start command specmon ran for it:\n"
               "start: cd /srv/sglang && setsid python3 -m sglang.launch_server --speculative-num-steps 2 "
               "--speculative-num-draft-tokens 3 </dev/null >>/srv/sglang/logs/sglang_2step.log 2>&1 &")

    def make(app: Any) -> RunDetailsScreen:
        row = app.dashboard.config_row("EAGLE3 2 steps")
        assert row is not None
        return RunDetailsScreen(row, command=command)

    assert snap_compare(sweep_app(), terminal_size=size, run_before=pushing(make))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_events_screen(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """``l``: every event, whole lines, newest at the bottom."""
    assert snap_compare(sweep_app(), terminal_size=size, run_before=pushing(
        lambda app: EventsScreen(lambda: list(app.feeder.session.events))))


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_report_view(snap_compare: Any, isolated_home: Path, size: tuple[int, int]) -> None:
    """``o`` in the verdict panel: the report's text, scrollable."""
    text = "# specmon report — demo.jsonl\n\n## Verdict\n\n**EAGLE3 2 steps: +5.3% (+4.4…+6.3%) over no speculation**\n"
    assert snap_compare(sweep_app(), terminal_size=size, run_before=pushing(
        lambda app: TextViewScreen(str(REPORT), text)))
