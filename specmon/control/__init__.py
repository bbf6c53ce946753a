"""specmon.control."""
