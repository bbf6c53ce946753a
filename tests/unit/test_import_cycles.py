"""No two modules of specmon import each other, directly or round a longer loop.

import-linter's layers keep the *packages* in order, but a circle between two modules of one
layer (``control/restart_controller.py`` <-> ``control/servers.py``, before the shims went) or hidden in an import inside a
function (the one that let ``ui/flows/restart.py`` and ``ui/flows/sweep.py`` lean on each other)
slips past it. This test builds the whole graph from the syntax trees (every import statement:
module level, inside functions, under ``TYPE_CHECKING``, relative ones resolved) and fails on
every strongly connected component of two or more modules, printing the loop.

``TYPE_CHECKING`` imports count too: a circle that only type checkers see is still a circle
in the design (it tells which module should own the shared type), and none is needed today.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specmon"


def module_name(path: Path) -> str:
    """``specmon/ui/app.py`` -> ``specmon.ui.app``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, known: Mapping[str, Path]) -> str | None:
    """The specmon module ``name`` stands for (a name inside a module: that module), or None."""
    while name:
        if name in known:
            return name
        name = name.rpartition(".")[0]
    return None


def imports_of(path: Path, known: Mapping[str, Path]) -> set[str]:
    """The specmon modules ``path`` imports anywhere in its body (relative imports resolved)."""
    me = module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    named: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            named.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            # ``from specmon.ui import app`` imports the module ``specmon.ui.app``; ``from
            # specmon.ui.app import make_app`` imports ``specmon.ui.app`` (make_app resolves to it).
            named.extend(f"{target}.{alias.name}" for alias in node.names)
            named.append(target)
    found = {m for m in (_resolve(n, known) for n in named if n.startswith("specmon")) if m is not None}
    # Importing a package's module runs the package's ``__init__`` first, but that is an edge of
    # the package to what *it* imports, not of this module to the package: only the named module counts.
    found.discard(me)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the specmon modules it imports."""
    known = all_modules()
    return {name: imports_of(path, known) for name, path in known.items()}


def strongly_connected(graph: Mapping[str, Iterable[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit on deep graphs)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph.get(root, ())))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop(0)
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(graph.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                out.append(sorted(component))
    return out


def a_cycle(graph: Mapping[str, Iterable[str]], component: list[str]) -> list[str]:
    """One loop through the component's first module, as ``a -> b -> ... -> a`` (shortest, by BFS)."""
    members = set(component)
    start = component[0]
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt: list[str] = []
        for node in frontier:
            for target in sorted(graph.get(node, ())):
                if target not in members:
                    continue
                if target == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if target not in parents:
                    parents[target] = node
                    nxt.append(target)
        frontier = nxt
    return component  # unreachable for a real component


def test_the_graph_sees_imports_inside_functions_and_relative_ones(tmp_path: Path) -> None:
    """The walk is not blind where the old circle hid: a function-level import and a relative one."""
    pkg = tmp_path / "specmon"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("")
    (pkg / "sub" / "a.py").write_text("def f():\n    from specmon.sub.b import g\n    return g\n")
    (pkg / "sub" / "b.py").write_text("from . import a\nimport specmon.sub.c\n")
    (pkg / "sub" / "c.py").write_text("from ..sub.a import f\n")
    known = {".".join(p.relative_to(tmp_path).with_suffix("").parts).removesuffix(".__init__"): p
             for p in pkg.rglob("*.py")}
    global ROOT
    saved, ROOT = ROOT, tmp_path
    try:
        graph = {name: imports_of(path, known) for name, path in known.items()}
    finally:
        ROOT = saved
    assert graph["specmon.sub.a"] == {"specmon.sub.b"}
    assert graph["specmon.sub.b"] == {"specmon.sub", "specmon.sub.a", "specmon.sub.c"}
    assert graph["specmon.sub.c"] == {"specmon.sub.a"}
    loops = [c for c in strongly_connected(graph) if len(c) > 1]
    assert loops == [["specmon.sub.a", "specmon.sub.b", "specmon.sub.c"]]
    assert a_cycle(graph, loops[0]) == ["specmon.sub.a", "specmon.sub.b", "specmon.sub.a"]


def test_no_import_cycle_in_specmon() -> None:
    graph = import_graph()
    assert len(graph) > 100  # the walk found the package, not an empty folder
    loops = [c for c in strongly_connected(graph) if len(c) > 1]
    described = [" -> ".join(a_cycle(graph, c)) + f"   (component: {', '.join(c)})" for c in loops]
    assert not loops, "import cycles between specmon modules:\n" + "\n".join(described)
