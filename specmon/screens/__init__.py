"""specmon.screens."""
