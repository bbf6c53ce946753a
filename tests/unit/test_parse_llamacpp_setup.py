"""llama.cpp's speculative set-up lines become one configuration per start (type and draft depth)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from specmon.model.session import Session
from specmon.parsing import parse_lines
from specmon.records import Config, Engine

# Verbatim from the real kit's logs (shared/real_server_llamacpp/logs/sample-*.log).
DRAFT = [
    "0.00.062.351 I spec common_specu: adding speculative implementation 'draft-simple'",
    "0.00.062.367 I spec common_specu: - n_max=4, n_min=0, p_min=0.000000",
    "0.00.063.317 I srv    load_model: speculative decoding context initialized",
    "0.00.070.314 I srv  llama_server: listening on http://127.0.0.1:8012",
    "0.00.277.557 I slot print_timing: id  1 | task 0 |        eval time =      12.44 ms /    32 tokens "
    "(    0.40 ms per token,  2491.36 tokens per second)",
    "0.00.277.557 I slot print_timing: id  1 | task 0 | draft acceptance = 0.20635 (   13 accepted /    63 "
    "generated), mean len =  1.76",
]
NGRAM = [
    "0.00.061.650 I spec common_specu: adding speculative implementation 'ngram-map-k'",
    "0.00.063.318 I spec common_specu: - size_key=3, size_value=4, key_only=1, min_hits=1",
]
NOSPEC = ["0.00.048.171 I spec common_specu: no implementations specified for speculative decoding"]


def configs(lines: list[str]) -> list[Config]:
    return [r for r in parse_lines(lines) if isinstance(r, Config)]


def test_draft_model_start_up_is_draft_simple_with_its_depth() -> None:
    [cfg] = configs(DRAFT)
    assert (cfg.engine, cfg.algorithm, cfg.steps, cfg.line) == (Engine.LLAMACPP, "draft-simple", 4, 2)


def test_ngram_map_k_depth_is_its_value_size() -> None:
    [cfg] = configs(NGRAM)
    assert (cfg.algorithm, cfg.steps) == ("ngram-map-k", 4)


def test_no_speculation_is_steps_zero() -> None:
    [cfg] = configs(NOSPEC)
    assert (cfg.algorithm, cfg.steps) == (None, 0)


def test_a_parameter_line_without_its_implementation_line_is_not_a_configuration() -> None:
    assert configs(DRAFT[1:]) == []


def test_session_labels_the_run_and_the_engine_from_the_start_up() -> None:
    session = Session()
    for rec in parse_lines(DRAFT + DRAFT):
        session.ingest(rec)
    assert session.engine is Engine.LLAMACPP  # not vLLM, though a throughput line comes first
    assert [r.config.label for r in session.runs if r.config] == ["draft-simple 4 tokens"] * 2


@given(kind=st.sampled_from(["draft-simple", "draft-eagle3", "ngram-mod", "ngram-simple", "ngram-map-k4v"]),
       depth=st.integers(0, 64), key=st.sampled_from(["n_max", "size_value", "size_m"]),
       noise=st.lists(st.sampled_from(["0.00.000.100 I srv  load_model: loading", "x" * 40, ""]), max_size=3))
def test_any_type_and_depth_pair_up(kind: str, depth: int, key: str, noise: list[str]) -> None:
    lines = [f"0.00.062.351 I spec common_specu: adding speculative implementation '{kind}'",
             f"0.00.062.367 I spec common_specu: - other=3, {key}={depth}, n_min=0", *noise]
    [cfg] = configs(lines)
    assert (cfg.algorithm, cfg.steps) == (kind, depth)
