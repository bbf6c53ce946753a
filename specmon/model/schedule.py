"""From per-load verdicts to what the engine runs: a step count for every batch size.

In 2026 the engines take a schedule instead of one step count: vLLM's
``num_speculative_tokens_per_batch_size`` (inclusive batch-size ranges, each with its K;
K = 0 turns speculation off there) inside ``--speculative-config``, SGLang's adaptive
mode (``--speculative-adaptive --speculative-adaptive-config FILE``: batch-size slots, each
with its candidate step tiers) and TensorRT-LLM's ``draft_len_schedule`` (batch-size
thresholds, each with its draft length, in ``speculative_config``). A sweep that measured several concurrencies has what such a
schedule needs; this module turns its verdicts into one, by one rule at each concurrency (each
engine's form of it, the flags or file it takes, is its module's: ``schedule_form``):

- the winner, when the sweep separated it from the runner-up (after its repeated looks);
- else the smallest K whose throughput is *equivalent* to the fastest within the sweep's
  margin (the same adjusted interval the sweep stops on): the cheaper setting when the
  evidence says they do the same; K = 0 when no speculation is among them (speculation
  does not pay there);
- else (neither separated nor equivalent: the evidence is short) the fastest by mean,
  marked *undecided*, so that nobody deploys it as a finding.

Between two measured loads the schedule switches at their geometric mean (loads are
measured on a log scale: 1, 4, 16, 64), and past the last one it keeps the last K (vLLM
carries the last range's K to its maximum batch size; SGLang routes a batch to the nearest
slot at or below it). The client's concurrency stands for the engine's running batch: in
a steady decode they are the same number of requests; say so wherever a schedule is shown.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from specmon.engines import ADAPTERS, EngineAdapter
from specmon.engines.base import ScheduleForm
from specmon.model.analysis import ConfigRow
from specmon.model.objective import ObjectiveVerdict
from specmon.model.stopping import SweepVerdict, adjusted_difference

__all__ = ["Schedule", "ScheduleEntry", "decide_from", "schedules_from"]

#: Why a concurrency got its K.
WINNER, EQUIVALENT, OFF, UNDECIDED = "winner", "smallest equivalent", "off", "undecided"

@dataclass(frozen=True, slots=True)
class ScheduleEntry:
    """The step count chosen at one measured concurrency, and why.

    Attributes:
        concurrency: The load it was measured at (concurrent requests).
        steps: The step count (K) to run there; 0 turns speculation off.
        why: ``winner``, ``smallest equivalent``, ``off`` or ``undecided``.
        fastest: The fastest setting's step count by mean at this load.
        note: The evidence in words (what it was equivalent to, or why it is undecided).
    """

    concurrency: int
    steps: int
    why: str
    fastest: int
    note: str

    @property
    def decided(self) -> bool:
        """Whether the sweep's evidence settles this K (not the fastest by mean only)."""
        return self.why != UNDECIDED

    def to_json(self) -> dict[str, object]:
        return {"concurrency": self.concurrency, "steps": self.steps, "why": self.why,
                "fastest_steps": self.fastest, "decided": self.decided, "note": self.note}


@dataclass(frozen=True, slots=True)
class Schedule:
    """A step count per batch size, for one workload (None: the sweep had one).

    Attributes:
        entries: One per measured concurrency, in increasing order.
        workload: The prompt set it was measured with.
    """

    entries: tuple[ScheduleEntry, ...]
    workload: str | None = None

    @property
    def decided(self) -> bool:
        """Every entry rests on a decision (none is only the fastest by mean)."""
        return all(e.decided for e in self.entries)

    @property
    def ranges(self) -> list[tuple[int, int, int]]:
        """Inclusive batch-size ranges ``(first, last, K)`` from 1 up; the last range ends at its own
        load (the engines carry the last K on), neighbouring loads meet at their geometric mean."""
        out: list[tuple[int, int, int]] = []
        entries = self.entries
        start = 1
        for i, e in enumerate(entries):
            if i + 1 < len(entries):
                nxt = entries[i + 1].concurrency
                end = max(start, min(nxt - 1, math.floor(math.sqrt(e.concurrency * nxt))))
            else:
                end = max(start, e.concurrency)
            if out and out[-1][2] == e.steps:
                out[-1] = (out[-1][0], end, e.steps)  # one range for neighbours with the same K
            else:
                out.append((start, end, e.steps))
            start = end + 1
        return out

    @property
    def max_steps(self) -> int:
        return max((e.steps for e in self.entries), default=0)

    @property
    def speculation_off(self) -> bool:
        """No speculation at any measured load: nothing to schedule."""
        return self.max_steps == 0

    def lines(self) -> list[str]:
        """The schedule in words, one line per measured load."""
        out = []
        for e in self.entries:
            k = "speculation off" if e.steps == 0 else f"{e.steps} step{'s' if e.steps != 1 else ''}"
            out.append(f"concurrency {e.concurrency}: {k} ({e.note})")
        return out

    def forms(self, *, own: EngineAdapter | None = None, argv: Sequence[str] | None = None,
              setting: tuple[str | None, int | None] | None = None,
              config_path: str = "specmon-schedule.json") -> list[tuple[EngineAdapter, ScheduleForm]]:
        """Each engine's form of this schedule, in the registry's order (the engines that take one).

        ``own`` is the launch profile's engine (None: not known), whose ``argv`` the form keeps;
        ``setting`` the swept (algorithm, top-k), checked by its own engine's form, or by every
        engine's when the profile names none (another engine's is shown as it is, for reference).
        """
        out = []
        for ad in ADAPTERS:
            form = ad.schedule_form(self.ranges, argv=argv if own is ad else None,
                                    setting=setting if own is None or own is ad else None,
                                    config_path=config_path)
            if form is not None:
                out.append((ad, form))
        return out

    def describe(self, *, own: EngineAdapter | None = None, argv: Sequence[str] | None = None,
                 setting: tuple[str | None, int | None] | None = None,
                 config_path: str = "specmon-schedule.json",
                 decide: Mapping[tuple[str | None, int], str] | None = None) -> list[str]:
        """What the sweep prints: the schedule per load, then each engine's exact flags.

        ``decide``: what would decide each undecided load, by (workload, concurrency) (:func:`decide_from`,
        from the sweep's ``needs_more``); a load without one is said undecided in exact words.
        """
        on = f" on the {self.workload} prompts" if self.workload else ""
        out = [f"Schedule{on} (the client's concurrency stands for the engine's running batch):"]
        out += [f"  {line}" for line in self.lines()]
        if self.speculation_off:
            out.append("  Speculation does not pay at any measured load: run without it.")
            return out
        for ad, form in self.forms(own=own, argv=argv, setting=setting, config_path=config_path):
            if form.problem:
                out.append(f"  {ad.label}: not offered: {form.problem}")
            elif form.heading:
                out.append(f"  {ad.label} {form.heading}:")
                out += [f"    {line}" for line in form.lines]
            elif form.lines:
                out.append(f"  {ad.label}: {form.lines[0]}")
                out += [f"    {line}" for line in form.lines[1:]]
        for c in (e.concurrency for e in self.entries if not e.decided):
            # Not "measure longer": more samples of the same launches do not narrow a launch spread.
            how = (decide or {}).get((self.workload, c)) or (
                "neither separated from the runner-up nor equivalent to it; more launches of the two leading "
                "settings would decide it, not more samples of these")
            out.append(f"  Undecided at concurrency {c}, the best by mean only (not a finding to deploy): {how}.")
        return out

    @classmethod
    def from_json(cls, doc: object) -> Schedule | None:
        """A schedule read back from a sweep document (None when ``doc`` is not one)."""
        if not isinstance(doc, dict) or not isinstance(doc.get("entries"), list):
            return None
        entries = []
        for e in doc["entries"]:
            if not isinstance(e, dict):
                return None
            try:
                entries.append(ScheduleEntry(int(e["concurrency"]), int(e["steps"]), str(e["why"]),
                                             int(e["fastest_steps"]), str(e.get("note") or "")))
            except (KeyError, TypeError, ValueError):
                return None
        workload = doc.get("workload")
        return cls(tuple(entries), workload if isinstance(workload, str) else None) if entries else None

    def to_json(self) -> dict[str, object]:
        doc: dict[str, object] = {
            "workload": self.workload,
            "entries": [e.to_json() for e in self.entries],
            "decided": self.decided,
            "ranges": [list(r) for r in self.ranges],
        }
        for _ad, form in self.forms():
            doc.update(form.fields or {})  # each engine's form under its own keys
        return doc


def decide_from(needs: object) -> dict[tuple[str | None, int], str]:
    """What would decide each undecided verdict, by (workload, concurrency), from a sweep document's
    ``needs_more`` (its entries' ``clause``; entries without a concurrency are left out)."""
    out: dict[tuple[str | None, int], str] = {}
    for n in needs if isinstance(needs, list) else ():
        if isinstance(n, dict) and isinstance(n.get("concurrency"), int) and isinstance(n.get("clause"), str):
            workload = n.get("workload")
            out[(workload if isinstance(workload, str) else None, n["concurrency"])] = n["clause"]
    return out


def _steps(row: ConfigRow) -> int | None:
    # A sweep's own settings only: a row of a baseline file given from outside has no step count here.
    return row.steps if row.config is not None else None


def entry_for(v: SweepVerdict | ObjectiveVerdict) -> ScheduleEntry | None:
    """The rule at one concurrency (None when the verdict has no fastest setting or no load).

    A verdict on another objective (``--objective itl-p50``) is read the same way: its
    candidates are on its internal scale, where higher is better.
    """
    if v.concurrency is None:
        return None
    if isinstance(v, ObjectiveVerdict):
        cands = v.candidates()
        if not cands:
            return None
        fastest, best_s = cands[0]
        others = cands[1:]
    else:
        best = v.best
        if best is None or best.throughput is None:
            return None
        k0 = _steps(best)
        if k0 is None:
            return None
        fastest, best_s = k0, best.throughput
        others = [(k, row.throughput) for row in v.analysis.rows
                  if row is not best and (k := _steps(row)) is not None and row.throughput is not None]
    if v.separated:
        why = OFF if fastest == 0 else WINNER
        return ScheduleEntry(v.concurrency, fastest, why, fastest,
                             "no speculation is the winner, separated from the runner-up" if fastest == 0
                             else "the winner, separated from the runner-up")
    margin = (v.margin_pct or 0.0) / 100.0 * best_s.mean
    same = {fastest}
    for k, s in others:
        d = adjusted_difference(best_s, s, v.level)
        if d.known and -margin < d.low and d.high < margin:  # type: ignore[operator]
            same.add(k)
    if len(same) > 1:
        k = min(same)
        listed = ", ".join(str(s) for s in sorted(same))
        return ScheduleEntry(v.concurrency, k, OFF if k == 0 else EQUIVALENT, fastest,
                             f"the smallest of K = {listed}, equivalent to the best within ±{v.margin_pct:g}%")
    return ScheduleEntry(v.concurrency, fastest, UNDECIDED, fastest,
                         "undecided: the best by mean, neither separated nor equivalent")


def schedules_from(verdicts: Sequence[SweepVerdict | ObjectiveVerdict]) -> list[Schedule]:
    """A schedule per workload, from the verdicts of a sweep over two or more concurrencies.

    Empty when the sweep measured one concurrency only (a schedule needs loads to vary over).
    """
    by_workload: dict[str | None, list[ScheduleEntry]] = {}
    for v in verdicts:
        e = entry_for(v)
        if e is not None:
            by_workload.setdefault(v.workload, []).append(e)
    out = []
    for workload, entries in by_workload.items():
        entries.sort(key=lambda e: e.concurrency)
        if len({e.concurrency for e in entries}) >= 2:
            out.append(Schedule(tuple(entries), workload))
    return out
