"""A Prometheus fleet profile's values checked, the queries written from the engines' counters, answers read.

Pure: no Prometheus here (tests/unit/test_prometheus_fleet.py runs the real one).
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from specmon.config import ConfigError, parse_config
from specmon.engines import ADAPTERS
from specmon.records import Engine
from specmon.sources.promql import (
    MAX_INSTANCE_TEXT,
    Matcher,
    PromAnswerError,
    fleet_queries,
    parse_duration,
    parse_selector,
    parse_vector,
)


@pytest.mark.parametrize(("text", "written"), [
    ('{job="vllm"}', '{job="vllm"}'),
    ("{}", "{}"),
    ('  { job = "vllm" , instance=~"gpu-.*:8000", }  ', '{job="vllm",instance=~"gpu-.*:8000"}'),
    ("{job!='a\"b'}", '{job!="a\\"b"}'),
    ('{x!~`raw\\d+`}', '{x!~"raw\\\\d+"}'),
    ('{x=~"a\\\\.b"}', '{x=~"a\\\\.b"}'),
])
def test_a_selector_is_written_again_from_its_parts(text: str, written: str) -> None:
    assert parse_selector(text).promql() == written


def test_the_parts_are_what_was_meant() -> None:
    sel = parse_selector("{job='vllm', env!~`dev|test`}")
    assert sel.matchers == (Matcher("job", "=", "vllm"), Matcher("env", "!~", "dev|test"))


@pytest.mark.parametrize(("text", "says"), [
    ('vllm:generation_tokens_total{job="vllm"}', "label-matcher set in braces"),
    ('{job="vllm"}[5m]', "unexpected text after the closing brace"),
    ('{job="vllm"} or vector(1)', "unexpected text after the closing brace"),
    ('{job="vllm"', "expected ',' or '}'"),
    ('{job=vllm}', "expected a quoted value"),
    ('{job=="vllm"}', "expected a quoted value"),
    ('{job:="vllm"}', "expected = != =~ or !~"),
    ('{1job="x"}', "expected a label name"),
    ('{job="vllm\\n"}', "unsupported escape"),
    ('{job="vllm}', "unterminated quoted value"),
    ('{__name__="up"}', "__name__"),
    ('{job="a\nb"}', "control characters"),
    ("", "label-matcher set in braces"),
    ("{" + ",".join(f'l{i}="x"' for i in range(17)) + "}", "more than 16 matchers"),
    ('{job="' + "x" * 1000 + '"}', "longer than 1000"),
])
def test_anything_but_a_matcher_set_is_refused_with_a_sentence(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=None) as info:
        parse_selector(text)
    assert says in str(info.value)


def test_a_value_cannot_break_out_of_its_quotes() -> None:
    # The text a user wrote inside quotes stays one value, whatever quotes and braces it holds.
    sel = parse_selector("""{job='x"} or up{a="'}""")
    assert sel.matchers == (Matcher("job", "=", 'x"} or up{a="'),)
    assert sel.promql() == '{job="x\\"} or up{a=\\""}'


@pytest.mark.parametrize(("text", "seconds"), [("1m", 60), ("30s", 30), ("2h", 7200), ("5s", 5)])
def test_durations(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "1m30s", "5", "1d", "-1m", "1.5m", "25h", "99999999s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


def test_the_queries_use_each_engines_counter_names_and_leave_the_rates_to_prometheus() -> None:
    sel = parse_selector('{job="vllm"}')
    queries = fleet_queries(sel, 60)
    with_counters = [a for a in ADAPTERS if a.counters is not None]
    assert {q.engine for q in queries} == {a.engine for a in with_counters} | {Engine.UNKNOWN}
    by = {(q.engine, q.figure): q.expr for q in queries}
    for ad in with_counters:
        c = ad.counters
        assert c is not None
        gen = f'sum by (instance) (rate({c.gen}{{job="vllm"}}[60s]))'
        if c.gen_seconds is None:  # tokens over wall time
            assert by[(ad.engine, "tps")] == gen
        else:  # tokens over the engine's own generation seconds, as its log and one-server counters say
            timed = f'({gen} - sum by (instance) (rate({c.gen_requests}{{job="vllm"}}[60s])))' if c.gen_requests else gen
            assert by[(ad.engine, "tps")] == f'{timed} / sum by (instance) (rate({c.gen_seconds}{{job="vllm"}}[60s]))'
        if c.drafts is not None:
            assert by[(ad.engine, "accept_len")] == (
                f'1 + sum by (instance) (rate({c.accepted}{{job="vllm"}}[60s])) / '
                f'sum by (instance) (rate({c.drafts}{{job="vllm"}}[60s]))')
        else:  # drafts counted by their first position (TensorRT-LLM)
            assert by[(ad.engine, "accept_len")] == (
                f'1 + sum by (instance) (rate({c.per_position}{{job="vllm"}}[60s])) / '
                f'sum by (instance) (rate({c.drafted_per_position}{{job="vllm",{c.position_label}="0"}}[60s]))')
        assert by[(ad.engine, "accept_rate")] == (
            f'sum by (instance) (rate({c.accepted}{{job="vllm"}}[60s])) / '
            f'sum by (instance) (rate({c.draft_tokens}{{job="vllm"}}[60s]))')
    # Only vLLM's per-position series tell its draft tokens (llama.cpp adds them as drafts are accepted).
    assert (Engine.VLLM, "spec_tokens") in by and (Engine.LLAMACPP, "spec_tokens") not in by
    assert by[(Engine.UNKNOWN, "up")] == 'up{job="vllm"}'
    assert [q.engine for q in fleet_queries(sel, 60, Engine.LLAMACPP)] == [Engine.LLAMACPP] * 3 + [Engine.UNKNOWN]


def _answer(*series: tuple[dict[str, Any], str]) -> dict[str, Any]:
    return {"status": "success", "data": {"resultType": "vector",
                                          "result": [{"metric": m, "value": [1.0, v]} for m, v in series]}}


def test_an_answer_is_read_by_instance() -> None:
    got = parse_vector(_answer(({"instance": "a:1"}, "12.5"), ({"instance": "b:1"}, "NaN"),
                               ({"instance": "c:1"}, "+Inf"), ({}, "3")))
    assert got == {"a:1": 12.5, "b:1": None, "c:1": None, "": 3.0}
    long = parse_vector(_answer(({"instance": "x" * 500}, "1")))
    (name,) = long
    assert len(name) == MAX_INSTANCE_TEXT and name.endswith("…")
    assert len(parse_vector(_answer(*[({"instance": str(i)}, "1") for i in range(50)]), limit=10)) == 10
    assert math.isclose(parse_vector(_answer(({"instance": "a"}, "1e3")))["a"] or 0, 1000.0)


@pytest.mark.parametrize(("answer", "says"), [
    ({"status": "error", "errorType": "bad_data", "error": "parse error: unexpected }"}, "parse error"),
    ([], "not a JSON object"),
    ({"status": "success", "data": {"resultType": "matrix", "result": []}}, "not an instant vector"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1]}]}},
     "no metric or value"),
    ({"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "x"]}]}},
     "not a number"),
])
def test_a_bad_answer_is_a_sentence(answer: Any, says: str) -> None:
    with pytest.raises(PromAnswerError) as info:
        parse_vector(answer)
    assert says in str(info.value)


# -- the profile -------------------------------------------------------------------------------------

GOOD = """
[profiles.fleet]
prometheus = "http://127.0.0.1:9090"
selector = '{ job = "vllm" }'
rate_window = "30s"
engine = "vllm"
baseline_tps = 88.8
"""


def test_a_fleet_profile_is_read_and_its_selector_kept_as_written_again() -> None:
    p = parse_config(GOOD).profiles["fleet"]
    assert (p.prometheus, p.selector, p.rate_window, p.engine) == (
        "http://127.0.0.1:9090", '{job="vllm"}', "30s", Engine.VLLM)


@pytest.mark.parametrize(("body", "line", "says"), [
    ('prometheus = "ftp://x:9090"\nselector = "{}"', 3, "prometheus must be an http(s) URL"),
    ('prometheus = "http://"\nselector = "{}"', 3, "prometheus must be an http(s) URL"),
    ('prometheus = "http://a b:9090"\nselector = "{}"', 3, "prometheus must be an http(s) URL"),
    ('prometheus = "http://x:99999"\nselector = "{}"', 3, "bad port"),
    ('prometheus = "http://x:9090/?q=1"\nselector = "{}"', 3, "no '?' query"),
    ('prometheus = "http://x:9090"\nselector = \'up{job="vllm"}\'', 4, "label-matcher set in braces"),
    ('prometheus = "http://x:9090"\nselector = \'{job="vllm"} or vector(1)\'', 4, "unexpected text"),
    ('prometheus = "http://x:9090"\nselector = 5', 4, "selector"),
    ('prometheus = "http://x:9090"', 2, "needs a selector"),
    ('selector = \'{job="vllm"}\'', 2, "set prometheus"),
    ('prometheus = "http://x:9090"\nselector = "{}"\nrate_window = "1m30s"', 5, "not a duration"),
    ('prometheus = "http://x:9090"\nselector = "{}"\nlog = "/x.log"', 2, "log belongs to a one-server profile"),
    ('prometheus = "http://x:9090"\nselector = "{}"\nhost = "gpu"\nlines = 10', 2,
     "host, lines belong to a one-server profile"),
    ('prometheus = "http://x:9090"\nselector = "{}"\nengine = "sglang"', 2, "exports no counters"),
    ('prometheus = "http://x:9090"\nselector = "{}"\nselectr = "{}"', 5, "unknown key 'selectr'"),
])
def test_bad_fleet_profiles_are_refused_with_a_clear_sentence(body: str, line: int, says: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config("\n[profiles.fleet]\n" + body + "\n")
    assert says in str(info.value)
    assert info.value.line == line, str(info.value)
