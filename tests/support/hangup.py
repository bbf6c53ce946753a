"""``specmon`` on a pty that is its controlling terminal, so closing the master is a real hang-up.

:class:`~tests.support.ptyproc.PtyProcess` starts the child in a new session without a
controlling terminal (its tests send SIGHUP themselves). Here the child makes the pty's slave
its controlling terminal (``setsid`` + ``TIOCSCTTY``), as a login shell's child has: when the
test closes the master, the kernel sends SIGHUP to the foreground process group, and reads and
writes on the terminal fail with EIO from then on, exactly as when a terminal window closes.
"""

from __future__ import annotations

import fcntl
import os
import re
import select
import signal
import subprocess
import sys
import termios
import threading
import time
from collections.abc import Callable
from pathlib import Path

from tests.support.proctree import all_gone_after, kill_marked, new_mark
from tests.support.ptyproc import running

ROOT = Path(__file__).resolve().parents[2]
_CSI = re.compile(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]|\x1b[()][A-Za-z0-9]|\x1b[=>]")


def _controlling_tty() -> None:  # runs in the child, between fork and exec
    os.setsid()
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)


class HangupPty:
    """``python -m specmon ARGS`` with the pty as its controlling terminal; output read by a thread."""

    def __init__(self, args: list[str], env: dict[str, str], *, size: tuple[int, int] = (120, 40)) -> None:
        master, slave = os.openpty()
        full = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(size[0]), "LINES": str(size[1]), **env}
        self.proc = subprocess.Popen([sys.executable, "-m", "specmon", *args], stdin=slave, stdout=slave,
                                     stderr=slave, env=full, cwd=ROOT, preexec_fn=_controlling_tty)
        os.close(slave)
        self.master: int | None = master
        self._chunks: list[bytes] = []
        self._closing = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        # Never blocked in read(): a read in flight holds the master's file open after close(),
        # so the hang-up (SIGHUP, EIO) came only once the app next wrote something, up to
        # 1.2 s later (the demo), and that wait was counted as specmon's.
        while not self._closing.is_set():
            master = self.master
            if master is None:
                return
            try:
                ready, _, _ = select.select([master], [], [], 0.02)
                if not ready:
                    continue
                data = os.read(master, 65536)
            except (OSError, ValueError):
                return
            if not data:
                return
            self._chunks.append(data)

    @property
    def output(self) -> str:
        """What was drawn so far, escape sequences removed (what a user reads)."""
        return _CSI.sub("", b"".join(self._chunks).decode(errors="replace"))

    def wait_for(self, text: str, bound_s: float = 120.0) -> None:
        """Wait until ``text`` was drawn (a bound against a hang, not a timing assertion)."""
        deadline = time.monotonic() + bound_s
        while text not in self.output:
            if self.proc.poll() is not None:
                raise AssertionError(f"specmon exited ({self.proc.returncode}) before {text!r}:\n{self.output[-2000:]}")
            if time.monotonic() > deadline:
                raise AssertionError(f"never drawn: {text!r}\n{self.output[-2000:]}")
            time.sleep(0.05)

    def close_terminal(self) -> float:
        """Close the master (the window closes); returns the monotonic time it happened."""
        self._closing.set()
        self._reader.join(1.0)  # its last select ends within 20 ms: then nothing holds the file
        master, self.master = self.master, None
        at = time.monotonic()
        if master is not None:
            os.close(master)
        return at

    def gone_after(self, since: float, bound_s: float = 15.0) -> float:
        """Seconds from ``since`` until the process is gone (``bound_s`` + 1 if it never goes)."""
        pid = self.proc.pid
        while time.monotonic() - since < bound_s:
            if self.proc.poll() is not None or not running(pid):
                return time.monotonic() - since
            time.sleep(0.01)
        return bound_s + 1

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.master is not None:
            self.close_terminal()


#: The issue's target is a second (bench/bench_hangup.py measures it, many tries per command). In the
#: suite, on two cores shared with another test worker and more, an exit that takes 1.01 s is load,
#: not the bug (processes alive for hours): the suite's bound turns a hang into a failure.
TARGET_S = 1.0
BOUND_S = 3.0
#: Moments after the first frame at which the terminal closes (at once: while it is still building).
MOMENTS = (0.0, 0.3, 0.8)


def _end_times(args: list[str], env: dict[str, str], first_frame: str, moments: tuple[float, ...],
               end: Callable[[HangupPty], float]) -> list[float]:
    """Seconds from ``end`` (which ends the run and says when) to every process of the run gone, once per moment."""
    took = []
    for moment in moments:
        marked_env = {**env, **new_mark()}
        p = HangupPty(args, marked_env)
        try:
            p.wait_for(first_frame, 90)
            time.sleep(moment)
            took.append(all_gone_after(marked_env, end(p))[0])
        finally:
            p.kill()
            kill_marked(marked_env)
    return took


def hang_up_times(args: list[str], env: dict[str, str], first_frame: str = "specmon",
                  moments: tuple[float, ...] = MOMENTS) -> list[float]:
    """Seconds from closing the terminal to every process of the run gone (the command, its
    workers and helpers, the servers it started: :mod:`tests.support.proctree`), once per moment."""
    return _end_times(args, env, first_frame, moments, lambda p: p.close_terminal())


def _sigterm(p: HangupPty) -> float:
    at = time.monotonic()
    p.proc.send_signal(signal.SIGTERM)
    return at


def sigterm_times(args: list[str], env: dict[str, str], first_frame: str = "specmon",
                  moments: tuple[float, ...] = MOMENTS) -> list[float]:
    """As :func:`hang_up_times`, with SIGTERM to the command instead of closing its terminal."""
    return _end_times(args, env, first_frame, moments, _sigterm)


def write_big_log(path: Path, small: Path, repeats: int = 2000) -> Path:
    """An SGLang log of one long run: ``small``'s other lines, then its decode lines ``repeats`` times
    (2000 times the simulator's log is about 60 MB: a reader of it is still busy when the run is ended)."""
    lines = small.read_text().splitlines()
    decode = "\n".join(line for line in lines if "Decode batch" in line) + "\n"
    with open(path, "w") as f:
        f.write("\n".join(line for line in lines if "Decode batch" not in line) + "\n")
        for _ in range(repeats):
            f.write(decode)
    return path
