"""A log on the "host" for the tail tests: numbered lines, rotations, truncations, and what was where.

Every line carries its sequence number, so a reader's output can be checked for lines
lost, doubled or out of order; ``files`` keeps, per physical file (an id, not an inode),
each line's end offset, so a test knows exactly what a destroyed file took with it.
"""

from __future__ import annotations

import asyncio
import os
import random
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["HostLog", "seq_of"]


@dataclass
class HostLog:
    """The log on the 'host' and what was written to which physical file (ids, not inodes)."""

    path: Path
    rng: random.Random
    seq: int = 0
    file_id: int = 0
    rotations: int = 0
    # file id -> [(seq, end offset of the line in that file)]
    files: dict[int, list[tuple[int, int]]] = field(default_factory=dict)
    size: int = 0

    def __post_init__(self) -> None:
        self.path.write_bytes(b"")
        self.files[0] = []

    async def write(self, count: int) -> None:
        """Append ``count`` numbered lines in random pieces (a piece may end mid-line)."""
        data = b""
        for _ in range(count):
            line = f"seq={self.seq:07d} file={self.file_id} {'x' * self.rng.randint(0, 150)}\n".encode()
            data += line
            self.size += len(line)
            self.files[self.file_id].append((self.seq, self.size))
            self.seq += 1
        position = 0
        with open(self.path, "ab", buffering=0) as f:
            while position < len(data):
                step = self.rng.randint(1, 900)
                f.write(data[position : position + step])
                position += step
                if self.rng.random() < 0.3:
                    await asyncio.sleep(0.002)

    def new_file(self) -> None:
        self.file_id += 1
        self.files[self.file_id] = []
        self.size = 0

    def rotate(self) -> None:
        self.rotations += 1
        self.path.rename(self.path.with_name(f"{self.path.name}.{self.rotations}"))
        self.path.write_bytes(b"")
        self.new_file()

    def truncate(self) -> None:
        os.truncate(self.path, 0)
        self.new_file()  # the old content is gone; what follows is another file's lines

    def recreate(self) -> None:
        self.path.unlink()
        self.path.write_bytes(b"")
        self.new_file()


def seq_of(line: str) -> int:
    assert line.startswith("seq="), line
    return int(line[4:11])
