"""The two-sided 95% t critical values at whole degrees of freedom, as scipy gives them, kept in a file.

Every ``summarize`` of a single configuration asks for one interval quantile,
``stdtrit(df, 0.975)`` at a whole ``df`` (the batch count less one), and importing
``scipy.special`` for it took 0.10-0.14 s of each run (12-15% of a 2M-line llama.cpp
summary; more of a small file's). ``t975.f64`` holds scipy's values for df = 1 to
``LARGEST`` (little-endian doubles, 160 KB); any other ``df`` or probability still
asks scipy. Made by ``python -m specmon.model.t975_table`` with scipy installed;
``tests/unit/test_stats.py`` checks every value against the scipy it runs with.
"""

from __future__ import annotations

import sys
from array import array
from functools import cache
from pathlib import Path

#: The largest whole df in the file: a run of n samples has about sqrt(n) batches, so this covers
#: runs of up to 4e8 samples.
LARGEST = 20_000
FILE = "t975.f64"


@cache
def values() -> array[float]:
    """The file's values; ``values()[df - 1]`` is the 0.975 quantile at ``df`` degrees of freedom."""
    data = array("d")
    try:
        # Beside this module, as pip installs it (importlib.resources and what it imports,
        # tempfile and shutil among them, took 6-7 ms of each summarize to start).
        raw = Path(__file__).with_name(FILE).read_bytes()
    except OSError:  # a package not on disk (a zip)
        from importlib import resources

        raw = resources.files("specmon.model").joinpath(FILE).read_bytes()
    data.frombytes(raw)
    if sys.byteorder != "little":
        data.byteswap()
    if len(data) != LARGEST:
        raise RuntimeError(f"specmon/model/{FILE} holds {len(data)} values, not {LARGEST}: reinstall specmon")
    return data


def computed() -> array[float]:
    """The values as scipy computes them now (the file's source, and its test's reference)."""
    from scipy.special import stdtrit

    return array("d", (float(stdtrit(float(df), 0.975)) for df in range(1, LARGEST + 1)))


def main() -> int:
    """Write the file beside this module (in a checkout: it ships with the package)."""
    data = computed()
    if sys.byteorder != "little":
        data.byteswap()
    target = Path(__file__).with_name(FILE)
    target.write_bytes(data.tobytes())
    print(f"wrote {LARGEST} values to {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
