"""Regenerate the dashboard test logs: ``python tests/data/dashboard/make_data.py``.

The files are committed and frozen: snapshot tests must not change when the
simulator (or the bundled ``sample_logs``) is retuned. Rerun this only together
with ``pytest tests/test_snapshots.py --snapshot-update`` and review the SVGs.

* ``sweep/sim_eagle3_*.log`` — the simulated EAGLE-3 campaign (seed 7) with 150
  decode lines per launch instead of 600 (small files, same shape);
* ``crash_3step.log`` — a 3-step launch whose scheduler dies of CUDA OOM while
  loading weights (traceback, then the parent's sigquit line).
"""

from __future__ import annotations

import io
import random
from pathlib import Path

from specmon.sim.logwriter import LogWriter, startup_script
from specmon.sim.model import SpecConfig
from specmon.sim.sweep import CAMPAIGN_START, write_campaign

HERE = Path(__file__).resolve().parent


def main() -> None:
    write_campaign(HERE / "sweep", seed=7, decode_lines=150)
    rng = random.Random(99)
    buf = io.StringIO()
    # Two hours after the campaign began: after the sweep's launches on the same clock.
    LogWriter(buf).script(float(CAMPAIGN_START) + 7200.0, startup_script(SpecConfig.make(3), rng, 700.0, crash_at=0.45))
    (HERE / "crash_3step.log").write_text(buf.getvalue(), encoding="utf-8")


if __name__ == "__main__":
    main()
