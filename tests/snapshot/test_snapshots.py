"""Snapshot tests of the dashboard at fixed sizes, on frozen replayed logs.

Every app is built by tests/app_factory.py: fixed wall clock, animations off,
no user themes, replay at max speed. Before each screenshot the feeder has
consumed its input completely and one synchronous refresh has run, so the
SVGs do not depend on timing. Update after a reviewed change with
``pytest tests/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specmon.sources.base import ConnectionState, SourceStatus
from tests.support.app_factory import (
    CRASH,
    FIXED_NOW,
    SWEEP,
    VLLM_KIT,
    StaticSource,
    build_app,
    head_lines,
    settle,
    settle_source,
    source_app,
    sweep_app,
)


def after_replay(*keys: str) -> Any:
    """A run_before: wait for the replay to end, refresh once, press keys, refresh again."""

    async def run_before(pilot: Any) -> None:
        app = pilot.app
        await settle(app, pilot)
        if keys:
            await pilot.press(*keys)
            app.refresh_now()
            await pilot.pause()
        # Toasts time out on a wall clock: keep them out of the pictures.
        app.clear_notifications()
        await pilot.pause()

    return run_before


def after_source(source: StaticSource) -> Any:
    """A run_before for an app on a StaticSource: wait until its lines are in, refresh once."""

    async def run_before(pilot: Any) -> None:
        await settle_source(pilot.app, source, pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


def test_startup_loading_weights(snap_compare: Any, isolated_home: Path) -> None:
    """A server that is loading its weights: no numbers yet, the state and its elapsed time."""
    source = StaticSource([head_lines(SWEEP[2], 60)])
    assert snap_compare(source_app(source), terminal_size=(100, 30), run_before=after_source(source))


def test_sweep_100x30(snap_compare: Any, isolated_home: Path) -> None:
    """The whole sweep replayed: six rows, 2 steps marked best, the plot with six runs."""
    assert snap_compare(sweep_app(), terminal_size=(100, 30), run_before=after_replay())


def test_sweep_80x24(snap_compare: Any, isolated_home: Path) -> None:
    """The same at 80×24: compact layout, every number still there."""
    assert snap_compare(sweep_app(), terminal_size=(80, 24), run_before=after_replay())


def test_sweep_200x60(snap_compare: Any, isolated_home: Path) -> None:
    """The same at 200×60: wide table with intervals, a large plot, a long event log."""
    assert snap_compare(sweep_app(), terminal_size=(200, 60), run_before=after_replay())


def test_mid_sweep_table(snap_compare: Any, isolated_home: Path) -> None:
    """Half-way through the sweep: three configurations so far."""
    assert snap_compare(build_app(SWEEP[:3]), terminal_size=(100, 30), run_before=after_replay())


def test_baseline_marked(snap_compare: Any, isolated_home: Path) -> None:
    """``b`` on the 3-step run: it becomes the baseline; the other rows compare with it."""
    assert snap_compare(build_app(SWEEP[:4]), terminal_size=(100, 30), run_before=after_replay("b"))


def test_crash_state(snap_compare: Any, isolated_home: Path) -> None:
    """A launch dying of CUDA OOM while loading: the state in red, the OOM in the event log."""
    app = build_app([SWEEP[0], SWEEP[1], CRASH])
    assert snap_compare(app, terminal_size=(100, 30), run_before=after_replay())


def test_vllm_per_position_acceptance(snap_compare: Any, isolated_home: Path) -> None:
    """Real vLLM logs (n-gram, 3 tokens): per-position acceptance bars, no-spec baseline."""
    # The n-gram run was logged before the no-speculation one: the latter is the baseline file here.
    assert snap_compare(build_app([VLLM_KIT[1]], baseline_files=[VLLM_KIT[0]]), terminal_size=(100, 30),
                        run_before=after_replay())


def test_theme_light(snap_compare: Any, isolated_home: Path) -> None:
    """The light theme."""
    assert snap_compare(sweep_app(theme="specmon-light"), terminal_size=(100, 30), run_before=after_replay())


def test_theme_contrast(snap_compare: Any, isolated_home: Path) -> None:
    """The high-contrast theme."""
    assert snap_compare(sweep_app(theme="specmon-contrast"), terminal_size=(100, 30),
                        run_before=after_replay())


def test_reconnecting_80x24(snap_compare: Any, isolated_home: Path) -> None:
    """A remote source between two connection attempts: the countdown in the header."""
    status = SourceStatus(state=ConnectionState.RECONNECTING, retry_at=FIXED_NOW + 4, attempts=1,
                          detail="connection lost")
    source = StaticSource([head_lines(SWEEP[2], 300)], status=status)
    assert snap_compare(source_app(source), terminal_size=(80, 24), run_before=after_source(source))


def test_help_screen(snap_compare: Any, isolated_home: Path) -> None:
    """The help screen over the dashboard."""
    assert snap_compare(sweep_app(), terminal_size=(100, 30), run_before=after_replay("question_mark"))
