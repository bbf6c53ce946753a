"""A sweep over several workloads (or concurrencies) reports every group: one verdict and one table
per group, each naming its workload, and the finding that the winner depends on it.

The report kept only the last group's verdict, without its workload, under a table that listed
every setting once per workload with two stars (issue 30, item 4).
"""

from __future__ import annotations

import asyncio
import html as htmllib
from pathlib import Path

import pytest

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.stopping import StoppingRule
from specmon.output.report import load_report, render_report
from specmon.sim.sweepworld import SweepWorld
from tests.unit.test_sweep_outcome import record

# (seed, workloads and how well the drafter does on each, concurrencies)
CASES = [
    (7, {"code": 1.35, "chat": 0.55}, (1,)),
    (3, {"chat": 0.6, "code": 1.3}, (1,)),
    (11, {"summaries": 1.0, "chat": 0.5, "code": 1.4}, (1,)),
    (5, {"code": 1.3, "chat": 0.6}, (1, 16)),
]


@pytest.mark.parametrize(("seed", "workloads", "concurrency"), CASES)
def test_the_report_gives_each_group_its_verdict_and_its_table(tmp_path: Path, seed: int,
                                                                workloads: dict[str, float],
                                                                concurrency: tuple[int, ...]) -> None:
    world = SweepWorld(seed, workloads=workloads)
    plan = SweepPlan((0, 1, 2, 3), seed=seed, rule=StoppingRule(), max_minutes=None, workloads=tuple(workloads),
                     concurrency=concurrency, launch_cv=0.0)
    sweep = Sweep(plan, session=world.session, restart=world.restart, clock=world.clock, sleep=world.sleep,
                  load=world)
    result = asyncio.run(sweep.run())
    doc = result.to_json()
    path = tmp_path / "sweep.jsonl"
    record(path, doc)
    data = load_report(path)

    groups = data.outcomes
    assert [(g.concurrency, g.workload) for g in groups] == [(v["concurrency"], v["workload"])
                                                             for v in doc["verdicts"]]
    assert len(groups) == len(workloads) * len(concurrency)
    # Each run in exactly one group's table; a setting once per table; at most one star per table.
    assert sum(len(g.rows) for g in groups) == len(doc["runs"])
    for g in groups:
        labels = [r.label for r in g.rows]
        assert len(labels) == len(set(labels)) == 4, labels
        assert sum(r.best for r in g.rows) <= 1
        assert f"on the {g.workload} prompts" in g.sentence

    md = render_report(data, "markdown")
    verdict = " ".join(md.split("## Verdict", 1)[1].split("\n## ", 1)[0].split())  # (wrapped within 80 columns)
    for g in groups:
        assert g.sentence.split(";")[0] in verdict  # every group's headline, its workload named
        heading = f"## Configurations measured by the sweep{g.group_text}"
        assert md.count(heading + "\n") == 1
        table = md.split(heading + "\n", 1)[1].split("\n## ", 1)[0]
        assert sum(line.startswith("| **★") for line in table.splitlines()) == sum(r.best for r in g.rows)
    if doc["winners_differ"]:
        assert doc["winners_differ"] in verdict and data.sentence == doc["winners_differ"]

    page = htmllib.unescape(render_report(data, "html"))
    for g in groups:
        assert f"Configurations measured by the sweep{g.group_text}</h2>" in page
        assert g.sentence.split(";")[0] in page
    if doc["winners_differ"]:
        assert doc["winners_differ"] in page


def test_a_sweep_with_one_group_reports_as_before(tmp_path: Path) -> None:
    world = SweepWorld(2)
    plan = SweepPlan((0, 1, 2), seed=2, rule=StoppingRule(), max_minutes=None, launch_cv=0.0)
    result = asyncio.run(Sweep(plan, session=world.session, restart=world.restart, clock=world.clock,
                               sleep=world.sleep).run())
    path = tmp_path / "one.jsonl"
    record(path, result.to_json())
    data = load_report(path)
    assert len(data.outcomes) == 1 and data.outcomes[0] == data.outcome
    assert data.sentence == data.outcome.sentence  # type: ignore[union-attr]
    assert render_report(data, "markdown").count("## Configurations measured by the sweep") == 1
