"""specmon.sim."""
