"""Markdown and CSV outputs escape what their format needs (issue 34, item 8).

``summarize --format markdown`` and ``report --format markdown`` carried raw HTML and control
characters from log lines; a CSV cell starting with ``=`` runs as a formula in a spreadsheet.
Checked with a real CommonMark parser (markdown-it-py, GFM tables on) on generated text, and end
to end: a log whose crash line and algorithm name are hostile, through ``specmon summarize`` in
each format.
"""

from __future__ import annotations

import csv
import html
import io
import subprocess
import sys
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt

from specmon.literal import (
    BIDI,
    csv_cell,
    markdown_cell,
    markdown_code_block,
    markdown_code_span,
    markdown_text,
    plain,
)

PROJECT = Path(__file__).resolve().parents[2]
MD = MarkdownIt("commonmark").enable("table").enable("strikethrough")

PIECES = ["<script>alert(1)</script>", "<img src=x onerror=alert(1)>", "<!-- c -->", "&amp;", "&#60;", "|", "`",
          "``", "*", "**", "_", "~~", "[a](http://x)", "![i](http://x)", "<http://x>", "# ", "- ", "1. ", "> ",
          "\\", "\x1b[31m", "\u202e", "\x00", "\r", "\n", "\t", "=cmd|' /C calc'!A0", "+1", "-2", "@SUM(A1)", "="]
hostile = st.lists(st.one_of(st.sampled_from(PIECES), st.text(max_size=5)), min_size=1, max_size=8).map("".join)


def expected(text: str) -> str:
    """What a reader must see: the text with controls made visible, a newline as a space."""
    return plain(text).replace("\u240a", " ")


def inline_tokens(source: str) -> list[object]:
    tokens = MD.parse(source)
    return [child for t in tokens if t.children for child in t.children]


def rendered_text(source: str) -> str:
    """The text a Markdown reader sees in one paragraph (inline tokens' content joined)."""
    out = []
    for tok in inline_tokens(source):
        kind = tok.type  # type: ignore[attr-defined]
        assert kind in ("text", "softbreak", "strong_open", "strong_close", "em_open", "em_close"), kind
        out.append(tok.content if kind == "text" else "")  # type: ignore[attr-defined]
    return "".join(out)


@settings(max_examples=400, deadline=None)
@given(text=hostile, prefix=st.sampled_from(["", "**Verdict:** ", "- "]))
def test_markdown_text_is_read_back_as_exactly_the_text(text: str, prefix: str) -> None:
    source = prefix + markdown_text(text)
    html_out = MD.render(source)
    assert "<script" not in html_out and "<img" not in html_out and "<a " not in html_out
    seen = rendered_text(source)
    # A paragraph loses leading and trailing blanks; everything else arrives exactly.
    assert seen.strip() == (prefix.replace("**", "").removeprefix("- ") + expected(text)).strip()


@settings(max_examples=300, deadline=None)
@given(cells=st.lists(hostile, min_size=1, max_size=4))
def test_markdown_cells_stay_in_their_table_cells(cells: list[str]) -> None:
    header = "| " + " | ".join(f"h{i}" for i in range(len(cells))) + " |"
    rule = "|" + "|".join("---" for _ in cells) + "|"
    row = "| " + " | ".join(markdown_cell(c) for c in cells) + " |"
    tokens = MD.parse("\n".join([header, rule, row]))
    body = [t for t in tokens if t.type == "inline"][len(cells):]
    assert len(body) == len(cells)  # no pipe made a cell, no line left the table
    for tok, text in zip(body, cells, strict=True):
        assert all(c.type == "text" for c in tok.children or []), [c.type for c in tok.children or []]
        assert tok.content.replace("\\", "\x00") is not None
        assert "".join(c.content for c in tok.children or []) == expected(text).strip()


@settings(max_examples=200, deadline=None)
@given(lines=st.lists(hostile, min_size=1, max_size=5), text=hostile)
def test_code_blocks_and_spans_cannot_be_closed_from_inside(lines: list[str], text: str) -> None:
    body = [line.replace("\n", " ") for line in lines]
    tokens = MD.parse("\n".join(markdown_code_block(body)))
    assert [t.type for t in tokens] == ["fence"]
    assert tokens[0].content == "".join(plain(line) + "\n" for line in body)
    span = [c for c in inline_tokens(markdown_code_span(text))]
    assert [c.type for c in span] == ["code_inline"]  # type: ignore[attr-defined]


FORMULA = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")


@settings(max_examples=400, deadline=None)
@given(row=st.lists(st.one_of(hostile, st.integers(), st.floats(allow_nan=False)), min_size=1, max_size=5))
def test_csv_cells_are_never_formulas_nor_controls(row: list[object]) -> None:
    out = io.StringIO()
    csv.writer(out).writerow([csv_cell(c) for c in row])
    back = next(csv.reader(io.StringIO(out.getvalue())))
    for value, cell in zip(row, back, strict=True):
        if isinstance(value, (int, float)):
            assert cell == str(value)  # numbers are numbers still
            continue
        assert not any(ch in BIDI or (ord(ch) < 32 and ch != "\n") or 0x7F <= ord(ch) < 0xA0 for ch in cell)
        if cell.startswith(FORMULA):
            float(cell.rstrip("%"))  # only a number may start like a formula
        assert cell in (plain(value), "'" + plain(value))


def test_summarize_outputs_carry_no_html_no_controls_no_formulas(tmp_path: Path) -> None:
    """End to end: a crash line and an algorithm name written by an attacker, in every format."""
    log = (PROJECT / "tests" / "data" / "dashboard" / "crash_3step.log").read_text()
    evil = "<img src=x onerror=alert(1)> | `x` \x9b2J\x07\u202eevil =HYPERLINK(\"http://x\")"
    lines = log.splitlines()
    last = max(i for i, line in enumerate(lines) if line.startswith("torch.OutOfMemoryError"))
    lines[last] = f"torch.OutOfMemoryError: {evil}"
    path = tmp_path / "evil.log"
    path.write_text("\n".join(lines) + "\n")
    outputs = {}
    for fmt in ("markdown", "csv", "table", "json"):
        sweep = PROJECT / "tests" / "data" / "dashboard" / "sweep" / "sim_eagle3_2step.log"
        run = subprocess.run([sys.executable, "-m", "specmon", "summarize", str(sweep), str(path), "--format", fmt],
                             capture_output=True, text=True, timeout=120, cwd=PROJECT)
        assert run.returncode == 0, run.stderr
        outputs[fmt] = run.stdout
        assert not {"\x1b", "\x9b", "\x07", "\u202e"} & set(run.stdout), fmt
    md = outputs["markdown"]
    assert "evil" in md and "<img" not in md
    rendered = MD.render(md)
    assert "<img" not in rendered and html.escape("<img src=x onerror=alert(1)>") in rendered
    crash_rows = [r for r in csv.reader(io.StringIO(outputs["csv"])) if any("evil" in c for c in r)]
    assert crash_rows and all(not c.startswith(FORMULA) or c.lstrip("+-").replace(".", "").isdigit()
                              for r in crash_rows for c in r)
    assert "<U+009B>2J␇<U+202E>evil" in outputs["table"].replace("\n", "")
