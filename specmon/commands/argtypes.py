"""Argument types and checks shared by every subcommand (argparse only: imported at start-up)."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

# The one parser of a list of counts lives below both the commands and the dashboard.
from specmon.control.counts import parse_step_list


def positive_float(text: str) -> float:
    """A finite number > 0 (``--baseline-tps 88.8``, ``--speed 60``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a positive number: {text!r}")
    return value


#: ``--launch-cv``'s help, shared by summarize, report and sweep.
LAUNCH_CV_HELP = ("run-to-run CV of a server launch's speed, percent, assumed while no setting was measured in "
                  "two launches (default 5: vLLM issue 53436 reports 7.5-19.7%% with speculation at low "
                  "concurrency, specmon's own proof run 9-16%%); once a setting has two launches the launch CV is "
                  "estimated from them instead; 0 says launches do not differ (replicates pool as one launch)")


def launch_cv_pct(text: str) -> float:
    """A launch CV in percent, 0 to below 100 (``--launch-cv 5``); returned as a fraction."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0 <= value < 100:  # also refuses nan
        raise argparse.ArgumentTypeError(f"must be a percentage from 0 to below 100: {text!r}")
    return value / 100.0


def launch_cv_number(text: str) -> float:
    """``sweep --launch-cv 5``: the percentage itself, as the plan holds it (0 to below 100)."""
    return round(launch_cv_pct(text) * 100.0, 12)


def finite_float(text: str) -> float:
    """Any finite number (``--drift-pct-per-hour -0.5``)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"must be a finite number: {text!r}")
    return value


def objective_text(text: str) -> str:
    """``sweep --objective``: checked as :func:`objective_arg`, kept as its text (what the plan holds)."""
    return str(objective_arg(text).token)


def objective_arg(text: str) -> Any:
    """``--objective``: tps, itl-pQ, ttft-pQ or goodput:ttft=MS,itl=MS (an :class:`~specmon.model.objective.Objective`)."""
    from specmon.model.objective import ObjectiveError, parse_objective  # numpy: only when the option is given

    try:
        return parse_objective(text)
    except ObjectiveError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# ASCII digits only: str.isdigit() also accepts "２" (full width) and "²", which int() reads or chokes on.
_DIGITS = re.compile(r"[0-9]+")


def whole_number(text: str) -> int:
    """An integer ≥ 0 (``--warmup 0``)."""
    if not _DIGITS.fullmatch(text):
        raise argparse.ArgumentTypeError(f"must be a whole number ≥ 0: {text!r}")
    return int(text)


def positive_int(text: str) -> int:
    """An integer ≥ 1."""
    if not _DIGITS.fullmatch(text) or int(text) < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1: {text!r}")
    return int(text)


def line_cap(text: str) -> int:
    """``--line-cap 1MiB``: the longest log line kept, 1 KiB to 1 GiB (units are 1024-based)."""
    from specmon.sources.lines import parse_line_cap

    try:
        return parse_line_cap(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


LINE_CAP_HELP = ("cut log lines longer than SIZE (bytes, or 512KiB, 1MiB, 4M; 1KiB-1GiB) and count them; "
                 "offsets still count every byte (default: the profile's line_cap, else 1MiB)")


def step_list(text: str) -> list[int]:
    """``--steps 0,1,2,3,5``: step counts ≥ 0 (the profile's range is checked before any restart)."""
    try:
        return list(parse_step_list(text, 0, None))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def concurrency_list(text: str) -> list[int]:
    """``--concurrency 1,4``: requests in flight, ≥ 1."""
    try:
        return list(parse_step_list(text, 1, None, what="concurrency levels"))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def year_arg(text: str) -> int:
    """``--year``: a four-digit year."""
    if not (text.isdigit() and len(text) == 4 and 1970 <= int(text) <= 2999):
        raise argparse.ArgumentTypeError(f"not a year: {text!r} (expected e.g. 2025)")
    return int(text)


def check_theme(name: str | None) -> str | None:
    """An error message when the theme does not exist, before any screen opens or host is reached."""
    if name is None:
        return None
    from specmon import paths
    from specmon.ui.theming import load_themes, theme_folders

    themes, problems = load_themes(theme_folders(paths.themes_dir()))
    if name in themes:
        return None
    # A theme file that could not be read (a FIFO, a device, too large) is why, more often than a typo.
    about = [p for p in problems if name in p] or problems
    why = f"; not loaded: {about[0]}" if about else ""
    return f"unknown theme {name!r}; available: {', '.join(sorted(themes))}{why}"


def out_dir(text: str) -> Path:
    """``--out DIR``: a folder for exports and reports (made when first written; not an existing file)."""
    from pathlib import Path

    if not text.strip() or any(ord(c) < 32 for c in text):
        raise argparse.ArgumentTypeError(f"not a folder name: {text!r}")
    path = Path(text).expanduser()
    if path.exists() and not path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a file, not a folder: exports need a folder")
    return path.resolve()


def metrics_url(text: str) -> str:
    """An http(s) URL of an engine's ``/metrics`` (the same rule as a profile's ``metrics_url``)."""
    from urllib.parse import urlsplit

    parts = urlsplit(text)
    try:
        parts.port  # noqa: B018  (raises on a bad port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a URL with a valid port: {text!r}") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or any(c.isspace() or ord(c) < 32 for c in text):
        raise argparse.ArgumentTypeError(f"not an http(s) URL such as http://127.0.0.1:8000/metrics: {text!r}")
    return text
