"""Every tok/s interval on screen says what it covers, in the words the rest of the app uses (issue 42).

The run table says ``CI (launch)`` (``±launch`` when narrow), the fleet's replica table ``±sample``,
its configuration table ``CI (replica)`` (`?` and the README explain the three). Every other label
of a throughput interval — the restart dialog's column, the sweep's terminal chart, the parallel
sweep's tables, the HTML report's settings chart — uses one of them, so 85.1 ± 0.6 and 85.1 ± 8.4
can stand side by side. A bare ``± CI`` or ``95% CI`` fails.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from specmon.output.charts import Panel, Setting, colour_map, settings_chart
from specmon.output.parallel_sweep import markdown_lines, text_report
from specmon.output.tables import COVERS, HEADERS
from specmon.ui.screens.help import HELP_TEXT
from specmon.ui.screens.restart_dialog import MeasuredStep, measured_text
from specmon.ui.widgets.comparison_plot import TITLE
from specmon.ui.widgets.config_pool_table import ConfigPoolTable
from specmon.ui.widgets.replica_table import ReplicaTable
from specmon.ui.widgets.run_table import SHORT_HEADERS

#: What an interval may cover, in the app's words (the keys of ``COVERS``: launch, sample, replica).
_UNIT = "|".join(COVERS)
#: A label's interval said with what it covers: ``± 95% CI (launch)``, ``CI (replica)``, ``±sample``.
_SAID = re.compile(rf"(±\s*)?(95% )?CI \(({_UNIT})\)|±({_UNIT})\b")


def _unsaid(label: str) -> list[str]:
    """The interval marks of ``label`` (``±``, ``CI``) that do not say what they cover."""
    return re.findall(r"±|\bCI\b", _SAID.sub("", label))


def _check(label: str, unit: str | None = None) -> None:
    assert "±" in label or "CI" in label, label  # an interval's label
    assert not _unsaid(label), f"an interval that does not say what it covers: {label!r}"
    if unit is not None:
        assert re.search(rf"CI \({unit}\)|±{unit}\b", label), (unit, label)


def test_the_fleet_view_and_the_run_table_say_what_their_intervals_cover() -> None:
    # The words the others are held to: the fleet's headers, the run table's, and `?` naming each.
    pool = {c.key: c.header for c in ConfigPoolTable.COLUMNS}
    replicas = {c.key: c.header for c in ReplicaTable.COLUMNS}
    _check(pool["tps"], "replica")
    _check(replicas["run"], "sample")
    _check(HEADERS[2], "launch")
    _check(SHORT_HEADERS["tps"], "launch")
    for key, header in [*pool.items(), *replicas.items()]:
        assert key == "covers" or not _unsaid(header), header  # ("CI covers": the words for it)
    for words in ("CI (launch)", "±launch", "±sample", "CI (replica)"):
        assert words in HELP_TEXT.replace("*", ""), words


def test_the_restart_dialogs_column_says_its_interval_is_over_launches() -> None:
    rows = [MeasuredStep(2, "EAGLE3 2 steps", 400, "85.1 ± 8.4", "+6.6%", "2.41 ± 0.02", mark="☆")]
    for width in (60, 80, 120):
        header = measured_text(rows, width).plain.splitlines()[0]
        tps = header[header.index("tok/s"):header.index("vs base")].strip()
        _check(tps, "launch")
        assert tps == SHORT_HEADERS["tps"]  # the run table's own words, narrow as the dialog is


def test_the_sweeps_terminal_chart_says_its_interval_is_over_launches() -> None:
    _check(TITLE, "launch")


def _parallel_doc() -> dict[str, object]:
    return {"kind": "parallel-sweep", "seed": 7, "replicas": ["r1", "r2"], "concurrency": 1,
            "rounds_planned": 4, "rounds_run": 2,
            "verdict": {"kind": "undecided", "winner_steps": None, "leader_steps": 2, "level": 0.9875,
                        "sentence": "2 steps leads."},
            "settings": [{"steps": 2, "launches": 2, "tok_s": 94.0, "ci95": [90.0, 98.0]},
                         {"steps": 0, "launches": 2, "tok_s": 80.0, "ci95": [76.0, 84.0],
                          "leader_ahead_pct": [17.5, -1.0, 30.0]}],
            "launches": [{"replica": "r1", "round": 1, "steps": 2, "ok": True, "tok_s": 94.0}]}


def test_the_parallel_sweeps_tables_say_their_interval_is_over_launches() -> None:
    doc = _parallel_doc()
    text = text_report(doc).splitlines()
    header = next(line for line in text if line.startswith("setting"))
    _check(header[header.index("tok/s") + 5:header.index("leader ahead")].strip(), "launch")
    md = markdown_lines(doc)[0].split(" | ")
    _check(md[3], "launch")
    assert not any(_unsaid(c) for c in md), md


def test_the_reports_settings_chart_says_its_interval_is_over_launches() -> None:
    panel = Panel(1, None, (Setting("no speculation", 0, 80.0, 2.0, True, False),
                            Setting("EAGLE3 2 steps", 2, 94.0, 3.0, False, True)))
    svg = settings_chart([panel], colour_map(s.label for s in panel.settings))
    assert svg is not None
    texts = ["".join(e.itertext()) for e in ET.fromstring(svg).iter("{http://www.w3.org/2000/svg}text")]
    labels = [t for t in texts if "±" in t or "CI" in t]
    assert labels, texts  # the y axis names its interval
    for label in labels:
        _check(label, "launch")
