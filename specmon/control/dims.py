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
from specmon.engines import ADAPTERS, adapter
from specmon.engines.base import Dimension
from specmon.engines.llamacpp import SPEC_TYPES as LLAMACPP_TYPES
from specmon.records import Engine
from specmon.wording import counted

#: What ``llama-server --spec-type`` accepts (llama.cpp's engine module holds the list).
LLAMACPP_SPEC_TYPES: tuple[str, ...] = LLAMACPP_TYPES

Value = int | str
#: The dimensions of one setting other than the step count, in :data:`ORDER`: ``(("topk", 4), ...)``.
Point = tuple[tuple[str, Value], ...]


# The step count, then each engine's own dimensions (its module declares them), in the
# engines' canonical order: the order points are keyed and shown in.
DIMENSIONS: dict[str, Dimension] = {d.name: d for d in (
    Dimension("steps", "speculative steps (0 = no speculation)", 0, 64),
    *(d for e in Engine for d in adapter(e).dimensions),
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


def point_problem(steps: int, point: Mapping[str, Value]) -> str | None:
    """Why an engine would refuse (or silently change) this combination; None when it is fine.

    Each engine judges the dimensions it declares (a point holds only one engine's).
    """
    for a in ADAPTERS:
        problem = a.point_problem(steps, point)
        if problem:
            return problem
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
