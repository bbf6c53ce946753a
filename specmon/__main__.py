"""``python -m specmon``."""

from specmon.cli import run

run()
