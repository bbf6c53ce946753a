"""Read a small text file a user named (a config, a theme): bounded, never blocking.

``--config /dev/zero`` grew to 2.3 GB in ten seconds, and a FIFO as ``--config`` blocked for
ever, deaf to Ctrl+C. :func:`read_small_text` opens without blocking (``O_NONBLOCK``: a FIFO
with no writer opens at once), refuses anything but a regular file, refuses a file larger
than the cap before reading it, reads at most cap + 1 bytes, and gives the read a deadline
(a regular file on a hung network mount could still stall): the read runs in a daemon
thread that can never hold the process.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

__all__ = ["DEFAULT_LIMIT", "DEFAULT_TIMEOUT_S", "SmallFileError", "read_small_text"]

#: A config or a theme is a few kilobytes; one megabyte is already absurd.
DEFAULT_LIMIT = 1 << 20
#: Seconds a read may take (a local file takes microseconds).
DEFAULT_TIMEOUT_S = 5.0


class SmallFileError(OSError):
    """The file is not a regular file, is too large, or could not be read in time; ``str()`` says which."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def read_small_text(path: str | os.PathLike[str], *, limit: int = DEFAULT_LIMIT,
                    timeout: float = DEFAULT_TIMEOUT_S) -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes.

    Raises:
        FileNotFoundError: no such file.
        SmallFileError: not a regular file (a FIFO, ``/dev/zero``, a directory), larger than
            ``limit``, or not read within ``timeout`` seconds.
        OSError: any other failure to open or read it.
        UnicodeDecodeError: not UTF-8.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(Path(path), flags)
    stuck = False
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SmallFileError(f"{_kind(st.st_mode)}, not a regular file")
        if st.st_size > limit:
            raise SmallFileError(f"{st.st_size:,} bytes: larger than the {limit:,} bytes a file of this kind may have")
        try:
            data = _read_with_deadline(fd, limit, timeout)
        except SmallFileError as exc:
            stuck = getattr(exc, "stuck", False)
            raise
        return data.decode("utf-8")
    finally:
        if not stuck:  # a read still stuck in the kernel keeps its descriptor: never a reused number
            os.close(fd)


def _read_with_deadline(fd: int, limit: int, timeout: float) -> bytes:
    """At most ``limit`` bytes of ``fd``, read in a daemon thread given ``timeout`` seconds.

    After the deadline it raises with ``stuck`` set: the thread is left to the kernel.
    """
    chunks: list[bytes] = []
    failure: list[BaseException] = []

    def read() -> None:
        try:
            total = 0
            while total <= limit:
                chunk = os.read(fd, min(1 << 16, limit + 1 - total))
                if not chunk:
                    return
                chunks.append(chunk)
                total += len(chunk)
        except BaseException as exc:  # handed to the caller
            failure.append(exc)

    reader = threading.Thread(target=read, name="specmon small-file read", daemon=True)
    reader.start()
    reader.join(timeout)
    if reader.is_alive():
        exc = SmallFileError(f"not read within {timeout:g} s")
        exc.stuck = True  # type: ignore[attr-defined]
        raise exc
    if failure:
        raise failure[0]
    data = b"".join(chunks)
    if len(data) > limit:  # it grew since fstat
        raise SmallFileError(f"larger than the {limit:,} bytes a file of this kind may have")
    return data
