"""Engines own their facts: outside ``specmon/engines/`` no code branches on an engine's name.

Walks the syntax tree of every module of ``specmon`` outside ``specmon/engines/`` and fails on
a comparison (``==``, ``!=``, ``is``, ``is not``, ``in``, ``not in``), a ``match`` case or a
dict literal keyed by an engine's name: an ``Engine.X`` member or its string value, for every
engine the registry (:data:`specmon.engines.ADAPTERS`) lists. ``Engine.UNKNOWN`` is not an
engine's name (it says none is known) and stays comparable. Lookups through the registry
(``adapter(engine).fact``) are how the rest of the program asks.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specmon.engines import ADAPTERS

ROOT = Path(__file__).resolve().parents[2] / "specmon"
NAMES = frozenset(a.engine.value for a in ADAPTERS)
MEMBERS = frozenset(a.engine.name for a in ADAPTERS)


def _names_engine(node: ast.AST) -> bool:
    """Whether an expression is an engine's name: ``Engine.SGLANG``, ``"sglang"``, or a
    tuple, list or set holding one."""
    if isinstance(node, ast.Attribute) and node.attr in MEMBERS:
        base = node.value
        return isinstance(base, ast.Name) and base.id == "Engine" or isinstance(base, ast.Attribute) and (
            base.attr == "Engine")
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value in NAMES
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_names_engine(e) for e in node.elts)
    return False


def engine_branches(source: str) -> list[tuple[int, str]]:
    """Each place in ``source`` that compares with, matches on or keys a table by an engine's name."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Compare):
            if any(_names_engine(x) for x in (node.left, *node.comparators)):
                found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.match_case):
            for sub in ast.walk(node.pattern):
                if isinstance(sub, ast.MatchValue) and _names_engine(sub.value):
                    found.append((sub.lineno, f"case {ast.unparse(sub.value)}"))
        elif isinstance(node, ast.Dict) and any(k is not None and _names_engine(k) for k in node.keys):
            found.append((node.lineno, "a table keyed by engine names"))
    return found


def _modules() -> list[Path]:
    return sorted(p for p in ROOT.rglob("*.py") if "engines" not in p.relative_to(ROOT).parts[:1])


def test_no_module_outside_engines_branches_on_an_engine_name() -> None:
    offences = [f"{p.relative_to(ROOT.parent)}:{line}: {text}"
                for p in _modules() for line, text in engine_branches(p.read_text(encoding="utf-8"))]
    assert not offences, "engine facts outside specmon/engines/ (ask the adapter):\n" + "\n".join(offences)


def test_the_walk_covers_the_package() -> None:
    mods = _modules()
    assert len(mods) > 100
    assert not any("engines" in p.relative_to(ROOT).parts[:1] for p in mods)
    assert any(p.name == "session.py" for p in mods)


# -- the checker itself finds what it is for --------------------------------------------------

_FORMS = (
    "if engine is Engine.{M}: pass",
    "x = engine == Engine.{M}",
    "x = profile.engine != {v!r}",
    "x = e in ({v!r}, 'unknown')",
    "x = e not in [Engine.{M}]",
    "match e:\n    case Engine.{M}:\n        pass",
    "match e:\n    case {v!r} | 'x':\n        pass",
    "T = {{{v!r}: 1}}",
    "x = a.b.Engine.{M} is e",
)


@pytest.mark.parametrize("form", _FORMS)
@pytest.mark.parametrize("engine", sorted(NAMES))
def test_each_form_of_branching_is_found(form: str, engine: str) -> None:
    src = form.format(M=engine.upper(), v=engine)
    assert engine_branches(src), src


@given(st.text(min_size=1, max_size=12))
def test_other_strings_and_lookups_are_not_branches(word: str) -> None:
    if word in NAMES:
        return
    src = "\n".join([
        f"x = e == {word!r}",
        "x = e is Engine.UNKNOWN",
        "x = adapter(e).counters is None",
        f"x = by_name({word!r})",
        "y = Engine.SGLANG",  # naming is not branching: the simulated server is SGLang
        "z = f(engine='sglang')",
    ])
    assert engine_branches(src) == []


def test_a_registered_engine_is_checked_too() -> None:
    # The registry, not a list here, says which names count: the fifth engine's included.
    assert "lmdeploy" in NAMES
    assert engine_branches("x = e == 'lmdeploy'")
