"""Where files go: exports and sweep reports in specmon's data directory by default (never the
current folder, a checkout), ``--out DIR`` to choose, the path shown in full and put on the clipboard."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from specmon import paths
from specmon.commands.dashboard import register as register_dashboard
from specmon.commands.demo import register as register_demo
from specmon.commands.remote import register as register_connect
from tests.support.app_factory import ROOT, settle, sweep_app

SIZE = (80, 24)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="specmon")
    sub = p.add_subparsers()
    register_dashboard(sub)
    register_demo(sub)
    register_connect(sub)
    return p


async def test_e_writes_to_the_data_directory_and_says_where(isolated_home: Path) -> None:
    before = set(ROOT.iterdir())
    app = sweep_app()  # no export_dir: the default
    async with app.run_test(size=SIZE, notifications=True) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        folder = paths.export_dir()
        assert folder.is_relative_to(paths.data_dir()) and folder.is_dir()
        assert len(app.dashboard.last_export) == 3 and all(p.parent == folder for p in app.dashboard.last_export)
        md = app.dashboard.last_export[-1]
        assert app.clipboard == str(md)  # copyable: on the clipboard
        assert any(str(md.with_suffix("")) in n.message for n in app._notifications)  # shown in full
        assert any(str(md.with_suffix("")) in e.text for e in app.feeder.session.events)  # and in the log
    assert set(ROOT.iterdir()) == before  # nothing landed in the checkout


@pytest.mark.parametrize("command", [["watch", "x.log"], ["replay", "x.log"], ["demo"], ["connect", "gpu-box", "--log", "/l"]])
def test_out_chooses_the_folder(command: list[str], tmp_path: Path) -> None:
    args = parser().parse_args([*command, "--out", str(tmp_path / "new" / "reports")])
    assert args.out == (tmp_path / "new" / "reports").resolve()
    assert parser().parse_args(command).out is None


def test_out_refuses_a_file_in_one_sentence(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("x")
    with pytest.raises(SystemExit) as exc:
        parser().parse_args(["watch", "x.log", "--out", str(f)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "is a file, not a folder" in err and "Traceback" not in err


async def test_the_out_folder_is_made_when_first_written(isolated_home: Path, tmp_path: Path) -> None:
    out = tmp_path / "not" / "yet"
    app = sweep_app(export_dir=out)
    async with app.run_test(size=SIZE) as pilot:
        await settle(app, pilot)
        await pilot.press("e")
        await pilot.pause()
        assert out.is_dir() and len(list(out.iterdir())) == 3
