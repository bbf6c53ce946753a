"""Open what the user names: every file input of every command goes through here.

A named input can be something no file reader expects: a FIFO (``open`` blocks until a writer
comes, deaf to Ctrl+C), ``/dev/zero`` (reads for ever: ``--config /dev/zero`` grew to 2.3 GB in
ten seconds), a directory, a sparse 2 GB file where a few kilobytes were meant, or a path whose
folder does not exist. Each is told in one sentence that names the path whole, before anything
can block or grow:

* :func:`check_input` looks at the path with ``os.stat`` (which never blocks, whatever the path
  names) and raises :class:`InputError` for what this kind of input cannot be;
* :func:`open_input` opens it without blocking (``O_NONBLOCK``: a FIFO with no writer opens at
  once) and checks the open descriptor again (the path may have changed in between);
* :func:`read_small_text` reads a whole small file (a config, a theme, prompts, a sweep's state):
  refused beyond its limit before reading, read at most limit + 1 bytes, in a daemon thread with
  a deadline (a regular file on a hung network mount could still stall) that never holds the
  process.

Logs are the one input that may be a FIFO: the local follower reads one as a stream
(``stream=True``). Everything read whole (summarize, replay, report, prompts, state, themes,
config) is a regular file or a sentence.
"""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path
from typing import BinaryIO

__all__ = ["DEFAULT_LIMIT", "DEFAULT_TIMEOUT_S", "InputError", "SmallFileError", "check_input", "kind_of",
           "open_input", "read_small_text", "size_text"]

#: A config or a theme is a few kilobytes; one megabyte is already absurd.
DEFAULT_LIMIT = 1 << 20
#: Seconds a read may take (a local file takes microseconds).
DEFAULT_TIMEOUT_S = 5.0

_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
               | getattr(os, "O_CLOEXEC", 0))


class InputError(OSError):
    """A named input that cannot be used as asked; ``str()`` is the one sentence, the path whole in it."""


#: The name the config and theme readers have always caught.
SmallFileError = InputError


def kind_of(mode: int) -> str | None:
    """What a ``st_mode`` names, in words ("a FIFO (a named pipe)"), or None for a regular file."""
    if stat.S_ISREG(mode):
        return None
    for test, name in ((stat.S_ISFIFO, "a FIFO (a named pipe)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISDIR, "a directory")):
        if test(mode):
            return name
    return "not a regular file"


def size_text(n: int) -> str:
    """A size for a sentence: exact bytes below 10 kB, else three figures (``2.15 GB``)."""
    if n < 10_000:
        return f"{n:,} bytes"
    # The unit is chosen after rounding to three figures: 999,500,000 bytes is "1 GB", not "1e+03 MB".
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if float(f"{n / scale:.3g}") >= 1 or unit == "kB":
            return f"{float(f'{n / scale:.3g}'):g} {unit}"
    raise AssertionError("unreachable")


def _problem(path: str | os.PathLike[str], mode: int, size: int, what: str, *, stream: bool,
             limit: int | None, hint: str | None) -> str | None:
    """The sentence for an input of this type and size, or None when it can be used."""
    if stream and stat.S_ISFIFO(mode):
        return None
    kind = kind_of(mode)
    if kind is not None:
        if stat.S_ISDIR(mode):
            return f"{path} is a directory, not a {what}"
        return f"{path} is {kind}, not a regular file" + (f": {hint}" if hint else "")
    if limit is not None and size > limit:
        return f"{path} is {size_text(size)}, larger than the {size_text(limit)} limit for a {what}"
    return None


def check_input(path: str | os.PathLike[str], what: str, *, stream: bool = False, limit: int | None = None,
                wait: bool = False, hint: str | None = None) -> os.stat_result | None:
    """Look at a named input before anything opens it; ``os.stat`` never blocks.

    Args:
        path: The path as the user gave it (``~`` is not expanded here).
        what: What the input is, for the sentence ("log file", "prompts file", "sweep state file").
        stream: A FIFO is accepted (it is read as a stream, without blocking).
        limit: Most bytes a regular file may have (it is read whole); None: no limit.
        wait: A missing file in an existing folder is fine (it is waited for, as ``tail -F``
            does): None is returned. A missing folder is still refused.
        hint: What to do instead, said after a FIFO's or a device's sentence.

    Returns:
        The path's ``stat``, or None when it is missing and ``wait`` is set.

    Raises:
        InputError: missing (with ``wait``: its folder), not usable as this input (a FIFO, a
            device, a directory), larger than ``limit``, or not accessible; one sentence.
    """
    try:
        info = os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        if not wait:
            raise InputError(f"{path}: no such file") from None
        parent = Path(path).parent
        if not parent.is_dir():  # nothing will ever appear there: a mistake in the path
            raise InputError(f"the folder of {path} does not exist ({parent}): check the path") from None
        return None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{path}: {exc.strerror or exc}") from None
    problem = _problem(path, info.st_mode, info.st_size, what, stream=stream, limit=limit, hint=hint)
    if problem is not None:
        raise InputError(problem)
    if not os.access(path, os.R_OK):
        raise InputError(f"{path}: permission denied")
    return info


def open_input(path: str | os.PathLike[str], what: str, *, stream: bool = False,
               limit: int | None = None, hint: str | None = None) -> tuple[int, os.stat_result]:
    """Open a named input for reading without blocking, and check what was opened.

    The descriptor of a FIFO (``stream=True``) stays non-blocking: a read with no data raises
    ``BlockingIOError``, one with no writer returns ``b""``. A regular file reads as usual.

    Returns:
        The descriptor (close it) and its ``fstat``.

    Raises:
        FileNotFoundError: no such file (the caller decides whether to wait for it).
        InputError: as for :func:`check_input`, from what was opened.
        OSError: any other failure to open it.
    """
    try:
        fd = os.open(Path(path), _OPEN_FLAGS)
    except FileNotFoundError:
        raise
    except OSError:
        # A socket cannot be opened at all (ENXIO): say what it is, not the errno's words.
        try:
            info = os.stat(path)
        except OSError:
            info = None
        problem = info and _problem(path, info.st_mode, info.st_size, what, stream=stream, limit=limit, hint=hint)
        if problem:
            raise InputError(problem) from None
        raise
    try:
        info = os.fstat(fd)
        problem = _problem(path, info.st_mode, info.st_size, what, stream=stream, limit=limit, hint=hint)
        if problem is not None:
            raise InputError(problem)
    except BaseException:
        os.close(fd)
        raise
    return fd, info


def open_bytes(path: Path, what: str, error: type[Exception], *, hint: str | None = None) -> BinaryIO:
    """A named input opened (as :func:`open_input`) to read bytes; any failure to open it is one
    sentence raised as ``error``, the caller's own class (a log's, a recording's)."""
    try:
        fd, _ = open_input(path, what, hint=hint)
    except InputError as exc:
        raise error(str(exc)) from None
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: {exc.strerror or exc}") from None
    return os.fdopen(fd, "rb")


def read_small_text(path: str | os.PathLike[str], *, limit: int = DEFAULT_LIMIT,
                    timeout: float = DEFAULT_TIMEOUT_S, what: str = "file of this kind") -> str:
    """The UTF-8 text of a regular file of at most ``limit`` bytes.

    Raises:
        FileNotFoundError: no such file.
        InputError: not a regular file (a FIFO, ``/dev/zero``, a directory), larger than
            ``limit``, or not read within ``timeout`` seconds; one sentence naming the path.
        OSError: any other failure to open or read it.
        UnicodeDecodeError: not UTF-8.
    """
    fd, _ = open_input(path, what, limit=limit)
    stuck = False
    try:
        try:
            data = _read_with_deadline(fd, limit, timeout)
        except InputError as exc:
            stuck = getattr(exc, "stuck", False)
            raise InputError(f"{path}: {exc}") from None
        if len(data) > limit:  # it grew since fstat
            raise InputError(f"{path} is larger than the {size_text(limit)} limit for a {what}")
        return data.decode("utf-8")
    finally:
        if not stuck:  # a read still stuck in the kernel keeps its descriptor: never a reused number
            os.close(fd)


def _read_with_deadline(fd: int, limit: int, timeout: float) -> bytes:
    """At most ``limit`` + 1 bytes of ``fd``, read in a daemon thread given ``timeout`` seconds.

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
        exc = InputError(f"not read within {timeout:g} s")
        exc.stuck = True  # type: ignore[attr-defined]
        raise exc
    if failure:
        raise failure[0]
    return b"".join(chunks)
