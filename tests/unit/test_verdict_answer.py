"""The one verdict object (:mod:`specmon.model.verdict`): its fields never contradict each other.

Verdicts are generated from real samples through the real computations (the dashboard's
``verdict_for``, the sweep's ``sweep_verdict``, the objective's ``objective_verdict``), not
built by hand, and the invariants are checked on what comes out: ★ exactly for a declared
winner, "no winner declared" exactly when undecided, one mark per table, the JSON's answer the
same as the object's.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.model.analysis import Verdict, assemble, build_rows
from specmon.model.run import RunConfig
from specmon.model.session import Run
from specmon.model.stopping import StoppingRule, check_source, sweep_verdict
from specmon.model.verdict import (
    LEADER_MARK,
    NO_WINNER,
    WINNER_MARK,
    Answer,
    Kind,
    VerdictError,
    answer,
    answer_from_json,
)
from specmon.records import Engine


def _run(i: int, steps: int, values: np.ndarray) -> Run:
    run = Run(id=i, source="x.log", first_line=1)
    run.config = RunConfig(Engine.SGLANG, None if steps == 0 else "EAGLE3", steps)
    for v in values:
        run.throughput.append(float(v))
        run.concurrency.append(1)
    run._spec_seen = len(values)  # the samples a session would have counted (Run.used)
    return run


def _check(a: Answer, marks: dict[str, str]) -> None:
    """The invariants every answer holds, and the marks a table drew from it."""
    assert (a.mark == WINNER_MARK) is (a.kind is Kind.WINNER) is (a.winner is not None)
    assert (a.mark == LEADER_MARK) is (a.kind in (Kind.UNDECIDED, Kind.EQUIVALENT, Kind.ALONE))
    assert (NO_WINNER in a.sentence) is (a.kind is Kind.UNDECIDED)
    assert not (WINNER_MARK in marks.values() and NO_WINNER in a.sentence)
    # One marked row, the leader's, with the answer's mark.
    marked = {k: m for k, m in marks.items() if m}
    assert marked == ({a.leader: a.mark} if a.mark else {})
    assert a.winner_steps == (a.leader_steps if a.kind is Kind.WINNER else None)
    # The JSON carries the same answer, and reads back to it.
    back = answer_from_json({"answer": a.to_json()})
    assert back == a
    assert a.label.startswith(a.mark) if a.mark else True


@st.composite
def campaigns(draw: st.DrawFn) -> list[Run]:
    """Settings with one or more launches, means close or far apart, spreads small or large."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    steps = draw(st.lists(st.sampled_from([0, 1, 2, 3, 5]), min_size=1, max_size=4, unique=True))
    runs, i = [], 0
    for s in steps:
        mean = draw(st.floats(60, 120))
        sd = draw(st.sampled_from([0.5, 3.0, 9.0]))
        for _ in range(draw(st.integers(1, 3))):
            i += 1
            runs.append(_run(i, s, rng.normal(mean, sd, size=draw(st.integers(40, 160)))))
    return runs


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(campaigns(), st.sampled_from([0.0, 0.05]))
def test_the_dashboard_and_sweep_verdicts_never_contradict_themselves(runs: list[Run], cv: float) -> None:
    rows = build_rows(runs)
    assert len(rows) == len({r.config for r in runs})
    analysis = assemble(rows, launch_cv=cv or 0.05)
    v: Verdict = analysis.verdict
    _check(v.answer, {r.label: r.mark for r in analysis.rows})
    assert v.answer.sentence == v.sentence
    assert (v.answer.kind is Kind.WINNER) is (v.best is not None and v.runner_up is not None and v.separated)
    # The sweep's verdict over the same rows, at its adjusted level: its marks replace the 95% ones.
    sv = sweep_verdict(analysis, StoppingRule(), concurrency=1)
    a = sv.answer
    _check(a, {r.label: r.mark for r in analysis.rows})
    doc = sv.to_json()
    assert doc["answer"] == a.to_json()
    assert doc["winner_steps"] == a.winner_steps
    assert doc["separated"] is (a.kind is Kind.WINNER)
    assert doc["equivalent"] is (a.kind is Kind.EQUIVALENT)
    assert answer_from_json(doc) == a


@given(st.dictionaries(st.sampled_from([0, 1, 2, 5]), st.floats(50, 120), min_size=2),
       st.dictionaries(st.sampled_from([0, 1, 2, 5]), st.floats(50, 120), min_size=2), st.booleans())
def test_a_source_check_says_the_same_fastest_setting_only_when_it_is(
        means: dict[int, float], primary: dict[int, float], separated: bool) -> None:
    leader = max(primary, key=lambda k: primary[k])
    c = check_source("client", means, primary, verdict_best=leader, separated=separated)
    if "the same fastest setting" in c.phrase():
        assert c.best_steps == leader
    if separated and c.agrees:
        assert c.best_steps == leader


def test_fields_that_contradict_are_refused() -> None:
    with pytest.raises(VerdictError):
        Answer(Kind.WINNER, "two", "three", 2, 3, "tok/s", 0.95, "two leads; three: no winner declared.")
    with pytest.raises(VerdictError):
        Answer(Kind.UNDECIDED, "two", "three", 2, 3, "tok/s", 0.95, "two is faster than three.")
    with pytest.raises(VerdictError):
        Answer(Kind.UNDECIDED, "two", None, 2, None, "tok/s", 0.95, "two: no winner declared")
    # A setting's name from a log may hold any phrase: only the verdict's own words count.
    a = answer(leader="no winner declared 2", runner_up="b", separated=True, equivalent=False,
               sentence="no winner declared 2 is faster than b.")
    assert a.kind is Kind.WINNER and a.mark == WINNER_MARK


def test_an_old_document_without_an_answer_reads_back_from_its_flags() -> None:
    old = {"best": "EAGLE3 2 steps", "best_steps": 2, "runner_up": "EAGLE3 3 steps", "runner_up_steps": 3,
           "separated": False, "equivalent": False,
           "sentence": "EAGLE3 2 steps: +5%; EAGLE3 3 steps is not distinguishable: no winner declared."}
    a = answer_from_json(old)
    assert a is not None and a.kind is Kind.UNDECIDED and a.mark == LEADER_MARK and a.winner is None
    assert a.mark_for("EAGLE3 2 steps") == LEADER_MARK and a.mark_for("EAGLE3 3 steps") == ""
    # A document whose flags contradict its sentence draws no answer at all.
    assert answer_from_json({**old, "separated": True}) is None


def test_the_claim_is_the_comparison_without_what_it_rests_on() -> None:
    rests = " Rests on 4 launches (2 of EAGLE3 2 steps, 2 of EAGLE3 3 steps); launch CV 2.0% estimated."
    head = "EAGLE3 2 steps: +5.9% over no speculation; EAGLE3 3 steps is not distinguishable: no winner declared."
    a = answer(leader="EAGLE3 2 steps", runner_up="EAGLE3 3 steps", separated=False, equivalent=False,
               sentence=head + rests)
    assert a.claim == head
    alone = answer(leader="EAGLE3 2 steps", runner_up=None, separated=False, equivalent=False,
                   sentence="EAGLE3 2 steps: 94.2 tok/s; no other configuration to compare with." + rests)
    assert alone.claim == "EAGLE3 2 steps: 94.2 tok/s; no other configuration to compare with."
    assert alone.tag == "☆ leads, undecided"
