"""Output files written whole or not at all.

An export to a full disk left a 0-byte CSV: ``Path.write_text`` truncates first and fails
half-way. :func:`write_files_atomically` writes each file to a temporary name beside it,
``fsync``s it, and renames it into place only when every file of the set was written; on
any failure the temporary files are removed and the error is raised, so a reader finds
the complete set, or nothing new.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

__all__ = ["write_files_atomically"]


def write_files_atomically(files: Mapping[Path, str], *, mode: int = 0o600) -> list[Path]:
    """Write every ``path: text`` pair, all or none (none on any ``OSError``, which is raised).

    Returns:
        The paths written, in the order given.
    """
    staged: list[tuple[str, Path]] = []
    try:
        for path, text in files.items():
            fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            staged.append((tmp, path))
            with os.fdopen(fd, "wb") as f:
                os.fchmod(f.fileno(), mode)
                f.write(text.encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())  # a full disk may only say so here
        for tmp, path in staged:
            os.replace(tmp, path)
    except BaseException:
        for tmp, _ in staged:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    return [path for _, path in staged]
