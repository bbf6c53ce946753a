"""The line cap (``--line-cap`` / a profile's ``line_cap``): validated, wired, and enforced over the real sshd.

A line longer than the cap, arriving without a newline for a while and cut by a drop,
is delivered once, cut to the cap, counted in ``status.overlong`` and said once in the
events; the lines after it arrive whole, at the right offsets.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from specmon.cli import build_parser
from specmon.commands.remote import ConnectError, plan_connect
from specmon.config import ConfigError, load_config
from specmon.sources.lines import DEFAULT_MAX_LINE, format_size, parse_line_cap
from specmon.sources.local import build_local_source
from specmon.sources.ssh import SSHTailSource
from specmon.ssh.connect import SSHTarget
from tests.support.sshd import OpenSSHServer


@pytest.mark.parametrize(("text", "size"), [
    ("1024", 1024), ("4KiB", 4096), ("4k", 4096), ("4 KB", 4096), ("512KiB", 512 << 10), ("1MiB", 1 << 20),
    ("2M", 2 << 20), ("1GiB", 1 << 30), (65536, 65536),
])
def test_sizes_accepted(text: str | int, size: int) -> None:
    assert parse_line_cap(text) == size


@pytest.mark.parametrize("text", ["0", "1023", "2GiB", "1.5M", "-4k", "", "lots", "４k", "1 MiB extra", True])
def test_sizes_refused_with_a_sentence(text: str | bool) -> None:
    with pytest.raises(ValueError, match=r"^(not a size|line cap .* is out of range)"):
        parse_line_cap(text)  # type: ignore[arg-type]


def test_format_size() -> None:
    assert [format_size(n) for n in (1 << 20, 3 << 10, 1500)] == ["1 MiB", "3 KiB", "1,500 bytes"]


def connect_args(*argv: str):  # type: ignore[no-untyped-def]
    return build_parser().parse_args(["connect", *argv])


def test_connect_option_and_profile(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.kimi]\nhost = "ops@gpu-box"\nlog = "/data/s.log"\nline_cap = "512KiB"\n')
    assert load_config(config).profiles["kimi"].line_cap == 512 << 10
    assert plan_connect(connect_args("kimi", "--config", str(config))).source.max_line == 512 << 10
    plan = plan_connect(connect_args("kimi", "--config", str(config), "--line-cap", "4MiB"))
    assert plan.source.max_line == 4 << 20  # the option wins over the profile
    assert plan_connect(connect_args("gpu-box", "--log", "/x.log")).source.max_line == DEFAULT_MAX_LINE


def test_bad_profile_value_is_one_sentence(tmp_path: Path) -> None:
    config = tmp_path / "config.toml"
    config.write_text('[profiles.kimi]\nhost = "gpu-box"\nlog = "/s.log"\nline_cap = "huge"\n')
    with pytest.raises(ConfigError, match="line_cap"):
        load_config(config)
    with pytest.raises(ConnectError, match="not a size: 'huge'"):
        plan_connect(connect_args("kimi", "--config", str(config)))


@pytest.mark.parametrize("command", [["connect", "gpu-box", "--log", "/x.log"], ["watch", "/tmp/x.log"]])
def test_bad_option_exits_2_with_one_sentence(command: list[str]) -> None:
    done = subprocess.run([sys.executable, "-m", "specmon", *command, "--line-cap", "12"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "argument --line-cap: line cap '12' is out of range: give 1KiB to 1GiB" in done.stderr
    assert "Traceback" not in done.stderr


def test_help_documents_it() -> None:
    for command in ("connect", "watch"):
        done = subprocess.run([sys.executable, "-m", "specmon", command, "--help"],
                              capture_output=True, text=True, timeout=60)
        assert "--line-cap SIZE" in done.stdout and "1KiB-1GiB" in " ".join(done.stdout.split())


def test_local_source_takes_it(tmp_path: Path) -> None:
    assert build_local_source(str(tmp_path / "x.log"), line_cap=2048)._split.max_line == 2048


async def until(predicate: Callable[[], bool], what: str, source: SSHTailSource) -> None:
    for _ in range(6000):
        if predicate():
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}; status={source.status!r}")


@pytest.mark.sshd
async def test_long_line_cut_once_across_a_drop(openssh_server: OpenSSHServer, tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_bytes(b"before\n")
    cap = 4096

    async def fast(_s: float) -> None:
        await asyncio.sleep(0.01)

    source = SSHTailSource(SSHTarget("127.0.0.1", port=openssh_server.port, user=openssh_server.user), str(log),
                           lines=10, sleep=fast, poll_interval=0.05, max_line=cap)
    got: list[str] = []

    async def read() -> None:
        async for batch in source.batches():
            got.extend(batch)

    task = asyncio.create_task(read())
    try:
        await until(lambda: got == ["before"], "the first line", source)
        with open(log, "ab") as f:
            f.write(b"L" * 300_000)  # no newline yet: held back, at most `cap` bytes kept
        await until(lambda: source.status.bytes >= 7 + 300_000, "the start of the long line", source)
        assert openssh_server.drop() >= 1
        await until(lambda: "resuming" in " ".join(source.status.events), "the reconnect", source)
        with open(log, "ab") as f:
            f.write(b"M" * 200_000 + b"\nafter 1\n" + b"N" * 10_000 + b"\nafter 2\n")
        await until(lambda: len(got) >= 5, "the lines after the long one", source)
        await asyncio.sleep(0.2)  # a repeat would arrive as an extra line
    finally:
        await source.close()
        await asyncio.wait_for(task, 20)
    assert got == ["before", "L" * cap, "after 1", "N" * cap, "after 2"]
    assert source.status.overlong == 2
    cut = [e for e in source.status.events if "line cap" in e]
    assert len(cut) == 1 and "500,000 bytes was cut to 4,096 bytes" in cut[0]
    assert source.position[1] == log.stat().st_size  # offsets count every byte, cut or not
