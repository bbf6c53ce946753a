"""A parallel sweep's tables, from its JSON document: for ``sweep``'s output and for ``report``.

The settings (launches, tok/s, 95% interval over launches, how far the leader is ahead at the adjusted
level), the allocation (replicas × rounds, ``steps:tok/s`` of each launch) and the verdict. The
plain text fits 80 columns: the allocation is cut into blocks of rounds that do. Replica names
come from the profile: through :func:`plain` / :func:`markdown_text`, never markup.

Working from the document (:meth:`specmon.experiment.fleet_sweep.FleetSweepResult.to_json`), not
the live objects, is what lets a recording's report print what the sweep printed.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping, Sequence
from typing import Any

from specmon.literal import markdown_text, plain
from specmon.model.verdict import LEADER_MARK, WINNER_MARK, Answer, answer_from_json, pct_bound, tps_bound

WIDTH = 80
#: The settings' interval column: over launches (each replica's launch in a round, replica effects removed
#: or inside the launch spread), in the words of every other table (``CI (launch)``, as `?` says).
CI_HEADER = "95% CI (launch)"
_NAME_W = 12
#: A launch's cell: ``10:1234.5`` and the space before it (at 9, two such cells ran into one word).
_CELL_W = 10

KIND = "parallel-sweep"


def is_parallel(doc: object) -> bool:
    """Whether ``doc`` is a parallel sweep's document."""
    return isinstance(doc, Mapping) and doc.get("kind") == KIND


def _label(steps: Any) -> str:
    return "no speculation" if steps == 0 else f"{steps} step{'s' if steps != 1 else ''}"


def _num(x: Any, fmt: str) -> str:
    return format(x, fmt) if isinstance(x, (int, float)) else "—"


def verdict_answer(doc: Mapping[str, Any]) -> Answer | None:
    """The sweep's one verdict (:class:`~specmon.model.verdict.Answer`) as its document carries it
    (``verdict.answer``); None for a document written before it did."""
    v = doc.get("verdict")
    return answer_from_json(v) if isinstance(v, dict) and isinstance(v.get("answer"), dict) else None


def _marks(doc: Mapping[str, Any]) -> tuple[str, str]:
    """The leader's mark and the verdict's words, the :class:`~specmon.model.verdict.Answer`'s (★ a declared
    winner, ☆ leads, undecided); from the older fields for a document without one."""
    a = verdict_answer(doc)
    if a is not None:
        return a.mark, a.tag
    v = doc.get("verdict") or {}
    if v.get("winner_steps") is not None:
        return WINNER_MARK, f"{WINNER_MARK} winner"
    if v.get("leader_steps") is not None:
        return LEADER_MARK, f"{LEADER_MARK} leads, undecided"
    return "", "nothing measured yet"


def setting_rows(doc: Mapping[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """``(setting, launches, tok/s, 95% CI, leader ahead)`` per setting; the leader marked as every
    verdict marks it (★ a declared winner, ☆ leads, undecided)."""
    a = verdict_answer(doc)
    leader = (doc.get("verdict") or {}).get("leader_steps") if a is None else a.leader_steps
    mark = _marks(doc)[0]
    rows = []
    for s in doc.get("settings") or []:
        ci = s.get("ci95")
        ahead = s.get("leader_ahead_pct")
        ahead_text = ""
        if isinstance(ahead, list) and len(ahead) == 3 and isinstance(ahead[0], (int, float)):
            # Bounded as the sentences bound them: +6367.1% (-10004.5…+22738.8) took the row past 80.
            ahead_text = (f"{pct_bound(ahead[0])}% ({pct_bound(ahead[1])}…{pct_bound(ahead[2])})" if None not in ahead
                          else f"{pct_bound(ahead[0])}%")
        rows.append(((f"{mark} " if mark and s.get("steps") == leader else "") + _label(s.get("steps")),
                     str(s.get("launches", 0)),
                     _num(s.get("tok_s"), ".1f"),
                     f"{tps_bound(ci[0], sign=False)}–{tps_bound(ci[1], sign=False)}"
                     if isinstance(ci, list) and len(ci) == 2 else "—", ahead_text))
    return rows


def _level(doc: Mapping[str, Any]) -> str:
    level = (doc.get("verdict") or {}).get("level")
    return f"{100 * level:.1f}%" if isinstance(level, (int, float)) else "adjusted"


def _rounds(doc: Mapping[str, Any]) -> tuple[int, dict[tuple[str, int], Mapping[str, Any]]]:
    cells = {(str(x.get("replica")), int(x.get("round", 0))): x for x in doc.get("launches") or []}
    return max((k for _, k in cells), default=0), cells


def _cell(x: Mapping[str, Any] | None) -> str:
    if x is None:
        return "·"
    if x.get("ok") and isinstance(x.get("tok_s"), (int, float)):
        return f"{x.get('steps')}:{x['tok_s']:.1f}"
    return f"{x.get('steps')}:x"


def allocation_lines(doc: Mapping[str, Any]) -> list[str]:
    """Replicas × rounds, ``steps:tok/s`` per launch (``x``: failed), in blocks that fit 80 columns.

    The name column is as wide as the longest replica name (a profile's ``gpu-node-12.rack3`` was cut
    at 11 characters), up to what leaves one round beside it."""
    rounds, cells = _rounds(doc)
    names = [plain(n) for n in doc.get("replicas") or []]
    name_w = min(max((len(n) + 1 for n in names), default=_NAME_W), WIDTH - _CELL_W)
    name_w = max(name_w, _NAME_W)
    per_block = max(1, (WIDTH - name_w) // _CELL_W)
    out = ["allocation (steps:tok/s per launch; x = failed)"]
    for first in range(1, rounds + 1, per_block):
        block = range(first, min(rounds, first + per_block - 1) + 1)
        out.append(f"{'replica':<{name_w}}" + "".join(f"{'round ' + str(k):>{_CELL_W}}" for k in block))
        for name in doc.get("replicas") or []:
            row = f"{plain(name)[:name_w - 1]:<{name_w}}"
            row += "".join(" " + f"{_cell(cells.get((str(name), k))):>{_CELL_W - 1}}" for k in block)
            out.append(row)
    return out


def failure_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per launch that failed, with why."""
    return [f"failed: {x.get('replica')} round {x.get('round')} ({_label(x.get('steps'))}): {x.get('text')}"
            for x in doc.get("launches") or [] if not x.get("ok")]


def left_out_lines(doc: Mapping[str, Any]) -> list[str]:
    """One line per round whose look took settings out of the rotation (why a later round holds fewer);
    none for a document written before rounds were recorded."""
    out = []
    for r in doc.get("rounds") or []:
        gone = [x for x in r.get("left_out") or [] if isinstance(x, Mapping)]
        if gone:
            out.append(f"after round {r.get('round')}: left out of the later rounds: "
                       + "; ".join(f"{_label(x.get('steps'))} ({x.get('why')})" for x in gone))
    return out


def text_report(doc: Mapping[str, Any], left: Sequence[str] = ()) -> str:
    """The whole plain-text answer, 80 columns wide."""
    head = (f"specmon parallel sweep: {len(doc.get('replicas') or [])} replicas, concurrency "
            f"{doc.get('concurrency')}, {doc.get('rounds_run')} of {doc.get('rounds_planned')} rounds, "
            f"layout seed {doc.get('seed')}")
    lines = textwrap.wrap(head, WIDTH) + [""]
    lines.append(f"{'setting':<17}{'launches':>8}{'tok/s':>9}  {CI_HEADER:<15}  leader ahead ({_level(doc)})")
    lines += [f"{a:<17}{b:>8}{c:>9}  {d:<15}  {e}".rstrip() for a, b, c, d, e in setting_rows(doc)]
    lines += ["", *allocation_lines(doc), ""]
    lines += textwrap.wrap(f"Verdict ({_marks(doc)[1]}): " + plain((doc.get("verdict") or {}).get("sentence", "")),
                           WIDTH, break_long_words=False, break_on_hyphens=False)
    for text in [*left_out_lines(doc), *failure_lines(doc), *left]:
        lines += textwrap.wrap(plain(text), WIDTH, subsequent_indent="  ")
    return "\n".join(lines) + "\n"


def markdown_lines(doc: Mapping[str, Any]) -> list[str]:
    """The settings and the allocation as Markdown tables (no verdict: the caller places it)."""
    out = [f"| setting | launches | tok/s | {CI_HEADER} | leader ahead ({_level(doc)}) |", "|---|---:|---:|---|---|"]
    out += ["| " + " | ".join(markdown_text(c) for c in row) + " |" for row in setting_rows(doc)]
    rounds, cells = _rounds(doc)
    out += ["", "| replica | " + " | ".join(f"round {k}" for k in range(1, rounds + 1)) + " |",
            "|---|" + "---:|" * rounds]
    for name in doc.get("replicas") or []:
        out.append(f"| {markdown_text(name)} | "
                   + " | ".join(markdown_text(_cell(cells.get((str(name), k)))) for k in range(1, rounds + 1)) + " |")
    out += ["", "_steps:tok/s of each launch; x: its start failed._"]
    out += [f"- {markdown_text(t)}" for t in [*left_out_lines(doc), *failure_lines(doc)]]
    return out


def markdown_report(doc: Mapping[str, Any], left: Sequence[str] = ()) -> str:
    """``sweep --format markdown``: heading, tables, verdict, what is left running."""
    out = [f"### Parallel sweep: {len(doc.get('replicas') or [])} replicas, concurrency {doc.get('concurrency')}",
           "", *markdown_lines(doc), "",
           f"**Verdict ({_marks(doc)[1]}):** {markdown_text((doc.get('verdict') or {}).get('sentence', ''))}"]
    out += [f"- {markdown_text(t)}" for t in left]
    return "\n".join(out) + "\n"
