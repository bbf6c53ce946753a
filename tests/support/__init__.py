"""Shared test helpers and fixtures (registered as pytest plugins by tests/conftest.py)."""
