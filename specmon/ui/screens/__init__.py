"""specmon.ui.screens."""
