"""Theme files: the shipped ones load, the user's folder adds and overrides, mistakes are reported."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from specmon import paths
from specmon.ui.theming import (
    DEFAULT_THEME,
    ThemeError,
    builtin_theme_dirs,
    load_theme,
    load_themes,
    theme_folders,
)

ROOT = Path(__file__).resolve().parents[2]
GOOD = """
name = "mine"
primary = "#336699"
background = "#000000"
dark = true
"""


def test_shipped_themes_load_without_problems() -> None:
    themes, problems = load_themes(builtin_theme_dirs())
    assert problems == []
    assert {"specmon-dark", "specmon-light", "specmon-contrast"} <= set(themes)
    assert DEFAULT_THEME in themes
    assert themes["specmon-dark"].dark and themes["specmon-contrast"].dark
    assert not themes["specmon-light"].dark
    for theme in themes.values():
        # Every colour the widgets rely on is set explicitly, not derived by Textual.
        for key in ("primary", "secondary", "accent", "background", "surface", "panel", "success",
                    "warning", "error", "foreground"):
            assert getattr(theme, key), f"{theme.name} lacks {key}"


def test_source_checkout_falls_back_to_the_top_level_folder() -> None:
    # In the test environment (an editable install) specmon.themes is not importable.
    dirs = builtin_theme_dirs()
    assert len(dirs) == 1
    assert {e.name for e in dirs[0].iterdir()} >= {"specmon-dark.toml", "specmon-light.toml",
                                                   "specmon-contrast.toml"}


def test_user_folder_adds_and_overrides(tmp_path: Path) -> None:
    (tmp_path / "mine.toml").write_text(GOOD)
    (tmp_path / "dark-override.toml").write_text(
        'name = "specmon-dark"\nprimary = "#FF0000"\ndark = true\n')
    themes, problems = load_themes(theme_folders(tmp_path))
    assert problems == []
    assert themes["mine"].primary == "#336699"
    assert themes["specmon-dark"].primary == "#FF0000"  # the user's file wins
    assert "specmon-light" in themes


@pytest.mark.parametrize(("text", "message"), [
    ('name = "x"\nprimary = "#123456"\nprimray = "#123456"\n', "unknown key 'primray'; a theme has name, primary"),
    ('primary = "#123456"\n', "'name' is required"),
    ('name = "x"\n', "'primary' is required"),
    ('name = "x"\nprimary = "not-a-colour"\n', "is not a colour"),
    ('name = "x"\nprimary = "#123456"\ndark = "yes"\n', "'dark' must be true or false"),
    ('name = "x"\nprimary = "#123456"\nvariables = "nope"\n', "[variables] must map names to strings"),
    ('name = "x"\nprimary = "#123456"\nvariables = {a = 1}\n', "[variables] must map names to strings"),
    ('name = " "\nprimary = "#123456"\n', "'name': must not be empty"),
    ('name = "x"\nprimary = 3\n', "'primary' must be a string, not 3"),
    ('name = "x"\nprimary = "#123456"\ntext_alpha = "0.5"\n', "'text_alpha' must be a number"),
    ("name = \n", "not valid TOML"),
])
def test_bad_theme_files_are_clear_errors(text: str, message: str) -> None:
    with pytest.raises(ThemeError, match="^" + re.escape("bad.toml: ") + ".*" + re.escape(message)):
        load_theme(text, "bad.toml")


def test_a_broken_file_is_reported_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "a-good.toml").write_text(GOOD)
    (tmp_path / "b-bad.toml").write_text('name = "bad"\n')
    (tmp_path / "notes.txt").write_text("not a theme")
    themes, problems = load_themes([tmp_path, tmp_path / "missing"])
    assert list(themes) == ["mine"]
    assert len(problems) == 1 and "b-bad.toml" in problems[0]


def test_user_theme_dir_follows_the_config_home(isolated_home: Path) -> None:
    assert paths.themes_dir() == isolated_home / ".config" / "specmon" / "themes"


#: The terminal UI's code (an exported HTML report has its own palette: themes do not apply there).
UI_CODE = ["specmon/ui", "specmon/ingest/live.py"]


def test_no_hex_colours_in_code_or_stylesheet() -> None:
    """Colours live in themes/*.toml; the UI's code and TCSS use theme variables only."""
    quoted_hex = re.compile(r"""["']#[0-9a-fA-F]{3}(?:[0-9a-fA-F]{3})?(?:[0-9a-fA-F]{2})?["']""")
    css_hex = re.compile(r":[^;{]*#[0-9a-fA-F]{3,8}\b")
    offenders = []
    files = []
    for entry in UI_CODE:
        path = ROOT / entry
        files += sorted(path.rglob("*.py")) if path.is_dir() else [path]
    for path in files:
        for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if quoted_hex.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}")
    for path in sorted((ROOT / "specmon").rglob("*.tcss")):
        text = re.sub(r"/\*.*?\*/", "", path.read_text(encoding="utf-8"), flags=re.S)
        for i, line in enumerate(text.splitlines(), 1):
            if css_hex.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{i}")
    assert offenders == []
