"""Fixtures every test shares, and the isolation every test gets.

The fixtures live in ``tests/support/`` next to the helpers they use and are
registered here as plugins, so a test module names a fixture as an argument and
never imports it. Every test runs with HOME and the XDG folders in a temp dir:
nobody's own ``~/.ssh``, config, themes or recordings leak in, and nothing a
test writes lands in them.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from textual.widgets import Input

pytest_plugins = ["tests.support.app_factory", "tests.support.sshd"]

# Hypothesis's deadline and its "input generation is slow" health check time the test harness
# by the wall clock. On a shared machine at load 10-15 (CI) they raced other processes and failed
# test_guided.py while every property held. The properties are checked in full; only those two
# wall-clock judgements are off. Example counts stay what each test sets.
settings.register_profile("specmon", deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("specmon")

XDG_VARIABLES = ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR")


@pytest.fixture(autouse=True)
def _isolated_environment(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> Path:
    """HOME and every XDG variable in a fresh temp dir, for every test."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("HOME", str(home))
    for name in XDG_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("XDG_DATA_HOME", str(home / ".local" / "share"))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / ".cache"))
    # The event log shows specmon's wall clock in local time: one zone, so screens are the same anywhere.
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return home


@pytest.fixture(autouse=True)
def _still_cursor(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """In pictures (every test that takes one), the text cursor holds still.

    A focused Input shows or hides its cursor every 0.5 s of wall clock. A picture taken
    after a slow setup (a loaded CI machine: the replay, the statistics, the plot) would
    catch it hidden and differ from the reviewed one for no change of ours. The blink is
    Textual's, not specmon's: in pictures the cursor stays as it is on focus, shown.
    """
    if "snap_compare" in request.fixturenames:
        monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)


@pytest.fixture(autouse=True)
def _writable_again() -> Iterator[None]:
    """``--read-only`` is process-wide (control/guard.py): a test that runs ``main([..., "--read-only"])``
    in-process turned every later test of its worker read-only (46 failures in one run). Each test
    starts writable and leaves it so."""
    from specmon.control.guard import set_read_only

    set_read_only(None)
    yield
    set_read_only(None)


def _live_children() -> dict[int, str]:
    """This process's running child processes (zombies not counted: they hold nothing), by PID: their command."""
    import os

    me, found = os.getpid(), {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        state, parent = stat[stat.rindex(")") + 2:].split()[:2]
        if int(parent) == me and state != "Z":
            found[int(entry)] = command.strip()[-160:]  # the end: a script's arguments
    return found


@pytest.fixture(autouse=True)
def _no_process_left() -> Iterator[None]:
    """No test leaves a process of its own running: specmon never leaves an orphan, and a leftover
    one made an unrelated test fail later on the same worker (test_workers_lost counts children).

    Found this way: a dashboard's controller never gave its lease back, so the holder (lease.sh's
    ``cat``) lived as long as the process. Session fixtures (sshd, Prometheus) start before this
    looks, so they are not counted; a child given ten seconds to finish exiting is not either.
    """
    if not Path("/proc/self/stat").exists():
        yield
        return
    before = set(_live_children())
    yield
    deadline = time.monotonic() + 10.0  # a loaded CI machine: a child on its way out gets time
    while (left := {pid: c for pid, c in _live_children().items() if pid not in before}) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not left, f"the test left processes running: {left}"
