"""Prompts paired across launches and settings (issue 44, item 3): the per-request drafted and accepted
tokens read from the engines' answers, every launch starting the prompt set at its first prompt, and
the per-prompt table built from what was sent (generated launches: every request counted once, under
its own prompt, at its own setting)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.control.load import _read_drafts
from specmon.control.load_report import LoadReport, RequestResult
from specmon.engines import ADAPTERS
from specmon.experiment.prompts import prompt_groups
from specmon.experiment.sweep_state import CellState
from specmon.output.prompt_table import prompt_html, prompt_markdown

# llama-server b11434's last streamed chunk (the kit's, cut to its keys), and a vLLM 0.34 answer with
# --per-request-spec-decode-metrics summary (entrypoints/generate/base/protocol.py's field names).
LLAMA_LAST_CHUNK = ('{"choices":[{"text":"","index":0,"finish_reason":"length"}],"usage":{"completion_tokens":24,'
                    '"prompt_tokens":7},"timings":{"cache_n":0,"prompt_n":7,"predicted_n":24,"predicted_ms":76.7,'
                    '"draft_n":78,"draft_n_accepted":1}}')
VLLM_ANSWER = ('{"choices":[{"text":"x"}],"usage":{"completion_tokens":16},"metrics":{"speculative_decoding":'
               '{"mean_acceptance_length":2.1,"num_draft_tokens":30,"num_accepted_draft_tokens":17}}}')


def _result(answer: str) -> RequestResult:
    r = RequestResult(index=0, prompt_index=0, ok=True, started_at=0.0, latency_s=1.0)
    _read_drafts(json.loads(answer), r)
    return r


def test_each_engines_answer_gives_its_drafts() -> None:
    r = _result(LLAMA_LAST_CHUNK)
    assert (r.drafted, r.accepted) == (78, 1)
    r = _result(VLLM_ANSWER)
    assert (r.drafted, r.accepted) == (30, 17)
    r = _result('{"choices":[{"text":"x"}],"usage":{"completion_tokens":3}}')  # SGLang's OpenAI route: none said
    assert (r.drafted, r.accepted) == (None, None)


@given(d=st.one_of(st.integers(-5, 50), st.booleans(), st.text(max_size=3), st.floats(), st.none()),
       a=st.one_of(st.integers(-5, 50), st.booleans(), st.text(max_size=3), st.floats(), st.none()))
def test_a_wrong_count_in_an_answer_is_ignored(d: Any, a: Any) -> None:
    for answer in ({"timings": {"draft_n": d, "draft_n_accepted": a}},
                   {"metrics": {"speculative_decoding": {"num_draft_tokens": d, "num_accepted_draft_tokens": a}}}):
        pairs = [p for ad in ADAPTERS if (p := ad.request_drafts(answer)) is not None]
        valid = type(d) is int and type(a) is int and 0 <= a <= d and d > 0
        assert pairs == ([(d, a)] if valid else [])


def test_every_launch_starts_the_prompt_set_at_its_first_prompt() -> None:
    import asyncio

    from specmon.control.load import BackgroundLoad, LoadConfig, LoadDriver

    async def go() -> list[int]:
        driver = LoadDriver(LoadConfig("http://127.0.0.1:9", prompts=("a", "b", "c"), request_timeout_s=0.2))
        load = BackgroundLoad(driver, cap_s=5.0)
        starts = []
        for _ in range(3):
            driver._next_prompt = 2  # where the last launch left off
            await load.start(1)
            starts.append(driver._next_prompt)
            await load.stop()
        return starts

    # Read right after start() returns, before its first request goes out: each launch begins at prompt 0.
    assert asyncio.run(go()) == [0, 0, 0]


_SETTINGS = (0, 2, 4)


@st.composite
def launches(draw: st.DrawFn) -> list[tuple[int, list[tuple[int, float, int, int]]]]:
    """Launches of the settings: each a list of requests (prompt, decode tok/s, drafted, accepted)."""
    out = []
    for steps in _SETTINGS:
        for _ in range(draw(st.integers(1, 3))):
            n = draw(st.integers(2, 12))
            prompts = 3
            out.append((steps, [(i % prompts, draw(st.floats(5, 200)), 0 if steps == 0 else draw(st.integers(1, 40)),
                                 0) for i in range(n)]))
    return out


def _report(requests: list[tuple[int, float, int, int]]) -> LoadReport:
    results = []
    for k, (prompt, tps, drafted, _) in enumerate(requests):
        # 21 tokens timed over 20 / tps seconds: decode_tps() gives tps back.
        r = RequestResult(index=k, prompt_index=prompt, ok=True, started_at=0.0, latency_s=30.0 / tps,
                          output_tokens=21, chunks=21, first_token_s=0.0, last_token_s=20.0 / tps, first_tokens=1,
                          drafted=drafted or None, accepted=(drafted // 2) if drafted else None)
        results.append(r)
    return LoadReport(concurrency=1, started_at=0.0, ended_at=10.0, results=results)


@settings(max_examples=120, deadline=None)
@given(runs=launches())
def test_the_table_counts_every_request_once_under_its_prompt_and_setting(
        runs: list[tuple[int, list[tuple[int, float, int, int]]]]) -> None:
    cells = {s: CellState(s, 1) for s in _SETTINGS}
    for steps, requests in runs:
        cells[steps].add_client(_report(requests))
    groups = prompt_groups(list(cells.values()))
    assert len(groups) == 1
    g = groups[0]
    assert g["baseline"] is True
    for steps, cell in cells.items():
        sent: dict[int, list[float]] = {}
        drafted: dict[int, int] = {}
        for s, requests in runs:
            if s == steps:
                for prompt, tps, d, _ in requests:
                    sent.setdefault(prompt, []).append(tps)
                    drafted[prompt] = drafted.get(prompt, 0) + d
        table = g["settings"][cell.key]
        assert {int(k): v[0] for k, v in table.items()} == {k: len(v) for k, v in sent.items()}
        for k, v in table.items():
            mean = sum(sent[int(k)]) / len(sent[int(k)])
            assert abs(v[1] - mean) <= 1e-3 * mean + 2e-3
            assert v[2] == drafted[int(k)]
    for row in g["rows"]:
        if row["best"] is None:  # no speculative setting sent this prompt
            assert all(str(row["prompt"]) not in g["settings"][cell.key] for s, cell in cells.items() if s)
            continue
        best = g["settings"][row["best_key"]][str(row["prompt"])]
        assert row["best_tps"] == max(g["settings"][label][str(row["prompt"])][1]
                                      for label in g["settings"] if label != cells[0].key
                                      if str(row["prompt"]) in g["settings"][label])
        assert row["best_requests"] == best[0]
        base_fig = g["settings"][cells[0].key].get(str(row["prompt"]))
        if base_fig is None:
            assert row["pays"] is None and row["change_pct"] is None
        else:
            assert row["pays"] == (row["best_tps"] > base_fig[1]) or abs(row["best_tps"] - base_fig[1]) < 1e-6
    lines = prompt_markdown(groups)
    assert lines and all(len(line) <= 80 for line in lines)
    assert "<script" not in prompt_html(groups)
