"""The session model and its statistics: pure, no I/O, no Textual."""
