"""The wheel ships every package: the list in pyproject.toml names each folder of specmon/.

The packages are listed, not found (pyproject.toml says why); an editable install hides a
missing entry (it imports from the source tree), a wheel does not: specmon.engines and
specmon.grammar were missing from the list when they were added.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(ROOT).parts) for p in (ROOT / "specmon").rglob("__init__.py")}
    assert found - listed == set(), "packages the wheel would leave out"
    assert listed - found == {"specmon.themes"}  # data shipped from themes/ (package-dir)
