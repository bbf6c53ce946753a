"""The helper run on the host: the reviewed ``remote_tail.sh`` and the command that starts it.

The script is a fixed resource shipped in this package, never built from input; every
argument it gets is quoted. See :mod:`specmon.sources.ssh` for what it does.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Sequence
from importlib import resources

__all__ = ["HELPER_NAME", "POLL_INTERVAL", "SEEN_KEPT", "helper_script", "tail_command", "tail_command_summary"]

HELPER_NAME = "remote_tail.sh"
POLL_INTERVAL = 0.2
#: Rotated files remembered as read to their end (the helper never reads them again).
SEEN_KEPT = 16
_MTIME = re.compile(r"[0-9]{1,20}(?:\.[0-9]{1,12})?")


def helper_script() -> str:
    """The reviewed POSIX ``sh`` helper run on the host (``specmon/sources/remote_tail.sh``).

    Whole-line comments and blank lines are left out of what is sent (the script has
    no heredocs, so that changes nothing it does).
    """
    text = resources.files("specmon.sources").joinpath(HELPER_NAME).read_text(encoding="utf-8")
    kept = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    return "\n".join(kept) + "\n"


def tail_command(
    path: str,
    offset: int,
    identity: tuple[int, int] | None = None,
    poll: float = POLL_INTERVAL,
    *,
    after: str | None = None,
    seen: Sequence[tuple[int, int]] = (),
    birth: str | None = None,
) -> str:
    """The follow command: the helper reading ``path`` (or the file ``identity``) from ``offset``.

    ``after`` (with no ``identity``): the mtime of the rotated file last read to its end,
    when the connection dropped before the helper said which file comes next: it goes on
    along the rotation chain from there. ``seen``: files already read to their end.
    ``birth``: the birth time of the file ``identity`` (a new file reusing its inode
    number has another one).
    Every argument is quoted; the script is a fixed resource, never built from input.

    >>> tail_command("/var/log/my server.log", 0).endswith("specmon-tail '/var/log/my server.log' '' '' 0 0.2 '' ''")
    True
    """
    dev, ino = (str(identity[0]), str(identity[1])) if identity else ("", "")
    if after is not None and not _MTIME.fullmatch(after):
        raise ValueError(f"not an mtime: {after!r}")
    if birth is not None and not _MTIME.fullmatch(birth):
        raise ValueError(f"not a birth time: {birth!r}")
    chain = " ".join(f"{d}:{i}" for d, i in seen)
    return shlex.join(["exec", "sh", "-c", helper_script(), "specmon-tail", path, dev, ino, str(offset), f"{poll:g}",
                       after or "", chain, birth if birth and identity else ""])


def tail_command_summary(
    path: str, offset: int, identity: tuple[int, int] | None, after: str | None = None
) -> str:
    """What the event log shows for :func:`tail_command` (the script itself is long)."""
    if identity:
        where = f"file {identity[0]}:{identity[1]} from byte {offset}"
    elif after:
        where = "the file rotated after the last one read to its end"
    else:
        where = f"the file from byte {offset}"
    return f"exec sh -c <{HELPER_NAME}> specmon-tail {shlex.quote(path)}: {where}"
