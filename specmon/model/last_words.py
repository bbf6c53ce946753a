"""Why a gone server ended, from its log's last lines: what the session makes of them, not the last line.

A server's last line is often a consequence (the parent's "Received sigquit", uvicorn's "Finished
server process", a frame of the traceback its shutdown printed): the first fatal line of its last
run names a crash, and the first line of a stop (``SIGTERM received ...``) names a stop. A
traceback the server printed and then served after is an error it caught: it names nothing.
"""

from __future__ import annotations

from collections.abc import Iterable

from specmon.model.run import ServerState
from specmon.model.session import Session
from specmon.parsing import parse_lines
from specmon.records import Engine


def death_cause(lines: Iterable[str], engine: Engine = Engine.UNKNOWN) -> str | None:
    """What ``lines`` (a gone server's last log lines, in order) say ended it, or None.

    The first fatal line of the last run when it crashed (a traceback named by its exception
    line), else the first line of its stop when it was stopped (a signal's), else None: the lines
    say nothing of an end (a kill -9 leaves none), and the caller shows the last line as it is.
    """
    session = Session()
    session.begin_source("log tail")
    for rec in parse_lines(lines, engine=engine):
        session.ingest(rec)
    run = session.current
    if run is None:
        return None
    if run.state is ServerState.CRASHED:
        return run.crash_cause or run.crash_detail
    if run.state is ServerState.STOPPED:
        return run.stop_detail
    return None
