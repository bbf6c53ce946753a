"""The sweep's cross-check compares each source's figure with the same kind of figure.

vLLM's and SGLang's throughput (counters or log) is tokens over wall time, as is the client's
output tok/s; llama.cpp's counters are per-stream decode speed, as is the client's pooled
decode speed. Generated request sets check that the right client figure is picked and pooled.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.control.load import LoadReport, RequestResult
from specmon.experiment.sweep_result import source_means
from specmon.experiment.sweep_state import CellState, Segment


def _request(i: int, tokens: int, span: float, latency: float) -> RequestResult:
    # Streamed: the first chunk at 10% of the latency, the last at 10% + span.
    first = 0.1 * latency
    return RequestResult(i, 0, True, float(i), latency, output_tokens=tokens, chunks=tokens, first_tokens=1,
                         first_token_s=first, last_token_s=first + span)


requests = st.lists(st.tuples(st.integers(8, 400), st.floats(0.5, 20.0)), min_size=3, max_size=40)


def _cell(engine: str, reqs: list[tuple[int, float]], wall: float) -> tuple[CellState, float, float]:
    cell = CellState(2, 2)
    cell.segments.append(Segment("x.log", 1, {"engine": engine}, throughput=[1000.0, 1010.0], kind="counters"))
    results = [_request(i, tokens, span, span / 0.8) for i, (tokens, span) in enumerate(reqs)]
    cell.add_client(LoadReport(2, 0.0, wall, results=results))
    pooled = sum(t - 1 for t, _ in reqs) / sum(span for _, span in reqs)
    output = sum(t for t, _ in reqs) / wall
    return cell, pooled, output


@settings(max_examples=60, deadline=None)
@given(requests, st.floats(5.0, 500.0))
def test_llamacpp_counters_are_checked_against_the_clients_pooled_decode_speed(
        reqs: list[tuple[int, float]], wall: float) -> None:
    cell, pooled, _ = _cell("llamacpp", reqs, wall)
    assert abs(source_means(cell)["client"] - pooled) <= 1e-6 * pooled


@settings(max_examples=60, deadline=None)
@given(requests, st.floats(5.0, 500.0), st.sampled_from(["vllm", "sglang"]))
def test_other_engines_are_checked_against_the_clients_output_over_wall_time(
        reqs: list[tuple[int, float]], wall: float, engine: str) -> None:
    cell, _, output = _cell(engine, reqs, wall)
    assert abs(source_means(cell)["client"] - output) <= 1e-6 * output


def test_the_kits_shape_two_streams_decoding_at_once() -> None:
    """Two streams of 48 tokens at ~1,180 tok/s each, back to back for 100 s: output over wall time
    is twice one stream's speed, which is what read "DISAGREES within 59-72%" on the real kit."""
    reqs = [(48, 47 / 1180.0)] * 200
    cell, pooled, output = _cell("llamacpp", reqs, wall=200 * 47 / 1180.0 / 2)
    assert abs(source_means(cell)["client"] - 1180.0) < 1.0 and output > 1.9 * pooled


# --- the counters' own figure: pooled over time, like the client's ------------------------------

intervals = st.lists(st.tuples(st.floats(1.0, 5000.0), st.floats(0.05, 30.0)), min_size=1, max_size=60)


def _counted(engine: str, samples: list[tuple[float, float]]) -> CellState:
    """A setting whose counter samples are (tokens, seconds of generation) pairs, in two segments."""
    cell = CellState(2, 1)
    half = len(samples) // 2
    for part in (samples[:half], samples[half:]):
        if part:
            cell.segments.append(Segment("x.log", 1, {"engine": engine}, kind="counters",
                                         throughput=[n / s for n, s in part], tokens=[n for n, _ in part]))
    return cell


@settings(max_examples=80, deadline=None)
@given(intervals, st.sampled_from(["vllm", "llamacpp", "sglang"]))
def test_the_counters_figure_is_tokens_over_seconds_across_every_sample(
        samples: list[tuple[float, float]], engine: str) -> None:
    means = source_means(_counted(engine, samples))
    expected = sum(n for n, _ in samples) / sum(s for _, s in samples)
    assert abs(means["counters"] - expected) <= 1e-9 * expected


def test_a_fast_short_interval_does_not_weigh_as_much_as_a_slow_long_one() -> None:
    # 100 tokens in 0.05 s (2,000 tok/s) and 1,000 tokens in 2 s (500 tok/s): the ratio mean says
    # 1,250, the engine made 1,100 tokens in 2.05 s.
    means = source_means(_counted("llamacpp", [(100.0, 0.05), (1000.0, 2.0)]))
    assert abs(means["counters"] - 1100 / 2.05) < 1e-6


def test_a_sweep_file_without_token_counts_falls_back_to_the_mean_of_the_samples() -> None:
    cell = CellState(2, 1)
    cell.segments.append(Segment("x.log", 1, {"engine": "vllm"}, throughput=[900.0, 1100.0], kind="counters"))
    assert source_means(cell)["counters"] == 1000.0


def test_token_counts_survive_the_sweep_file() -> None:
    seg = Segment("x.log", 1, {"engine": "llamacpp"}, throughput=[500.0, 2000.0], kind="counters",
                  tokens=[1000.0, 100.0])
    assert Segment.from_json(seg.to_json()).tokens == [1000.0, 100.0]
