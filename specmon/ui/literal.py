"""Untrusted text on the dashboard, shown literally: never markup, never a terminal escape.

Textual reads a plain ``str`` as markup in many places: ``App.notify`` (by default), a
``Static`` without ``markup=False``, border titles, command-palette entries, DataTable
cells given as ``str``. A log line such as ``[/pytorch/…/ProcessGroupNCCL.cpp:3356] NCCL
error`` raised ``MarkupError`` there and ended the app; ``[rank0]:`` vanished as a style
and ``[@click=app.quit]`` became an action. Every widget, screen and flow that shows text
from a log, a server, a host, a file name or a config value goes through these helpers,
which all rest on :func:`specmon.literal.plain` (control and bidi characters made visible).
"""

from __future__ import annotations

from textual.content import Content

from specmon.literal import plain

__all__ = ["literal", "markup_escaped", "plain", "styled"]


def literal(text: object, *, newlines: bool = False) -> Content:
    """``text`` as content shown exactly as written (for ``Static``, ``update``, border titles).

    ``newlines``: keep line breaks (a multi-line body); otherwise ``\\n`` shows as ``␊``.
    """
    return Content(plain(text, newlines=newlines))


def styled(text: object, style: str) -> tuple[str, str]:
    """A ``(text, style)`` part for ``Content.assemble``: the text literal, the style ours."""
    return plain(text), style


def markup_escaped(text: object) -> str:
    """``text`` for the Textual APIs that only take a markup string (command-palette entries).

    Only ``[`` opens a tag; ``\\[`` is a literal bracket, whatever precedes it (a property
    test checks the round trip). ``textual.markup.escape`` is not used: it leaves
    ``[$accent]`` a style and doubles backslashes.
    """
    return plain(text).replace("[", "\\[")
