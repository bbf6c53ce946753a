"""``specmon replay`` / ``specmon watch``: the command line, import discipline, and watch on a real file."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specmon.cli import build_parser, main
from specmon.sources.base import ConnectionState
from tests.support.app_factory import (
    FIXED_NOW,
    ROOT,
    SWEEP,
    header_text,
    options,
    wait_for,
)
from tests.support.logtext import campaign, decode

SIZE = (100, 30)


def test_replay_and_watch_are_registered_with_their_options() -> None:
    parser = build_parser()
    args = parser.parse_args(["replay", "a.log", "b.log", "--speed", "max", "--loop", "--baseline-tps", "88.8",
                              "--theme", "specmon-light"])
    assert args.files == ["a.log", "b.log"] and args.speed is None and args.loop
    assert args.baseline_tps == 88.8 and args.theme == "specmon-light"
    assert parser.parse_args(["replay", "a.log", "--speed", "10x"]).speed == 10.0
    assert parser.parse_args(["replay", "a.log"]).speed == 1.0
    args = parser.parse_args(["watch", "/var/log/server.log", "--lines", "500"])
    assert args.path == "/var/log/server.log" and args.lines == 500


@pytest.mark.parametrize("argv", [
    ["replay", "a.log", "--speed", "0"],
    ["replay", "a.log", "--speed", "fast"],
    ["replay", "a.log", "--baseline", "b.log", "--baseline-tps", "80"],
    ["watch", "x.log", "--lines", "-3"],
])
def test_bad_options_are_usage_errors(argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(argv)
    assert exc.value.code == 2


def test_missing_file_and_unknown_theme_are_clear_errors(capsys: pytest.CaptureFixture[str],
                                                        isolated_home: Path) -> None:
    assert main(["replay", "no/such.log"]) == 2
    assert "no/such.log: no such file" in capsys.readouterr().err
    assert main(["replay", str(SWEEP[0]), "--theme", "no-such-theme"]) == 2
    err = capsys.readouterr().err
    assert "unknown theme 'no-such-theme'" in err and "specmon-light" in err
    assert main(["watch", "x.log", "--theme", "no-such-theme"]) == 2


def test_the_command_line_does_not_import_textual_until_a_dashboard_opens() -> None:
    """``specmon summarize`` builds the same parser: it must not pay for Textual."""
    code = ("import sys, specmon.cli as c; c.build_parser(); "
            "import specmon.ingest.live, specmon.ui.views, specmon.sources.replay; "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"


async def test_watch_follows_a_growing_file_and_reports_truncation(isolated_home: Path,
                                                                    tmp_path: Path) -> None:
    from specmon.ui.factories import watch_app

    log = tmp_path / "server.log"
    first = campaign(2, 94.0, 12)
    log.write_text("\n".join(first) + "\n")
    app = watch_app(log, options=options(), clock=lambda: FIXED_NOW, user_themes=None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: app.feeder.lines == len(first), "the existing lines")
        assert app.feeder.source.status.state is ConnectionState.LIVE
        with log.open("a") as f:
            f.write(decode(100, 55.5, 2.0, 0.5) + "\n")
        await wait_for(pilot, lambda: app.feeder.lines == len(first) + 1, "the appended line")
        app.refresh_now()
        assert app.dashboard._panels[0]._view.current == 55.5
        assert app.dashboard._header.view.source == str(log)
        assert "server.log" in header_text(app) and "source: live" in header_text(app)
        log.write_text(decode(200, 60.0, 2.0, 0.5) + "\n")  # truncated and rewritten
        await wait_for(pilot, lambda: any("truncated" in e.text for e in app.feeder.session.events),
                       "the truncation in the event log")
        app.refresh_now()
        assert any(e.level == "warning" and "truncated" in e.text for e in app.dashboard._events.events)
