"""Launches where the decision is: best-arm identification for the launch design.

Today's launch design (:mod:`specmon.experiment.stats.design`) launches *every* undecided setting in every
round, so a setting 8% behind gets as many restarts as the two that decide the answer. This
module is the fixed-confidence best-arm identification alternative, adapted from **LUCB**
(Kalyanakrishnan, Tewari, Auer & Stone, "PAC subset selection in stochastic multi-armed
bandits", ICML 2012; the k = 1 case) with **successive elimination** of clearly slower arms
(Even-Dar, Mannor & Mansour, "Action elimination and stopping conditions for the multi-armed
bandit and reinforcement learning problems", JMLR 7, 2006):

* **Warm-up**: every setting is launched twice before any is judged (the launch model needs two
  launches of a setting before its spread is its own, :mod:`specmon.model.launches`).
* **Each later round launches two settings**: the empirical leader (highest mean) and its *most
  ambiguous challenger* — the undecided setting whose upper confidence bound on
  ``challenger − leader`` is highest at the design's level (LUCB's rule: sample the leader and
  the arm most likely to overturn it). Settings that are neither wait; their launches so far
  still count, in their means and in the pooled launch spread.
* **Elimination and stopping** are today's rule, unchanged in kind: at each planned look every
  undecided setting is tested against the leader on the two-level interval of the difference
  (:func:`specmon.experiment.stats.design.judge_round`); a setting whose adjusted interval lies below the
  leader's leaves (*slower*, successive elimination), one within the margin leaves as
  *equivalent* (still an answer), and the sweep ends when one setting is left.

**The guarantee.** LUCB's own stopping uses per-arm confidence bounds; here the stopping test is
the verdict's pairwise test on the difference (tighter by about √2 for two arms measured alike),
kept at an adjusted level so that a union bound covers every test: all settings are judged at
the *same* planned rounds (every pair is tested at most ``K`` times, once per look, not ``2K`` as
when settings reach sample looks at different times), so each test is two-sided at ``α/K`` and
the chance that two equal settings are ever called different stays at most ``α``. Which
settings are launched may depend on the data; the looks do not (they are fixed before the first
restart), and an eliminated setting's tests are in the same count, so the error it carries is
counted. The chance of naming a wrong winner is at most the chance that some slower setting's
interval clears the truly best one, which is within the same union bound. Simulated campaigns
(``bench/bench_bai.py``) measure both.

Pure: no I/O; :mod:`specmon.experiment.rounds` and the bench call the same functions.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import replace

from specmon.model.stats import Summary
from specmon.model.stopping import StoppingRule, adjusted_difference

#: Launches of every setting before LUCB picks (the launch model needs two for a setting's spread).
WARMUP = 2
#: The most rounds a best-arm sweep plans: the two contenders may need this many launches each.
MAX_ROUNDS = 40
#: The planned looks of a best-arm sweep (rounds after which every undecided setting is judged).
LOOKS = 10
#: The design's name (``--design``).
NAME = "bai"


def look_rounds(last: int | None = None, looks: int | None = None, first: int = WARMUP) -> tuple[int, ...]:
    """Rounds ``first ≤ r_1 < … < r_K = last`` after which the settings are judged, fixed in advance.

    Spaced so the rounds *between* looks grow geometrically after the warm-up: the early looks
    catch the clearly slower settings (the 36% one after two launches), the later ones the
    close contenders.
    """
    last = MAX_ROUNDS if last is None else last
    looks = LOOKS if looks is None else looks
    if last <= first or looks <= 1:
        return (max(last, 1),)
    ratio = (last / first) ** (1.0 / (looks - 1))
    out: list[int] = []
    for j in range(looks):
        r = last if j == looks - 1 else round(first * ratio**j)
        if not out or r > out[-1]:
            out.append(r)
    return tuple(out)


def rule_for(plan_rule: StoppingRule, looks: Sequence[int]) -> StoppingRule:
    """The rule a best-arm sweep judges (and gives its verdict) with: at most ``α/K`` two-sided per test.

    :attr:`StoppingRule.test_level` is ``1 − α/(2·looks)``; settings judged together at ``K``
    rounds are tested ``K`` times per pair, so the rule's ``looks`` is ``⌈K/2⌉`` (for an odd ``K``
    that is ``α/(K+1)``: a little stricter, never looser). The sample budget is per launch, not
    per setting.
    """
    k = max(1, len(looks))
    return replace(plan_rule, looks=max(1, math.ceil(k / 2)), max_samples=max(plan_rule.max_samples, 1 << 40))


def challenger(sums: Mapping[Hashable, Summary], leader: Hashable, candidates: Sequence[Hashable],
               level: float) -> Hashable | None:
    """LUCB's challenger: the candidate whose upper bound on ``candidate − leader`` is highest.

    The bound is the upper end of the two-level interval of the difference at ``level``; a
    candidate without one yet (fewer launches than an interval needs) is the most ambiguous of all.
    """
    best: tuple[float, Hashable] | None = None
    lead = sums.get(leader)
    for key in candidates:
        if key == leader or key not in sums:
            continue
        if lead is None:
            return key
        d = adjusted_difference(sums[key], lead, level)
        score = d.high if d.high is not None else math.inf
        if best is None or score > best[0]:
            best = (score, key)
    return best[1] if best is not None else None


def to_launch(active: Sequence[Hashable], launches: Mapping[Hashable, int], sums: Mapping[Hashable, Summary],
              baseline: Hashable | None, round_no: int, level: float) -> list[Hashable]:
    """The settings to launch in round ``round_no`` (1-based), in alternating order.

    During the warm-up every undecided setting (and the baseline) until it has :data:`WARMUP`
    launches; after it, the leader and its most ambiguous undecided challenger (:func:`challenger`).
    The leader is taken over every setting measured, decided or not: a setting that stopped as
    *equivalent* may still lead, and then it is launched again against its challenger.

    Args:
        active: The undecided settings.
        launches: Launches of each setting so far (also fixes the order: the caller's).
        sums: The settings' two-level summaries now.
        baseline: The no-speculation setting, if any.
        round_no: The round (1-based).
        level: The design's test level (the challenger's bound is at it).
    """
    order = list(launches) + [k for k in active if k not in launches]
    warm = [k for k in order if (k in active or k == baseline) and launches.get(k, 0) < WARMUP]
    if warm:
        keys = warm
    else:
        live = [k for k in active if k in sums]
        if not live:
            return []
        leader = max(sums, key=lambda k: sums[k].mean)
        rival = challenger(sums, leader, [k for k in live if k != leader], level)
        keys = [leader] + ([rival] if rival is not None else [])
        if rival is None and leader not in active:
            return []
        keys = [k for k in order if k in keys]
    return keys if round_no % 2 == 1 else list(reversed(keys))


def fleet_pick(open_settings: Sequence[Hashable], launches: Mapping[Hashable, int], leader: Hashable | None,
               upper_pct: Mapping[Hashable, float | None]) -> list[Hashable]:
    """The settings a parallel sweep's rotation fills its next round with (:mod:`specmon.experiment.stats.rotation`).

    Every open setting until each has :data:`WARMUP` launches (or while no leader is known); then the
    leader and its most ambiguous open challenger — the one whose upper bound on ``challenger / leader
    − 1`` (``upper_pct``, percent) is highest — so the replicas are spread over the two contenders,
    rotated as before. A leader that left the open settings (equivalent, still fastest) still runs.

    Args:
        open_settings: The settings still undecided, in the sweep's order.
        launches: Launches counted of each setting so far.
        leader: The fastest setting now (None before a fit).
        upper_pct: Each open setting's upper bound on its difference from the leader (None: not known).
    """
    if leader is None or any(launches.get(s, 0) < WARMUP for s in open_settings):
        return list(open_settings)
    rivals = [s for s in open_settings if s != leader]
    if not rivals:
        return list(open_settings)
    rival = max(rivals, key=lambda s: math.inf if upper_pct.get(s) is None else float(upper_pct[s]))  # type: ignore[arg-type]
    return [leader, rival]
