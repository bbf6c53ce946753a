"""SSH: connecting with verified host keys."""
