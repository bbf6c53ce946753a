"""Every place specmon keeps files, in one module (platformdirs).

On Linux these are the XDG locations: ``$XDG_CONFIG_HOME/specmon`` (default
``~/.config/specmon``) for what the user writes, ``$XDG_DATA_HOME/specmon``
(default ``~/.local/share/specmon``) for what specmon writes. Each is a function,
resolved at call time, never at import: tests (and users) point ``HOME`` and the
XDG variables elsewhere after specmon is imported.
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_config_path, user_data_path

__all__ = ["config_dir", "config_file", "data_dir", "eta_history_file", "export_dir", "recordings_dir",
           "servers_dir", "sweeps_dir", "themes_dir"]

APP = "specmon"


def config_dir() -> Path:
    """``<user config dir>/specmon``: what the user writes (profiles, themes)."""
    return user_config_path(APP)


def config_file() -> Path:
    """``<user config dir>/specmon/config.toml``: the profiles (:mod:`specmon.config`)."""
    return config_dir() / "config.toml"


def themes_dir() -> Path:
    """``<user config dir>/specmon/themes``: the user's theme files, one per theme."""
    return config_dir() / "themes"


def data_dir() -> Path:
    """``<user data dir>/specmon``: what specmon writes and reads back."""
    return user_data_path(APP)


def recordings_dir() -> Path:
    """``<user data dir>/specmon/recordings``: the recordings of watch, connect, demo."""
    return data_dir() / "recordings"


def sweeps_dir() -> Path:
    """``<user data dir>/specmon/sweeps``: the state files a headless sweep resumes from."""
    return data_dir() / "sweeps"


def servers_dir() -> Path:
    """``<user data dir>/specmon/servers``: the servers a session started and left running."""
    return data_dir() / "servers"


def eta_history_file() -> Path:
    """``<user data dir>/specmon/restart_times.json``: past restart durations per host (the ETA)."""
    return data_dir() / "restart_times.json"


def export_dir() -> Path:
    """``<user data dir>/specmon/exports``: where ``e`` (export) and sweep reports write by default.

    Not the current directory: run from a checkout, exports became untracked files in it.
    ``--out DIR`` (the dashboard's ``export_dir`` argument) chooses another folder; the path
    of every file written is shown, and can be copied.
    """
    return data_dir() / "exports"
