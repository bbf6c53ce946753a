"""Sweep dimensions beyond the step count, and the grid of settings they span.

A sweep setting is a step count plus, optionally, other launch parameters:

============================  ==========  =====================================================
dimension (placeholder)       engine      the server's flag
============================  ==========  =====================================================
``steps``                     all         SGLang ``--speculative-num-steps``; vLLM
                                          ``num_speculative_tokens``; llama.cpp
                                          ``--spec-draft-n-max`` (the draft depth)
``topk``                      SGLang      ``--speculative-eagle-topk``
``draft_tokens``              SGLang      ``--speculative-num-draft-tokens``
``prompt_lookup_max``/``_min``  vLLM      ``--speculative-config`` n-gram window
``spec_type``                 llama.cpp   ``--spec-type`` (one of :data:`LLAMACPP_SPEC_TYPES`)
============================  ==========  =====================================================

Every value is validated before it can reach a command: integers within a
fixed range (real ``int``, never text), ``spec_type`` only from the fixed list
the real ``llama-server --help`` prints. Combinations the engine refuses or
silently rewrites are left out of the grid, with the reason (SGLang: top-k 1
forces ``draft_tokens = steps + 1``; a tree holds at most ``steps*topk + 1``
draft tokens; vLLM: ``prompt_lookup_min <= prompt_lookup_max``).

Pure: no I/O (the command line and the dashboard's sweep dialog both use it).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from specmon.control.counts import parse_step_list
from specmon.wording import counted

#: What ``llama-server --spec-type`` accepts (build 11434, ``llama-server --help``); ``none`` turns it off.
LLAMACPP_SPEC_TYPES: tuple[str, ...] = (
    "none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
)

Value = int | str
#: The dimensions of one setting other than the step count, in :data:`ORDER`: ``(("topk", 4), ...)``.
Point = tuple[tuple[str, Value], ...]


@dataclass(frozen=True, slots=True)
class Dimension:
    """One sweepable launch parameter."""

    name: str
    what: str
    lo: int = 0
    hi: int = 0
    choices: tuple[str, ...] = ()

    def check(self, value: object) -> Value:
        """The value if it is allowed here, else ``ValueError`` with one sentence."""
        if self.choices:
            if not isinstance(value, str) or value not in self.choices:
                raise ValueError(f"{self.name} {value!r} is not one of {', '.join(self.choices)}")
            return value
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise ValueError(f"{self.name} must be a whole number from {self.lo} to {self.hi}, not {value!r}")
        return value


DIMENSIONS: dict[str, Dimension] = {d.name: d for d in (
    Dimension("steps", "speculative steps (0 = no speculation)", 0, 64),
    Dimension("topk", "EAGLE top-k (branches per draft step)", 1, 64),
    Dimension("draft_tokens", "draft tokens verified per cycle", 1, 64 * 64 + 1),
    Dimension("prompt_lookup_max", "n-gram lookup window, longest", 1, 64),
    Dimension("prompt_lookup_min", "n-gram lookup window, shortest", 1, 64),
    Dimension("spec_type", "llama.cpp speculative type", choices=LLAMACPP_SPEC_TYPES),
)}
#: Canonical order of a point's dimensions (also the order they are shown in).
ORDER: tuple[str, ...] = tuple(DIMENSIONS)
EXTRA: tuple[str, ...] = ORDER[1:]

_WORD = re.compile(r"([a-z_]+)=(.*)")


def check_point(point: Mapping[str, object]) -> Point:
    """Validate and order the extra dimensions of a setting (``steps`` excluded)."""
    out = []
    for name, value in point.items():
        if name not in DIMENSIONS or name == "steps":
            raise ValueError(f"unknown sweep dimension {name!r} (known: {', '.join(EXTRA)})")
        out.append((name, DIMENSIONS[name].check(value)))
    return tuple(sorted(out, key=lambda kv: ORDER.index(kv[0])))


def parse_values(name: str, text: str) -> tuple[Value, ...]:
    """``topk=1,4`` → ``(1, 4)``; ``spec_type=draft-simple,ngram-mod`` → the names, each checked."""
    dim = DIMENSIONS.get(name)
    if dim is None:
        raise ValueError(f"unknown sweep dimension {name!r} (known: {', '.join(ORDER)})")
    if dim.choices:
        items = [t for t in re.split(r"\s*,\s*", text.strip())]
        if not text.strip() or any(not t for t in items):
            raise ValueError(f"{name}= needs values separated by commas, from: {', '.join(dim.choices)}")
        for t in items:
            dim.check(t)
        if len(set(items)) != len(items):
            raise ValueError(f"{name}: a value is listed twice")
        return tuple(items)
    return parse_step_list(text, dim.lo, dim.hi, what=f"{name} values", where=name)


def parse_grid(words: Sequence[str]) -> dict[str, tuple[Value, ...]]:
    """``["steps=1,2,3", "topk=1,4", "draft_tokens=4,8"]`` → one tuple of values per dimension.

    Raises:
        ValueError: an unknown dimension, a dimension twice, or a bad value (one sentence).
    """
    grid: dict[str, tuple[Value, ...]] = {}
    for word in words:
        m = _WORD.fullmatch(word.strip())
        if m is None:
            raise ValueError(f"{word!r}: write NAME=V1,V2,... (dimensions: {', '.join(ORDER)})")
        name, text = m.groups()
        if name in grid:
            raise ValueError(f"{name} is given twice")
        grid[name] = parse_values(name, text)
    return grid


def sglang_problem(steps: int, topk: int | None, draft_tokens: int | None) -> str | None:
    """Why SGLang would refuse or rewrite this tree (None when it accepts it as given)."""
    if steps == 0 or draft_tokens is None:
        return None
    k = 1 if topk is None else topk
    if k == 1 and draft_tokens != steps + 1:
        return f"top-k 1 makes SGLang use steps+1 = {steps + 1} draft tokens, not {draft_tokens}"
    if draft_tokens > steps * k + 1:
        return f"{draft_tokens} draft tokens exceed steps*topk+1 = {steps * k + 1}"
    if draft_tokens < 2:
        return "a tree needs at least 2 draft tokens"
    return None


def point_problem(steps: int, point: Mapping[str, Value]) -> str | None:
    """Why the engine would refuse (or silently change) this combination; None when it is fine."""
    topk, dt = point.get("topk"), point.get("draft_tokens")
    problem = sglang_problem(steps, topk if isinstance(topk, int) else None, dt if isinstance(dt, int) else None)
    if problem:
        return problem
    lo, hi = point.get("prompt_lookup_min"), point.get("prompt_lookup_max")
    if isinstance(lo, int) and isinstance(hi, int) and lo > hi:
        return f"prompt_lookup_min {lo} is above prompt_lookup_max {hi}"
    return None


@dataclass(frozen=True, slots=True)
class Grid:
    """The settings a sweep measures: ``(steps, point)`` pairs, and what was left out and why."""

    settings: tuple[tuple[int, Point], ...]
    skipped: tuple[tuple[str, str], ...] = ()

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The extra dimensions used by any setting (in :data:`ORDER`)."""
        used = {k for _, p in self.settings for k, _ in p}
        return tuple(d for d in EXTRA if d in used)


def expand_grid(grid: Mapping[str, Sequence[Value]]) -> Grid:
    """Every combination of the values, in the order given, without the ones the engine refuses.

    ``steps`` is required. A step count of 0 (no speculation) is one setting
    whatever the other dimensions say (they do not apply without speculation).

    Raises:
        ValueError: no ``steps``, or nothing left to measure.
    """
    if "steps" not in grid:
        raise ValueError("give the step counts: steps=0,1,2 (0 = no speculation)")
    extras = [d for d in EXTRA if d in grid]
    out: list[tuple[int, Point]] = []
    skipped: list[tuple[str, str]] = []
    for steps in grid["steps"]:
        assert isinstance(steps, int)
        if steps == 0:
            if (0, ()) not in out:
                out.append((0, ()))
            continue
        for values in itertools.product(*(grid[d] for d in extras)):
            point = dict(zip(extras, values, strict=True))
            problem = point_problem(steps, point)
            if problem:
                skipped.append((label(steps, check_point(point)), problem))
                continue
            out.append((steps, check_point(point)))
    if not out:
        why = "; ".join(f"{name}: {p}" for name, p in skipped[:3])
        raise ValueError(f"no combination of these values is a valid setting ({why})")
    return Grid(tuple(out), tuple(skipped))


def label(steps: int, point: Point | Mapping[str, Value] = ()) -> str:
    """``2 steps, topk 4, draft_tokens 8``; ``no speculation`` for 0."""
    if steps == 0:
        return "no speculation"
    items = point.items() if isinstance(point, Mapping) else point
    return ", ".join([counted(steps, "step"), *(f"{k} {v}" for k, v in items)])


def key(steps: int, point: Point) -> str:
    """The compact name of a setting in state files: ``2`` or ``2/topk=4/draft_tokens=8``."""
    return "/".join([str(steps), *(f"{k}={v}" for k, v in point)])


def parse_key(text: str) -> tuple[int, Point]:
    """Inverse of :func:`key`."""
    head, *rest = text.split("/")
    point: dict[str, Value] = {}
    for item in rest:
        name, _, raw = item.partition("=")
        dim = DIMENSIONS.get(name)
        if dim is None:
            raise ValueError(f"unknown dimension {name!r} in {text!r}")
        point[name] = raw if dim.choices else int(raw)
    return int(head), check_point(point)


def used_placeholders(templates: Iterable[str]) -> set[str]:
    """The dimension placeholders (``{topk}``, ...) the given template strings use."""
    found: set[str] = set()
    for t in templates:
        found |= {name for name in ORDER if "{" + name + "}" in t}
    return found
