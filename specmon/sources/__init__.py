"""specmon.sources."""
