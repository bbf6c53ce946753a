"""Feeding lines into a session: live sources, whole files, and the bulk path."""
