"""Sweep dimensions beyond the step count: parsing, the grid's engine rules, and the commands they build."""

from __future__ import annotations

import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.control.dims import (
    LLAMACPP_SPEC_TYPES,
    check_point,
    expand_grid,
    key,
    parse_grid,
    parse_key,
    used_placeholders,
)
from specmon.control.launch import LaunchError, LaunchProfile, build_plan
from specmon.sim.model import SpecConfig, SpecConfigError


def sglang() -> LaunchProfile:
    return LaunchProfile(engine="sglang", argv=[
        "python3", "-m", "sglang.launch_server", "--speculative-num-steps", "{steps}",
        "--speculative-eagle-topk", "{topk}", "--speculative-num-draft-tokens", "{draft_tokens}"],
        log="/tmp/sg_{steps}_{topk}_{draft_tokens}.log", ready_marker="fired up")


def vllm() -> LaunchProfile:
    return LaunchProfile(engine="vllm", argv=[
        "vllm", "serve", "/m", "--speculative-config",
        '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": {prompt_lookup_max}, '
        '"prompt_lookup_min": {prompt_lookup_min}}'], log="/tmp/v.log", ready_marker="startup complete",
        prompt_lookup_min=1)


def llamacpp() -> LaunchProfile:
    return LaunchProfile(engine="llamacpp", argv=[
        "llama-server", "-m", "/m.gguf", "--spec-type", "{spec_type}", "--spec-draft-n-max", "{steps}"],
        log="/tmp/l.log", ready_marker="listening on")


def test_the_grid_syntax() -> None:
    assert parse_grid(["steps=1,2,3", "topk=1,4", "draft_tokens=4,8"]) == {
        "steps": (1, 2, 3), "topk": (1, 4), "draft_tokens": (4, 8)}
    assert parse_grid(["steps=2", "spec_type=draft-simple,ngram-mod"]) == {
        "steps": (2,), "spec_type": ("draft-simple", "ngram-mod")}


@pytest.mark.parametrize(("words", "message"), [
    (["steps=1", "topk=1", "topk=2"], "topk is given twice"),
    (["steps=1", "beam=2"], "unknown sweep dimension 'beam'"),
    (["steps=1", "topk"], "write NAME=V1,V2"),
    (["steps=1", "topk=0"], "0 is out of range"),
    (["steps=1", "topk=1;reboot"], "not a whole number"),
    (["steps=1", "spec_type=draft-simple,$(id)"], "is not one of"),
    (["steps=1", "spec_type=draft"], "is not one of"),  # the old llama.cpp name: refused, not guessed
    (["steps=1,1"], "listed twice"),
])
def test_bad_grids_say_why_in_one_sentence(words: list[str], message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("$", r"\$")):
        parse_grid(words)


@given(st.lists(st.text(max_size=20), max_size=4))
def test_any_text_is_a_grid_or_a_value_error(words: list[str]) -> None:
    try:
        grid = parse_grid(words)
    except ValueError as exc:
        assert str(exc) and "\n" not in str(exc)
        return
    for name, values in grid.items():
        for v in values:  # everything that comes out is a checked int or a listed name
            assert (type(v) is int) or v in LLAMACPP_SPEC_TYPES, (name, v)


@settings(max_examples=200, deadline=None)
@given(steps=st.lists(st.integers(0, 8), min_size=1, max_size=4, unique=True),
       topk=st.lists(st.integers(1, 8), min_size=1, max_size=3, unique=True),
       drafts=st.lists(st.integers(1, 40), min_size=1, max_size=4, unique=True))
def test_the_grid_keeps_exactly_what_sglang_runs_as_asked(steps: list[int], topk: list[int],
                                                          drafts: list[int]) -> None:
    """SpecConfig.make is the simulator's copy of SGLang's own checks (it rewrites top-k 1 chains)."""
    try:
        grid = expand_grid({"steps": tuple(steps), "topk": tuple(topk), "draft_tokens": tuple(drafts)})
    except ValueError:
        grid = None
    kept = set(grid.settings) if grid else set()
    for s in steps:
        for k in topk:
            for d in drafts:
                if s == 0:
                    continue
                try:
                    spec = SpecConfig.make(s, k, d)
                    as_asked = (spec.topk, spec.draft_tokens) == (k, d)
                except SpecConfigError:
                    as_asked = False
                assert ((s, check_point({"topk": k, "draft_tokens": d})) in kept) == as_asked, (s, k, d)
    if 0 in steps:
        assert grid is not None and sum(1 for s, _ in grid.settings if s == 0) == 1
        assert (0, ()) in kept
    if grid is not None:
        assert len(grid.settings) + len(grid.skipped) >= len(kept)


def test_left_out_combinations_are_named_with_the_reason() -> None:
    grid = expand_grid(parse_grid(["steps=1,3", "topk=1,4", "draft_tokens=4,8"]))
    assert (3, (("topk", 1), ("draft_tokens", 4))) in grid.settings
    assert (3, (("topk", 4), ("draft_tokens", 8))) in grid.settings
    reasons = dict(grid.skipped)
    assert reasons["1 step, topk 1, draft_tokens 8"].startswith("top-k 1 makes SGLang use steps+1 = 2")
    assert reasons["1 step, topk 4, draft_tokens 8"] == "8 draft tokens exceed steps*topk+1 = 5"
    assert grid.dimensions == ("topk", "draft_tokens")
    with pytest.raises(ValueError, match="no combination"):
        expand_grid(parse_grid(["steps=1", "topk=1", "draft_tokens=9"]))
    vl = expand_grid(parse_grid(["steps=1", "prompt_lookup_min=3", "prompt_lookup_max=2,4"]))
    assert vl.settings == ((1, (("prompt_lookup_max", 4), ("prompt_lookup_min", 3))),)


@given(st.integers(0, 64), st.dictionaries(st.sampled_from(["topk", "draft_tokens", "prompt_lookup_max"]),
                                           st.integers(1, 64)),
       st.one_of(st.none(), st.sampled_from(LLAMACPP_SPEC_TYPES)))
def test_state_file_names_round_trip(steps: int, values: dict[str, int], spec_type: str | None) -> None:
    point = check_point({**values, **({"spec_type": spec_type} if spec_type else {})})
    assert parse_key(key(steps, point)) == (steps, point)


def test_commands_carry_each_dimension_and_say_so_up_front() -> None:
    plan = build_plan(sglang(), 3, dims={"topk": 4, "draft_tokens": 8})
    argv = shlex.split(plan.start.display.split("   (PID")[0])
    assert argv[argv.index("--speculative-eagle-topk") + 1] == "4"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "8"
    assert plan.describe().splitlines()[0].endswith("(3 steps, 8 draft tokens, topk 4)")
    v = build_plan(vllm(), 2, dims={"prompt_lookup_max": 5})
    assert '"num_speculative_tokens": 2, "prompt_lookup_max": 5, "prompt_lookup_min": 1' in v.start.command
    assert "prompt_lookup_max 5" in v.describe().splitlines()[0]
    ll = build_plan(llamacpp(), 4, dims={"spec_type": "ngram-mod"})
    assert "--spec-type ngram-mod --spec-draft-n-max 4" in ll.start.display


@pytest.mark.parametrize(("profile", "steps", "dims", "message"), [
    (sglang, 3, {"topk": 1, "draft_tokens": 8}, r"exceeds steps\*topk\+1 = 4"),
    (sglang, 3, {"topk": 1, "draft_tokens": 2}, r"top-k 1 makes SGLang use steps\+1 = 4"),
    (sglang, 3, {"topk": "4"}, "topk must be a whole number"),
    (sglang, 3, {"topk": True}, "topk must be a whole number"),
    (sglang, 3, {"beams": 2}, "unknown sweep dimension"),
    (vllm, 2, {}, r"placeholder \{prompt_lookup_max\} has no value"),
    (vllm, 2, {"prompt_lookup_max": 1, "prompt_lookup_min": 2}, "prompt_lookup_min 2 is above"),
    (vllm, 2, {"prompt_lookup_max": 65}, "from 1 to 64"),
    (llamacpp, 2, {"spec_type": "draft-simple; rm -rf /"}, "is not one of"),
    (llamacpp, 2, {}, r"placeholder \{spec_type\} has no value"),
])
def test_bad_dimension_values_never_reach_a_command(profile: object, steps: int, dims: dict[str, object],
                                                    message: str) -> None:
    with pytest.raises(LaunchError, match=message):
        build_plan(profile(), steps, dims=dims)  # type: ignore[operator, arg-type]


def test_profiles_validate_their_default_dimension_values() -> None:
    with pytest.raises(ValueError, match="spec_type"):
        llamacpp().model_copy(update={}).model_validate({**llamacpp().model_dump(), "spec_type": "draft"})
    ok = LaunchProfile.model_validate({**llamacpp().model_dump(), "spec_type": "draft-simple"})
    assert "--spec-type draft-simple" in build_plan(ok, 2).start.display
    with pytest.raises(ValueError, match="prompt_lookup_min 3 is above prompt_lookup_max 2"):
        LaunchProfile.model_validate({**vllm().model_dump(), "prompt_lookup_max": 2, "prompt_lookup_min": 3})
    with pytest.raises(ValueError, match=r"unknown placeholder \{beam\}"):
        LaunchProfile.model_validate({**vllm().model_dump(), "argv": ["vllm", "--x", "{beam}"]})


def test_used_placeholders() -> None:
    assert used_placeholders(sglang().argv or []) == {"steps", "topk", "draft_tokens"}
    assert used_placeholders(vllm().argv or []) == {"steps", "prompt_lookup_max", "prompt_lookup_min"}
