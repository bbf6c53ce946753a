"""Which replica runs which setting in each round of a parallel sweep: a seeded, rotated layout.

Replicas differ in speed (hardware, neighbours, what their launch drew), so a setting that
always ran on the fast replica would win for the replica's sake. The layout is a cyclic Latin
rectangle: the replicas and the settings are put in a seeded order once, and in round ``k``
the replica at position ``i`` runs setting ``(i + k) mod S``. So

* within a round the settings' counts differ by at most one (every setting runs in parallel,
  under the same hour's conditions);
* over any ``S`` consecutive rounds every replica runs every setting exactly once, and the
  replica's own speed cancels out of the comparisons (:mod:`specmon.experiment.stats.replica_effects`
  then removes it outright);
* the same seed gives the same layout (a rerun, or a resumed sweep, can be checked against it).

A replica may be *barred* from a setting (its start failed: it is dropped from that arm). It
then takes the setting it may run that has the fewest replicas this round, or sits the round
out when it may run none. Settings decided early leave the rotation: the replicas spread over
the ones still open. With the best-arm design (:func:`specmon.experiment.stats.bai.fleet_pick`) the settings
passed after the warm-up are the leader and its closest challenger: the replicas fill each round
with the two contenders, rotated between them.

Pure: no I/O.
"""

from __future__ import annotations

import random
from collections.abc import Hashable, Mapping, Sequence
from typing import TypeVar

_K = TypeVar("_K", bound=Hashable)


def seeded_order(items: Sequence[_K], seed: int, salt: str) -> list[_K]:
    """``items`` in an order fixed by ``seed`` (``salt`` keeps the replicas' and settings' shuffles apart)."""
    out = list(items)
    random.Random(f"{seed}:{salt}").shuffle(out)
    return out


def assign(replicas: Sequence[str], settings: Sequence[_K], round_index: int, seed: int,
           barred: Mapping[str, set[_K]] | None = None) -> dict[str, _K]:
    """The setting each replica runs in round ``round_index`` (0-based); a replica missing sits out.

    Args:
        replicas: The replicas still in the sweep (names, distinct).
        settings: The settings still open (distinct), in the caller's fixed order (the seed
            shuffles what is passed: the same open settings give the same layout).
        round_index: Which round.
        seed: The sweep's seed.
        barred: Per replica, the settings it may not run.

    Raises:
        ValueError: no settings, or a replica named twice.
    """
    if not settings:
        raise ValueError("a layout needs at least one setting")
    if len(set(replicas)) != len(replicas):
        raise ValueError("replica names must be distinct")
    barred = barred or {}
    rs = seeded_order(sorted(replicas), seed, "replicas")
    ss = seeded_order(list(settings), seed, "settings")
    n = len(ss)
    out: dict[str, _K] = {}
    counts = dict.fromkeys(ss, 0)
    unplaced: list[str] = []
    for i, name in enumerate(rs):
        want = ss[(i + round_index) % n]
        if want in barred.get(name, set()):
            unplaced.append(name)
            continue
        out[name] = want
        counts[want] += 1
    for name in unplaced:  # after the others: the least-run allowed setting keeps the round balanced
        allowed = [s for s in ss if s not in barred.get(name, set())]
        if allowed:
            pick = min(allowed, key=lambda s: counts[s])
            out[name] = pick
            counts[pick] += 1
    return out
