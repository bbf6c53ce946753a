"""What the pictures share: a text cursor that holds still.

A focused Input shows or hides its cursor every 0.5 s of wall clock. A picture taken
after a slow setup (a loaded CI machine: the replay, the statistics, the plot) would
catch it hidden, and differ from the reviewed one for no change of ours. The blink is
Textual's, not specmon's: in the pictures the cursor stays as it is on focus, shown.
"""

from __future__ import annotations

import pytest
from textual.widgets import Input


@pytest.fixture(autouse=True)
def _still_cursor(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Input, "_toggle_cursor", lambda self: None)
