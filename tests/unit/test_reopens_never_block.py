"""A log or a recording checked before it is read, then opened again: a FIFO put in its place since
is one sentence, never an ``open`` that waits for a writer (issue 43, items 1 and 2).

``summarize``'s pieces, its cutting into pieces and its learning from the head, ``replay``'s list of a
recording's inputs and each input's reading opened the path again with a plain ``open()``: it blocks
until a writer comes, on a FIFO. Each is called here on a FIFO (as if the file had been swapped for
one after its check), in a thread with a bound.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from specmon.ingest.feeding import _learn_from_head, line_ranges, parse_piece
from specmon.ingest.live import recording_inputs
from specmon.records import Engine
from specmon.sources.base import ConnectionState
from specmon.sources.logfiles import LogFileError
from specmon.sources.recorded import RecordingSource
from specmon.sources.replay import ReplayClock

#: An open without O_NONBLOCK waits for ever; a checked open takes microseconds.
BOUND_S = 5.0


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "swapped.pipe"
    os.mkfifo(path)
    yield path
    # An open still waiting (the test failed) is let go: a writer's end opened once, then closed.
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
    except OSError:
        pass


def within(call: Callable[[], Any]) -> BaseException | None:
    """What ``call()`` raised (None: it returned), within the bound; fails when it blocked."""
    raised: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            raised.append(None)
        except BaseException as exc:  # handed to the test
            raised.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(BOUND_S)
    assert not thread.is_alive(), f"blocked for {BOUND_S:g} s"
    return raised[0]


@pytest.mark.parametrize("name", ["parse_piece", "line_ranges", "learn_from_head", "recording_inputs"])
def test_each_reopen_of_a_checked_path_refuses_a_fifo_at_once(fifo: Path, name: str) -> None:
    calls: dict[str, Callable[[], Any]] = {
        "parse_piece": lambda: parse_piece((str(fifo), 0, 100, Engine.SGLANG.value, 2026, 0.0)),
        "line_ranges": lambda: list(line_ranges(str(fifo), 100 << 20, 1 << 20)),
        "learn_from_head": lambda: _learn_from_head(str(fifo), Engine.SGLANG, 2026, 0.0),
        "recording_inputs": lambda: recording_inputs(fifo, ReplayClock(None)),
    }
    exc = within(calls[name])
    assert isinstance(exc, LogFileError), repr(exc)
    assert str(exc).startswith(f"{fifo} is a FIFO (a named pipe), not a regular file"), str(exc)


def test_a_recorded_input_on_a_fifo_fails_with_the_sentence(fifo: Path) -> None:
    source = RecordingSource(fifo, 0, "server.log", ReplayClock(None))
    got: list[list[str]] = []

    async def drain() -> None:
        async for batch in source.batches():
            got.append(batch)

    assert within(lambda: asyncio.run(drain())) is None
    assert got == []
    assert source.status.state is ConnectionState.FAILED
    assert source.status.detail.startswith(f"{fifo} is a FIFO (a named pipe), not a regular file"), source.status.detail


def test_replay_of_a_recording_swapped_for_a_fifo_after_its_check_exits_2_with_the_sentence(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """``replay REC``: the recording passes its checks, then is a FIFO when its inputs are listed: one
    sentence and exit 2, no traceback (the error was raised out of ``cmd_replay``)."""
    import specmon.ui.factories as factories
    from specmon.cli import main
    from specmon.output.recording import Recorder

    rec = tmp_path / "run.jsonl"
    with Recorder(rec, meta={"command": "watch"}) as r:
        r.source("server.log", baseline=False, year=2026)
        r.batch("server.log", 1, ["[2026-01-01 00:00:00] Decode batch. #running-req: 1, gen throughput (token/s): 80.0"])
    real = factories.recording_inputs

    def swapped(path: Any, *args: Any, **kwargs: Any) -> Any:
        os.remove(path)
        os.mkfifo(path)  # the swap, between the check and the open
        return real(path, *args, **kwargs)

    monkeypatch.setattr(factories, "recording_inputs", swapped)
    monkeypatch.setattr("specmon.commands.dashboard.no_terminal", lambda _name: None)  # (no terminal here)
    code: list[int] = []
    assert within(lambda: code.append(main(["replay", str(rec)]))) is None
    assert code == [2]
    err = capsys.readouterr().err
    assert "is a FIFO (a named pipe), not a regular file" in err
    assert "Traceback" not in err
    os.remove(rec)
