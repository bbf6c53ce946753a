"""``specmon watch PATH...``: one path keeps the dashboard it always opened; several open the fleet view."""

from __future__ import annotations

from pathlib import Path

import pytest

from specmon.cli import build_parser, main
from specmon.commands.dashboard import watch_app_for


def test_one_path_builds_the_dashboard_exactly_as_before(tmp_path: Path) -> None:
    from specmon.sources.local import LocalTailSource
    from specmon.ui.app import SpecmonApp

    args = build_parser().parse_args(["watch", str(tmp_path / "server.log"), "--lines", "50", "--window", "7"])
    assert args.path == str(tmp_path / "server.log") and args.paths == [args.path]
    app = watch_app_for(args)
    assert type(app) is SpecmonApp
    source = app.feeder.source
    assert isinstance(source, LocalTailSource) and source.name == args.path and source._lines == 50
    assert app.options.window == 7


def test_two_paths_build_the_fleet_view(tmp_path: Path) -> None:
    from specmon.ui.fleet_app import FleetApp

    logs = [str(tmp_path / "r1" / "server.log"), str(tmp_path / "r2" / "server.log")]
    args = build_parser().parse_args(["watch", *logs, "--lines", "50", "--window", "7", "--theme", "specmon-light",
                                      "--baseline-tps", "88.8"])
    assert args.path == logs[0] and args.paths == logs
    app = watch_app_for(args)
    assert type(app) is FleetApp
    assert [r.name for r in app.fleet.replicas] == ["r1", "r2"]
    assert [r.source.name for r in app.fleet.replicas] == logs
    assert all(r.source._lines == 50 for r in app.fleet.replicas)
    assert app.options.window == 7 and app.options.theme == "specmon-light" and app.options.baseline_tps == 88.8


@pytest.mark.parametrize(("extra", "sentence"), [
    (["--metrics", "http://127.0.0.1:8000/metrics"], "--metrics works with one log"),
    (["--record", "x.jsonl"], "--record works with one log"),
    (["--prometheus-port", "0"], "--prometheus-port works with one log"),
])
def test_what_belongs_to_one_server_is_refused_for_a_fleet(tmp_path: Path, extra: list[str], sentence: str,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["watch", str(tmp_path / "a.log"), str(tmp_path / "b.log"), *extra]) == 2
    assert sentence in capsys.readouterr().err


def test_a_fleet_refuses_a_directory_and_a_log_given_twice(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = str(tmp_path / "a.log")
    assert main(["watch", log, str(tmp_path)]) == 2
    assert "is a directory, not a log file" in capsys.readouterr().err
    assert main(["watch", log, log]) == 2
    assert "is given twice" in capsys.readouterr().err
    # Without a terminal, the fleet says so like the dashboard (pytest's stdin is not one).
    assert main(["watch", log, str(tmp_path / "b.log")]) == 2
    assert "needs a terminal" in capsys.readouterr().err


@pytest.mark.parametrize("how", ["q", "SIGTERM"])
def test_watch_with_two_logs_opens_the_fleet_in_a_terminal_and_leaves(tmp_path: Path, how: str) -> None:
    """The real command in a pseudo-terminal: the fleet's header appears; q exits 0, SIGTERM 128 + 15."""
    import os
    import signal

    from tests.support.logtext import campaign
    from tests.support.ptyproc import PtyProcess, running

    logs = []
    for name in ("r1", "r2"):
        log = tmp_path / name / "server.log"
        log.parent.mkdir()
        log.write_text("\n".join(campaign(2, 90.0, 20)) + "\n")
        logs.append(str(log))
    env = {"HOME": str(tmp_path / "home"), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CONFIG_HOME": str(tmp_path / "config")}
    p = PtyProcess(["watch", *logs], env)
    try:
        p.wait_until(lambda: "2 live" in p.output and "EAGLE3 2 steps" in p.output, "the fleet with both replicas")
        if how == "q":
            assert p.master is not None
            os.write(p.master, b"q")
            assert p.wait_exit() == 0
        else:
            p.proc.send_signal(signal.SIGTERM)
            assert p.wait_exit() == 128 + signal.SIGTERM
        assert "the fleet view is not recorded" in p.final_output()
        assert not running(p.proc.pid)
    finally:
        p.kill()
