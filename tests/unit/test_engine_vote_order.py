"""The session's engine from its votes does not depend on the order the votes came in.

The bulk path counts a piece's votes kind by kind, the line path line by line: a file of
several engines with a tie named SGLang on one and vLLM on the other (hypothesis found it in
test_fastscan with three real logs, one after the other).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specmon.model.session import Session
from specmon.records import Engine

ENGINES = [e for e in Engine if e is not Engine.UNKNOWN]


@given(st.lists(st.tuples(st.sampled_from(ENGINES), st.integers(1, 5)), min_size=1, max_size=30),
       st.randoms(use_true_random=False), st.one_of(st.none(), st.sampled_from(ENGINES)))
def test_the_engine_is_the_same_whatever_order_the_votes_come_in(votes: list[tuple[Engine, int]], rng, hint) -> None:  # type: ignore[no-untyped-def]
    def decide(order: list[tuple[Engine, int]]) -> Engine:
        s = Session()
        if hint is not None:
            s.engine_hint = hint
        for engine, n in order:
            s._vote(engine, n)
        s._decide_engine()
        return s.engine

    shuffled = list(votes)
    rng.shuffle(shuffled)
    one_by_one = [(e, 1) for e, n in votes for _ in range(n)]
    assert decide(votes) is decide(shuffled) is decide(one_by_one)
    totals: dict[Engine, int] = {}
    for e, n in votes:
        totals[e] = totals.get(e, 0) + n
    assert totals[decide(votes)] == max(totals.values())  # always a most-voted engine
