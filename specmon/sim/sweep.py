"""Writes the bundled simulated campaign: one SGLang log per speculative step count.

``python -m specmon.sim.sweep --out sample_logs --seed 7`` reproduces
``sample_logs/sim_eagle3_*.log`` byte for byte. Each file is one server launch
(start-up of 10-14 simulated minutes, a benchmark client sending one request
at a time, SIGTERM at the end); launches follow each other on one timeline,
like a campaign run by hand.
"""

from __future__ import annotations

import argparse
import calendar
import io
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from specmon.sim.engine import SimEngine, SimRequest
from specmon.sim.logwriter import HTTP, LogWriter, access_message, shutdown_script, startup_script
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig

#: Step counts of the bundled campaign (0 = no speculation).
CAMPAIGN_STEPS: tuple[int, ...] = (0, 1, 2, 3, 5, 10)
DEFAULT_DECODE_LINES = 600
#: Where the bundled campaign starts on the (naive) log clock.
CAMPAIGN_START = calendar.timegm(time.strptime("2026-02-12 09:14:03", "%Y-%m-%d %H:%M:%S"))


def log_name(steps: int) -> str:
    """File name of the launch with ``steps`` speculative steps."""
    return "sim_eagle3_nospec.log" if steps == 0 else f"sim_eagle3_{steps}step.log"


def simulate_launch(
    spec: SpecConfig,
    *,
    seed: int,
    start: float,
    decode_lines: int = DEFAULT_DECODE_LINES,
    model: CostModel = DEFAULT_MODEL,
    startup_s: float | None = None,
) -> tuple[str, float]:
    """Simulate one launch under a sequential benchmark and return its log.

    Args:
        spec: Speculative configuration of the launch.
        seed: Seed of this launch's randomness.
        start: Naive time of the launch.
        decode_lines: Stop the benchmark after the request running when this
            many decode lines have been written.
        model: Cost model.
        startup_s: Start-up length in simulated seconds (random 10-14 min if None).

    Returns:
        The log text and the simulated time the process exited.
    """
    rng = random.Random(seed)
    buf = io.StringIO()
    writer = LogWriter(buf)
    startup = startup_s if startup_s is not None else rng.uniform(600.0, 840.0)
    writer.script(start, startup_script(spec, rng, startup, pid=rng.randint(3000, 90000), seed=seed))
    engine = SimEngine(spec, writer, start + startup, rng, model)
    # The benchmark is started by hand a little after "ready".
    engine.advance_to(engine.now + rng.uniform(8.0, 25.0))
    while engine.decode_lines < decode_lines or not engine.idle:
        if engine.idle:
            engine.advance_to(engine.now + rng.uniform(0.003, 0.02))  # client turnaround
            req = SimRequest(rng.randint(200, 1200), rng.randint(1024, 2048), client_port=rng.randint(40000, 60000))
            # A streaming client: uvicorn logs the request when the response starts.
            writer.line(engine.now, access_message(req.client_port, "POST", "/v1/completions"), HTTP)
            engine.submit(req)
        engine.step(max_cycles=model.decode_log_interval)
        engine.finished.clear()
    end = engine.now + rng.uniform(2.0, 6.0)
    writer.script(end, shutdown_script())
    return buf.getvalue(), end + 1.0


def write_campaign(
    out_dir: Path, seed: int = 7, steps: Sequence[int] = CAMPAIGN_STEPS, decode_lines: int = DEFAULT_DECODE_LINES
) -> list[Path]:
    """Write one log per step count into ``out_dir``; deterministic for ``seed``.

    Returns:
        The paths written, in campaign order.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    t = float(CAMPAIGN_START)
    paths = []
    for n in steps:
        text, end = simulate_launch(SpecConfig.make(n), seed=seed * 1000 + n, start=t, decode_lines=decode_lines)
        path = out_dir / log_name(n)
        path.write_text(text, encoding="utf-8")
        paths.append(path)
        # Kill, edit the command line, relaunch: about a minute.
        t = end + random.Random(seed * 1000 + n + 500).uniform(40.0, 90.0)
    return paths


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: write the simulated campaign logs."""
    ap = argparse.ArgumentParser(prog="python -m specmon.sim.sweep", description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("sample_logs"), help="output directory (default: sample_logs)")
    ap.add_argument("--seed", type=int, default=7, help="random seed (default: 7)")
    ap.add_argument(
        "--lines", type=int, default=DEFAULT_DECODE_LINES, help="decode lines per launch (default: %(default)s)"
    )
    ap.add_argument(
        "--steps", default=",".join(map(str, CAMPAIGN_STEPS)), help="comma-separated step counts, 0 = no speculation"
    )
    args = ap.parse_args(argv)
    try:
        steps = [int(s) for s in args.steps.split(",") if s.strip()]
        for n in steps:
            SpecConfig.make(n)
    except ValueError as exc:
        print(f"error: bad --steps: {exc}", file=sys.stderr)
        return 2
    for path in write_campaign(args.out, args.seed, steps, args.lines):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
