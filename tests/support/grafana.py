"""The shipped Grafana dashboard's queries, and what they name (a small PromQL reader)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json"

#: Grafana's built-in variables, as a query run by hand would spell them.
GRAFANA_VARIABLES = {"$__rate_interval": "1m", "$__interval": "1s", "$__range": "1h", "$instance": ".*"}

#: PromQL functions and aggregations the dashboard may call (anything else is taken for a typo).
FUNCTIONS = {"rate", "irate", "increase", "delta", "last_over_time", "max_over_time", "min_over_time",
             "avg_over_time", "sum", "avg", "max", "min", "count", "label_values", "abs", "clamp_min",
             "clamp_max", "round", "topk", "bottomk"}
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "bool",
            "offset"}
_GROUPING = re.compile(r"\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_MATCHERS = re.compile(r"\{([^}]*)\}")
_MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)\s*\"(?:[^\"\\]|\\.)*\"")
_LABEL_VALUES = re.compile(r"label_values\(\s*([^,]+?)\s*,\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*\)")
_IDENT = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def load() -> dict[str, Any]:
    """The dashboard JSON."""
    data: dict[str, Any] = json.loads(DASHBOARD.read_text())
    return data


def expressions(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """Every PromQL expression in the dashboard: (where, expression), panels then variables."""
    out: list[tuple[str, str]] = []
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            out.append((f"panel {panel['title']!r} {target['refId']}", target["expr"]))
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") == "query":
            query = var["query"]
            out.append((f"variable {var['name']}", query["query"] if isinstance(query, dict) else query))
    return out


def legends(dashboard: dict[str, Any]) -> list[str]:
    """Every legend format of the dashboard's targets."""
    return [t.get("legendFormat", "") for p in dashboard["panels"] for t in p.get("targets", [])]


def substitute(expr: str) -> str:
    """The expression as Prometheus would get it from Grafana (variables filled in)."""
    for name in sorted(GRAFANA_VARIABLES, key=len, reverse=True):
        expr = expr.replace(name, GRAFANA_VARIABLES[name])
    return expr


def names(expr: str) -> tuple[set[str], set[str], set[str]]:
    """(series names, label names, functions) an expression uses.

    A reader for the subset of PromQL a dashboard needs: selectors with label
    matchers, range and subquery brackets, function calls, binary operators with
    ``on``/``group_left`` lists, ``by``/``without`` aggregations and numbers.
    """
    expr = substitute(expr)
    labels: set[str] = set()
    functions: set[str] = set()
    # Grafana's label_values(series, label) is not PromQL: read its label, keep its series.
    for call in _LABEL_VALUES.finditer(expr):
        labels.add(call.group(2))
        functions.add("label_values")
    expr = _LABEL_VALUES.sub(r" \1 ", expr)
    for group in _GROUPING.finditer(expr):
        labels |= {x.strip() for x in group.group(2).split(",") if x.strip()}
    expr = _GROUPING.sub(r" \1 ", expr)
    for block in _MATCHERS.finditer(expr):
        inner = block.group(1)
        found = _MATCHER.findall(inner)
        assert _MATCHER.sub("", inner).replace(",", "").strip() == "", f"cannot read matchers {{{inner}}}"
        labels |= set(found)
    expr = _MATCHERS.sub(" ", expr)
    expr = re.sub(r"\[[^\]]*\]", " ", expr)  # ranges and subqueries: [1h], [1h:1s]
    expr = re.sub(r"\"(?:[^\"\\]|\\.)*\"", " ", expr)
    series: set[str] = set()
    for m in _IDENT.finditer(expr):
        word = m.group(0)
        after = expr[m.end():].lstrip()
        if word in KEYWORDS:
            continue
        if after.startswith("("):
            functions.add(word)
        else:
            series.add(word)
    return series, labels, functions
