"""Reading and setting flags in a server's command line: what the engines' adoption rules are written in.

An adopted server is restarted with its own command line, with only its speculative
flags changed. These helpers read a flag's values (``--flag value`` and ``--flag=value``,
``_`` and ``-`` alike, as argparse reads them) and set them in place, keeping each
occurrence's form; JSON-valued flags (vLLM's ``--speculative-config``) are rewritten
through the JSON. Pure: lists of strings in, lists of strings out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass


class ArgvError(ValueError):
    """A command line that cannot be read or rewritten as asked; the message says why."""


@dataclass(frozen=True, slots=True)
class SpecSettings:
    """The speculative settings an argv asks for.

    Attributes:
        steps: Step count (vLLM: ``num_speculative_tokens``); 0 when the server
            runs without speculation; ``None`` when speculation is on but the
            engine picks the count itself (SGLang without the flag).
        draft_tokens: SGLang's ``--speculative-num-draft-tokens``, if given.
        topk: SGLang's ``--speculative-eagle-topk``, if given.
        method: ``--speculative-algorithm`` (SGLang) or the config's ``method``.
    """

    steps: int | None
    draft_tokens: int | None = None
    topk: int | None = None
    method: str | None = None


def split_flag(token: str) -> tuple[str, str | None]:
    """``--a_b=1`` -> (``--a-b``, ``1``); ``--a-b`` -> (``--a-b``, None)."""
    name, eq, value = token.partition("=")
    return name.replace("_", "-"), (value if eq else None)


def flag_values(argv: Sequence[str], flag: str) -> list[str]:
    """Every value ``flag`` is given, in order."""
    values = []
    for i, tok in enumerate(argv):
        if not tok.startswith("--"):
            continue
        name, inline = split_flag(tok)
        if name != flag:
            continue
        if inline is not None:
            values.append(inline)
        elif i + 1 < len(argv):
            values.append(argv[i + 1])
    return values


def last_int(argv: Sequence[str], flag: str) -> int | None:
    """The last value of ``flag`` as a whole number (argparse keeps the last), or None."""
    values = flag_values(argv, flag)
    if not values:
        return None
    if not re.fullmatch(r"[0-9]+", values[-1]):
        raise ArgvError(f"{flag} has a value that is not a number: {values[-1]!r}")
    return int(values[-1])


def load_json_flag(flag: str, text: str) -> dict[str, object]:
    """A JSON-object flag value."""
    try:
        conf = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ArgvError(f"{flag} is not valid JSON ({exc.msg}): {text[:80]!r}") from None
    if not isinstance(conf, dict):
        raise ArgvError(f"{flag} is not a JSON object")
    return conf


def set_flag(argv: list[str], flag: str, value: str, *, add: bool) -> bool:
    """Set every occurrence of ``flag`` to ``value`` (keeping ``=`` or separate form); True if any."""
    hit = False
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            name, inline = split_flag(tok)
            if name == flag:
                hit = True
                if inline is not None:
                    argv[i] = tok.partition("=")[0] + "=" + value
                elif i + 1 < len(argv):
                    argv[i + 1] = value
                    i += 1
                else:
                    argv.append(value)
        i += 1
    if not hit and add:
        argv += [flag, value]
    return hit


_SENTINEL = "__specmon_value__"


def set_json_key(argv: list[str], flag: str, key: str, value_text: str) -> bool:
    """Set ``key`` to the JSON text ``value_text`` in every JSON value of ``flag``; True if any.

    The value is put in as text (a placeholder such as ``{steps}`` stays a placeholder):
    the object is re-serialised around a sentinel, which is then replaced.
    """
    def rewrite(text: str) -> str:
        conf = load_json_flag(flag, text)
        if _SENTINEL in text:
            raise ArgvError(f"{flag} holds specmon's own marker text")
        conf[key] = _SENTINEL
        return json.dumps(conf).replace(json.dumps(_SENTINEL), value_text)

    hit = False
    for i, tok in enumerate(argv):
        if not tok.startswith("--"):
            continue
        name, inline = split_flag(tok)
        if name != flag:
            continue
        hit = True
        if inline is not None:
            argv[i] = tok.partition("=")[0] + "=" + rewrite(inline)
        elif i + 1 < len(argv):
            argv[i + 1] = rewrite(argv[i + 1])
    return hit


def strip_flags(argv: Sequence[str], pattern: re.Pattern[str]) -> list[str]:
    """``argv`` without every flag whose name ``pattern`` matches, and its value."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        tok = argv[i]
        if tok.startswith("--"):
            name, inline = split_flag(tok)
            if pattern.match(name):
                # A value follows unless it is inline or the next token is a flag.
                if inline is None and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                    i += 1
                i += 1
                continue
        out.append(tok)
        i += 1
    return out
