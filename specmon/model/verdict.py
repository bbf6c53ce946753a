"""The one answer every surface draws: who leads, whether that is a declared winner, and the sentence.

Three computations reach a verdict (the dashboard's :func:`specmon.model.analysis.verdict_for` at
95%, the sweep's :func:`specmon.model.stopping.sweep_verdict` at its adjusted level, the
objective's :func:`specmon.model.objective.objective_verdict`); each ends by calling
:func:`answer`, and what is drawn — the mark beside a setting, the words after it, the JSON's
``answer`` — is read from the :class:`Answer` it returns, never worked out again by a surface.

One rule holds everywhere: ★ marks a *declared winner* and nothing else. The setting that is
fastest by mean but not separated from the runner-up gets ☆ and the words "leads, undecided".
:class:`Answer` checks on construction that its fields cannot contradict each other, so a
surface cannot draw a ★ beside "no winner declared".
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = ["LEADER_MARK", "LEGEND", "MARK_WORDS", "NO_WINNER", "WINNER_MARK", "Answer", "Kind", "answer",
           "answer_from_json", "claim_of", "pct_bound", "tps_bound"]

#: A declared winner: the difference holds up at the verdict's level.
WINNER_MARK = "★"
#: The leader by mean, not separated from the runner-up (or with nothing to compare with).
LEADER_MARK = "☆"
#: The phrase every undecided sentence ends its comparison with.
NO_WINNER = "no winner declared"

#: What each mark means, in the words of every legend (README, ``?``, Markdown, HTML).
MARK_WORDS = {WINNER_MARK: "winner (declared: separated from the runner-up)",
              LEADER_MARK: "leads, undecided (fastest by mean, no winner declared)"}
#: The legend line, as the help and the reports print it.
LEGEND = f"{WINNER_MARK} {MARK_WORDS[WINNER_MARK]} · {LEADER_MARK} {MARK_WORDS[LEADER_MARK]}"


class Kind(StrEnum):
    """What the verdict says."""

    #: The leader is separated from the runner-up: a winner is declared.
    WINNER = "winner"
    #: The leader and the runner-up are equivalent within the margin: either will do.
    EQUIVALENT = "equivalent"
    #: The leader is not separated from the runner-up, and not shown equivalent.
    UNDECIDED = "undecided"
    #: One setting only: nothing to compare it with.
    ALONE = "alone"
    #: Nothing measured enough to rank.
    EMPTY = "empty"


_WORDS = {Kind.WINNER: "winner", Kind.EQUIVALENT: "leads, undecided (equivalent to the runner-up)",
          Kind.UNDECIDED: "leads, undecided", Kind.ALONE: "leads, undecided",
          Kind.EMPTY: "nothing measured yet"}


class VerdictError(ValueError):
    """An answer whose fields would contradict each other (a bug in the caller, never user input)."""


@dataclass(frozen=True, slots=True)
class Answer:
    """The verdict as every surface draws it.

    Attributes:
        kind: What the verdict says (see :class:`Kind`).
        leader: The setting first by mean on the verdict's measure (None when nothing ranks).
        runner_up: The second (None with fewer than two).
        leader_steps, runner_up_steps: Their step counts, where known.
        measure: What was compared: ``tok/s``, or the objective's name (``ITL p50``).
        level: The confidence level of the test that separates (0.95, or the sweep's adjusted level).
        sentence: The whole verdict in words.
    """

    kind: Kind
    leader: str | None
    runner_up: str | None
    leader_steps: int | None
    runner_up_steps: int | None
    measure: str
    level: float
    sentence: str

    def __post_init__(self) -> None:
        problems = []
        if (self.leader is None) != (self.kind is Kind.EMPTY):
            problems.append("a leader exactly when something ranks")
        if self.kind in (Kind.WINNER, Kind.EQUIVALENT, Kind.UNDECIDED) and self.runner_up is None:
            problems.append(f"a runner-up for a {self.kind} verdict")
        if self.kind in (Kind.ALONE, Kind.EMPTY) and self.runner_up is not None:
            problems.append(f"no runner-up for a {self.kind} verdict")
        said = self.sentence  # the verdict's own words: a name from a log may hold any phrase
        for name in (self.leader, self.runner_up):
            said = said.replace(name, "") if name else said
        if (NO_WINNER in said) != (self.kind is Kind.UNDECIDED):
            problems.append(f"{NO_WINNER!r} in the sentence exactly when undecided")
        if not 0 < self.level < 1:
            problems.append("a level between 0 and 1")
        if problems:
            raise VerdictError(f"a {self.kind} verdict needs " + "; ".join(problems) + f": {self.sentence!r}")

    @property
    def winner(self) -> str | None:
        """The declared winner's name (None unless ``kind`` is WINNER)."""
        return self.leader if self.kind is Kind.WINNER else None

    @property
    def winner_steps(self) -> int | None:
        """The declared winner's step count (None unless a winner is declared)."""
        return self.leader_steps if self.kind is Kind.WINNER else None

    @property
    def mark(self) -> str:
        """The leader's mark: ★ for a declared winner, ☆ for a leader not separated, "" for none."""
        if self.kind is Kind.WINNER:
            return WINNER_MARK
        return "" if self.leader is None else LEADER_MARK

    @property
    def words(self) -> str:
        """What the mark means here: ``winner``, ``leads, undecided``, ..."""
        return _WORDS[self.kind]

    @property
    def label(self) -> str:
        """The mark, the leader and the words: ``☆ EAGLE3 2 steps leads, undecided``."""
        if self.leader is None:
            return self.words
        if self.kind is Kind.WINNER:
            return f"{WINNER_MARK} {self.leader} is the winner"
        return f"{LEADER_MARK} {self.leader} {self.words}"

    @property
    def claim(self) -> str:
        """The sentence without what it rests on (`` Rests on 6 launches ...``): the comparison alone,
        for a surface with three lines for it (the dashboard at 80×24); the whole is in ``sentence``."""
        return claim_of(self.sentence, (self.leader, self.runner_up))

    @property
    def head(self) -> str:
        """The claim's first clause, on the leader alone (``EAGLE3 2 steps has the lowest ITL p50 at
        concurrency 1: 12.3 ms (3 launches)``), without what it says of the runner-up; the claim when
        it has no such clause. A headline over the rest, or a comparison shown for context only."""
        claim = self.claim
        start = claim.index(self.leader) + len(self.leader) if self.leader and self.leader in claim else 0
        cut = claim.find("; ", start)
        return claim if cut < 0 else claim[:cut]

    @property
    def tag(self) -> str:
        """``☆ leads, undecided``, ``★ winner``: the mark and its words, as every surface shows them."""
        return f"{self.mark} {self.words}" if self.mark else self.words

    def mark_for(self, name: str | None) -> str:
        """The mark beside a setting of this verdict's table (only the leader has one)."""
        return self.mark if name is not None and name == self.leader else ""

    def to_json(self) -> dict[str, Any]:
        """The answer as every JSON document carries it (``verdict.answer``)."""
        return {"kind": self.kind.value, "mark": self.mark, "words": self.words, "leader": self.leader,
                "leader_steps": self.leader_steps, "winner": self.winner, "winner_steps": self.winner_steps,
                "runner_up": self.runner_up, "runner_up_steps": self.runner_up_steps, "measure": self.measure,
                "level": round(self.level, 5), "sentence": self.sentence}


#: Beyond this a percentage bound says only its side: an interval of ±10^40% (one launch each, one
#: degree of freedom) is as uninformative as ±10^4%, and its digits took a whole 80-column line.
PCT_BOUND = 9999.0


def pct_bound(x: float) -> str:
    """``+5.3``; ``>+9999`` / ``<-9999`` past :data:`PCT_BOUND` (the sentences and the tables alike)."""
    if x > PCT_BOUND:
        return f">+{PCT_BOUND:.0f}"
    if x < -PCT_BOUND:
        return f"<-{PCT_BOUND:.0f}"
    return f"{x:+.1f}"


def tps_bound(x: float, *, sign: bool = True) -> str:
    """A tok/s bound in a sentence: ``+3.1``; past 10^5 in three digits (``-4.42e+77``), the width an
    interval on a fraction of a degree of freedom reaches (its 80 digits were cut at the edge)."""
    if abs(x) < 1e5:
        return f"{x:+.1f}" if sign else f"{x:.1f}"
    return f"{x:+.3g}" if sign else f"{x:.3g}"


def claim_of(sentence: str, names: tuple[str | None, ...]) -> str:
    """``sentence`` up to its `` Rests on ...`` part, searched after the settings' first mention (their
    names are log text; the part it rests on names them again: "2 of EAGLE3 2 steps")."""
    start = 0
    for name in names:
        if name and name in sentence:
            start = max(start, sentence.index(name) + len(name))
    cut = sentence.find(" Rests on ", start)
    return sentence if cut < 0 else sentence[:cut]


def answer(*, leader: str | None, runner_up: str | None, separated: bool, equivalent: bool, sentence: str,
           leader_steps: int | None = None, runner_up_steps: int | None = None, measure: str = "tok/s",
           level: float = 0.95) -> Answer:
    """The one constructor: the kind follows from the comparison, so no caller picks it by hand.

    Args:
        separated: The leader's difference from the runner-up holds at ``level``.
        equivalent: Not separated, and the difference lies within the margin either way.
    """
    if leader is None:
        kind = Kind.EMPTY
    elif runner_up is None:
        kind = Kind.ALONE
    elif separated:
        kind = Kind.WINNER
    elif equivalent:
        kind = Kind.EQUIVALENT
    else:
        kind = Kind.UNDECIDED
    return Answer(kind, leader, runner_up if leader is not None else None, leader_steps,
                  runner_up_steps if runner_up is not None and leader is not None else None, measure, level,
                  sentence)


def _int(x: Any) -> int | None:
    return x if isinstance(x, int) and not isinstance(x, bool) else None


def answer_from_json(v: Any) -> Answer | None:
    """The answer of a verdict's JSON: its ``answer`` when written, else rebuilt from the older fields
    (``best``, ``runner_up``, ``separated``, ``equivalent``, ``sentence``); None if ``v`` is not a verdict."""
    if not isinstance(v, dict):
        return None
    inner = v.get("answer")
    a: dict[str, Any] = inner if isinstance(inner, dict) else v
    leader = a.get("leader", a.get("best"))
    runner = a.get("runner_up")
    sentence = str(a.get("sentence") or v.get("sentence") or "")
    kind = a.get("kind")
    separated = kind == Kind.WINNER.value if isinstance(kind, str) else bool(v.get("separated"))
    equivalent = kind == Kind.EQUIVALENT.value if isinstance(kind, str) else bool(v.get("equivalent"))
    level = a.get("level", v.get("diff_level", 0.95))
    try:
        return answer(leader=leader if isinstance(leader, str) else None,
                      runner_up=runner if isinstance(runner, str) else None, separated=separated,
                      equivalent=equivalent, sentence=sentence,
                      leader_steps=_int(a.get("leader_steps", a.get("best_steps"))),
                      runner_up_steps=_int(a.get("runner_up_steps")), measure=str(a.get("measure") or "tok/s"),
                      level=float(level) if isinstance(level, (int, float)) and 0 < level < 1 else 0.95)
    except VerdictError:
        return None  # a document whose fields contradict each other: no answer is drawn from it
