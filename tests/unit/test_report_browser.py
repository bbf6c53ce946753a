"""A real browser shows the HTML report's charts: Debian's ``chromium``, headless, screenshots the
report of a sweep recording, and the picture has the charts' per-configuration colours in it.

The other tests read the SVG as text; this one checks that a browser draws it (inline SVG in an
HTML page, no script, nothing fetched). ``.ci/run`` installs chromium: a missing one fails the
test under ``CI=true`` and skips it elsewhere (as sshd does, tests/support/sshd.py).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from PIL import Image

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.output.charts import report_colours
from specmon.output.report import load_report, render_report
from specmon.sim.sweepworld import SweepWorld
from tests.unit.test_sweep_outcome import record

pytestmark = pytest.mark.chromium

CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1200, 2000


def require_chromium() -> str:
    """The browser's path; fail under CI (where .ci/run installs it), skip elsewhere, when it is missing."""
    path = CHROMIUM if os.access(CHROMIUM, os.X_OK) else shutil.which("chromium")
    if path:
        return path
    message = f"{CHROMIUM} is missing: apt-get install chromium (.ci/run installs it)"
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


def screenshot(browser: str, page: Path, out: Path, profile: Path) -> None:
    """``chromium --headless --screenshot`` of ``page``, in a session of its own: whatever of it is left
    when it returns (or times out) is ended by that session's id, never by name."""
    cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", f"--screenshot={out}",
           f"--window-size={WIDTH},{HEIGHT}", "--hide-scrollbars", f"--user-data-dir={profile}", page.as_uri()]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        output = b"(timed out after 60 s)"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    assert out.is_file(), f"chromium wrote no screenshot (exit {proc.returncode}):\n{output.decode(errors='replace')[-3000:]}"


def near(pixel: tuple[int, int, int], colour: str, tolerance: int = 6) -> bool:
    target = (int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16))
    return all(abs(a - b) <= tolerance for a, b in zip(pixel, target, strict=True))


def test_a_browser_draws_the_charts_of_a_sweep_report(tmp_path: Path) -> None:
    browser = require_chromium()
    world = SweepWorld(2)
    plan = SweepPlan((0, 1, 2, 3), seed=2, rule=StoppingRule(), max_minutes=None, launch_cv=0.0)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, clock=world.clock,
                               sleep=world.sleep).run())
    recording = tmp_path / "sweep.jsonl"
    record(recording, result.to_json())
    data = load_report(recording)
    page = tmp_path / "report.html"
    page.write_text(render_report(data, "html"), encoding="utf-8")
    png = tmp_path / "report.png"

    started = time.monotonic()
    screenshot(browser, page, png, tmp_path / "profile")
    took = time.monotonic() - started

    image = Image.open(png).convert("RGB")
    assert image.size == (WIDTH, HEIGHT)
    counts = image.getcolors(WIDTH * HEIGHT)
    assert counts is not None
    white = sum(n for n, c in counts if c == (255, 255, 255))
    assert white < 0.97 * WIDTH * HEIGHT, "a blank page"
    # Text alone gives a few hundred shades (the tables: ~250); the charts' lines, bars and fills thousands.
    assert len(counts) > 1000, len(counts)
    # Every configuration's colour is drawn (the tables are black on white: these come from the charts).
    colours = report_colours(data)
    labels = [r.label for r in data.analysis.rows]
    assert len(labels) == 4
    for label in labels:
        drawn = sum(n for n, c in counts if near(c, colours[label]))
        assert drawn >= 40, (label, colours[label], drawn)
    assert took < 60
