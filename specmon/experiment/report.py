"""A sweep's result drawn: its tables, verdicts, cost model, per-prompt table, schedules and what could
not be measured, as ``specmon sweep`` prints them (``table``: rich tables in a terminal, wrapped to its
width; ``markdown``; ``json``: the result's document). What the command then says on stderr (the
server left running, a lost server, the exit status) is the command's (:mod:`specmon.commands.sweep_output`).
"""

from __future__ import annotations

import json
import sys
import textwrap
from typing import TYPE_CHECKING, Any

from rich.console import Console

from specmon.engines import by_name
from specmon.experiment.stats.design import closing_advice
from specmon.experiment.sweep_result import analyses_from_cells
from specmon.literal import markdown_text, plain
from specmon.model.costmodel import build_cost_model
from specmon.model.schedule import decide_from
from specmon.output.objective import deployed_lines, objective_lines
from specmon.output.prompt_table import prompt_markdown
from specmon.output.tables import print_analysis, to_markdown, verdict_tag
from specmon.output.textfit import verdict_text

if TYPE_CHECKING:
    from specmon.control.launch import LaunchProfile
    from specmon.experiment.sweep_result import SweepResult

__all__ = ["schedule_context", "write_result"]


def write_result(result: SweepResult, fmt: str, extra: dict[str, Any]) -> dict[str, Any]:
    """Print ``result`` in ``fmt`` on stdout; returns its JSON document (``extra``'s public keys added)."""
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
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        console = None
        if fmt != "markdown":
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

        # With --objective the objective's verdict decides: the tok/s comparison is context, not a verdict
        # (no mark beside its rows, no verdict's words under them).
        context = not result.plan.objective.is_tps
        for v in result.verdicts:
            on = f", {v.workload} prompts" if v.workload else ""
            if console is None:
                sys.stdout.write(f"### Concurrency {v.concurrency}{on}\n\n"
                                 + to_markdown(v.analysis, verdict=v.answer, context=context) + "\n")
            else:
                # The sweep's own verdict (adjusted for its looks) under a table that fits the terminal.
                print_analysis(console, v.analysis, title=f"specmon sweep — concurrency {v.concurrency}{on}",
                               verdict=v.answer, context=context)
        for ov in result.objective_verdicts:
            text = "\n".join(objective_lines(ov.to_json(), width=80 if console is None else console.width))
            if console is None:
                sys.stdout.write(f"```\n{text}\n```\n**Verdict on {markdown_text(ov.objective.name)} "
                                 f"({verdict_tag(ov.answer)}):** "
                                 f"{markdown_text(ov.sentence)}\n\n")
            else:
                out(text)
                console.print(verdict_text(ov.answer, lead=f"Verdict on {ov.objective.name}"))
        if cost is not None:
            text = "\n".join(cost.lines())
            if fmt == "markdown":
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
        decide = decide_from([n.to_json() for n in result.needs_more])  # an undecided load: what would decide it
        for schedule in result.schedules():
            lines = schedule.describe(**schedule_context(launch, result), decide=decide)
            text = "\n".join(lines)
            if fmt == "markdown":
                sys.stdout.write(f"```\n{text}\n```\n")
            else:
                out(text)
        checks = extra.get("schedule_check")
        if checks:
            text = "\n".join(deployed_lines(checks))
            if fmt == "markdown":
                sys.stdout.write(f"```\n{text}\n```\n")
            else:
                out(text)
        for cell in result.cells:
            if cell.status == "failed":
                out(f"failed: {cell.label or cell.key}: {cell.text}")
            elif cell.status == "skipped":
                out(f"skipped: {cell.setting_label}: {cell.text}")
    return doc


def schedule_context(launch: LaunchProfile | None, result: SweepResult) -> dict[str, Any]:
    """What each engine's form of a schedule is given: the profile's engine (None: not named) and
    its argv (its own flags kept), and the swept setting (algorithm, top-k) its form checks."""

    own = by_name(launch.engine) if launch is not None else None
    setting = next(((cfg.algorithm, cfg.topk) for v in result.verdicts for row in v.analysis.rows
                    if (cfg := row.config) is not None and cfg.steps), None)
    return {"own": own, "argv": launch.argv if launch is not None and launch.argv else None, "setting": setting}
