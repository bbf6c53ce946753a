"""Split a byte stream into complete text lines, remembering where they end.

Shared by the local and the SSH tail: both receive bytes in arbitrary chunks
(a line can straddle two reads or two SSH packets) and must hand only complete
lines to the parser, while knowing the byte offset just past the last complete
line so a reader can resume exactly there.

Linear time whatever the chunking: each chunk is searched once, and the bytes
of an unfinished line are kept as a list of pieces joined once, when its newline
arrives (joining and re-searching the whole pending buffer on every chunk made a
single 40 MB line take 17 s). A line longer than ``max_line`` bytes is cut to
``max_line`` bytes (memory stays bounded however long it grows), counted in
:attr:`LineSplitter.overlong`, and its real length kept in
:attr:`LineSplitter.longest`; offsets always count the real bytes.
"""

from __future__ import annotations

import re

__all__ = ["DEFAULT_MAX_LINE", "MAX_LINE_CAP", "MIN_LINE_CAP", "LineSplitter", "format_size", "parse_line_cap"]

DEFAULT_MAX_LINE = 1 << 20  # 1 MiB: no engine's log line comes near it
#: The line cap's range: below 1 KiB real stats lines (a vLLM per-position list, a long
#: server_args dump) would be cut; above 1 GiB one line could exhaust the memory it protects.
MIN_LINE_CAP = 1 << 10
MAX_LINE_CAP = 1 << 30

_SIZE = re.compile(r"([0-9]+)\s*([kKmMgG]?)(i?[bB])?")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_line_cap(value: str | int) -> int:
    """A line cap in bytes from ``"1MiB"``, ``"512k"``, ``"2M"``, ``"65536"`` or an int (units are 1024-based).

    Raises:
        ValueError: not a size, or outside 1 KiB-1 GiB; the message says what to write.

    >>> parse_line_cap("1MiB"), parse_line_cap("512k"), parse_line_cap(4096)
    (1048576, 524288, 4096)
    """
    if isinstance(value, bool):
        raise ValueError(f"not a size: {value!r}")
    if isinstance(value, int):
        size = value
    else:
        match = _SIZE.fullmatch(value.strip())
        if match is None:
            raise ValueError(f"not a size: {value!r} (write bytes, or with a unit: 512KiB, 1MiB, 4M)")
        size = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if not MIN_LINE_CAP <= size <= MAX_LINE_CAP:
        raise ValueError(f"line cap {value!r} is out of range: give 1KiB to 1GiB")
    return size


def format_size(size: int) -> str:
    """``1048576`` -> ``"1 MiB"``; sizes that are not a whole unit stay in bytes."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size:,} bytes"


class LineSplitter:
    """Accumulate bytes; release complete lines decoded with replacement characters.

    Args:
        offset: Byte offset in the file of the first byte that will be fed.
        encoding: Text encoding of the lines (invalid bytes become U+FFFD).
        max_line: Longest line kept, in bytes (excluding the newline); longer
            lines are cut to this length.

    Attributes:
        offset: Byte offset in the file just past the last complete line released.
        tail: The last (up to ``TAIL_SIZE``) bytes before ``offset``, when known: a
            resuming reader compares them with the file to detect that it was
            replaced (inode numbers get reused) or rewritten.
        overlong: How many released lines were longer than ``max_line`` (and cut).
        longest: Real length in bytes of the longest over-long line, 0 if none.
    """

    TAIL_SIZE = 64
    __slots__ = (
        "offset", "encoding", "tail", "max_line", "overlong", "longest",
        "_parts", "_kept", "_plen", "_recent",
    )

    def __init__(self, offset: int = 0, encoding: str = "utf-8", max_line: int = DEFAULT_MAX_LINE) -> None:
        if max_line < 1:
            raise ValueError("max_line must be at least 1 byte")
        self.offset = offset
        self.encoding = encoding
        self.max_line = max_line
        self.tail = b""
        self.overlong = 0
        self.longest = 0
        self._parts: list[bytes] = []  # the kept (at most max_line) bytes of the unfinished line
        self._kept = 0
        self._plen = 0  # real length of the unfinished line
        self._recent = b""  # the last TAIL_SIZE bytes before read_position

    @property
    def pending(self) -> bytes:
        """The kept bytes of the incomplete last line (at most ``max_line``)."""
        if len(self._parts) > 1:
            self._parts = [b"".join(self._parts)]
        return self._parts[0] if self._parts else b""

    @property
    def pending_length(self) -> int:
        """Real length of the incomplete last line, in bytes."""
        return self._plen

    @property
    def read_position(self) -> int:
        """Offset of the next byte to read: completed lines plus the pending part."""
        return self.offset + self._plen

    @property
    def recent(self) -> bytes:
        """The last (up to ``TAIL_SIZE``) bytes before :attr:`read_position`."""
        return self._recent

    def reset(self, offset: int = 0) -> None:
        """Start counting at ``offset`` of a (new) file; forget pending and tail bytes."""
        self.offset = offset
        self.tail = b""
        self._recent = b""
        self._clear_pending()

    def drop_pending(self) -> None:
        """Forget the incomplete line (it will be read again whole on resume)."""
        self._clear_pending()
        self._recent = self.tail

    def take_pending(self) -> str | None:
        """Release the incomplete last line as a line (its file ended); None if there is none."""
        if not self._plen:
            return None
        line = self._finish(b"")
        self.offset += self._plen
        self.tail = self._recent
        self._clear_pending()
        return line

    def _clear_pending(self) -> None:
        self._parts = []
        self._kept = 0
        self._plen = 0

    def _keep(self, data: bytes) -> None:
        """Add bytes to the unfinished line, keeping at most ``max_line`` of them."""
        self._plen += len(data)
        room = self.max_line - self._kept
        if room > 0 and data:
            piece = data[:room]
            self._parts.append(piece)
            self._kept += len(piece)

    def _decode(self, line: bytes, length: int) -> str:
        if length > self.max_line:
            self.overlong += 1
            self.longest = max(self.longest, length)
            line = line[: self.max_line]
        elif line.endswith(b"\r"):
            line = line[:-1]
        return line.decode(self.encoding, errors="replace")

    def _finish(self, head: bytes) -> str:
        """The unfinished line completed by ``head`` (the bytes before its newline)."""
        length = self._plen + len(head)
        if not self._parts:
            return self._decode(head, length)
        room = self.max_line + 1 - self._kept  # one byte more: a kept "\r" must stay visible
        return self._decode(b"".join(self._parts) + head[: max(0, room)], length)

    def feed(self, data: bytes) -> list[str]:
        """Add bytes; return the lines they complete, without line endings.

        Decoding happens per complete line, so a multi-byte character split
        across two chunks is decoded correctly; invalid bytes become U+FFFD.
        A trailing ``\\r`` (CRLF logs) is dropped with the ``\\n``.
        """
        if not data:
            return []
        recent = self._recent
        self._recent = (recent + data[-self.TAIL_SIZE :])[-self.TAIL_SIZE :]
        first = data.find(b"\n")
        if first < 0:
            self._keep(data)
            return []
        last = data.rfind(b"\n")
        lines = [self._finish(data[:first])]
        if last > first:
            middle = data[first + 1 : last]
            if len(middle) <= self.max_line:
                lines.extend(self._decode(raw, 0) for raw in middle.split(b"\n"))
            else:
                lines.extend(self._decode(raw, len(raw)) for raw in middle.split(b"\n"))
        self.offset += self._plen + last + 1
        if last + 1 >= self.TAIL_SIZE:
            self.tail = data[last + 1 - self.TAIL_SIZE : last + 1]
        else:
            self.tail = (recent + data[: last + 1])[-self.TAIL_SIZE :]
        self._clear_pending()
        self._keep(data[last + 1 :])
        return lines
