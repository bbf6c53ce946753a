"""A parallel sweep's verdict is the one verdict object (issue 42): made by :func:`specmon.model.verdict.answer`
from the sweep's decision, so its ★ means a declared winner and ☆ "leads, undecided" exactly as every other
surface, its sentence has the sequential sweep's shapes, and its tables and text draw that answer.

The results are simulated campaigns fitted and decided by the runner's own functions (no forcing):
a clear winner, two equal settings within the margin, two close settings after two rounds, and a sweep
where nothing was measured.
"""

from __future__ import annotations

import pytest

from specmon.experiment.fleet_sweep import FleetPlan
from specmon.model.verdict import LEADER_MARK, NO_WINNER, WINNER_MARK, Kind, answer_from_json
from specmon.output.parallel_sweep import markdown_report, setting_rows, text_report
from tests.support.fleet_verdict import campaign, parallel_result

#: The keys a parallel sweep's verdict has always written (tests and scripts read them).
_KEYS = {"kind", "winner_steps", "leader_steps", "level", "model", "rests_on", "replica_cv", "sentence"}

CASES = {
    Kind.WINNER: (FleetPlan((0, 2, 3), rounds=6), dict(truth={0: 100.0, 2: 140.0, 3: 120.0}, rounds=6,
                                                        launch_cv=0.02)),
    Kind.EQUIVALENT: (FleetPlan((0, 2), rounds=8, margin_pct=2.0),
                      dict(truth={0: 100.0, 2: 100.0}, rounds=8, launch_cv=0.002, replica_cv=0.2, noise=0.01)),
    Kind.UNDECIDED: (FleetPlan((0, 2), rounds=2), dict(truth={0: 100.0, 2: 101.0}, rounds=2)),
}


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize("kind", [*CASES, Kind.EMPTY])
def test_a_parallel_sweeps_marks_and_sentence_are_the_answers(kind: Kind) -> None:
    if kind is Kind.EMPTY:
        plan, launches = FleetPlan((0, 2)), campaign(3, {0: 100.0, 2: 110.0}, 1)
        result = parallel_result(plan, launches, force="empty", stopped=True)
    else:
        plan, how = CASES[kind]
        result = parallel_result(plan, campaign(3, **how))  # type: ignore[arg-type]
    a = result.answer
    assert a.kind is kind, (kind, result.decision, a.sentence)
    # The document carries the answer beside the keys it always had, and they agree with it.
    doc = result.to_json()
    v = doc["verdict"]
    again = answer_from_json(v)
    assert set(v) >= _KEYS and v["answer"] == a.to_json() and again is not None and again.to_json() == a.to_json()
    assert v["sentence"] == a.sentence == result.sentence()
    assert v["winner_steps"] == a.winner_steps == result.winner and v["leader_steps"] == a.leader_steps
    # ★ a declared winner only, ☆ leads, undecided; "no winner declared" exactly when undecided.
    assert a.mark == {Kind.WINNER: WINNER_MARK, Kind.EMPTY: ""}.get(kind, LEADER_MARK)
    assert (NO_WINNER in a.sentence) is (kind is Kind.UNDECIDED)
    # The sequential sweep's sentence shapes: the leader, the comparison, then what it rests on.
    claim = a.claim
    if kind is Kind.EMPTY:
        assert a.sentence.startswith("Not enough data: the sweep was stopped before") and a.leader is None
    else:
        assert claim.startswith((f"{a.leader}: ", f"{a.leader} is fastest at concurrency 1 ("))
        assert a.sentence[len(claim):].startswith(" Rests on ")
        assert "launches on 4 replicas" in a.sentence
    if kind is Kind.WINNER:
        assert a.leader == "2 steps" and a.runner_up == "3 steps"
        assert "; faster than 3 steps by " in claim and "adjusted for repeated looks)" in claim
    elif kind is Kind.EQUIVALENT:
        assert f"; {a.runner_up} is equivalent within ±2% (" in claim and claim.endswith(": either will do.")
    elif kind is Kind.UNDECIDED:
        assert f"; {a.runner_up} is not distinguishable (" in claim and claim.endswith(f": {NO_WINNER}.")
    # Every surface of the parallel sweep draws that answer: the leader's row, the verdict's tag and sentence.
    marked = [row[0] for row in setting_rows(doc) if row[0][:1] in (WINNER_MARK, LEADER_MARK)]
    assert marked == ([f"{a.mark} {a.leader}"] if a.leader else [])
    text, md = text_report(doc), markdown_report(doc)
    assert f"Verdict ({a.tag}): {a.sentence}" in _flat(text)
    assert f"**Verdict ({a.tag}):**" in md and _flat(a.sentence) in _flat(md.replace("\\", ""))
    for out in (text, md):
        assert (WINNER_MARK in out) is (kind is Kind.WINNER)
