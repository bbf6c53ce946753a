"""Property tests of the grammar on vLLM (V0/V1) and llama.cpp lines (issue 10).

Lines are built from the parts real servers print — process wrapper × prefix ×
lead (``Engine 000: ``, ``N Engines Aggregated: ``) × field subset and order ×
units × unknown fields × trailing punctuation, and llama.cpp's fixed-word forms —
and read by both parse paths. Both must give the same records; the values must be
the ones written; and every whole line is read by a template (the fast path).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from specmon.ingest.bulk import piece_records
from specmon.parsing import LineParser, parse_lines
from specmon.records import EngineStats, Spec

YEAR = 2026
ACCESS = '(APIServer pid=1) INFO:     127.0.0.1:3766 - "POST /v1/completions HTTP/1.1" 200 OK'


@dataclass
class Line:
    text: str
    kind: type
    values: dict[str, Any] = field(default_factory=dict)


def _f(draw: st.DrawFn, lo: float, hi: float, digits: int) -> tuple[float, str]:
    text = f"{draw(st.floats(lo, hi, allow_nan=False)):.{digits}f}"
    return float(text), text


@st.composite
def vllm_prefix(draw: st.DrawFn) -> str:
    wrapper = draw(st.sampled_from(("", "(APIServer pid=1) ", "(EngineCore_DP0 pid=123) ",
                                    "2026-03-01T10:00:00.250000000Z ", "2026-03-01T10:00:00.25Z stdout F ")))
    mo, d = draw(st.integers(1, 12)), draw(st.integers(1, 28))
    h, mi, s = draw(st.integers(0, 23)), draw(st.integers(0, 59)), draw(st.integers(0, 59))
    stamp = f"{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}"
    level = draw(st.sampled_from(("INFO", "WARNING")))
    where = draw(st.sampled_from(("[loggers.py:271] ", "metrics.py:411] ", "[v1/metrics/loggers.py:1] ")))
    return f"{wrapper}{level} {stamp} {where}"


@st.composite
def vllm_stats(draw: st.DrawFn) -> Line:
    lead = draw(st.sampled_from(("", "Engine 000: ", "Engine 003: ", "2 Engines Aggregated: ")))
    values: dict[str, Any] = {}
    pt, pt_s = _f(draw, 0, 5000, 1)
    gt, gt_s = _f(draw, 0, 5000, 1)
    run = draw(st.integers(0, 500))
    wait = draw(st.integers(0, 500))
    kv, kv_s = _f(draw, 0, 100, 1)
    values.update(prompt_throughput=pt, gen_throughput=gt, running=run, waiting=wait, kv_cache_usage=kv)
    v0 = draw(st.booleans())
    parts = [f"Avg prompt throughput: {pt_s} tokens/s", f"Avg generation throughput: {gt_s} tokens/s",
             f"Running: {run} reqs"]
    if v0:
        parts += ["Swapped: 0 reqs", f"Pending: {wait} reqs", f"GPU KV cache usage: {kv_s}%", "CPU KV cache usage: 0.0%"]
    else:
        parts.append(f"Waiting: {wait} reqs")
        extra = draw(st.lists(st.sampled_from(("Deferred: 2 reqs", "Preemptions: 3")), unique=True, max_size=2))
        parts += extra + [f"GPU KV cache usage: {kv_s}%"]
        hit, hit_s = _f(draw, 0, 100, 1)
        parts.append(f"Prefix cache hit rate: {hit_s}%")
        values["prefix_cache_hit_rate"] = hit
        if draw(st.booleans()):
            parts.append("MM cache hit rate: 12.5%")
    trail = draw(st.sampled_from(("", ".", " ")))
    if lead.startswith("Engine"):
        values["engine_index"] = int(lead[7:10])
    elif lead:
        values["engines_aggregated"] = 2
    return Line(draw(vllm_prefix()) + lead + ", ".join(parts) + trail, EngineStats, values)


@st.composite
def vllm_spec(draw: st.DrawFn) -> Line:
    acc = draw(st.integers(0, 10**6))
    dra = acc + draw(st.integers(1, 10**6))
    k = draw(st.integers(1, 6))
    pos = [f"{draw(st.floats(0, 1)):.3f}" for _ in range(k)]
    mal, mal_s = _f(draw, 1, 9, 2)
    rate = round(acc / dra * 100, 1)
    form = draw(st.sampled_from(("v1", "v1_2025_04", "v0")))
    values: dict[str, Any] = {"accepted": acc, "drafted": dra}
    if form == "v1":
        body = (f"SpecDecoding metrics: Mean acceptance length: {mal_s}, Accepted throughput: 26.40 tokens/s, "
                f"Drafted throughput: 30.10 tokens/s, Accepted: {acc} tokens, Drafted: {dra} tokens, "
                f"Per-position acceptance rate: {', '.join(pos)}, Avg Draft acceptance rate: {rate:.1f}%")
        values.update(mean_acceptance_length=mal, per_position=tuple(map(float, pos)),
                      draft_acceptance_rate=float(f"{rate:.1f}") / 100, accepted_throughput=26.4)
    elif form == "v1_2025_04":
        body = (f"SpecDecoding metrics: Draft acceptance rate: {rate:.1f}%, Mean acceptance length: {mal_s}, "
                f"Accepted: {acc} tokens, Drafted: {dra} tokens, Per-position acceptance rate: {', '.join(pos)}")
        values.update(mean_acceptance_length=mal, draft_acceptance_rate=float(f"{rate:.1f}") / 100)
    else:
        typo = draw(st.sampled_from(("", " tokens")))
        body = (f"Speculative metrics: Draft acceptance rate: {acc / dra:.3f}, System efficiency: 0.059, Number of "
                f"speculative tokens: {k}, Number of accepted tokens: {acc}, Number of draft tokens{typo}: {dra}, "
                f"Number of emitted tokens{typo}: {acc + 5}.")
        values["draft_acceptance_rate"] = float(f"{acc / dra:.3f}")
    return Line(draw(vllm_prefix()) + body, Spec, values)


@st.composite
def llamacpp_spec(draw: st.DrawFn) -> Line:
    prefix = draw(st.sampled_from(("", "2026-05-14 22:40:29.046 | ", "0.06.896.015 I ",
                                   "slot print_timing: id  1 | task 0 | ")))
    acc = draw(st.integers(0, 99999))
    gen = acc + draw(st.integers(1, 99999))
    rate = f"{acc / gen:.5f}"
    form = draw(st.sampled_from(("old", "mean_len", "per_pos")))
    values: dict[str, Any] = {"accepted": acc, "drafted": gen, "draft_acceptance_rate": float(rate)}
    if form == "old":
        text = f"draft acceptance rate = {rate} ({acc:5d} accepted / {gen:5d} generated)"
    else:
        mal, mal_s = _f(draw, 1, 9, 2)
        values["mean_acceptance_length"] = mal
        text = f"draft acceptance = {rate} ({acc:5d} accepted / {gen:5d} generated), "
        if form == "mean_len":
            text += f"mean len = {mal_s:>5}"
        else:
            pos = [f"{draw(st.floats(0, 1)):.3f}" for _ in range(draw(st.integers(1, 5)))]
            values["per_position"] = tuple(map(float, pos))
            text += f"mean acceptance length = {mal_s:>5}, acceptance rate per position = ({', '.join(pos)})"
    return Line(prefix + text, Spec, values)


@st.composite
def llamacpp_eval(draw: st.DrawFn) -> Line:
    prefix = draw(st.sampled_from(("", "2026-05-14 22:40:29.046 | ", "0.06.896.015 I ")))
    tps, tps_s = _f(draw, 1, 999, 2)
    n = draw(st.integers(1, 9999))
    text = (f"{prefix}       eval time = {n * 14.84:10.2f} ms / {n:5d} tokens (   14.84 ms per token, "
            f"{tps_s:>8} tokens per second)")
    return Line(text, EngineStats, {"gen_throughput": tps})


any_line = st.one_of(vllm_stats(), vllm_spec(), llamacpp_spec(), llamacpp_eval())


def _check(line: Line, rec: Any) -> None:
    assert isinstance(rec, line.kind), (line.text, rec)
    for attr, value in line.values.items():
        assert getattr(rec, attr) == value, (attr, line.text, rec)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(any_line)
def test_line_parser_reads_what_was_written(line: Line) -> None:
    _check(line, LineParser(year=YEAR).parse(line.text, 1))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(any_line, min_size=1, max_size=3), st.data())
def test_both_paths_identical_and_every_whole_line_on_the_fast_path(shapes: list[Line], data: st.DataObject) -> None:
    lines: list[Line] = [data.draw(st.sampled_from(shapes)) for _ in range(data.draw(st.integers(2, 20)))]
    texts: list[str] = []
    for i, ln in enumerate(lines):
        texts.append(ln.text)
        if i % 4 == 1:
            texts.append(ACCESS)
        if i % 7 == 3:
            texts.append(ln.text[: len(ln.text) // 2])  # a cut copy: the line parser's, never guessed
    by_line = list(parse_lines(texts, year=YEAR))
    by_bulk, by_template = piece_records(("\n".join(texts) + "\n").encode(), year=YEAR)
    assert [r.to_json() for r in by_bulk] == [r.to_json() for r in by_line]
    assert by_template >= len(lines), (by_template, len(lines), texts)
    whole = [r for r in by_line if r.line in {i + 1 for i, t in enumerate(texts) if t in {x.text for x in lines}}]
    for rec in whole:
        _check(next(x for x in lines if x.text == texts[rec.line - 1]), rec)
