"""Time to split one long line (no newline until its end): the old splitter vs LineSplitter.

    .venv/bin/python bench/bench_lines.py [--sizes 10,20,40,100] [--chunk 65536] [--before-up-to 40]

The old splitter (kept below, verbatim in spirit) joined the pending bytes with each new
chunk and searched the whole buffer again: quadratic in the line length. The new one is
linear (and keeps at most ``max_line`` bytes of the line). Both run in the same process
on the same chunks; the ratio is what to read on a shared machine.
"""

from __future__ import annotations

import argparse
import time

from specmon.sources.lines import LineSplitter

MB = 1 << 20


class OldSplitter:
    """The splitter before the line cap (quadratic on a long line)."""

    def __init__(self) -> None:
        self.offset = 0
        self.pending = b""

    def feed(self, data: bytes) -> list[str]:
        buffer = self.pending + data
        end = buffer.rfind(b"\n")
        if end < 0:
            self.pending = buffer
            return []
        complete, self.pending = buffer[: end + 1], buffer[end + 1 :]
        self.offset += len(complete)
        return [line.decode("utf-8", errors="replace") for line in complete[:-1].split(b"\n")]


def run(splitter: OldSplitter | LineSplitter, size: int, chunk: int) -> float:
    piece = b"x" * chunk
    started = time.perf_counter()
    for _ in range(size // chunk):
        splitter.feed(piece)
    lines = splitter.feed(b"\n")
    elapsed = time.perf_counter() - started
    assert len(lines) == 1
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10,20,40,100", help="line lengths in MB")
    parser.add_argument("--chunk", type=int, default=65536, help="bytes per feed (an SSH packet is 32 KiB)")
    parser.add_argument("--before-up-to", type=int, default=40, help="skip the old splitter above this many MB")
    args = parser.parse_args()
    print(f"{'line':>8} {'before':>10} {'after':>10} {'ratio':>8}   (chunks of {args.chunk} bytes)")
    for mb in (int(s) for s in args.sizes.split(",")):
        after = run(LineSplitter(), mb * MB, args.chunk)
        if mb <= args.before_up_to:
            before = run(OldSplitter(), mb * MB, args.chunk)
            print(f"{mb:>6}MB {before:>9.2f}s {after:>9.3f}s {before / after:>7.0f}x")
        else:
            print(f"{mb:>6}MB {'(skipped)':>10} {after:>9.3f}s")


if __name__ == "__main__":
    main()
