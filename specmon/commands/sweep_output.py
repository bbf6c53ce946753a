"""What ``specmon sweep`` says: its progress on stderr, and the result's tables, verdicts and schedules.

Like the command module, only light modules are imported at module level.
"""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from rich.console import Console

from specmon.commands.again import continue_command
from specmon.commands.exits import EXIT_INCOMPLETE, EXIT_NOTHING, EXIT_OK
from specmon.engines import by_name
from specmon.experiment.stats.design import closing_advice
from specmon.experiment.sweep_result import analyses_from_cells
from specmon.literal import markdown_text, plain
from specmon.model.costmodel import build_cost_model
from specmon.output.objective import deployed_lines, objective_lines
from specmon.output.prompt_table import prompt_markdown
from specmon.output.tables import print_analysis, to_markdown, verdict_tag
from specmon.output.textfit import verdict_text

if TYPE_CHECKING:  # annotations only
    from specmon.control.launch import LaunchProfile
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
    doc = result.to_json()
    verdict = result.verdict
    cost = None
    # The cost-model panel explains a line of step counts; over more dimensions its rows would repeat
    # step counts, so it is left out (the guided strategy's own model explains what it skipped).
    if verdict is not None and not result.plan.points:
        cost = build_cost_model(analyses_from_cells(result.cells, verdict.concurrency or 1),
                                concurrency=verdict.concurrency)
    doc["cost_model"] = cost.to_json() if cost else None
    doc.update({k: v for k, v in extra.items() if not k.startswith("_")})
    if exp.format == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        console = None
        if exp.format != "markdown":
            console = Console()
            if not console.is_terminal:
                console.width = max(console.width, 110)  # piped: keep rows whole
        def out(text: str) -> None:
            """Plain text under the tables: in a terminal each line wrapped at its width between words,
            continuation lines indented under their first (the cost model's sentences ran to 104 columns)."""
            if console is None:
                sys.stdout.write(text + "\n")
                return

            for line in text.split("\n"):
                indent = " " * (len(line) - len(line.lstrip(" ")))
                sys.stdout.write("\n".join(textwrap.wrap(line, console.width, subsequent_indent=indent + "  ",
                                                          break_long_words=False, break_on_hyphens=False)
                                            or [""]) + "\n")

        # With --objective the objective's verdict decides: the tok/s comparison is context, not a verdict.
        lead = "Verdict" if result.plan.objective.is_tps else "tok/s, for context"
        for v in result.verdicts:
            on = f", {v.workload} prompts" if v.workload else ""
            if console is None:
                sys.stdout.write(f"### Concurrency {v.concurrency}{on}\n\n"
                                 + to_markdown(v.analysis, verdict=v.answer, lead=lead) + "\n")
            else:
                # The sweep's own verdict (adjusted for its looks) under a table that fits the terminal.
                print_analysis(console, v.analysis, title=f"specmon sweep — concurrency {v.concurrency}{on}",
                               verdict=v.answer, lead=lead)
        for ov in result.objective_verdicts:
            text = "\n".join(objective_lines(ov.to_json()))
            if console is None:
                sys.stdout.write(f"```\n{text}\n```\n**Verdict on {markdown_text(ov.objective.name)} "
                                 f"({verdict_tag(ov.answer)}):** "
                                 f"{markdown_text(ov.sentence)}\n\n")
            else:
                out(text)
                console.print(verdict_text(ov.answer, lead=f"Verdict on {ov.objective.name}"))
        if cost is not None:
            text = "\n".join(cost.lines())
            if exp.format == "markdown":
                sys.stdout.write(f"```\n{text}\n```\n")
            else:
                out(text)
        prompts = prompt_markdown(doc.get("prompts") or [])  # which prompts pay for speculation
        if prompts:
            sys.stdout.write("\n" + "\n".join(prompts) + "\n\n")
        out(result.restart_note)

        for advice in closing_advice(result.needs_more):  # an undecided verdict: what would decide it
            out(markdown_text(advice) if console is None else plain(advice))
        differ = result.winners_differ()
        if differ:
            out(differ)
        launch = extra.get("_launch")
        for schedule in result.schedules():
            lines = schedule.describe(**schedule_context(launch, result))
            text = "\n".join(lines)
            if exp.format == "markdown":
                sys.stdout.write(f"```\n{text}\n```\n")
            else:
                out(text)
        checks = extra.get("schedule_check")
        if checks:
            text = "\n".join(deployed_lines(checks))
            if exp.format == "markdown":
                sys.stdout.write(f"```\n{text}\n```\n")
            else:
                out(text)
        for cell in result.cells:
            if cell.status == "failed":
                out(f"failed: {cell.label or cell.key}: {cell.text}")
            elif cell.status == "skipped":
                out(f"skipped: {cell.setting_label}: {cell.text}")
    left = extra.get("server_left_on")
    if isinstance(left, dict) and left.get("text"):
        _err(f"sweep: {left['text']}")
    note = extra.get("_left_note")
    if note and not (isinstance(left, dict) and left.get("running") is False and left.get("text") == note):
        _err(f"sweep: {note}")
    if extra.get("server_lost"):
        again = continue_command(exp.argv) if not exp.demo else None
        how = f"continue it with: {again}" if again else "run the same command again to continue"
        _err(f"sweep: stopped: {extra['server_lost']}; {how} (exit "
             f"{EXIT_INCOMPLETE})")
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


def schedule_context(launch: LaunchProfile | None, result: SweepResult) -> dict[str, Any]:
    """What each engine's form of a schedule is given: the profile's engine (None: not named) and
    its argv (its own flags kept), and the swept setting (algorithm, top-k) its form checks."""

    own = by_name(launch.engine) if launch is not None else None
    setting = next(((cfg.algorithm, cfg.topk) for v in result.verdicts for row in v.analysis.rows
                    if (cfg := row.config) is not None and cfg.steps), None)
    return {"own": own, "argv": launch.argv if launch is not None and launch.argv else None, "setting": setting}
