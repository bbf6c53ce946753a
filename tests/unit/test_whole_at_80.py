"""Every text surface of the verdict, whole at 80 columns, whatever the labels, numbers and verdict kind.

Generated campaigns (setting names, means, spreads, launches) go through the real verdicts (the
dashboard's, the sweep's, a parallel sweep's) and the real renderers (``summarize``'s and ``sweep``'s
table and verdict, the sweep panel's table, the Markdown report's verdict, the parallel sweep's table
and verdict, the dashboard's line under the run table), each verdict kind forced by its campaign; the check: no line over 80 cells, every word of every cell and of the
verdict whole on one line, the verdict sentence complete, and ★ never beside "no winner declared".
"""

from __future__ import annotations

import io
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from specmon.model.analysis import Analysis, assemble, build_rows
from specmon.model.run import RunConfig
from specmon.model.session import Run
from specmon.model.stopping import StoppingRule, sweep_verdict
from specmon.model.verdict import NO_WINNER, WINNER_MARK, Answer, Kind, answer_from_json
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


# --------------------------------------------------------------------------- every verdict kind, forced


@st.composite
def campaigns(draw: st.DrawFn, kind: Kind) -> tuple[Analysis, StoppingRule]:
    """A campaign whose verdict is ``kind``, with generated names, means and other settings: the leader
    1.5 times the runner-up (a winner); the two level, with a huge margin (equivalent) or a tiny one and
    noisy samples (undecided); one setting (alone); too few samples for any interval (nothing measured)."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    algo = draw(names)
    steps = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5, 10, 16]), min_size=2, max_size=5, unique=True))
    steps = steps[:1] if kind is Kind.ALONE else steps
    top = draw(st.floats(5, 4000))
    noisy = kind is Kind.UNDECIDED
    runs: list[Run] = []
    for j, s in enumerate(steps):
        mean = top * (1.5 if kind is Kind.WINNER else 1.0) if j == 0 else top if j == 1 else \
            top * draw(st.floats(0.3, 0.9))
        n = 1 if kind is Kind.EMPTY else draw(st.integers(30, 120))  # two samples a setting: no interval
        for _ in range(2):  # two launches each: the launch spread measured
            runs.append(_run(len(runs) + 1, algo, s, rng.normal(mean, mean * (0.1 if noisy else 0.002), size=n)))
    analysis = assemble(build_rows(runs), launch_cv=0.05 if noisy else 0.0001)
    return analysis, StoppingRule(margin_pct={Kind.EQUIVALENT: 1e4, Kind.UNDECIDED: 1e-3}.get(kind, 1.0))


def _kinds(*kinds: Kind) -> st.SearchStrategy[tuple[Kind, tuple[Analysis, StoppingRule]]]:
    return st.sampled_from(kinds).flatmap(lambda k: st.tuples(st.just(k), campaigns(k)))


_FORCED = settings(max_examples=40, deadline=None,
                   suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@_FORCED
@given(_kinds(Kind.WINNER, Kind.UNDECIDED, Kind.EQUIVALENT, Kind.EMPTY))
def test_the_markdown_reports_verdict_is_whole_at_80_columns(case: tuple[Kind, tuple[Analysis, StoppingRule]]) -> None:
    from specmon.model.session import Session
    from specmon.output.report import ReportData, to_markdown

    kind, (analysis, rule) = case
    doc = sweep_doc(analysis, rule=rule)
    a = answer_from_json(doc["verdict"])
    assume(a is not None and a.kind is kind)
    assert a is not None
    data = ReportData("sweep.jsonl", Session(), analysis, [], "log time", {}, sweep_verdicts=[doc])
    section = to_markdown(data).split("\n## Verdict\n\n", 1)[1].split("\n## ", 1)[0]
    _check_lines(section.splitlines(), WIDTH)
    # Its first paragraph is the sentence, in bold, wrapped at spaces only: no word cut, nothing left out.
    first = section.split("\n\n", 1)[0].replace("\\", "")  # Markdown's escapes taken out
    assert first.startswith("**") and first.endswith("**"), first
    outcome = data.outcome
    assert outcome is not None and outcome.answer == a
    assert _flat(first[2:-2]) == _flat(outcome.sentence), (first, outcome.sentence)
    if a.leader is not None:
        assert outcome.claim.split(";", 1)[-1] in a.sentence  # the sweep's own comparison
    assert (NO_WINNER in _flat(first)) is (kind is Kind.UNDECIDED)
    assert not (WINNER_MARK in section and NO_WINNER in section)


#: Replica names as a profile may give them: up to 24 characters, no spaces.
replica_names = st.lists(st.text(st.sampled_from("abcdefgh-_.0123456789"), min_size=1, max_size=24),
                         min_size=1, max_size=6, unique=True)


@_FORCED
@given(st.sampled_from([Kind.WINNER, Kind.UNDECIDED, Kind.EQUIVALENT, Kind.EMPTY, None]), replica_names,
       st.lists(st.sampled_from([0, 1, 2, 3, 5, 10]), min_size=2, max_size=5, unique=True),
       st.lists(st.floats(5, 4000), min_size=5, max_size=5), st.integers(1, 4), st.booleans(),
       st.integers(0, 2**31))
def test_the_parallel_sweeps_table_and_verdict_are_whole_at_80_columns(
        kind: Kind | None, replicas: list[str], steps: list[int], means: list[float], rounds: int, stopped: bool,
        seed: int) -> None:
    from specmon.experiment.fleet_sweep import FleetPlan
    from specmon.output.parallel_sweep import setting_rows, text_report
    from tests.support.fleet_verdict import campaign, parallel_result

    plan = FleetPlan(tuple(steps), rounds=rounds)
    launches = campaign(seed, dict(zip(steps, means, strict=False)), rounds, replicas=replicas)
    result = parallel_result(plan, launches, force=None if kind is None else kind.value, stopped=stopped)
    d = result.decision
    # A forced winner or equivalence needs its intervals (the runner's decide() gives no other).
    assume(kind not in (Kind.WINNER, Kind.EQUIVALENT) or d is None
           or all(None not in v for v in (*d.slower.values(), *d.equivalent.values())))
    a = result.answer
    if kind is not None and d is not None:
        assert a.kind is kind
    out = text_report(result.to_json())
    _check_lines(out.splitlines(), WIDTH)
    _check_verdict(out, a)
    assert f"Verdict ({a.tag}):" in _flat(out)
    # Every setting, every replica and every number of the tables whole (each launch's ``steps:tok/s``).
    _check_whole(out, [c for row in setting_rows(result.to_json()) for c in row])
    _check_whole(out, replicas)
    _check_whole(out, [f"{x.steps}:{round(x.mean, 3):.1f}" for x in result.records])  # type: ignore[arg-type]


@_FORCED
@given(_kinds(Kind.WINNER, Kind.UNDECIDED, Kind.ALONE, Kind.EMPTY))
def test_the_dashboards_verdict_under_the_run_table_is_whole_at_80x24(
        case: tuple[Kind, tuple[Analysis, StoppingRule]]) -> None:
    """The line under the run table as the dashboard's ``#verdict`` wraps it at 80×24: 78 cells (its
    padding) and three lines (the rest of the table box's ten)."""
    from specmon.model.session import Session
    from specmon.ui.literal import literal
    from specmon.ui.views import SnapshotBuilder

    kind, (analysis, _rule) = case
    a = analysis.verdict.answer
    assume(a.kind is kind)
    builder = SnapshotBuilder()
    builder.analysis = analysis
    verdict = builder.table(Session()).verdict
    lines = [line.plain for line in literal(verdict, newlines=True).wrap(WIDTH - 2)]
    assert len(lines) <= 3, lines
    _check_lines(lines, WIDTH - 2)
    shown = _flat("\n".join(lines))
    assert _flat(a.claim if a.leader is not None else a.sentence) in shown, (lines, a.sentence)
    assert a.leader is None or lines[0].startswith(f"{a.tag}: ")  # the mark and its words first
    assert (NO_WINNER in shown) is (kind is Kind.UNDECIDED)
    assert not (WINNER_MARK in shown and NO_WINNER in shown)


@_FORCED
@given(_kinds(Kind.WINNER, Kind.UNDECIDED, Kind.ALONE, Kind.EMPTY))
def test_while_a_sweep_runs_the_run_tables_own_comparison_names_no_winner(
        case: tuple[Kind, tuple[Analysis, StoppingRule]]) -> None:
    """A sweep is running: the table's comparison of its runs (one look at 95%) is not the sweep's
    verdict (judged at its looks, adjusted for them), so no row and no line carries ★ until the sweep
    ends; the leader keeps ☆ and its figures, the line says whose verdict is to come, whole at 80×24."""
    from specmon.model.session import Session
    from specmon.ui.literal import literal
    from specmon.ui.views import SnapshotBuilder

    kind, (analysis, _rule) = case
    a = analysis.verdict.answer
    assume(a.kind is kind)
    builder = SnapshotBuilder()
    builder.analysis = analysis
    builder.sweeping = True
    table = builder.table(Session())
    lines = [line.plain for line in literal(table.verdict, newlines=True).wrap(WIDTH - 2)]
    assert len(lines) <= 3, lines
    _check_lines(lines, WIDTH - 2)
    shown = _flat("\n".join(lines))
    assert WINNER_MARK not in shown and all(r.mark != WINNER_MARK for r in table.rows)
    if a.leader is None:
        assert shown == _flat(a.sentence)
    else:
        assert shown.startswith("☆ leads; the sweep's verdict comes at its end: ")
        assert _flat(a.head) in shown
    builder.sweeping = False  # the sweep ended: the table's own verdict again, ★ where it declares one
    after = builder.table(Session())
    assert (WINNER_MARK in after.verdict) is (kind is Kind.WINNER)
