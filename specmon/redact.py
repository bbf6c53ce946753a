"""Secret values hidden from what specmon shows and stores: names kept, values replaced.

A launch profile's ``env`` may hold ``HF_TOKEN``, a server's command line
``--api-key``; a failed start's log tail repeats them (SGLang prints its whole
``ServerArgs``). Whatever specmon keeps (the sweep state, the event log, a
recording's restart entries) or shows (the confirmation screen) goes through
here first:

- :func:`is_secret_name`: an environment name that may hold a secret (its value is never shown);
- :func:`redact_argv`: a command line with the values of secret flags (``--api-key X``,
  ``--hf-token=X``) replaced;
- :func:`redact_text`: free text (log lines, messages) with ``NAME=value``,
  ``name: value``, ``--flag value`` and ``name='value'`` hidden wherever the name looks
  secret, ``Bearer`` credentials and well-known token shapes (``hf_...``, ``sk-...``)
  hidden, and any literal value given in ``known`` (the profile's own secret values)
  hidden wherever it appears.

Over-hiding is cheaper than a leak: ``--key-file x`` loses its value too. Counts
(``max_tokens``, ``#token: 12``) are not secrets and are left alone.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Sequence

__all__ = ["MASK", "SECRET_NAME_GLOBS", "is_secret_flag", "is_secret_name", "redact_argv", "redact_line",
           "redact_text"]

#: What a hidden value is replaced with.
MASK = "***"

#: Environment names (upper-cased, shell glob syntax) whose values are secrets:
#: never shown, and never read from a running server (adopt.py filters on the
#: host with these same patterns).
SECRET_NAME_GLOBS: tuple[str, ...] = (
    "*TOKEN*", "*SECRET*", "*PASSW*", "*PASS", "*KEY*", "*CREDENTIAL*",
    "*AUTH*", "*COOKIE*", "*PRIVATE*", "*SESSION*",
)

# A name (flag, variable, keyword argument) that holds a secret: one of these words inside an
# identifier. "tokens" (a count) and "tokenizer" (a path) are not secrets.
_WORD = r"(?:token(?!s|izer)|secret|passw(?:or)?d?|passphrase|credential|auth|cookie|private|api[_-]?key|key)"
_NAME = rf"[A-Za-z0-9_.-]*{_WORD}[A-Za-z0-9_.-]*"
# A value: quoted, or a run of characters up to a separator.
_VALUE = r"""(?:'[^'\n]*'|"[^"\n]*"|[^\s'",;)\]}]+)"""

_PATTERNS: tuple[re.Pattern[str], ...] = (
    # --api-key=X, --hf-token X, '--api-key', 'X' (a Python list of argv), -token X
    re.compile(rf"""(?i)(?<![\w-])(-{{1,2}}{_NAME})(=|['"]?,?\s+['"]?)(?!-)({_VALUE})"""),
    # HF_TOKEN=X, api_key='X', "api_key": "X", token: X, Authorization: X
    re.compile(rf"""(?i)(?<![\w.#-])(["']?{_NAME}["']?)(\s*[=:]\s*)(?!{re.escape(MASK)})({_VALUE})"""),
    # Authorization: Bearer X
    re.compile(r"(?i)(\b(?:bearer|basic))(\s+)([A-Za-z0-9._~+/=-]{8,})"),
    # Token shapes that mean a secret wherever they stand.
    re.compile(r"()()(\b(?:hf_[A-Za-z0-9]{20,}|sk-[A-Za-z0-9_-]{20,}|gh[pousr]_[A-Za-z0-9]{20,}"
               r"|xox[abpr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16})\b)"),
)


def is_secret_name(name: str) -> bool:
    """True when an environment variable called ``name`` may hold a secret."""
    upper = name.upper()
    return any(fnmatch.fnmatchcase(upper, glob) for glob in SECRET_NAME_GLOBS)


_FLAG_RE = re.compile(rf"(?i)-{{1,2}}{_NAME}")


def is_secret_flag(flag: str) -> bool:
    """True when a command-line flag (``--api-key``, ``--hf-token``) takes a secret as its value."""
    return _FLAG_RE.fullmatch(flag) is not None


def redact_argv(argv: Sequence[str]) -> list[str]:
    """``argv`` with the values of secret flags replaced by :data:`MASK` (``--api-key=***``, ``--token ***``).

    A secret flag followed by another flag (``--api-key --port``) has no value to hide.
    """
    out = list(argv)
    for i, token in enumerate(out):
        flag, eq, _ = token.partition("=")
        if not is_secret_flag(flag):
            continue
        if eq:
            out[i] = f"{flag}={MASK}"
        elif i + 1 < len(out) and not out[i + 1].startswith("--"):
            out[i + 1] = MASK
    return out


def redact_text(text: str, known: Iterable[str] = ()) -> str:
    """``text`` with secret values hidden (see the module docstring); names and everything else kept.

    Args:
        text: A log line, a message, a multi-line tail.
        known: Literal secret values (a profile's secret ``env`` values): hidden wherever they appear.
            Values shorter than 4 characters are ignored (hiding every ``1`` would hide the numbers).
    """
    for value in sorted({v for v in known if len(v) >= 4}, key=len, reverse=True):
        text = text.replace(value, MASK)
    for pattern in _PATTERNS:
        text = pattern.sub(_mask, text)
    return text


# Whatever _PATTERNS can hide, these words find first: a line without any is returned as it is.
# Log lines come by the tens of thousands a second, and one case-blind regex of all of them took
# 25 us on a decode line where a lower() and substring checks take 2 (measured). SGLang's decode
# lines all say "#token:", "token usage" and "(token/s)", which no pattern hides: a line whose
# every "token" is one of those is let by too (never one inside a longer name: "-0token usage" is
# a flag and its value).
_WORDS = ("secret", "passw", "passphrase", "credential", "auth", "cookie", "private", "key", "bearer", "basic",
          "hf_", "sk-", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "xox", "akia")
_HARMLESS_TOKEN = re.compile(r"(?<![A-Za-z0-9_.-])token(?:s|izer|/s| usage)|(?<=#)token(?=:)")


def _suspect(text: str) -> bool:
    low = text.lower()
    if any(w in low for w in _WORDS):
        return True
    return "token" in low and low.count("token") != len(_HARMLESS_TOKEN.findall(low))


def redact_line(text: str) -> str:
    """:func:`redact_text` of one log line, fast for the lines that hold nothing to hide (most)."""
    return redact_text(text) if _suspect(text) else text


def _mask(m: re.Match[str]) -> str:
    value = m.group(3)
    if value == MASK or value.strip("'\"") == MASK:
        return m.group(0)
    quote = value[0] if value[:1] in ("'", '"') and len(value) > 1 and value[-1] == value[0] else ""
    return f"{m.group(1)}{m.group(2)}{quote}{MASK}{quote}"
