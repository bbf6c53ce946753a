"""specmon.widgets."""
