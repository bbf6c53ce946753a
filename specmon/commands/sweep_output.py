"""What ``specmon sweep`` says: its progress on stderr, the result (drawn by :mod:`specmon.experiment.report`),
what it left running and its exit status. Imported only when a sweep runs."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from specmon.commands.again import again_advice
from specmon.commands.exits import EXIT_INCOMPLETE, EXIT_NOTHING, EXIT_OK
from specmon.experiment.report import schedule_context as schedule_context
from specmon.experiment.report import write_result
from specmon.literal import plain

if TYPE_CHECKING:  # annotations only
    from specmon.experiment.plan import ExperimentPlan
    from specmon.experiment.sweep_plan import SweepEvent
    from specmon.experiment.sweep_result import SweepResult


def _err(text: str) -> None:
    try:
        print(plain(text, newlines=True), file=sys.stderr, flush=True)
    except (OSError, ValueError):
        pass  # the terminal went away (SIGHUP): the clean-up goes on without it


def _on_event(ev: SweepEvent) -> None:
    if ev.kind in ("look",):
        _err(f"  {ev.text}")
    else:
        _err(f"sweep: {ev.text}")


def _print_result(exp: ExperimentPlan, result: SweepResult, extra: dict[str, Any]) -> int:
    write_result(result, exp.format, extra)
    verdict = result.verdict
    left = extra.get("server_left_on")
    if isinstance(left, dict) and left.get("text"):
        _err(f"sweep: {left['text']}")
    note = extra.get("_left_note")
    if note and not (isinstance(left, dict) and left.get("running") is False and left.get("text") == note):
        _err(f"sweep: {note}")
    if extra.get("server_lost"):
        # What running it again does, as a stop by a signal says it (a demo is not resumed).
        _err(f"sweep: stopped: {extra['server_lost']}; {again_advice(exp)} (exit {EXIT_INCOMPLETE})")
        return EXIT_INCOMPLETE
    failed = [c for c in result.cells if c.status == "failed"]
    if failed:
        _err(f"sweep: {len(failed)} of {len(result.cells)} requested setting(s) could not be measured "
             f"(exit {EXIT_INCOMPLETE})")
        return EXIT_INCOMPLETE
    if verdict is None or verdict.best is None:
        return EXIT_NOTHING
    if result.objective_verdicts and result.objective_verdicts[0].best is None:
        return EXIT_NOTHING
    return EXIT_OK
