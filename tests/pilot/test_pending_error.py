"""The dashboard shows a pending error (an exception with no serving after it yet) as
"error (serving stopped?)", not as a crash; a request answered or a sample after it makes it an
error the server caught, and the header says "serving" again (issue 43, item 6)."""

from __future__ import annotations

from pathlib import Path

from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import StaticSource, settle_source, source_app, wait_for
from tests.support.logtext import decode, ready, server_args

SIZE = (100, 30)
TRACEBACK = ["Traceback (most recent call last):", '  File "/sgl/tokenizer_manager.py", line 12, in handle',
             "ValueError: The input (40000 tokens) is longer than the model's context length (32768 tokens)."]


async def test_a_pending_error_is_shown_as_one_until_a_request_is_answered(isolated_home: Path) -> None:
    lines = [server_args(2, 0), ready(5), *(decode(6 + i, 90.0, 2.1, 0.6) for i in range(8)), *TRACEBACK]
    source = StaticSource([lines])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        header = app.query_one(StatusHeader)
        view = header.view
        assert view is not None and view.state == "crashed"
        assert view.state_text.startswith("error (serving stopped?): ValueError: The input")
        assert "crashed" not in view.state_text and not header.has_class("-crashed")
        # A 500 answered for the failed request says nothing; the next request answered does.
        more = ['[2026-08-23 09:00:20] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 500 Internal Server Error',
                '[2026-08-23 09:00:21] INFO:     127.0.0.1:5001 - "POST /generate HTTP/1.1" 200 OK']
        await source.more.put(more[:1])
        await wait_for(pilot, lambda: app.feeder.lines == len(lines) + 1, "the failed request ingested")
        app.refresh_now()
        await pilot.pause()
        assert header.view is not None and header.view.state_text.startswith("error (serving stopped?)")
        await source.more.put(more[1:])
        await wait_for(pilot, lambda: app.feeder.lines == len(lines) + 2, "the answered request ingested")
        app.refresh_now()
        await pilot.pause()
        assert header.view is not None and header.view.state == "serving"
        assert header.view.state_text.startswith("serving")


async def test_a_certain_death_is_shown_as_a_crash(isolated_home: Path) -> None:
    lines = [server_args(2, 0), ready(5), *(decode(6 + i, 90.0, 2.1, 0.6) for i in range(8)),
             "[2026-08-23 09:00:20 TP0] Scheduler hit an exception: Traceback (most recent call last):",
             *TRACEBACK[1:]]
    source = StaticSource([lines])
    app = source_app(source)
    async with app.run_test(size=SIZE) as pilot:
        await settle_source(app, source, pilot)
        header = app.query_one(StatusHeader)
        assert header.view is not None and header.view.state_text.startswith("crashed")
        assert header.has_class("-crashed")
