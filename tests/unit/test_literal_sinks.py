"""Every place in the UI where Textual would read a string as markup gets literal content
(issue 34, item 1: the mechanism, checked on the source, so a new call site cannot slip by).

Textual parses a ``str`` as markup in ``Static(...)`` and ``Static.update(...)`` (unless
``markup=False``, which still lets control characters through), in border titles and
subtitles, and in ``notify`` (``SpecmonApp.notify`` makes every notification literal). This
walks the syntax tree of ``specmon/ui`` and fails on any such call whose text is not a string
constant written here, an f-string of constants, or content made by a helper that shows
untrusted text literally. :mod:`tests.pilot.test_literal_text` drives generated hostile text
through the same surfaces at run time.
"""

from __future__ import annotations

import ast
from pathlib import Path

UI = Path(__file__).resolve().parents[2] / "specmon" / "ui"
#: Calls that return content safe to show: the literal helpers, and functions that build
#: ``Content`` from parts (every untrusted part through ``plain``).
SAFE_CALLS = {"literal", "measured_text", "value_text", "delta_text", "Content", "styled"}


def _safe(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return True
    if isinstance(node, ast.Call):
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        return name in SAFE_CALLS or (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                                      and func.value.id == "Content")
    if isinstance(node, ast.IfExp):
        return _safe(node.body) and _safe(node.orelse)
    return False


def _sinks() -> list[tuple[str, int, str]]:
    found = []
    for path in sorted(UI.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            where = (str(path.relative_to(UI.parent.parent)), getattr(node, "lineno", 0))
            if isinstance(node, ast.Call) and node.args:
                func = node.func
                static = isinstance(func, ast.Name) and func.id == "Static"
                update = isinstance(func, ast.Attribute) and func.attr == "update"
                if (static or update) and not _safe(node.args[0]):
                    found.append((*where, ast.unparse(node)[:90]))
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and target.attr in ("border_title", "border_subtitle") \
                            and not _safe(node.value):
                        found.append((*where, ast.unparse(node)[:90]))
    return found


def test_every_markup_sink_in_the_ui_gets_literal_content() -> None:
    assert _sinks() == []


def test_the_check_finds_a_raw_sink() -> None:
    """The walk is not vacuous: a raw ``Static(text)`` in a module is found."""
    tree = ast.parse("Static(text)\nself.border_title = name\nw.update(f'{x}')\nStatic(literal(x))\n")
    bad = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args and not _safe(n.args[0])
           and isinstance(n.func, (ast.Name, ast.Attribute))
           and getattr(n.func, "id", getattr(n.func, "attr", "")) in ("Static", "update")]
    assert len(bad) == 2
    assigns = [n for n in ast.walk(tree) if isinstance(n, ast.Assign) and not _safe(n.value)]
    assert len(assigns) == 1
