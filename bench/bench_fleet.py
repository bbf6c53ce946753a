"""The fleet view's refresh cost with 64 live replicas (``specmon watch LOG1 ... LOG64``).

64 SGLang logs (EAGLE3 2 and 3 steps, no speculation) of ``BACKLOG`` decode lines each; the app
runs headless at 120x40 (Textual's pilot) and reads them; then every replica's log gets one new
decode line a second (as a server under load logs), spread over the second, for ``SECONDS``
seconds, while the app refreshes on its own timer (4 Hz). Printed: the refresh's duration (the
model's snapshot of every replica and the tables' update, :attr:`FleetApp.last_refresh_s`) as
median, p95 and max over every refresh in that time, and the load average, since the machine's
load moves it. Also, four times a second, a key (``down``, then ``up``) is pressed on the replica
table and timed from the key event's posting (``App.simulate_key``, as a terminal's input is
posted) until the table's cursor has moved; and the process's peak RSS
(``VmHWM``: the app, its 64 sessions and the pilot). Run: ``python bench/bench_fleet.py [SECONDS]
[BACKLOG]`` (default 20 s, 2000 lines).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from specmon.ui.fleet_app import FleetOptions, fleet_app
from tests.support.logtext import campaign, decode

REPLICAS = 64


def peak_rss_mb() -> float:
    """The process's peak resident set (VmHWM), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def run(seconds: float, backlog: int) -> tuple[list[float], list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i in range(REPLICAS):
            steps = (2, 2, 3, None)[i % 4]
            path = Path(tmp) / f"host-{i:02d}" / "server.log"
            path.parent.mkdir()
            path.write_text("\n".join(campaign(steps, 90.0 + i % 5, backlog)) + "\n")
            paths.append(path)
        app = fleet_app([str(p) for p in paths], options=FleetOptions(animations=False), user_themes=None)
        took: list[float] = []
        keys: list[float] = []
        async with app.run_test(size=(120, 40)) as pilot:
            while not all(r.feeder.lines >= backlog + 2 for r in app.fleet.replicas):
                await pilot.pause(0.05)
            seen = app.refreshes
            start = time.monotonic()
            n = 0
            while time.monotonic() - start < seconds:
                # One line per replica per second, spread over the second.
                i = n % REPLICAS
                with open(paths[i], "a") as f:
                    f.write(decode(backlog + 10 + n // REPLICAS, 90.0 + (n % 7), 2.0, 0.6) + "\n")
                n += 1
                await asyncio.sleep(1.0 / REPLICAS)
                if app.refreshes != seen:
                    seen = app.refreshes
                    took.append(app.last_refresh_s)
                if n % (REPLICAS // 4) == 0:  # four keys a second
                    table = app.fleet_screen.replica_table
                    before = table.cursor_row
                    pressed = time.perf_counter()
                    # A key event posted as a terminal's input would be: no wait for the app to settle.
                    app.simulate_key("down" if (n // (REPLICAS // 4)) % 2 else "up")
                    while table.cursor_row == before and time.perf_counter() - pressed < 5.0:
                        await asyncio.sleep(0.001)
                    keys.append(time.perf_counter() - pressed)
        return took, keys


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 20.0
    backlog = int(sys.argv[2]) if len(sys.argv) > 2 else 2000
    took, keys = asyncio.run(run(seconds, backlog))
    ms = sorted(t * 1000 for t in took)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    kms = sorted(t * 1000 for t in keys)
    kp95 = kms[min(len(kms) - 1, int(0.95 * len(kms)))]
    print(f"{REPLICAS} replicas, {backlog} lines each, one new line per replica per second, {seconds:g} s: "
          f"{len(ms)} refreshes, median {statistics.median(ms):.2f} ms, p95 {p95:.2f} ms, max {ms[-1]:.2f} ms; "
          f"{len(kms)} keys, median {statistics.median(kms):.1f} ms, p95 {kp95:.1f} ms, max {kms[-1]:.1f} ms; "
          f"peak RSS {peak_rss_mb():.0f} MB (load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
