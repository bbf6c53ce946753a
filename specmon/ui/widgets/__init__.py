"""specmon.ui.widgets."""
