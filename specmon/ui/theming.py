"""Load the dashboard's colour themes from TOML files into Textual ``Theme`` objects.

One file per theme; its keys are the fields of :class:`textual.theme.Theme`
(``name``, ``primary``, ``secondary``, ``accent``, ``background``, ``surface``,
``panel``, ``success``, ``warning``, ``error``, ``foreground``, ``dark``, ...),
plus an optional ``[variables]`` table. An unknown key is an error (a typo
would otherwise silently fall back to a default colour); a broken file is
reported and skipped, never fatal.

Where themes come from, later folders overriding earlier ones by name:

1. the themes shipped with specmon: the package ``specmon.themes`` in an
   installed wheel (``pyproject.toml`` maps the top-level ``themes/`` folder to
   it), or the ``themes/`` folder next to the ``specmon/`` package in a
   source checkout or an editable install, which does not map it;
2. the user's folder, :func:`specmon.paths.themes_dir`
   (``~/.config/specmon/themes`` on Linux).

This module is named ``theming`` because ``specmon.themes`` is that data package.
"""

from __future__ import annotations

import tomllib
from collections.abc import Iterable, Sequence
from dataclasses import fields
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

from textual.color import Color, ColorParseError
from textual.theme import Theme

__all__ = ["DEFAULT_THEME", "ThemeError", "builtin_theme_dirs", "load_theme", "load_themes"]

DEFAULT_THEME = "specmon-dark"
_FIELDS = {f.name: f for f in fields(Theme)}
_COLOUR_KEYS = ("primary", "secondary", "warning", "error", "success", "accent", "foreground",
                "background", "surface", "panel", "boost")


class ThemeError(ValueError):
    """A theme file that cannot be used, with a message naming the file."""


def builtin_theme_dirs() -> list[Traversable]:
    """The folder of the themes shipped with specmon (one entry, or none if it is missing)."""
    try:
        folder = resources.files("specmon.themes")
        if any(entry.name.endswith(".toml") for entry in folder.iterdir()):
            return [folder]
    except (ModuleNotFoundError, FileNotFoundError, NotADirectoryError, TypeError):
        pass
    # A source checkout or an editable install: the top-level folder beside the package.
    here = Path(__file__).resolve().parents[2] / "themes"
    return [here] if here.is_dir() else []


def load_theme(text: str, origin: str) -> Theme:
    """Build a Theme from the text of one TOML file.

    Args:
        text: The file's contents.
        origin: Where it came from, for messages.

    Raises:
        ThemeError: Invalid TOML, an unknown key, a missing name or primary, a bad colour.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{origin}: not valid TOML: {exc}") from None
    unknown = sorted(set(data) - set(_FIELDS))
    if unknown:
        raise ThemeError(f"{origin}: unknown key(s) {', '.join(unknown)}; "
                         f"a theme has {', '.join(sorted(_FIELDS))}")
    for key in ("name", "primary"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise ThemeError(f"{origin}: '{key}' is required and must be a non-empty string")
    for key in _COLOUR_KEYS:
        value = data.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise ThemeError(f"{origin}: '{key}' must be a colour string, not {value!r}")
        try:
            Color.parse(value)
        except ColorParseError:
            raise ThemeError(f"{origin}: '{key}' = {value!r} is not a colour") from None
    if "dark" in data and not isinstance(data["dark"], bool):
        raise ThemeError(f"{origin}: 'dark' must be true or false")
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
        raise ThemeError(f"{origin}: [variables] must map names to strings")
    for key in ("luminosity_spread", "text_alpha"):
        if key in data and not isinstance(data[key], (int, float)):
            raise ThemeError(f"{origin}: '{key}' must be a number")
    if "ansi" in data and not isinstance(data["ansi"], bool):
        raise ThemeError(f"{origin}: 'ansi' must be true or false")
    return Theme(**data)


def _entries(folder: Traversable | Path) -> list[Traversable | Path]:
    try:
        return sorted((e for e in folder.iterdir() if e.name.endswith(".toml") and e.is_file()),
                      key=lambda e: e.name)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []


def load_themes(folders: Iterable[Traversable | Path]) -> tuple[dict[str, Theme], list[str]]:
    """Load every ``*.toml`` theme of the folders, later folders overriding earlier names.

    Args:
        folders: Folders to read, in order (missing folders are skipped).

    Returns:
        The themes by name, and one message per file that could not be used.
    """
    themes: dict[str, Theme] = {}
    problems: list[str] = []
    for folder in folders:
        for entry in _entries(folder):
            origin = str(entry)
            try:
                text = entry.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                problems.append(f"{origin}: cannot read: {exc}")
                continue
            try:
                theme = load_theme(text, origin)
            except ThemeError as exc:
                problems.append(str(exc))
                continue
            themes[theme.name] = theme
    return themes, problems


def theme_folders(user_dir: Path | None, extra: Sequence[Traversable | Path] = ()) -> list[Traversable | Path]:
    """Shipped folder, then ``extra`` folders, then the user's folder."""
    out: list[Traversable | Path] = [*builtin_theme_dirs(), *extra]
    if user_dir is not None:
        out.append(user_dir)
    return out
