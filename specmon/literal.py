"""Untrusted text shown literally: the one way text from a log, a server, a host, a file name
or a config value reaches a screen, a terminal or an output file.

Such text is data. It must never act as markup (``[/pytorch/…]`` broke Textual's markup
parser; ``[@click=app.quit]`` would become an action), as a terminal escape (``ESC [2J``,
8-bit ``CSI``), as a bidi override that reorders what is read (U+202E, U+2066…), or as
formatting in a Markdown or CSV file. :func:`plain` neutralises the characters; the
format helpers (:func:`markdown_text`, :func:`markdown_cell`, :func:`csv_cell`) add what
their format needs on top. The UI wraps :func:`plain` in ``specmon.ui.literal``.

Everything neutralised stays visible: a C0 control becomes its Unicode control picture
(``ESC`` → ``␛``), anything else its code point (``<U+202E>``), so what the server wrote
can still be read and reported.
"""

from __future__ import annotations

import re
import unicodedata

__all__ = ["csv_cell", "markdown_cell", "markdown_code_block", "markdown_code_span", "markdown_text", "plain"]

#: Bidi embeddings, overrides, isolates and marks: they reorder what follows on screen.
BIDI = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
#: Format characters kept: the joiners that scripts (Persian, Indic) and emoji sequences need.
_KEPT_FORMAT = frozenset("\u200c\u200d")

_cache: dict[str, str] = {}


def _neutral(ch: str) -> str:
    code = ord(ch)
    if code < 0x20:
        return chr(0x2400 + code)  # the control picture: ␛ ␀ ␍ …
    if code == 0x7F:
        return "\u2421"  # ␡
    return f"<U+{code:04X}>"


def _dangerous(ch: str) -> bool:
    if ch in BIDI:
        return True
    cat = unicodedata.category(ch)
    # Cc: C0/C1 controls and DEL; Cs: lone surrogates (from surrogateescape'd file names), which
    # no terminal encoding can write; Zl/Zp: line and paragraph separators that break a line.
    return cat in ("Cc", "Cs", "Zl", "Zp") or (cat == "Cf" and ch not in _KEPT_FORMAT)


# A fast pre-check: most text is plain printable ASCII and needs nothing.
_SAFE_ASCII = re.compile(r"[\x20-\x7e]*")


def plain(text: object, *, newlines: bool = False) -> str:
    """``text`` with every control, bidi and format character made visible and inert.

    Args:
        text: Anything (``str()`` is taken): a log line, an exception, a path.
        newlines: Keep ``\\n`` as a line break (multi-line surfaces: notifications,
            full-screen views); otherwise it becomes ``␊`` like any control.

    Tabs become one space (a tab's width depends on where it lands). The result is
    idempotent: ``plain(plain(x)) == plain(x)``.
    """
    s = text if isinstance(text, str) else str(text)
    if _SAFE_ASCII.fullmatch(s):
        return s
    out = []
    for ch in s:
        if ch == "\n" and newlines:
            out.append(ch)
        elif ch == "\t":
            out.append(" ")
        elif ch.isascii() and " " <= ch <= "~":
            out.append(ch)
        else:
            hit = _cache.get(ch)
            if hit is None:
                hit = _neutral(ch) if _dangerous(ch) else ch
                if len(_cache) < 4096:
                    _cache[ch] = hit
            out.append(hit)
    return "".join(out)


# Characters Markdown (CommonMark and GitHub's) gives a meaning to anywhere in a line: code
# spans, emphasis, links and images, table pipes, strikethrough, HTML tags and entities.
_MD_INLINE = re.compile(r"[\\`*_\[\]|~]")
_MD_HTML = {"<": "&lt;", ">": "&gt;", "&": "&amp;"}
# ... and at the start of a line: headings, lists, quotes, setext underlines, ordered lists.
_MD_LEAD = re.compile(r"^(\s*)([#+=-])|^(\s*\d+)([.)])(?=\s|$)")


def markdown_text(text: object) -> str:
    """``text`` as literal Markdown inline text: no HTML, no emphasis, no links, no code spans.

    Every character Markdown could read as syntax is backslash-escaped (``<``, ``>`` and ``&``
    become HTML entities, which no renderer turns back into a tag); a newline becomes a
    space, so the text stays in its paragraph, list item or table cell (``|`` is escaped too).
    """
    # Four leading blanks made an indented code block that showed nothing of the text (found by
    # hypothesis: "    <script>…"): the first is written as an entity, which is no indentation.
    s = markdown_cell(text)
    if s.startswith(" "):
        return "&#32;" + s[1:]
    return _MD_LEAD.sub(lambda m: (m.group(1) or m.group(3) or "") + "\\" + (m.group(2) or m.group(4)), s, count=1)


def markdown_cell(text: object) -> str:
    """``text`` for one cell of a Markdown table, or inline after other text: pipes, HTML,
    emphasis, code spans and links escaped, one line (a cell never starts a block, so a
    leading ``-`` or ``1.`` stays as written)."""
    s = plain(text).replace("\u240a", " ")
    s = _MD_INLINE.sub(lambda m: "\\" + m.group(), s)
    return re.sub(r"[<>&]", lambda m: _MD_HTML[m.group()], s)


def markdown_code_span(text: object) -> str:
    """``text`` as inline code that shows every character as written (one line): the
    backtick fence is longer than any run inside, padded when the text starts or ends with one."""
    body = plain(text)
    longest = max((len(m) for m in re.findall(r"`+", body)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if body.startswith("`") or body.endswith("`") or not body.strip() else ""
    return f"{fence}{pad}{body}{pad}{fence}"


def markdown_code_block(lines: list[str]) -> list[str]:
    """``lines`` as a fenced code block that no line can close: the fence is longer than any
    run of backticks inside (CommonMark), and every line is :func:`plain`."""
    body = [plain(line) for line in lines]
    longest = max((len(m) for line in body for m in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return [fence, *body, fence]


#: A leading character that makes a spreadsheet read a cell as a formula (CSV injection).
_FORMULA_START = ("=", "+", "-", "@", "\uff1d", "\uff0b", "\uff0d", "\uff20")
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?%?")


def csv_cell(value: object) -> object:
    """A CSV cell that a spreadsheet shows as text, never runs as a formula.

    Numbers (and ``None``) pass unchanged; text goes through :func:`plain` and, when it
    starts like a formula (``=``, ``+``, ``-``, ``@``, full-width forms too), gets a leading
    ``'`` (OWASP's advice). A negative number written as text (``-3.2``) stays a number.
    """
    if value is None or isinstance(value, (int, float)):
        return value
    s = plain(value)
    if s.startswith(_FORMULA_START) and not _NUMBER.fullmatch(s):
        return "'" + s
    return s
