"""Split a byte stream into complete text lines, remembering where they end.

Shared by the local and the SSH tail: both receive bytes in arbitrary chunks
(a line can straddle two reads or two SSH packets) and must hand only complete
lines to the parser, while knowing the byte offset just past the last complete
line so a reader can resume exactly there.
"""

from __future__ import annotations

__all__ = ["LineSplitter"]


class LineSplitter:
    """Accumulate bytes; release complete lines decoded with replacement characters.

    Attributes:
        offset: Byte offset in the file just past the last complete line released.
        pending: Bytes of the incomplete last line, not yet released.
        tail: The last (up to ``TAIL_SIZE``) bytes before ``offset``, when known: a
            resuming reader compares them with the file to detect that it was
            replaced (inode numbers get reused) or rewritten.
    """

    TAIL_SIZE = 64
    __slots__ = ("offset", "pending", "encoding", "tail")

    def __init__(self, offset: int = 0, encoding: str = "utf-8") -> None:
        self.offset = offset
        self.pending = b""
        self.encoding = encoding
        self.tail = b""

    @property
    def read_position(self) -> int:
        """Offset of the next byte to read: completed lines plus the pending part."""
        return self.offset + len(self.pending)

    def reset(self, offset: int = 0) -> None:
        """Start counting at ``offset`` of a (new) file; forget pending and tail bytes."""
        self.offset = offset
        self.pending = b""
        self.tail = b""

    def drop_pending(self) -> None:
        """Forget the incomplete line (it will be read again whole on resume)."""
        self.pending = b""

    def feed(self, data: bytes) -> list[str]:
        """Add bytes; return the lines they complete, without line endings.

        Decoding happens per complete line, so a multi-byte character split
        across two chunks is decoded correctly; invalid bytes become U+FFFD.
        A trailing ``\\r`` (CRLF logs) is dropped with the ``\\n``.
        """
        if not data:
            return []
        buffer = self.pending + data
        end = buffer.rfind(b"\n")
        if end < 0:
            self.pending = buffer
            return []
        complete, self.pending = buffer[: end + 1], buffer[end + 1 :]
        self.offset += len(complete)
        self.tail = (self.tail + complete)[-self.TAIL_SIZE :]
        lines = complete[:-1].split(b"\n")
        return [
            (line[:-1] if line.endswith(b"\r") else line).decode(self.encoding, errors="replace")
            for line in lines
        ]
