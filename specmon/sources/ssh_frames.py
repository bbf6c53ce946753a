"""The helper's wire format: the frames it writes on stdout, and the reader that cuts them out.

Everything before the helper's marker line is login noise (kept for the error message); after
it, each frame is a header line (a kind letter and integer fields) and, for some kinds, a body
whose length a field gives.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Frame", "FrameReader", "ProtocolError"]


@dataclass(frozen=True, slots=True)
class Frame:
    """One message of the helper: a kind letter, its numeric fields, and its body bytes."""

    kind: str
    fields: tuple[int, ...] = ()
    body: bytes = b""


class ProtocolError(Exception):
    """The helper's output is not what it sends (a wrong script, a login banner on stdout)."""


# kind -> (number of integer fields, index of the field giving the body length, or None)
_FRAMES: dict[bytes, tuple[int, int | None]] = {
    b"O": (4, 3), b"D": (2, 1), b"K": (1, None), b"T": (1, None), b"R": (4, 3),
    b"G": (3, None), b"A": (1, 0), b"M": (0, None), b"U": (0, None), b"H": (0, None),
}


class FrameReader:
    """Cut the helper's stdout into :class:`Frame`\\ s, whatever the packet boundaries.

    Linear: the buffer is only searched for a header's newline, and bodies are
    taken by length.
    """

    MAX_HEADER = 256
    MARKER = b"\nS specmon-tail 1\n"
    MAX_NOISE = 1 << 16

    def __init__(self) -> None:
        self._buf = bytearray()
        self._body: tuple[str, tuple[int, ...], int] | None = None
        self._synced = False
        self.noise = b""  # what the remote login scripts printed before the helper's marker

    def feed(self, data: bytes) -> list[Frame]:
        """Add bytes; return the frames they complete."""
        self._buf += data
        frames: list[Frame] = []
        if not self._synced:
            found = self._buf.find(self.MARKER)
            if found < 0:
                if len(self._buf) > self.MAX_NOISE:
                    raise ProtocolError(f"no helper output, only {bytes(self._buf[:60])!r}")
                return frames
            self.noise = bytes(self._buf[:found])
            del self._buf[: found + len(self.MARKER)]
            self._synced = True
        while True:
            if self._body is not None:
                kind, fields, size = self._body
                if len(self._buf) < size:
                    return frames
                body = bytes(self._buf[:size])
                del self._buf[:size]
                self._body = None
                frames.append(Frame(kind, fields, body))
                continue
            newline = self._buf.find(b"\n", 0, self.MAX_HEADER)
            if newline < 0:
                if len(self._buf) >= self.MAX_HEADER:
                    raise ProtocolError(f"unexpected output {bytes(self._buf[:60])!r}")
                return frames
            header = bytes(self._buf[:newline]).split(b" ")
            del self._buf[: newline + 1]
            if header[0] == b"X":
                frames.append(Frame("X", (), b" ".join(header[1:])))
                continue
            spec = _FRAMES.get(header[0])
            try:
                if spec is None or len(header) != spec[0] + 1:
                    raise ValueError
                fields = tuple(int(x) for x in header[1:])
            except ValueError:
                raise ProtocolError(f"unexpected output {b' '.join(header)[:60]!r}") from None
            if spec[1] is None:
                frames.append(Frame(header[0].decode(), fields))
            else:
                self._body = (header[0].decode(), fields, fields[spec[1]])
