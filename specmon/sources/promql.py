"""PromQL for a Prometheus-backed fleet: the profile's selector checked, the queries written, the answers read.

A fleet profile names its replicas with a PromQL label-matcher set (``selector =
'{job="vllm"}'``). That text comes from a config file and ends up inside queries sent to
the user's Prometheus, so it is never pasted in: :func:`parse_selector` reads it into
matchers (a label name, an operator, a value) and refuses anything else, and
:meth:`Selector.promql` writes it again from those parts, quoting every value itself. The
queries (:func:`fleet_queries`) take the counter names from the engine modules
(:data:`specmon.engines.ADAPTERS`) and leave the rates to Prometheus: one query per figure
for every instance at once, ``by (instance)``.

Pure: no I/O. :mod:`specmon.sources.prometheus_fleet` sends the queries.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

from specmon.engines import ADAPTERS
from specmon.records import Engine

__all__ = [
    "MAX_INSTANCE_TEXT", "MAX_MATCHERS", "MAX_SELECTOR_CHARS", "FleetQuery", "Matcher", "PromAnswerError",
    "Selector", "fleet_queries", "parse_duration", "parse_selector", "parse_vector",
]

#: Longest selector accepted (a real one is a few dozen characters).
MAX_SELECTOR_CHARS = 1000
#: Most matchers in one selector.
MAX_MATCHERS = 16
#: An instance label longer than this is cut (it is shown in a table cell and used as a key).
MAX_INSTANCE_TEXT = 200

# Prometheus 2's label names (3's quoted UTF-8 names are not accepted: a plain name is what a scrape
# config's labels are).
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("=~", "!~", "!=", "=")
_SPACE = re.compile(r"\s*")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_DURATION = re.compile(r"([1-9][0-9]{0,5})(s|m|h)")
_UNIT_S = {"s": 1, "m": 60, "h": 3600}


@dataclass(frozen=True, slots=True)
class Matcher:
    """One label matcher: ``name op "value"`` (``op``: ``=``, ``!=``, ``=~``, ``!~``)."""

    name: str
    op: str
    value: str

    def promql(self) -> str:
        """The matcher as PromQL, its value double-quoted with backslashes and quotes escaped."""
        quoted = self.value.replace("\\", "\\\\").replace('"', '\\"')
        return f'{self.name}{self.op}"{quoted}"'


@dataclass(frozen=True, slots=True)
class Selector:
    """A checked label-matcher set (``{job="vllm"}``); :meth:`promql` is the only text that reaches a query."""

    matchers: tuple[Matcher, ...] = ()

    def promql(self) -> str:
        """``{job="vllm",instance=~"gpu-.*"}``, written from the parsed parts."""
        return "{" + ",".join(m.promql() for m in self.matchers) + "}"

    def __str__(self) -> str:
        return self.promql()


def _string(text: str, at: int) -> tuple[str, int]:
    """A PromQL string literal at ``text[at]``: its value and the index after it.

    Double and single quotes take the escapes ``\\\\``, ``\\"`` and ``\\'`` (enough for a regex's
    backslashes); backticks are raw. Other escapes are refused rather than guessed at.
    """
    quote = text[at]
    if quote not in "\"'`":
        raise ValueError(f"expected a quoted value at character {at + 1}")
    out: list[str] = []
    i = at + 1
    while i < len(text):
        c = text[i]
        if c == quote:
            return "".join(out), i + 1
        if c == "\\" and quote != "`":
            nxt = text[i + 1] if i + 1 < len(text) else ""
            if nxt not in ("\\", '"', "'"):
                raise ValueError(f"unsupported escape \\{nxt} at character {i + 1} (use \\\\ for a backslash)")
            out.append(nxt)
            i += 2
            continue
        out.append(c)
        i += 1
    raise ValueError(f"unterminated quoted value starting at character {at + 1}")


def parse_selector(text: str) -> Selector:
    """Read a label-matcher set such as ``{job="vllm", instance=~"gpu-.*:8000"}``.

    Only ``{`` matchers ``}`` is accepted: no metric name, no function, no range, no second
    expression; each matcher is a label name, one of ``= != =~ !~`` and a quoted value.
    ``__name__`` is refused (the metric names are the engines').

    Raises:
        ValueError: with a sentence saying what is wrong and where.
    """
    if not isinstance(text, str):
        raise ValueError("selector must be a string such as '{job=\"vllm\"}'")
    if len(text) > MAX_SELECTOR_CHARS:
        raise ValueError(f"selector is longer than {MAX_SELECTOR_CHARS} characters")
    if _CONTROL.search(text):
        raise ValueError("selector must not contain control characters")
    i = _SPACE.match(text, 0).end()  # type: ignore[union-attr]
    if i >= len(text) or text[i] != "{":
        raise ValueError("selector must be a label-matcher set in braces such as '{job=\"vllm\"}' "
                         "(no metric name, function or range: specmon writes the queries)")
    i += 1
    matchers: list[Matcher] = []
    while True:
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if i < len(text) and text[i] == "}":
            i += 1
            break
        name = _NAME.match(text, i)
        if name is None:
            raise ValueError(f"expected a label name at character {i + 1}")
        if name.group() == "__name__":
            raise ValueError("selector must not match __name__: specmon queries the engines' own metric names")
        i = _SPACE.match(text, name.end()).end()  # type: ignore[union-attr]
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is None:
            raise ValueError(f"expected = != =~ or !~ after {name.group()!r} at character {i + 1}")
        i = _SPACE.match(text, i + len(op)).end()  # type: ignore[union-attr]
        if i >= len(text):
            raise ValueError(f"missing value for {name.group()!r}")
        value, i = _string(text, i)
        matchers.append(Matcher(name.group(), op, value))
        if len(matchers) > MAX_MATCHERS:
            raise ValueError(f"selector has more than {MAX_MATCHERS} matchers")
        i = _SPACE.match(text, i).end()  # type: ignore[union-attr]
        if i < len(text) and text[i] == ",":
            i += 1
            continue
        if i < len(text) and text[i] == "}":
            i += 1
            break
        raise ValueError(f"expected ',' or '}}' at character {i + 1}")
    if text[i:].strip():
        raise ValueError(f"unexpected text after the closing brace: {text[i:].strip()[:40]!r}")
    return Selector(tuple(matchers))


def parse_duration(text: str) -> int:
    """A PromQL range such as ``30s``, ``1m``, ``2h``: its seconds (1 s to 1 day; one unit only).

    Raises:
        ValueError: not such a duration.
    """
    m = _DURATION.fullmatch(text.strip()) if isinstance(text, str) else None
    if m is None:
        raise ValueError(f"not a duration such as \"1m\" or \"30s\": {text!r}")
    seconds = int(m.group(1)) * _UNIT_S[m.group(2)]
    if not 1 <= seconds <= 86_400:
        raise ValueError(f"a rate window must lie between 1s and 24h, not {text!r}")
    return seconds


# -- the queries ---------------------------------------------------------------------------------------



@dataclass(frozen=True, slots=True)
class FleetQuery:
    """One query of a poll: which engine and figure it gives, and its PromQL."""

    engine: Engine
    figure: str  # "tps", "accept_len", "accept_rate", "spec_tokens", or "up" (engine: UNKNOWN)
    expr: str


def _rate(name: str, sel: str, window: str) -> str:
    return f"sum by (instance) (rate({name}{sel}[{window}]))"


def fleet_queries(selector: Selector, window_s: int, engine: Engine | None = None) -> tuple[FleetQuery, ...]:
    """The queries of one poll: per engine with counters, tok/s, accept length, accept rate (and its
    draft-token setting where its counters tell it), then ``up`` for the targets' scrape state.

    Args:
        selector: The fleet's replicas.
        window_s: The rate window, in seconds.
        engine: Only this engine's counters (None: every engine that exports counters).
    """
    sel, window = selector.promql(), f"{int(window_s)}s"
    out: list[FleetQuery] = []
    for ad in ADAPTERS:
        c = ad.counters
        if c is None or (engine is not None and ad.engine is not engine):
            continue
        accepted = _rate(c.accepted, sel, window)
        tps = _rate(c.gen, sel, window)
        if c.gen_seconds is not None:
            # The engine times its own generation (llama.cpp's per-stream decode speed, a request
            # decode-time sum): tok/s is tokens over those seconds, as its log and specmon's
            # one-server counters say it, not over wall time (first tokens left out where the
            # seconds leave them out).
            timed = f"({tps} - {_rate(c.gen_requests, sel, window)})" if c.gen_requests else tps
            tps = f"{timed} / {_rate(c.gen_seconds, sel, window)}"
        out.append(FleetQuery(ad.engine, "tps", tps))
        if c.drafts is not None:
            out.append(FleetQuery(ad.engine, "accept_len", f"1 + {accepted} / {_rate(c.drafts, sel, window)}"))
        elif c.per_position and c.drafted_per_position:
            # Drafts counted by position: every draft drafts the first one; the accepted tokens of
            # the same (finished) requests are the per-position series summed.
            first = Selector((*selector.matchers, Matcher(c.position_label, "=", "0"))).promql()
            out.append(FleetQuery(ad.engine, "accept_len", f"1 + {_rate(c.per_position, sel, window)} / "
                                                           f"{_rate(c.drafted_per_position, first, window)}"))
        out.append(FleetQuery(ad.engine, "accept_rate", f"{accepted} / {_rate(c.draft_tokens, sel, window)}"))
        if c.per_position and ad.positions_from_start:  # counting them gives the setting
            # Distinct positions per instance (a data-parallel server has one series per engine and position).
            out.append(FleetQuery(ad.engine, "spec_tokens",
                                   f"count by (instance) (count by (instance, {c.position_label}) ({c.per_position}{sel}))"))
    # up{...} holds the targets' scrape state when the selector names target labels (job, instance).
    out.append(FleetQuery(Engine.UNKNOWN, "up", f"up{sel}"))
    return tuple(out)


# -- the answers ----------------------------------------------------------------------------------------

class PromAnswerError(ValueError):
    """An answer of ``/api/v1/query`` that is an error or not the shape of one."""


def parse_vector(answer: Any, *, limit: int = 10_000) -> dict[str, float | None]:
    """An instant-vector answer as {instance label: value}; a value that is NaN or infinite is None.

    Series without an instance label are keyed ``""``; a label longer than
    :data:`MAX_INSTANCE_TEXT` is cut (with ``…``). At most ``limit`` series are read.

    Raises:
        PromAnswerError: Prometheus said error (its message, cut), or the JSON is not a vector answer.
    """
    if not isinstance(answer, dict):
        raise PromAnswerError("the answer is not a JSON object")
    if answer.get("status") != "success":
        error = str(answer.get("error") or answer.get("status") or "no message")[:300]
        raise PromAnswerError(f"Prometheus refused the query: {error}")
    data = answer.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise PromAnswerError("the answer is not an instant vector")
    out: dict[str, float | None] = {}
    for series in data["result"][:limit]:
        if not isinstance(series, dict):
            raise PromAnswerError("a series of the answer is not an object")
        metric, value = series.get("metric"), series.get("value")
        if not isinstance(metric, dict) or not isinstance(value, list) or len(value) != 2:
            raise PromAnswerError("a series of the answer has no metric or value")
        instance = metric.get("instance", "")
        instance = instance if isinstance(instance, str) else str(instance)
        if len(instance) > MAX_INSTANCE_TEXT:
            instance = instance[:MAX_INSTANCE_TEXT - 1] + "…"
        try:
            number = float(value[1])
        except (TypeError, ValueError):
            raise PromAnswerError(f"a value of the answer is not a number: {str(value[1])[:40]!r}") from None
        out[instance] = number if math.isfinite(number) else None
    return out
