"""The dashboard: the only package that imports Textual."""
