"""The host-side scripts are real POSIX sh files shipped in the package: they parse, and pass shellcheck."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from specmon.control.launch import (
    ALIVE_SCRIPT,
    LEASE_SCRIPT,
    READY_SCRIPT,
    SCRIPT_FILES,
    START_SCRIPT,
    STOP_SCRIPT,
    script_text,
)

ASSEMBLED = {"stop": STOP_SCRIPT, "start": START_SCRIPT, "ready": READY_SCRIPT, "alive": ALIVE_SCRIPT,
             "lease": LEASE_SCRIPT}


@pytest.mark.parametrize("name", SCRIPT_FILES)
def test_each_script_file_parses_with_sh_n(name: str, tmp_path: Path) -> None:
    path = tmp_path / name
    path.write_text(script_text(name))
    done = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("name", sorted(ASSEMBLED))
def test_the_command_text_is_the_shipped_files(name: str) -> None:
    """What is sent is proc.sh then the script, verbatim: nothing is generated or spliced."""
    assert ASSEMBLED[name] == "\n" + script_text("proc.sh") + script_text(f"{name}.sh")


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed (apt install shellcheck)")
@pytest.mark.parametrize("name", sorted(ASSEMBLED))
def test_the_assembled_scripts_pass_shellcheck(name: str, tmp_path: Path) -> None:
    path = tmp_path / f"{name}.sh"
    path.write_text(ASSEMBLED[name])
    done = subprocess.run(["shellcheck", "--shell=sh", "--severity=warning", str(path)], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stdout + done.stderr
