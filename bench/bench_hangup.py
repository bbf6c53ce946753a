"""Closing the terminal (or SIGTERM) ends every process of specmon within a second: measured, many tries.

Each try opens a real pty that is the command's controlling terminal, starts the command with a
mark in its environment (``tests/support/proctree.py``: every process it starts inherits it, also
the demo's ``setsid``'d simulated server), waits for its first frame, waits a moment (0, 0.3 or
0.8 s: while it is still building, and later), closes the terminal (or sends SIGTERM with
``--sigterm``), and times until no marked process is left. ``connect`` runs against Debian's real
sshd on 127.0.0.1 (started here, as the tests do). Prints per command: tries, median, p95, max,
and how many were over a second.

Run on a quiet machine: `python bench/bench_hangup.py [--tries N] [--sigterm] [COMMAND ...]`
(default 15 per command: demo, watch, replay, fleet, connect; also sweep-demo).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.support.hangup import MOMENTS, TARGET_S, hang_up_times, sigterm_times

ROOT = Path(__file__).resolve().parents[1]
SMALL = ROOT / "sample_logs" / "sim_eagle3_2step.log"
OTHER = ROOT / "sample_logs" / "sim_eagle3_3step.log"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tries", type=int, default=15)
    ap.add_argument("--sigterm", action="store_true", help="SIGTERM to the command instead of closing the terminal")
    ap.add_argument("commands", nargs="*", default=["demo", "watch", "replay", "fleet", "connect"])
    opts = ap.parse_args()
    moments = tuple(MOMENTS[i % len(MOMENTS)] for i in range(opts.tries))
    measure = sigterm_times if opts.sigterm else hang_up_times
    with tempfile.TemporaryDirectory() as tmp:
        env = {"HOME": tmp, "TMPDIR": tmp, "XDG_DATA_HOME": f"{tmp}/data", "XDG_CONFIG_HOME": f"{tmp}/config"}
        commands: dict[str, tuple[list[str], str]] = {
            "demo": (["demo", "--time-scale", "200", "--startup-seconds", "0.5", "--seed", "5"], "serving"),
            # The app's own footer: "specmon: recording to ..." comes before the app runs.
            "watch": (["watch", str(SMALL)], "Quit"),
            "replay": (["replay", str(SMALL), "--speed", "max"], "Quit"),
            "fleet": (["watch", str(SMALL), str(OTHER)], "Quit"),
            # Headless, on the pty all the same: the signal comes as a restart begins (its stop, then
            # its start: the moment a start may be cut short).
            "sweep-demo": (["sweep", "--demo", "--steps", "1,2", "--time-scale", "100", "--no-record", "--seed", "3"],
                           "restarting the server"),
        }
        server = None
        if "connect" in opts.commands:
            from tests.support.sshd import _make_home, start_openssh_server

            home = _make_home(Path(tmp) / "client")
            server = start_openssh_server(home, Path(tmp) / "sshd")
            home.trust(server.known_hosts_pattern, server.host_key)
            log = Path(tmp) / "server.log"
            log.write_text(SMALL.read_text())
            commands["connect"] = (["connect", f"{server.user}@127.0.0.1", "-p", str(server.port), "--log", str(log),
                                    "--lines", "1000"], "Quit")
        try:
            for name in opts.commands:
                args, frame = commands[name]
                run_env = {**env, "HOME": str(home.path)} if name == "connect" else env
                took = sorted(measure(args, run_env, frame, moments))
                p95 = took[min(len(took) - 1, int(0.95 * len(took)))]
                over = sum(t > TARGET_S for t in took)
                print(f"{name:8s} tries {len(took):3d}  median {statistics.median(took):.2f} s  p95 {p95:.2f} s  "
                      f"max {took[-1]:.2f} s  over {TARGET_S:g} s: {over}", flush=True)
        finally:
            if server is not None:
                server.stop()


if __name__ == "__main__":
    main()
