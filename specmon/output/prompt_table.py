"""The per-prompt table of a sweep (its JSON ``prompts``, :mod:`specmon.experiment.prompts`) as text: the
sweep's own output and the report draw it alike. Whole at 80 columns."""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Any

from specmon.literal import markdown_cell, plain
from specmon.output.report_text import dropped_note, fit_table, table_row, wrap

__all__ = ["HEADERS", "prompt_html", "prompt_legend", "prompt_markdown", "prompt_rows", "prompt_title"]

HEADERS = ("prompt", "no spec (n)", "fastest spec", "tok/s (n)", "change", "accepted")


def _num(v: Any, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) else "—"


def prompt_title(group: Mapping[str, Any]) -> str:
    """``Per prompt, concurrency 1 (code prompts)``."""
    on = f" ({group['workload']} prompts)" if group.get("workload") else ""
    return f"Per prompt, concurrency {group.get('concurrency')}{on}: which prompts pay for speculation"


def prompt_rows(group: Mapping[str, Any]) -> list[list[str]]:
    """One row of text cells per prompt (the prompt's number in the load's set, from 1)."""
    out = []
    for r in group.get("rows") or []:
        if not isinstance(r, Mapping):
            continue
        change = r.get("change_pct")
        rate = r.get("accept_rate")
        out.append([
            f"#{int(r.get('prompt', 0)) + 1}",
            f"{_num(r.get('nospec_tps'), '.1f')} ({int(r.get('nospec_requests') or 0)})",
            str(r.get("best") or "—"),
            f"{_num(r.get('best_tps'), '.1f')} ({int(r.get('best_requests') or 0)})",
            "—" if change is None else f"{change:+.1f}%",
            "—" if rate is None else f"{100 * rate:.0f}% of {int(r.get('drafted') or 0)}",
        ])
    return out


def prompt_legend(groups: Sequence[Mapping[str, Any]]) -> str:
    """What the table says and what it rests on."""
    paying = sum(1 for g in groups for r in g.get("rows") or [] if isinstance(r, Mapping) and r.get("pays"))
    measured = sum(1 for g in groups for r in g.get("rows") or []
                   if isinstance(r, Mapping) and r.get("pays") is not None)
    said = (f"{paying} of {measured} prompts are faster with speculation. " if measured else
            "No speculation was not measured: the rows give each prompt's acceptance only. ")
    return (f"{said}Each prompt's requests are paired "
            "across launches and settings (every launch sends the prompts in the same order); a row is the "
            "mean decode speed of its requests (n), no speculation against the speculative setting fastest "
            "on that prompt, and that setting's drafted tokens accepted where the engine says. Descriptive: "
            "the verdict rests on launches.")


def prompt_markdown(groups: Sequence[Mapping[str, Any]]) -> list[str]:
    """Each load's table as Markdown under its heading, then the legend; [] when there is none. Within
    80 columns: the accepted column is left out, and said, when a row would be wider."""
    out: list[str] = []
    for group in groups:
        rows = [[markdown_cell(c) for c in row] for row in prompt_rows(group)]
        headers, kept, dropped = fit_table(HEADERS, rows, optional=("accepted", "fastest spec"))
        out += [f"### {markdown_cell(prompt_title(group))}", "", table_row(headers),
                table_row(["---"] * len(headers)), *[table_row(r) for r in kept], ""]
        note = dropped_note(dropped)
        if note:
            out += [*wrap(note), ""]
    if out:
        out += wrap(f"_{markdown_cell(prompt_legend(groups))}_")
    return out


def escape(text: object) -> str:
    """Text from a recording in HTML: escaped, no control or bidi character (as the report's own)."""
    return html.escape(plain(text, newlines=True))


def prompt_html(groups: Sequence[Mapping[str, Any]]) -> str:
    """Each load's table as HTML (every cell escaped: labels come from a recording), then the legend."""
    out = ""
    for group in groups:
        out += (f"<h2>{escape(prompt_title(group))}</h2>\n<table><thead><tr>"
                + "".join(f"<th>{escape(h)}</th>" for h in HEADERS) + "</tr></thead><tbody>"
                + "".join("<tr>" + "".join(f"<td>{escape(c)}</td>" for c in row) + "</tr>" for row in prompt_rows(group))
                + "</tbody></table>\n")
    if out:
        out += f'<p class="legend">{escape(prompt_legend(groups))}</p>\n'
    return out
