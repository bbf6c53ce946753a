"""With ``--objective`` the verdict is the objective's on every surface; tok/s is context, never a second
verdict (issue 42: "one verdict object, drawn by every surface").

Sweeps on simulated truth (:class:`specmon.sim.sweepworld.SweepWorld` with client requests) decide on
ITL p50; the checks read what each surface draws from the sweep's document: the dashboard's sweep panel,
the line under its run table and the setting ``w`` restarts on; the report's Markdown, HTML and JSON;
what ``specmon sweep`` prints.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_result import SweepResult
from specmon.experiment.sweep_run import Sweep
from specmon.model.objective import parse_objective
from specmon.model.stopping import StoppingRule
from specmon.model.verdict import LEADER_MARK, NO_WINNER, WINNER_MARK, Kind
from specmon.output.tables import sweep_outcome
from specmon.sim.sweepworld import SweepWorld
from specmon.ui.screens.sweep_verdict import verdict_lines
from specmon.ui.views_data import outcome_table

MARKS = (WINNER_MARK, LEADER_MARK)


def _sweep(seed: int, steps: tuple[int, ...], **plan: Any) -> SweepResult:
    world = SweepWorld(seed, launch_cv=0.05, restart_s=600.0, lines_per_poll=10, requests=True)
    p = SweepPlan(steps, (1,), order="launches", rule=StoppingRule(), max_minutes=60, poll_s=10.0, launch_cv=0.05,
                  objective=parse_objective("itl-p50"), **plan)
    return asyncio.run(Sweep(p, session=world.session, restart=world.restart, load=world, clock=world.clock,
                             sleep=world.sleep).run())


@pytest.fixture(scope="module")
def decided() -> SweepResult:
    """ITL p50 of no speculation against 2 steps (the objective and tok/s may name the same leader)."""
    return _sweep(2, (0, 2), resolve_pct=5.0)


@pytest.fixture(scope="module")
def undecided() -> SweepResult:
    """2 and 3 steps, 1.9% apart: two rounds of ITL p50 cannot tell them (the sweep says what would)."""
    return _sweep(4, (2, 3), rounds=2)


def _tps_sentence_tail(result: SweepResult) -> str:
    """What the tok/s verdict says of its runner-up (the verdict's words a context must not repeat)."""
    v = result.verdict
    assert v is not None
    return v.sentence.split(";", 1)[1].split(" Rests on ")[0]


@pytest.mark.parametrize("which", ["decided", "undecided"])
def test_the_dashboard_draws_the_objectives_verdict_and_tps_as_context(which: str,
                                                                       request: pytest.FixtureRequest) -> None:
    result: SweepResult = request.getfixturevalue(which)
    (ov,) = result.objective_verdicts
    a = ov.answer
    outcome = sweep_outcome(result.to_json())
    assert outcome is not None
    # The one verdict object is the objective's: its mark, words and sentence.
    assert outcome.answer == a and outcome.tag == a.tag and outcome.sentence == a.sentence
    assert outcome.separated is (a.kind is Kind.WINNER) and outcome.equivalent is (a.kind is Kind.EQUIVALENT)
    # w restarts on the objective's leader; its mark is beside that row only.
    assert outcome.best is not None and outcome.best.steps == a.leader_steps == ov.rows[0].steps
    assert [r.mark for r in outcome.rows] == [a.mark if r is outcome.best else "" for r in outcome.rows]
    # The panel: the objective's claim and tag; tok/s once, as context, without a mark or a verdict's words.
    lines = verdict_lines(outcome, report=Path("/tmp/r.md"))
    head = "\n".join(lines["head"])
    assert a.claim in head and f"{a.tag}: {a.leader}" in head
    assert head.count("for context (not a verdict)") == 1
    context = next(line for line in lines["head"] if "for context" in line)
    assert not any(m in context for m in MARKS) and NO_WINNER not in context
    assert _tps_sentence_tail(result) not in head
    what = "winner" if a.kind is Kind.WINNER else "leader (undecided)"
    assert f"w: restart on the {what} ({a.leader};" in "\n".join(lines["foot"])
    # The line under the run table: the objective's tag and claim.
    table = outcome_table(outcome)
    assert table.verdict.startswith(f"sweep: {a.tag}: {a.claim}")
    assert [r.mark for r in table.rows] == [r.mark for r in outcome.rows]
    if which == "undecided":  # what would decide it, in the objective's own terms
        assert a.kind is Kind.UNDECIDED and outcome.advice and "in ITL p50" in outcome.advice[0]
        assert outcome.advice[0] in head


def test_the_report_has_the_objectives_verdict_and_tps_in_a_section_of_its_own(
        undecided: SweepResult, tmp_path: Path) -> None:
    import json

    from specmon.output.report import load_report, render_report
    from tests.unit.test_sweep_outcome import record

    (ov,) = undecided.objective_verdicts
    a = ov.answer
    path = tmp_path / "sweep.jsonl"
    record(path, undecided.to_json())
    data = load_report(path)
    md = render_report(data, "markdown")
    verdict = md.split("## Verdict", 1)[1].split("\n## ", 1)[0]
    assert " ".join(a.sentence.split()) in " ".join(verdict.replace("**", "").split())
    assert "## tok/s, for context" in md
    context = md.split("## tok/s, for context", 1)[1].split("\n## ", 1)[0]
    assert "for context (not a verdict)" in context and not any(m in context for m in MARKS)
    assert NO_WINNER not in context and md.index("## Verdict") < md.index("## tok/s, for context")
    html = render_report(data, "html")
    verdict_html = html.split("<h2>Verdict</h2>", 1)[1].split("<h2>", 1)[0]
    assert "lowest ITL p50" in verdict_html and "tok/s, for context" not in verdict_html
    context_html = html.split("<h2>tok/s, for context</h2>", 1)[1].split("<h2>", 1)[0]
    assert "for context (not a verdict)" in context_html and not any(m in context_html for m in MARKS)
    doc = json.loads(render_report(data, "json"))["report"]
    assert doc["sentence"] == a.sentence and doc["decided_on"] == "ITL p50"
    (ctx,) = doc["context"]
    assert ctx["measure"] == "tok/s" and "for context (not a verdict)" in ctx["text"]
    assert not any(m in ctx["text"] for m in MARKS)
    # The keys users read are kept: the sweep's own tok/s verdict and the objective's.
    assert doc["sweep_verdict"]["verdict"]["sentence"] == undecided.verdicts[0].sentence
    assert doc["sweep_verdict"]["objective_verdict"]["sentence"] == a.sentence


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_the_sweep_prints_one_verdict_sentence_the_objectives(fmt: str, undecided: SweepResult,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """``specmon sweep --demo --objective itl-p50`` as printed: one verdict, the objective's; the tok/s
    table and its line are context: no mark, no verdict's words."""
    from specmon.commands.sweep_output import _print_result
    from specmon.experiment.plan_sources import resolve

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as rich sees it
    monkeypatch.delenv("NO_COLOR", raising=False)
    exp = resolve([("command line", {"demo": True, "objective": "itl-p50", "format": fmt})]).plan
    _print_result(exp, undecided, {})
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    flat = " ".join(out.replace("**", "").split())
    (ov,) = undecided.objective_verdicts
    a = ov.answer
    assert len(re.findall(r"^(\*\*)?Verdict\b", out, flags=re.M)) == 1, out
    assert f"Verdict on ITL p50 ({a.tag}):" in flat and " ".join(a.sentence.split()) in flat
    assert flat.count(NO_WINNER) == 1  # the objective's (undecided); the tok/s verdict's words are not printed
    assert _tps_sentence_tail(undecided) not in flat
    # Every mark is the objective's: in its table beside its leader, and in its verdict's tag.
    tps_part = out.split("ITL p50 at concurrency 1", 1)[0]
    assert "tok/s, for context (not a verdict):" in " ".join(tps_part.split())
    assert not any(m in tps_part for m in MARKS), tps_part
    assert all(line.count(a.mark) <= 1 for line in out.splitlines())


def test_the_demo_sweep_on_an_objective_prints_one_verdict(tmp_path: Path) -> None:
    """The real command, ``specmon sweep --demo --objective itl-p50`` in an 80-column terminal: one
    "Verdict" sentence, the objective's; no ★/☆ before the objective's table."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home"), "COLUMNS": "80", "FORCE_COLOR": "1"}
    env.pop("NO_COLOR", None)
    proc = subprocess.run([sys.executable, "-m", "specmon", "sweep", "--demo", "--steps", "0,2", "--objective",
                           "itl-p50", "--seed", "3", "--no-record", "--finish", "last"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 3), proc.stderr[-3000:]
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout)
    assert len(re.findall(r"^Verdict\b", out, flags=re.M)) == 1, out
    assert "Verdict on ITL p50 (" in out and "tok/s, for context (not a verdict):" in " ".join(out.split())
    tps_part = out.split("ITL p50 at concurrency 1", 1)[0]
    assert tps_part != out and not any(m in tps_part for m in MARKS), out
    assert all(len(line) <= 80 for line in out.splitlines()), out
