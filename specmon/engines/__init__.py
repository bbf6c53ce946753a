"""The engines specmon understands, one module each, and the one place that lists them.

The rest of the program asks :func:`adapter` (or iterates :data:`ADAPTERS`) for what an
engine prints, exports and needs, instead of naming engines itself. A new engine is one
module here with an :class:`~specmon.engines.base.EngineAdapter` subclass (its name made an
:class:`specmon.records.Engine` there, with ``Engine.register``), and its line in :data:`ADAPTERS`.

The list is a tuple here rather than Python entry points (harlequin's ``harlequin.adapter``
group): its order is part of it (the parser tries each engine's lines in this order, and an
engine whose line holds another's words goes first), entry points have none, and they would
need the package reinstalled to take a new module. An engine from outside this package would
want them; none is, today.
"""

from __future__ import annotations

from specmon.engines.base import CounterNames, EngineAdapter, EntryPoints
from specmon.engines.llamacpp import LlamaCpp
from specmon.engines.lmdeploy import LMDeploy
from specmon.engines.sglang import SGLang
from specmon.engines.trtllm import TensorRTLLM
from specmon.engines.vllm import VLLM
from specmon.grammar.kinds import LineKind
from specmon.records import Engine

__all__ = ["ADAPTERS", "KINDS", "NAMES", "CounterNames", "EngineAdapter", "EntryPoints", "adapter", "by_name"]

#: Every engine, in the order the line parser tries their line kinds and configuration lines: the
#: registry (LMDeploy before vLLM: its stats line holds vLLM's "SpecDecoding metrics" words).
ADAPTERS: tuple[EngineAdapter, ...] = (LlamaCpp(), SGLang(), LMDeploy(), VLLM(), TensorRTLLM())

_BY_ENGINE: dict[Engine, EngineAdapter] = {a.engine: a for a in ADAPTERS}

#: The engine names a profile may give (``engine = "vllm"``), "unknown" included.
NAMES: tuple[str, ...] = (*(e.value for e in Engine if e is not Engine.UNKNOWN), Engine.UNKNOWN.value)

#: Every stats line kind, in the order the line parser tests their markers.
KINDS: tuple[LineKind, ...] = tuple(k for a in ADAPTERS for k in a.kinds)


class _Unknown(EngineAdapter):
    """An engine not (yet) recognised: nothing declared, the cautious defaults."""

    engine = Engine.UNKNOWN
    label = "unknown engine"
    # The longest of the known warm-ups: an unknown engine may capture graphs.
    warmup = max(a.warmup for a in ADAPTERS)

    def draft_limit(self, steps: int, topk: int) -> int | None:
        # The tightest known engine's draft tree: a profile that names no engine is held to it.
        limits = [n for a in ADAPTERS if (n := a.draft_limit(steps, topk)) is not None]
        return min(limits) if limits else None


UNKNOWN = _Unknown()


def adapter(engine: Engine | str | None) -> EngineAdapter:
    """The adapter of ``engine`` (an :class:`Engine` or its name); the unknown one otherwise."""
    if isinstance(engine, Engine):
        return _BY_ENGINE.get(engine, UNKNOWN)
    return by_name(engine) or UNKNOWN


def by_name(name: str | None) -> EngineAdapter | None:
    """The adapter named ``name`` (``"vllm"``), or None."""
    try:
        return _BY_ENGINE.get(Engine(name)) if name else None
    except ValueError:
        return None
