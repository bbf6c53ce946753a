"""The terminal driver: Textual's Linux driver, made safe for a terminal that goes away.

When a terminal window closes, every read and write on it fails with EIO and the kernel
sends SIGHUP, then SIGCONT. With Textual's own driver, specmon processes were found alive
hours later, every thread in a futex wait: the output thread died on EIO (or a SIGCONT handler
restarted application mode on a dead terminal) while the app kept putting escape sequences on
the thread's bounded queue, and ``put`` waited for ever; so did ``close`` (``put(None)`` and an
unbounded ``join``). The input thread's EIO became a ``panic`` that printed a traceback to the
dead terminal.

:class:`HangupSafeDriver` keeps the driver's behaviour on a live terminal and, once the terminal
is gone (a write or read failed, or the command's SIGHUP handler said so):

* drops output instead of queueing it (nobody can see it), and never blocks on the queue;
* does not restart application mode on SIGCONT;
* stops its output thread with a bounded wait;
* does not wait for the input thread, whose last ``select`` waited 0.1 s for keys that cannot
  come (a tenth of the second a closed terminal has to end every process);
* ends the input thread quietly and asks the app to exit.

It relies on ``WriterThread._queue`` (textual is pinned to 8.2.8 exactly).
"""

from __future__ import annotations

import queue
import signal
from typing import IO, Any

from textual.drivers.linux_driver import LinuxDriver

__all__ = ["HangupSafeDriver", "TerminalFile"]

#: Seconds a write may wait for room on the output queue before the terminal counts as gone.
PUT_TIMEOUT_S = 0.5
#: Seconds ``close`` waits for the output thread.
JOIN_TIMEOUT_S = 0.5


class TerminalFile:
    """The terminal's output file, whose write and flush never raise: a failure marks it gone.

    The output thread writes through it, so EIO does not kill the thread and leave its queue
    to fill up.
    """

    def __init__(self, file: IO[str]) -> None:
        self._file = file
        self.gone = False

    def write(self, text: str) -> int:
        if self.gone:
            return len(text)
        try:
            return self._file.write(text)
        except (OSError, ValueError):
            self.gone = True
            return len(text)

    def flush(self) -> None:
        if self.gone:
            return
        try:
            self._file.flush()
        except (OSError, ValueError):
            self.gone = True

    def fileno(self) -> int:
        return self._file.fileno()

    def isatty(self) -> bool:
        try:
            return self._file.isatty()
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)


class HangupSafeDriver(LinuxDriver):
    """Textual's Linux driver that drops output, skips SIGCONT's restart and stops promptly once
    the terminal is gone."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._terminal = TerminalFile(self._file)  # type: ignore[arg-type]  # sys.__stderr__, never None here
        self._file = self._terminal  # type: ignore[assignment]
        self._hung_up = False

    @property
    def terminal_gone(self) -> bool:
        """Whether the terminal went away (SIGHUP, or a read or write on it failed)."""
        return self._hung_up or self._terminal.gone

    def hang_up(self) -> None:
        """The command's SIGHUP handler: the terminal is gone, write nothing more to it."""
        self._hung_up = True

    def write(self, data: str) -> None:
        if self.terminal_gone:
            return
        thread = self._writer_thread
        if thread is None or not thread.is_alive():
            return
        try:
            thread._queue.put(data, timeout=PUT_TIMEOUT_S)
        except queue.Full:
            self._hung_up = True  # nobody drains the output: as good as gone

    def _sigcont_application(self, *args: Any) -> None:
        if not self.terminal_gone:
            super()._sigcont_application(*args)

    def disable_input(self) -> None:
        if not self.terminal_gone:
            super().disable_input()  # a live terminal: Textual's own, its last keys read
            return
        # Gone: the input thread is told to stop, not waited for (it ends within 0.2 s, or with
        # the process); nothing is flushed or restored on a terminal nobody has.
        try:
            signal.signal(signal.SIGWINCH, signal.SIG_DFL)
        except ValueError:
            pass  # not the main thread: the handler goes with the process
        self.exit_event.set()

    def _run_input_thread(self) -> None:
        try:
            self.run_input_thread()
        except OSError:
            # EIO: the terminal closed. Not a crash to report (on a terminal nobody sees): leave.
            self._hung_up = True
            self._call_app(self._app.exit)
        except BaseException:
            if self.terminal_gone:
                return  # its last events after the app closed: nobody to show them to
            import rich.traceback  # as Textual's own driver reports anything else

            self._call_app(self._app.panic, rich.traceback.Traceback())

    def _call_app(self, callback: Any, *args: Any) -> None:
        """``app.call_later`` from the input thread, quiet when the app's loop has closed meanwhile."""
        try:
            self._app.call_later(callback, *args)
        except RuntimeError:
            pass  # the loop closed: the app is already gone

    def close(self) -> None:
        thread = self._writer_thread
        if thread is None or not thread.is_alive():
            return
        try:
            thread._queue.put(None, timeout=JOIN_TIMEOUT_S)
        except queue.Full:
            return
        thread.join(JOIN_TIMEOUT_S)
