"""Every text surface of the verdict, whole at 80 columns, whatever the labels, numbers and verdict kind.

Generated campaigns (setting names, means, spreads, launches) go through the real verdicts (the
dashboard's, the sweep's) and the real renderers (``summarize``'s and ``sweep``'s table and verdict,
the sweep panel's table); the check: no line over 80 cells, every word of every cell and of the
verdict whole on one line, the verdict sentence complete, and ★ never beside "no winner declared".
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from specmon.model.analysis import Analysis, assemble, build_rows
from specmon.model.run import RunConfig
from specmon.model.session import Run
from specmon.model.stopping import StoppingRule, sweep_verdict
from specmon.model.verdict import NO_WINNER, WINNER_MARK, Answer
from specmon.output.tables import print_analysis, row_cells, sweep_outcome
from specmon.records import Engine
from specmon.ui.screens.sweep_verdict import verdict_lines
from tests.support.verdict_doc import sweep_doc

WIDTH = 80
#: What separates words on a rendered line: spaces and the table's box drawing.
_SPLIT = re.compile(r"[\s│┃┏┓┗┛┡┩└┘┌┐╇┳┻┴┬━─┼╋]+")


def _words(text: str) -> list[str]:
    return [w for w in _SPLIT.split(text) if w]


def _flat(text: str) -> str:
    return " ".join(_words(text))


def _run(i: int, algo: str, steps: int, values: np.ndarray) -> Run:
    run = Run(id=i, source="x.log", first_line=1)
    run.config = RunConfig(Engine.SGLANG, None if steps == 0 else algo, steps)
    for v in values:
        run.throughput.append(float(v))
        run.concurrency.append(1)
        run.accept_len.append(1.0 + steps * 0.4)
        run.accept_rate.append(0.6)
    run._spec_seen = len(values)  # the samples a session would have counted (Run.used)
    return run


#: A drafter's name as a log might print it: one or two words, up to 14 characters each.
names = st.lists(st.text(st.sampled_from("abcdefghXYZ0123456789-_."), min_size=1, max_size=14),
                 min_size=1, max_size=2).map(" ".join)


@st.composite
def analyses(draw: st.DrawFn) -> Analysis:
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    algo = draw(names)
    steps = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 10, 16]), min_size=1, max_size=6, unique=True))
    runs, i = [], 0
    for s in steps:
        mean = draw(st.floats(5, 4000))
        sd = mean * draw(st.sampled_from([0.002, 0.03, 0.1]))
        for _ in range(draw(st.integers(1, 2))):
            i += 1
            runs.append(_run(i, algo, s, rng.normal(mean, sd, size=draw(st.integers(30, 120)))))
    rows = build_rows(runs)
    assert len(rows) == len(steps)
    return assemble(rows, launch_cv=draw(st.sampled_from([0.0001, 0.05])))


def _check_lines(lines: list[str], width: int) -> None:
    for line in lines:
        assert cell_len(line) <= width, (cell_len(line), line)


def _check_whole(out: str, texts: list[str]) -> None:
    """Every word of ``texts`` stands whole on some line of ``out``."""
    on_lines = {w for line in out.splitlines() for w in _words(line)}
    for text in texts:
        for w in _words(text):
            assert w in on_lines, (w, out)


def _check_verdict(out: str, a: Answer) -> None:
    # The sentence complete, in order (wrapped at spaces only), and no ★ beside "no winner declared".
    if _flat(a.sentence) not in _flat(out):
        missing = [w for w in _words(a.sentence) if w not in _words(out)]
        raise AssertionError(f"verdict not whole; words not on screen: {missing}\n{out}")
    assert not (WINNER_MARK in out and NO_WINNER in out)
    assert a.mark in out


def _render(analysis: Analysis, answer: Answer, lead: str) -> str:
    buf = io.StringIO()
    console = Console(file=buf, width=WIDTH, color_system=None, force_terminal=False, legacy_windows=False)
    print_analysis(console, analysis, title="specmon summary — 5279 lines, engine sglang", verdict=answer,
                   lead=lead)
    return buf.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(analyses(), st.sampled_from(["Verdict", "tok/s, for context"]))
def test_summarize_and_sweep_text_are_whole_at_80_columns(analysis: Analysis, lead: str) -> None:
    # summarize: the analysis' own verdict.
    out = _render(analysis, analysis.verdict.answer, "Verdict")
    _check_lines(out.splitlines(), WIDTH)
    kept = [c for row in analysis.rows for c in row_cells(row)[:4]]  # the columns that never drop
    _check_whole(out, kept)
    _check_verdict(out, analysis.verdict.answer)
    dropped = re.search(r"Not shown at 80 columns: ([a-z ,]+) \(", _flat(out))
    for header in ("accept len", "accept rate"):
        assert header in _flat(out) or (dropped is not None and header in dropped.group(1))
    # sweep: the sweep's verdict (adjusted for its looks) under the same table.
    sv = sweep_verdict(analysis, StoppingRule(), concurrency=1)
    out = _render(analysis, sv.answer, lead)
    _check_lines(out.splitlines(), WIDTH)
    _check_verdict(out, sv.answer)
    # Its marks are the sweep verdict's: ★ only beside a declared winner.
    assert (f"{WINNER_MARK} " in out) is (sv.answer.mark == WINNER_MARK)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(analyses(), st.sampled_from([36, 56, 76, 120]))
def test_the_sweep_panel_table_fits_its_width_with_every_name_whole(analysis: Analysis, width: int) -> None:
    outcome = sweep_outcome(sweep_doc(analysis))
    assert outcome is not None and outcome.answer is not None
    lines = verdict_lines(outcome, report=Path("/tmp/r.md"), width=width)
    table = lines["table"]
    names = [f"{r.mark or ('B' if r.is_baseline else ' ')} {r.label}".strip() for r in outcome.rows]
    longest = max(len(n) + 2 for n in names)
    if longest <= width:  # a name longer than the panel is the one thing that may not fit
        _check_lines(table, width)
    _check_whole("\n".join(table), names)
    # The head says the verdict with its mark and words; ★ never beside "no winner declared".
    head = "\n".join(lines["head"])
    assert outcome.tag in head or outcome.best is None
    assert not (WINNER_MARK in head + "\n".join(table) and NO_WINNER in head)
    if "(pending)" in "\n".join(table):
        assert all("(pending)" in line for line in table if "(pendin" in line)  # never cut


def test_an_undecided_panel_says_what_would_decide_it_and_a_decided_one_does_not() -> None:
    from specmon.ingest.summarize import ingest_files
    from specmon.model.analysis import analyze

    root = Path(__file__).resolve().parents[2] / "sample_logs"
    analysis = analyze(ingest_files(sorted(str(p) for p in root.glob("sim_eagle3_*.log"))).runs)
    doc = sweep_doc(analysis)
    verdict = doc["verdict"]
    assert isinstance(verdict, dict) and verdict["separated"] is False
    text = "What would decide it: about 3 more launches of each of EAGLE3 2 steps and EAGLE3 3 steps"
    doc["needs_more"] = [{"a": verdict["best"], "b": verdict["runner_up"], "text": text},
                         {"a": "EAGLE3 5 steps", "b": "EAGLE3 1 step", "text": "another pair's advice"}]
    outcome = sweep_outcome(doc)
    assert outcome is not None and outcome.advice == (text,)
    head = verdict_lines(outcome, report=None)["head"]
    assert text in head and "another pair's advice" not in head
    # Once the panel is closed, the line under the run table keeps the verdict's mark and words.
    from specmon.ui.views import outcome_table

    line = outcome_table(outcome).verdict
    assert line.startswith("sweep: ☆ leads, undecided: EAGLE3 2 steps") and "no winner declared" in line
    assert "★" not in line and not any(r.mark == "★" for r in outcome_table(outcome).rows)
    # A separated verdict has nothing to decide: no advice drawn even if a document carried one.
    decided = sweep_outcome({**doc, "verdict": {**verdict, "separated": True, "answer": None,
                                                "sentence": verdict["sentence"].replace("no winner declared", "")}})
    assert decided is not None and decided.advice == ()


def test_the_sweep_text_in_an_80_column_terminal_is_whole(monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """What ``specmon sweep`` prints in an 80-column terminal (tables, verdict, cost model, restarts):
    no line over 80, the verdict whole and marked as the verdict object says."""
    from specmon.commands.sweep_output import _print_result
    from specmon.experiment.plan_sources import resolve
    from tests.support.sweepsim import run_sweep

    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("FORCE_COLOR", "1")  # a terminal, as rich sees it
    monkeypatch.delenv("NO_COLOR", raising=False)
    result = run_sweep(3, steps=(0, 1, 2, 3, 5), rule=StoppingRule(looks=2, min_samples=20, max_samples=120))
    _print_result(resolve([("test", {"profile": "p", "steps": [0, 1, 2, 3, 5]})]).plan, result, {})
    out = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out)
    _check_lines(out.splitlines(), WIDTH)
    v = result.verdict
    assert v is not None
    _check_verdict(out, v.answer)
    assert f"Verdict ({v.answer.tag}):" in out
    assert "Cost model" in out and "restarts:" in out
