"""Run ``specmon`` in a pseudo-terminal, as a user's shell would: stdin, stdout and stderr on a pty."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def state_of(pid: int) -> str | None:
    """The process's state letter, or None when it is gone (a zombie counts as gone: ``Z``)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(") ", 1)[1].split()[0]
    except (OSError, IndexError):
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a live process (not gone, not a zombie waiting to be reaped)."""
    return state_of(pid) not in (None, "Z", "X")


class PtyProcess:
    """``python -m specmon ARGS`` on a new pty, its output collected by a thread.

    Args:
        args: The command line after ``specmon``.
        env: Extra environment.
    """

    def __init__(self, args: list[str], env: dict[str, str]) -> None:
        master, slave = pty.openpty()
        full = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40", **env}
        self.proc = subprocess.Popen([sys.executable, "-m", "specmon", *args], stdin=slave, stdout=slave,
                                     stderr=slave, env=full, cwd=ROOT, start_new_session=True)
        os.close(slave)
        self.master: int | None = master
        self._chunks: list[bytes] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        while self.master is not None:
            try:
                data = os.read(self.master, 65536)
            except OSError:
                return  # the child closed its end, or the test hung up
            if not data:
                return
            self._chunks.append(data)

    @property
    def output(self) -> str:
        """Everything the process wrote so far (escape sequences included)."""
        return b"".join(self._chunks).decode(errors="replace")

    def hang_up(self) -> None:
        """Close the terminal, as a closed window does (the signal is sent by the caller)."""
        master, self.master = self.master, None
        if master is not None:
            os.close(master)

    def wait_until(self, condition: Callable[[], object], what: str, bound_s: float = 120.0) -> None:
        """Wait for ``condition`` (a bound against a hang, not a timing assertion)."""
        deadline = time.monotonic() + bound_s
        while not condition():
            if self.proc.poll() is not None:
                raise AssertionError(f"specmon exited ({self.proc.returncode}) before {what}:\n{self.output[-3000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"never happened: {what}\n{self.output[-3000:]}")
            time.sleep(0.1)

    def wait_exit(self, bound_s: float = 120.0) -> int:
        """The exit status, once it exits."""
        try:
            return self.proc.wait(timeout=bound_s)
        except subprocess.TimeoutExpired:
            raise AssertionError(f"specmon did not exit:\n{self.output[-3000:]}") from None

    def final_output(self) -> str:
        """Everything it wrote, once it has exited and its end of the terminal is closed."""
        self._reader.join(10)
        return self.output

    def kill(self) -> None:
        """Kill it (by its PID) if it still runs; close the terminal."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.hang_up()
