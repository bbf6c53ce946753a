"""The house (issue 41): docs/architecture.md's layer table says what the import contracts enforce, no
module is over 700 lines, and no more imports hide in functions than the 297 counted when the
experiment got its home (commands import what a command needs when it runs; each other one is a
reason to look)."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_LINES = 700
MAX_FUNCTION_IMPORTS = 297


def _contract_layers() -> list[set[str]]:
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contract = next(c for c in doc["tool"]["importlinter"]["contracts"]
                    if c["type"] == "layers" and "containers" not in c)
    return [{m.strip().removeprefix("specmon.") for m in layer.split("|")} for layer in contract["layers"]]


def _doc_layers() -> list[set[str]]:
    text = (ROOT / "docs" / "architecture.md").read_text()
    table = text[text.index("| layer | holds | may import |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        first = line.split("|")[1]
        names = {n.removesuffix("/").removesuffix(".py") for n in re.findall(r"`([a-z_]+(?:/|\.py))`", first)}
        if names:
            rows.append(names)
    # control/ and output/ share a row, as they share a layer; the doc splits no layer the contract joins.
    return rows


def test_the_documented_layers_are_the_contracts() -> None:
    assert _doc_layers() == _contract_layers()


def test_no_module_is_over_700_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "specmon").rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_function_level_imports_do_not_grow() -> None:
    found = set()
    for path in (ROOT / "specmon").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found.update((str(path), sub.lineno) for sub in ast.walk(node)
                             if isinstance(sub, (ast.Import, ast.ImportFrom)))
    assert len(found) <= MAX_FUNCTION_IMPORTS, f"{len(found)} imports inside functions (at most {MAX_FUNCTION_IMPORTS})"


def test_no_namespace_below_the_commands() -> None:
    """Below ``commands/`` (and ``cli.py``), no module takes an ``argparse.Namespace`` or sets ``args.x``:
    the sweep is a typed plan, the simulated server's command line a dataclass."""
    found = []
    for path in (ROOT / "specmon").rglob("*.py"):
        rel = path.relative_to(ROOT / "specmon").as_posix()
        if rel.startswith("commands/") or rel == "cli.py":
            continue
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and node.attr == "Namespace":
                found.append(f"{rel}:{node.lineno}: Namespace")
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name)
                                                    and t.value.id == "args" for t in node.targets):
                found.append(f"{rel}:{node.lineno}: args.x =")
    assert found == []
