"""Adopting a hand-started SGLang 0.5 server: both entry points, any flag order and form.

``python -m sglang.launch_server ARGS`` and ``sglang serve ARGS`` (the console script,
seen in /proc as ``PYTHON /venv/bin/sglang serve ARGS``, or ``python -m sglang.cli.main
serve``) start the same server. Generated command lines (flag order, ``--flag value`` or
``--flag=value``, underscores, extra flags, EAGLE3 / STANDALONE / NGRAM) are recognised,
read and rewritten: the rewrite changes only the speculative values and reads back as
asked; the launch profile built from them renders to the server's own argv.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specmon.control.adopt import AdoptError, ServerProcess, classify, current_spec, profile_from_server, rewrite_steps
from specmon.control.launch import expand

VENV = "/tmp/sglangenv/bin"
# The kit's serve.sh, as it runs (tests/support/realkits.py starts it the same way).
KIT_ARGS = ["--model-path", "/tmp/sglangmodel", "--device", "cpu", "--host", "127.0.0.1", "--port", "30011",
            "--prefill-attention-backend", "intel_amx", "--decode-attention-backend", "intel_amx",
            "--disable-overlap-schedule", "--max-total-tokens", "8192", "--enable-metrics",
            "--decode-log-interval", "10"]

_ENTRY = st.sampled_from([
    [f"{VENV}/python", "-m", "sglang.launch_server"],
    [f"{VENV}/python3", f"{VENV}/sglang", "serve"],  # the console script's shebang line
    [f"{VENV}/sglang", "serve"],
    ["python3", "-u", "-m", "sglang.launch_server"],
    [f"{VENV}/python", "-m", "sglang.cli.main", "serve"],
])


def _flag(name: str, value: str, eq: bool, underscore: bool) -> list[str]:
    flag = name.replace("-", "_").replace("__", "--", 1) if underscore else name
    return [f"{flag}={value}"] if eq else [flag, value]


@st.composite
def _server(draw: st.DrawFn) -> tuple[list[str], dict[str, Any]]:
    algo = draw(st.sampled_from(["EAGLE3", "STANDALONE", "NGRAM", "EAGLE"]))
    steps = draw(st.integers(1, 8))
    topk = 1 if algo == "NGRAM" else draw(st.sampled_from([1, 1, 2, 4]))
    draft = steps + 1 if topk == 1 else draw(st.integers(steps + 1, steps * topk + 1))
    spec: list[tuple[str, str]] = [("--speculative-algorithm", algo)]
    if algo == "NGRAM":
        spec.append(("--speculative-num-draft-tokens", str(draft)))
    else:
        spec += [("--speculative-draft-model-path", "/tmp/sglangmodel-eagle3"), ("--speculative-num-steps", str(steps)),
                 ("--speculative-eagle-topk", str(topk)), ("--speculative-num-draft-tokens", str(draft))]
    plain = [(KIT_ARGS[i], KIT_ARGS[i + 1]) for i in range(0, 12, 2)]
    pairs = plain + spec
    order = draw(st.permutations(range(len(pairs))))
    args: list[str] = []
    for i in order:
        args += _flag(pairs[i][0], pairs[i][1], draw(st.booleans()), draw(st.booleans()))
    args += ["--disable-overlap-schedule", "--enable-metrics"]
    return draw(_ENTRY) + args, {"algo": algo, "steps": steps, "topk": topk, "draft": draft}


@settings(max_examples=120, deadline=None)
@given(_server(), st.integers(1, 8))
def test_both_entry_points_are_read_and_rewritten(server: tuple[list[str], dict[str, Any]], new: int) -> None:
    argv, want = server
    assert classify(argv) == "sglang"
    spec = current_spec(argv)
    assert spec.method == want["algo"]
    assert spec.steps == want["steps"]
    assert spec.draft_tokens == want["draft"]
    draft = new + 1 if want["topk"] == 1 else new * want["topk"] + 1
    out = rewrite_steps(argv, new, None if want["topk"] == 1 else draft)
    got = current_spec(out)
    assert (got.method, got.steps, got.draft_tokens) == (want["algo"], new, draft)
    if want["algo"] != "NGRAM":
        assert got.topk == want["topk"]
    else:
        assert not any("num-steps" in t or "num_steps" in t or "topk" in t for t in out)
    # Nothing but the speculative values changed: same length, same entry point, same other tokens.
    entry = next(i for i, t in enumerate(argv) if t.startswith("--"))
    assert len(out) == len(argv) and out[:entry] == argv[:entry]
    changed = [i for i, (a, b) in enumerate(zip(argv, out, strict=True)) if a != b]
    for i in changed:
        tok = argv[i] if "=" in argv[i] else argv[i - 1]
        assert tok.lstrip("-").replace("_", "-").startswith("speculative-"), (argv[i], out[i])
    # Steps 0: no speculative flag left, everything else kept.
    bare = rewrite_steps(argv, 0)
    assert current_spec(bare).steps == 0 and classify(bare) == "sglang"


@settings(max_examples=60, deadline=None)
@given(_server(), st.integers(1, 6))
def test_profile_from_an_adopted_server_renders_its_own_argv(server: tuple[list[str], dict[str, Any]], new: int) -> None:
    argv, want = server
    proc = ServerProcess(pid=4242, starttime=1, ppid=1, pgid=4242, engine="sglang", argv=tuple(argv),
                         cwd="/tmp", stdout="/tmp/sgl.log", env={"SGLANG_USE_CPU_ENGINE": "1"})
    topk, draft0 = want["topk"], want["draft"]
    if topk > 1 and draft0 != want["steps"] * topk + 1 and draft0 > topk + 1:
        # A fixed draft count that step count 1 cannot hold: refused with the reason, not guessed.
        with pytest.raises(AdoptError, match="exceeds steps"):
            profile_from_server(proc)
        return
    profile = profile_from_server(proc)
    assert profile.port == 30011 and profile.ready_marker == "The server is fired up and ready to roll!"
    assert profile.env == {"SGLANG_USE_CPU_ENGINE": "1"}
    draft = profile.draft_tokens_for(new)
    if draft > new * want["topk"] + 1:
        return  # the server's fixed draft count does not fit this step count: build_plan refuses it
    values = {"steps": str(new), "draft_tokens": str(draft), "topk": str(profile.topk)}
    rendered = [expand(t, values) for t in profile.argv]
    assert rendered == rewrite_steps(argv, new, draft)
    assert [expand(t, values) for t in profile.nospec_argv or []] == rewrite_steps(argv, 0)
