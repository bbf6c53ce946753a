"""Load the dashboard's colour themes from TOML files into Textual ``Theme`` objects.

One file per theme; its keys are the fields of :class:`textual.theme.Theme`
(``name``, ``primary``, ``secondary``, ``accent``, ``background``, ``surface``,
``panel``, ``success``, ``warning``, ``error``, ``foreground``, ``dark``, ...),
plus an optional ``[variables]`` table, validated by :class:`ThemeFile` (a pydantic
model, like the config's profiles). An unknown key is an error (a typo would
otherwise silently fall back to a default colour); a broken file is reported,
naming the file, and skipped, never fatal.

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

import re
import tomllib
from collections.abc import Iterable, Sequence
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError
from textual.color import Color, ColorParseError
from textual.theme import Theme

from specmon.smallfile import InputError, read_small_text

__all__ = ["DEFAULT_THEME", "ThemeError", "ThemeFile", "builtin_theme_dirs", "load_theme", "load_themes"]

DEFAULT_THEME = "specmon-dark"
#: Bytes a theme file may have (a real one is under a kilobyte).
THEME_LIMIT = 64 * 1024


class ThemeError(ValueError):
    """A theme file that cannot be used, with a message naming the file."""


def _non_empty(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be empty")
    return value


def _colour(value: str) -> str:
    try:
        Color.parse(value)
    except ColorParseError:
        raise ValueError(f"{value!r} is not a colour") from None
    return value


#: A colour as Textual parses it: ``#RRGGBB``, ``rgb(...)``, a name such as ``ansi_red``.
Colour = Annotated[StrictStr, AfterValidator(_colour)]
#: A fraction; strict, so ``"0.2"`` (a string) is an error rather than a silent conversion; NaN,
#: infinities and out-of-range values (``1e308`` crashed the app when the theme was applied) too.
Fraction = Annotated[float, Field(strict=True, ge=0.0, le=1.0, allow_inf_nan=False)]

_VARIABLE_NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")
# A variable's value is substituted into the stylesheet: a colour, a style word or a number,
# never a ``;``, a brace, a colon, a comment or a quote that would end the declaration.
_VARIABLE_VALUE = re.compile(r"[A-Za-z0-9#(),.%+ -]{1,64}")


def _variables(value: dict[str, str]) -> dict[str, str]:
    for name, text in value.items():
        if not _VARIABLE_NAME.fullmatch(name):
            raise ValueError(f"variable name {name!r} must be lowercase words joined by '-'")
        if not _VARIABLE_VALUE.fullmatch(text):
            raise ValueError(f"variable {name!r}: {text!r} is not a colour, a style or a number "
                             "(letters, digits, '#', '(', ')', ',', '.', '%', '+', '-' and spaces; 64 at most)")
    return value


class ThemeFile(BaseModel):
    """One theme file: the fields of :class:`textual.theme.Theme`, nothing else."""

    model_config = ConfigDict(extra="forbid")

    name: Annotated[StrictStr, AfterValidator(_non_empty)]
    primary: Colour
    secondary: Colour | None = None
    warning: Colour | None = None
    error: Colour | None = None
    success: Colour | None = None
    accent: Colour | None = None
    foreground: Colour | None = None
    background: Colour | None = None
    surface: Colour | None = None
    panel: Colour | None = None
    boost: Colour | None = None
    dark: StrictBool = True
    luminosity_spread: Fraction = 0.15
    text_alpha: Fraction = 0.95
    variables: Annotated[dict[str, StrictStr], AfterValidator(_variables)] = Field(default_factory=dict)
    ansi: StrictBool = False

    def to_theme(self) -> Theme:
        """The Textual theme (keys the file left out keep Textual's defaults)."""
        return Theme(**self.model_dump(exclude_unset=True))


def _theme_error(exc: ValidationError, origin: str) -> ThemeError:
    """One sentence per problem, the file named first."""
    problems: list[str] = []
    unknown = False
    for error in exc.errors():
        loc = error["loc"]
        key = str(loc[0]) if loc else "(top level)"
        kind = error["type"]
        if kind == "extra_forbidden":
            problems.append(f"unknown key {key!r}")
            unknown = True
        elif kind == "missing":
            problems.append(f"'{key}' is required")
        elif key == "variables" and kind != "value_error":
            problems.append("[variables] must map names to strings")
        elif kind == "bool_type":
            problems.append(f"'{key}' must be true or false")
        elif kind == "finite_number":
            problems.append(f"'{key}' must be a finite number, not {error['input']!r}")
        elif kind.startswith("float"):
            problems.append(f"'{key}' must be a number")
        elif kind in ("greater_than_equal", "less_than_equal"):
            problems.append(f"'{key}' must be between 0 and 1, not {error['input']!r}")
        elif kind == "string_type":
            problems.append(f"'{key}' must be a string, not {error['input']!r}")
        else:
            problems.append(f"'{key}': {error['msg'].removeprefix('Value error, ')}")
    if unknown:
        problems.append(f"a theme has {', '.join(ThemeFile.model_fields)}")
    return ThemeError(f"{origin}: {'; '.join(dict.fromkeys(problems))}")


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
        ThemeError: Invalid TOML, an unknown key, a missing name or primary, a bad colour;
            the message names ``origin``.
    """
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ThemeError(f"{origin}: not valid TOML: {exc}") from None
    try:
        theme = ThemeFile.model_validate(data).to_theme()
    except ValidationError as exc:
        raise _theme_error(exc, origin) from None
    try:
        # What Textual does when the theme is applied (at start or on ``t``), done here: a theme
        # that cannot make its colours is skipped now, not a crash later.
        theme.to_color_system().generate()
    except Exception as exc:
        raise ThemeError(f"{origin}: its colours cannot be generated: {exc}") from None
    return theme


def _entries(folder: Traversable | Path) -> list[Traversable | Path]:
    # Not ``is_file()`` here: a FIFO or a device named *.toml is reported by the read, not skipped silently.
    try:
        return sorted((e for e in folder.iterdir() if e.name.endswith(".toml") and not e.is_dir()),
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
                # A user's file: bounded and non-blocking (a FIFO or a device named *.toml).
                text = read_small_text(entry, limit=THEME_LIMIT, what="theme") if isinstance(entry, Path) else \
                    entry.read_text(encoding="utf-8")
            except UnicodeDecodeError:
                problems.append(f"{origin}: cannot read: not UTF-8 text")
                continue
            except InputError as exc:  # its sentence names the file
                problems.append(str(exc))
                continue
            except OSError as exc:
                problems.append(f"{origin}: cannot read: {exc.strerror or exc}")
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
