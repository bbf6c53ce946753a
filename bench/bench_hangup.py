"""Closing the terminal ends specmon within a second: measured, many tries per command.

Each try opens a real pty, starts the command, waits for its first frame, waits a moment
(0, 0.3 or 0.8 s: while it is still building, and later), closes the terminal, and times
until the process is gone. Prints per command: tries, median, p95, max, and how many were
over a second. Run on a quiet machine: `python bench/bench_hangup.py [TRIES]` (default 9 per
command, 3 per moment).
"""

from __future__ import annotations

import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.hangup import MOMENTS, TARGET_S, hang_up_times

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "sample_logs" / "sim_eagle3_2step.log"


def main() -> None:
    rounds = max(1, int(sys.argv[1]) // len(MOMENTS)) if len(sys.argv) > 1 else 3
    commands = {
        "demo": (["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5"], "serving"),
        "watch": (["watch", str(SMALL)], "specmon"),
        "replay": (["replay", str(SMALL), "--speed", "max"], "specmon"),
    }
    with tempfile.TemporaryDirectory() as tmp:
        env = {"HOME": tmp, "TMPDIR": tmp, "XDG_DATA_HOME": f"{tmp}/data", "XDG_CONFIG_HOME": f"{tmp}/config"}
        for name, (args, frame) in commands.items():
            took: list[float] = []
            for _ in range(rounds):
                took += hang_up_times(args, env, frame)
            took.sort()
            p95 = took[min(len(took) - 1, int(0.95 * len(took)))]
            over = sum(t > TARGET_S for t in took)
            print(f"{name:7s} tries {len(took):3d}  median {statistics.median(took):.2f} s  p95 {p95:.2f} s  "
                  f"max {took[-1]:.2f} s  over {TARGET_S:g} s: {over}")


if __name__ == "__main__":
    main()
