"""Every place specmon keeps files, in one module (platformdirs).

On Linux these are the XDG locations: ``$XDG_CONFIG_HOME/specmon`` (default
``~/.config/specmon``) for what the user writes, ``$XDG_DATA_HOME/specmon``
(default ``~/.local/share/specmon``) for what specmon writes. Each is a function,
resolved at call time, never at import: tests (and users) point ``HOME`` and the
XDG variables elsewhere after specmon is imported.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from platformdirs import user_config_path, user_data_path

__all__ = ["config_dir", "config_file", "data_dir", "eta_history_file", "export_dir", "locks_dir", "private_dir",
           "recordings_dir", "servers_dir", "sweeps_dir", "themes_dir", "write_private"]

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


def locks_dir() -> Path:
    """``<user data dir>/specmon/locks``: one lock file per server specmon controls (the client's lease)."""
    return data_dir() / "locks"


# --------------------------------------------------------------------------- private files

#: What specmon writes can hold a server's log tail, a host name, a command line: no one else reads it.
DIR_MODE, FILE_MODE = 0o700, 0o600


def private_dir(path: str | os.PathLike[str]) -> Path:
    """Make ``path`` a directory only its owner can enter (0700); return it.

    Missing directories are created 0700 one by one (``mkdir(parents=True, mode=...)``
    gives the parents the umask's mode). Existing ones inside specmon's own data
    directory that are ours and open to others (an older specmon made them 0755) are
    tightened; a folder the user chose elsewhere (``--out``) is left as it is, only the
    folders specmon creates there are private.
    """
    target = Path(path)
    missing: list[Path] = []
    probe = target
    while not probe.exists() and probe != probe.parent:
        missing.append(probe)
        probe = probe.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=DIR_MODE)
        except FileExistsError:
            pass
        os.chmod(d, DIR_MODE)  # mkdir's mode is masked by the umask; chmod is not
    own = data_dir()
    try:
        inside = target.resolve().is_relative_to(own.resolve())
    except OSError:
        inside = False
    if inside:
        d = target
        while True:
            _tighten(d)
            if d == own or d == d.parent:
                break
            d = d.parent
    return target


def _tighten(d: Path) -> None:
    try:
        st = os.stat(d, follow_symlinks=False)
    except OSError:
        return
    if st.st_uid == os.getuid() and st.st_mode & 0o077:
        os.chmod(d, DIR_MODE, follow_symlinks=False)


def write_private(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` as a 0600 file in a 0700 directory, atomically.

    A temporary file (created 0600 by :func:`tempfile.mkstemp`) in the same folder is
    written, flushed to disk and renamed over ``path``: a reader never sees half a file,
    and a failed write (a full disk) leaves the old file, or none, and no temporary.

    Raises:
        OSError: The folder or the file cannot be written; nothing is left behind.
    """
    target = Path(path)
    private_dir(target.parent)
    blob = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(blob)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, FILE_MODE)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return target
