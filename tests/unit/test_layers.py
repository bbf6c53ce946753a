"""The layers hold: Textual only under specmon/ui/, and the import-linter contracts kept.

One walk over every module's syntax tree (every import statement, at module level,
inside functions and under ``TYPE_CHECKING`` alike), rather than importing a hand-picked
list of modules and looking at ``sys.modules``: a new module is covered the day it is
added, and an import inside a function that a test never calls is still seen.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "specmon"
UI = PACKAGE / "ui"
#: The terminal UI toolkit and its plot widget (plotext comes in through it).
UI_ONLY = ("textual", "textual_plotext", "plotext")


def module_name(path: Path) -> str:
    """``specmon/ui/app.py`` -> ``specmon.ui.app``; a package's ``__init__`` is the package."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(path: Path) -> str:
    """The package a module's relative imports start from."""
    return module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]


def imported_modules(path: Path, package: str) -> list[tuple[int, str]]:
    """Every module an import statement in ``path`` names, with its line (relative imports resolved)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # ``from specmon import ui`` imports a module that the statement's own name hides.
            found.extend((node.lineno, f"{target}.{alias.name}") for alias in node.names)
    return found


def is_ui_only(name: str) -> bool:
    return any(name == top or name.startswith(top + ".") for top in UI_ONLY)


def modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_the_walk_sees_what_it_must(tmp_path: Path) -> None:
    """The walker itself: imports in functions, under TYPE_CHECKING, relative, and every package."""
    sample = tmp_path / "sample.py"
    sample.write_text("from typing import TYPE_CHECKING\n"
                      "if TYPE_CHECKING:\n    from textual.app import App\n"
                      "def later():\n    import textual_plotext as tp\n"
                      "from .widgets import plot\nfrom .. import records\n")
    found = [name for _, name in imported_modules(sample, "specmon.ui")]
    assert "textual.app" in found and "textual_plotext" in found
    assert "specmon.ui.widgets.plot" in found and "specmon.records" in found
    assert [is_ui_only(n) for n in ("textual", "textual.app", "textual_plotext", "textualize", "specmon.ui")] \
        == [True, True, True, False, False]
    assert "textual.app" in {name for _, name in imported_modules(UI / "app.py", "specmon.ui")}
    names = {module_name(p) for p in modules()}
    for package in ("specmon.parsing", "specmon.model", "specmon.ingest", "specmon.sources", "specmon.ssh",
                    "specmon.control", "specmon.output", "specmon.ui", "specmon.commands", "specmon.sim"):
        assert package in names, package
    assert len(names) > 60


def test_textual_is_imported_only_under_specmon_ui() -> None:
    offenders = [f"{path.relative_to(ROOT)}:{line}: {name}"
                 for path in modules() if UI not in path.parents
                 for line, name in imported_modules(path, package_of(path)) if is_ui_only(name)]
    assert offenders == [], "Textual outside specmon/ui/:\n" + "\n".join(offenders)


def test_import_contracts_are_kept() -> None:
    """``lint-imports`` (import-linter, contracts in pyproject.toml): the layer order and the rest."""
    exe = Path(sys.executable).with_name("lint-imports")
    if not exe.exists():
        pytest.fail(f"{exe} is missing: install the dev extras (pip install -e '.[dev]')")
    proc = subprocess.run([str(exe), "--no-cache"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout
