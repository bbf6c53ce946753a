"""Dashboard commands without a terminal refuse in one sentence (they used to spin a core forever)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

SAMPLE = sorted(Path("sample_logs").glob("sim_eagle3_*.log"))[0]


def run(*argv: str) -> subprocess.CompletedProcess[str]:
    """``specmon ARGV`` with stdin from /dev/null and stdout piped, as under cron or nohup."""
    # The bound only turns the old busy loop into a failure; nothing asserts timing.
    return subprocess.run([sys.executable, "-m", "specmon", *argv], stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "argv",
    [
        ["watch", str(SAMPLE)],
        ["replay", str(SAMPLE), "--speed", "max"],
        ["demo"],
        ["connect", "127.0.0.1:1", "--log", "/var/log/server.log", "--no-record"],
    ],
    ids=["watch", "replay", "demo", "connect"],
)
def test_dashboard_without_terminal_refuses(argv: list[str]) -> None:
    result = run(*argv)
    assert result.returncode == 2, result.stderr
    message = result.stderr.strip()
    assert message.count("\n") == 0 and "Traceback" not in message
    assert f"the {argv[0]} dashboard needs a terminal and stdin and stdout are not one" in message
    assert "specmon summarize" in message and "specmon sweep" in message
    assert result.stdout == ""


def test_watch_a_directory_is_refused(tmp_path: Path) -> None:
    result = run("watch", str(tmp_path))
    assert result.returncode == 2
    assert result.stderr.strip() == (
        f"specmon: {tmp_path} is a directory, not a log file: pass the log itself, "
        f"e.g. specmon watch {tmp_path}/server.log"
    )
