"""The configuration lines a history window leaves out: found before it and read first.

A follower starts with the last N lines of a log (``--lines``, 1,000 by default). An engine
says its configuration once, when a launch starts (SGLang's ``server_args=``, vLLM's
``non-default args:``, llama.cpp's ``common_speculative`` lines); a server that has run
for a while has pushed those lines far above the window, and everything read would be
"unknown config" (seen on four real llama-server replicas at ``-lv 4``: 60,000 lines in
25 s). So before the window, the follower looks for the *last* configuration lines of any
engine (:data:`CONFIG_MARKERS`, each engine module's own) and delivers them first: the
latest launch's configuration, not the first one's, since a log appended to by several
launches has its newest configuration last.

The search is bounded and cheap: on this machine ``mmap`` and ``rfind`` (C speed, no copy of
the file); on a host one ``tail -c +FLOOR -- LOG | head -c LEN | grep -a -b -F -e M ... | tail -n K``,
both at most :data:`PREFACE_REACH` bytes back from the window.
At most :data:`PREFACE_LINES` lines are kept, all within :data:`PREFACE_SPAN` bytes of the last
one (one launch's configuration block, never a mix reaching back through older launches).
"""

from __future__ import annotations

import mmap
import shlex

from specmon.engines import ADAPTERS

__all__ = ["CONFIG_MARKERS", "PREFACE_LINES", "PREFACE_SPAN", "local_preface", "parse_grep", "preface_command"]

#: Every engine's configuration-line markers, in the order the engines are declared.
CONFIG_MARKERS: tuple[str, ...] = tuple(dict.fromkeys(m for a in ADAPTERS for m in a.config_markers))
#: Configuration lines kept at most (llama.cpp writes two per speculative implementation).
PREFACE_LINES = 8
#: Bytes before the last configuration line that still belong to its block.
PREFACE_SPAN = 256 * 1024
#: Bytes before the window searched at most: a launch whose configuration is further back than this is
#: not looked for (a bound on the start-up cost of a huge log; measured in tests/unit/test_preface.py).
PREFACE_REACH = 256 * 1024 * 1024


def _keep(found: list[tuple[int, bytes]], max_line: int) -> list[str]:
    """The block of ``(offset, line)`` (oldest first) ending at the last one, as text lines."""
    if not found:
        return []
    last = found[-1][0]
    block = [line for offset, line in found[-PREFACE_LINES:] if last - offset <= PREFACE_SPAN]
    return [line[:max_line].decode("utf-8", "replace").rstrip("\r") for line in block]


def local_preface(fd: int, start: int, max_line: int) -> list[str]:
    """The last configuration block in bytes ``[0, start)`` of an open file."""
    if start <= 0 or not CONFIG_MARKERS:
        return []
    floor = max(0, start - PREFACE_REACH)
    with mmap.mmap(fd, start, access=mmap.ACCESS_READ) as mm:
        found: list[tuple[int, bytes]] = []
        end = start
        markers = [m.encode() for m in CONFIG_MARKERS]
        while len(found) < PREFACE_LINES and markers:
            hits = [(mm.rfind(m, floor, end), m) for m in markers]
            markers = [m for at, m in hits if at >= 0]  # absent above here: absent below too
            at = max((at for at, _ in hits), default=-1)
            if at < 0 or (found and found[0][0] - at > PREFACE_SPAN):
                break
            line_start = mm.rfind(b"\n", 0, at) + 1
            line_end = mm.find(b"\n", at, start)
            found.insert(0, (line_start, mm[line_start:line_end if line_end >= 0 else start]))
            end = line_start
        return _keep(found, max_line)


def preface_command(path: str, start: int) -> str:
    """The host's command printing ``OFFSET:LINE`` for the last configuration lines before byte ``start``."""
    patterns = " ".join(f"-e {shlex.quote(m)}" for m in CONFIG_MARKERS)
    floor = max(0, int(start) - PREFACE_REACH)
    # grep -b counts from the first byte it reads: the offsets are relative to the floor.
    return (f"tail -c +{floor + 1} -- {shlex.quote(path)} | head -c {int(start) - floor} | "
            f"grep -a -b -F {patterns} | tail -n {PREFACE_LINES}")


def parse_grep(out: bytes, max_line: int) -> list[str]:
    """The configuration block from :func:`preface_command`'s output (malformed lines skipped)."""
    found: list[tuple[int, bytes]] = []
    for raw in out.split(b"\n"):
        offset, sep, line = raw.partition(b":")
        if sep and offset.isdigit():
            found.append((int(offset), line))
    return _keep(found, max_line)
