"""Launch profiles and command building: placeholders, quoting, hostile values."""

from __future__ import annotations

import json
import shlex

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from specmon.control.launch import (
    START_SCRIPT,
    STOP_SCRIPT,
    CommandPlan,
    LaunchError,
    LaunchProfile,
    ProcessIdentity,
    build_plan,
    check_int,
    expand,
    parse_result_line,
)

VLLM_SPEC = '{"method":"ngram","num_speculative_tokens":{steps},"prompt_lookup_max":4}'


def managed(**over: object) -> LaunchProfile:
    fields: dict[str, object] = {
        "engine": "sglang",
        "argv": [
            "python3",
            "-m",
            "sglang.launch_server",
            "--speculative-num-steps",
            "{steps}",
            "--speculative-num-draft-tokens",
            "{draft_tokens}",
            "--speculative-eagle-topk",
            "{topk}",
            "--port",
            "{port}",
        ],
        "env": {"NCCL_PROTO": "LL"},
        "cwd": "/srv/sglang",
        "log": "/logs/sglang_eagle3_{steps}step.log",
        "port": 30000,
        "ready_marker": "The server is fired up and ready to roll!",
    }
    fields.update(over)
    return LaunchProfile.model_validate(fields)


def start_parts(plan: CommandPlan) -> list[str]:
    """The start command split back the way the host shell splits it."""
    parts = shlex.split(plan.start.command)
    assert parts[:4] == ["sh", "-c", START_SCRIPT, "specmon-start"]
    return parts[4:]


def server_argv(plan: CommandPlan) -> list[str]:
    parts = start_parts(plan)
    return parts[parts.index("--") + 1 :]


# --------------------------------------------------------------------------- profile


def test_minimal_managed_profile_defaults() -> None:
    p = managed()
    assert p.mode == "managed"
    assert p.topk == 1 and p.draft_tokens == "steps+1"
    assert p.pidfile_template() == "~/.cache/specmon/run/specmon-{port}.pid"
    assert (p.steps_min, p.steps_max) == (1, 16)


@pytest.mark.parametrize(
    ("over", "needle"),
    [
        ({"argv": ["python3", "--speculative-num-steps", "{step}"]}, "unknown placeholder {step}"),
        ({"log": "/logs/{log}.log"}, "unknown placeholder {log}"),
        ({"pidfile": "/tmp/x-{steps}.pid"}, "unknown placeholder {steps}"),
        ({"cwd": "/srv/{port}"}, "unknown placeholder {port}"),
        ({"argv": ["python3", "a\nb"]}, "control character"),
        ({"argv": ["python3", "a\x00b"]}, "control character"),
        ({"argv": ["python3", "\x1b[31mred"]}, "control character"),
        ({"argv": ["python3", "a\tb"]}, "control character"),
        ({"argv": []}, "needs `argv`"),
        ({"argv": ["--flag-first"]}, "must start with a program name"),
        ({"log": "logs/x.log"}, "absolute path"),
        ({"log": "/logs/x\n.log"}, "control character"),
        ({"cwd": "relative/dir"}, "absolute path"),
        ({"env": {"BAD-NAME": "1"}}, "not a valid variable name"),
        ({"env": {"1X": "1"}}, "not a valid variable name"),
        ({"env": {"X": "a\nb"}}, "control character"),
        ({"steps_min": 0}, "needs `nospec_argv`"),
        ({"nospec_argv": ["python3", "--n", "{steps}"]}, "unknown placeholder {steps}"),
        ({"steps_min": 5, "steps_max": 4}, "above steps_max"),
        ({"port": None}, "give `port`"),
        ({"ready_marker": None}, "ready"),
        ({"ready_marker": "ok\n"}, "control character"),
        ({"health_url": "ftp://127.0.0.1/health"}, "http(s) URL"),
        ({"health_url": "http://127.0.0.1:{port}/he alth"}, "spaces"),
        ({"health_url": "http://127.0.0.1:{steps}/health"}, "unknown placeholder {steps}"),
        ({"start": ["systemctl", "start", "x"]}, "belongs to custom mode"),
        ({"draft_tokens": 3}, "exceeds steps*topk+1"),
    ],
)
def test_invalid_profiles_are_refused_with_a_reason(over: dict[str, object], needle: str) -> None:
    with pytest.raises(ValidationError) as info:
        managed(**over)
    assert needle in str(info.value)


@pytest.mark.parametrize(
    "over",
    [
        {"port": "30000"},  # a string, even a numeric one
        {"port": True},
        {"port": 30000.0},
        {"port": 70000},
        {"topk": True},
        {"steps_max": 4.5},
        {"stop_grace_s": "30"},
        {"draft_tokens": "steps+2"},
        {"mode": "auto"},
        {"stpes_max": 3},  # a typo is an error, not ignored
    ],
)
def test_profile_fields_are_strict(over: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        managed(**over)


def test_custom_profile_needs_start_and_stop_and_no_managed_fields() -> None:
    base = {"mode": "custom", "argv": None, "env": {}, "cwd": None, "log": None, "ready_marker": None}
    good = managed(**base, start=["systemctl", "start", "sglang@{steps}"], stop=["systemctl", "stop", "sglang@*"],
                   health_url="http://127.0.0.1:{port}/health")
    assert good.mode == "custom"
    with pytest.raises(ValidationError, match="both `start` and `stop`"):
        managed(**base, start=["x"], health_url="http://h/health")
    with pytest.raises(ValidationError, match="belongs to managed mode"):
        managed(**base | {"env": {"A": "1"}}, start=["x"], stop=["y"], health_url="http://h/health")
    with pytest.raises(ValidationError, match="unknown placeholder {steps}"):
        managed(**base, start=["x"], stop=["docker", "stop", "s{steps}"], health_url="http://h/health")


# --------------------------------------------------------------------------- values


@pytest.mark.parametrize("bad", ["4; reboot", "$(id)", "4\n", "4", True, False, 4.5, 4.0, None, [4], b"4"])
def test_hostile_step_values_are_rejected(bad: object) -> None:
    with pytest.raises(LaunchError, match="steps must be an integer"):
        build_plan(managed(), bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [0, -1, 17, 10**9])
def test_steps_outside_the_allowed_range_are_rejected(bad: int) -> None:
    with pytest.raises(LaunchError, match="between 1 and 16"):
        build_plan(managed(), bad)


@pytest.mark.parametrize("bad", ["5", True, 5.0, "5; id"])
def test_hostile_draft_token_overrides_are_rejected(bad: object) -> None:
    with pytest.raises(LaunchError, match="draft_tokens must be an integer"):
        build_plan(managed(), 3, draft_tokens=bad)  # type: ignore[arg-type]


def test_check_int_is_exact_about_types() -> None:
    assert check_int(3, "x", 0, 5) == 3
    with pytest.raises(LaunchError):
        check_int(True, "x", 0, 5)


# --------------------------------------------------------------------------- draft tokens


def test_draft_tokens_default_to_steps_plus_one() -> None:
    plan = build_plan(managed(), 3)
    argv = server_argv(plan)
    assert argv[argv.index("--speculative-num-steps") + 1] == "3"
    assert argv[argv.index("--speculative-num-draft-tokens") + 1] == "4"
    assert argv[argv.index("--speculative-eagle-topk") + 1] == "1"
    assert plan.draft_tokens == 4


def test_vllm_draft_tokens_are_its_speculative_tokens() -> None:
    profile = managed(engine="vllm", argv=["vllm", "serve", "m", "--speculative-config",
                                            '{"method": "ngram", "num_speculative_tokens": {steps}}'])
    plan = build_plan(profile, 3)
    assert plan.draft_tokens == 3
    assert "3 steps, 3 draft tokens" in plan.describe()


def test_draft_token_constraint_at_topk_one() -> None:
    with pytest.raises(LaunchError, match=r"exceeds steps\*topk\+1 = 4"):
        build_plan(managed(), 3, draft_tokens=5)
    # SGLang rewrites any other count to steps+1 at top-k 1: asking for 2 would run 4 unannounced.
    with pytest.raises(LaunchError, match=r"top-k 1 makes SGLang use steps\+1 = 4 draft tokens, not 2"):
        build_plan(managed(), 3, draft_tokens=2)


def test_draft_token_constraint_with_topk() -> None:
    p = managed(topk=2, draft_tokens="steps*topk+1")
    assert build_plan(p, 3).draft_tokens == 7
    assert build_plan(p, 3, draft_tokens=7).draft_tokens == 7
    with pytest.raises(LaunchError, match=r"exceeds steps\*topk\+1 = 7"):
        build_plan(p, 3, draft_tokens=8)


def test_fixed_draft_tokens_checked_over_the_whole_range() -> None:
    p = managed(draft_tokens=4, steps_min=3)
    assert build_plan(p, 3).draft_tokens == 4
    assert build_plan(p, 8).draft_tokens == 4


# --------------------------------------------------------------------------- templates


def test_placeholder_inside_a_json_token_keeps_the_braces() -> None:
    p = managed(engine="vllm", argv=["vllm", "serve", "/m", "--speculative-config", VLLM_SPEC])
    token = server_argv(build_plan(p, 3))[-1]
    assert token == '{"method":"ngram","num_speculative_tokens":3,"prompt_lookup_max":4}'
    assert json.loads(token)["num_speculative_tokens"] == 3


def test_expand_touches_only_known_placeholders_and_never_rescans() -> None:
    assert expand("{log}", {"log": "/a/{steps}"}) == "/a/{steps}"
    assert expand('{"a":{"b":{steps}}}', {"steps": "2"}) == '{"a":{"b":2}}'
    assert expand("{{steps}}", {"steps": "2"}) == "{2}"
    assert expand("{ steps }", {"steps": "2"}) == "{ steps }"
    with pytest.raises(LaunchError, match="no value"):
        expand("{port}", {})


def test_start_command_carries_exact_values_as_separate_arguments() -> None:
    plan = build_plan(managed(), 5, host="gpu1")
    pidfile, log, cwd, *rest = start_parts(plan)
    assert pidfile == "~/.cache/specmon/run/specmon-30000.pid"
    assert log == "/logs/sglang_eagle3_5step.log" == plan.log
    assert cwd == "/srv/sglang"
    # The environment's size on the command line, its NAME=VALUE lines on stdin.
    assert rest[: rest.index("--")] == ["1"]
    assert plan.start.stdin == "NCCL_PROTO=LL\n"
    assert tuple(server_argv(plan)) == plan.argv
    assert server_argv(plan)[-2:] == ["--port", "30000"]


def test_hostile_text_in_a_template_stays_one_literal_argument() -> None:
    evil = ["python3", "$(id)", "; reboot", "`id`", "a'b\"c", "--x={steps}&&id"]
    plan = build_plan(managed(argv=evil), 2)
    assert server_argv(plan) == ["python3", "$(id)", "; reboot", "`id`", "a'b\"c", "--x=2&&id"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="{}"), max_size=12),
                min_size=1, max_size=6))
def test_any_printable_argv_survives_quoting_exactly(tokens: list[str]) -> None:
    argv = ["prog", *tokens]
    plan = build_plan(managed(argv=argv), 1)
    assert server_argv(plan) == argv


def test_steps_zero_uses_nospec_argv() -> None:
    p = managed(steps_min=0, nospec_argv=["python3", "-m", "sglang.launch_server", "--port", "{port}"])
    plan = build_plan(p, 0)
    assert server_argv(plan) == ["python3", "-m", "sglang.launch_server", "--port", "30000"]
    assert plan.log == "/logs/sglang_eagle3_0step.log"
    assert plan.draft_tokens is None
    with pytest.raises(LaunchError, match="steps 0"):
        build_plan(p, 0, draft_tokens=1)


def test_stop_command_targets_the_pidfile_or_the_adopted_identity() -> None:
    plan = build_plan(managed(stop_grace_s=7, stop_signal="TERM"), 2)
    parts = shlex.split(plan.stop.command)
    assert parts[:4] == ["sh", "-c", STOP_SCRIPT, "specmon-stop"]
    assert parts[4:9] == ["~/.cache/specmon/run/specmon-30000.pid", "7", "TERM", "", ""]
    # Before the start: what the start needs, checked first; on its own (at exit): nothing more.
    assert parts[9:] == [plan.log, "/srv/sglang", "python3"]
    assert shlex.split(plan.stop_only.command)[4:] == parts[4:9]
    adopted = build_plan(managed(), 2, adopted=ProcessIdentity(4242, 987654))
    assert shlex.split(adopted.stop.command)[4:9] == ["~/.cache/specmon/run/specmon-30000.pid", "30", "INT", "4242", "987654"]
    assert "PID 4242" in adopted.describe()


@pytest.mark.parametrize(("pid", "start"), [(True, 1), (1, 1), ("12", 1), (12, -1), (12, 1.5)])
def test_process_identity_is_validated(pid: object, start: object) -> None:
    with pytest.raises(LaunchError):
        ProcessIdentity(pid, start)  # type: ignore[arg-type]


def test_custom_mode_joins_the_users_commands() -> None:
    p = managed(
        mode="custom", argv=None, env={}, cwd=None, log=None, ready_marker=None,
        start=["systemctl", "--user", "start", "sglang@{steps}-{draft_tokens}"],
        stop=["docker", "stop", "sglang-{port}"],
        health_url="http://127.0.0.1:{port}/health",
    )
    plan = build_plan(p, 3)
    assert plan.start.command == "systemctl --user start sglang@3-4"
    assert plan.stop.command == "docker stop sglang-30000"
    assert plan.pidfile is None and plan.argv is None
    assert "http://127.0.0.1:30000/health" in shlex.split(plan.ready.command)
    with pytest.raises(LaunchError, match="managed mode"):
        build_plan(p, 3, adopted=ProcessIdentity(10, 10))


def test_secrets_are_redacted_on_screen_but_sent_exactly() -> None:
    p = managed(argv=["vllm", "serve", "/m", "--api-key", "sk-live-123", "--hf-token=hf_abc"],
                env={"HF_TOKEN": "hf_zzz", "NCCL_PROTO": "LL"})
    plan = build_plan(p, 2)
    shown = plan.describe()
    for secret in ("sk-live-123", "hf_abc", "hf_zzz"):
        assert secret not in shown
    # The server's own flags are on its command line by nature; the environment never is.
    assert "sk-live-123" in plan.start.command and "hf_abc" in plan.start.command
    assert "hf_zzz" not in plan.start.command
    assert plan.start.stdin == "HF_TOKEN=hf_zzz\nNCCL_PROTO=LL\n"
    assert "--api-key '***'" in shown and "--hf-token=***" in shown and "HF_TOKEN=***" in shown
    assert "NCCL_PROTO=LL" in shown


def test_describe_shows_host_stop_start_and_readiness() -> None:
    plan = build_plan(managed(health_url="http://127.0.0.1:{port}/health"), 2, host="gpu-7")
    text = plan.describe()
    assert "gpu-7" in text and "2 steps, 3 draft tokens" in text
    assert "cd /srv/sglang && NCCL_PROTO=LL setsid python3 -m sglang.launch_server" in text
    assert ">/logs/sglang_eagle3_2step.log 2>&1" in text
    assert "http://127.0.0.1:30000/health" in text
    assert "SIGINT" in text and "SIGKILL" in text
    assert plan.start.command not in text
    assert plan.start.command in plan.describe(exact=True)


def test_a_plan_cannot_be_made_by_hand() -> None:
    real = build_plan(managed(), 2)
    with pytest.raises(TypeError, match="build_plan"):
        CommandPlan(host="h", mode="managed", steps=2, draft_tokens=3, log=None, pidfile=None, argv=None,
                    stop=real.stop, start=real.start, ready=real.ready)


def test_build_plan_refuses_a_control_character_in_the_host_label() -> None:
    with pytest.raises(LaunchError, match="control character"):
        build_plan(managed(), 2, host="gpu\x1b]0;pwn\x07")


def test_parse_result_line_reads_the_last_result() -> None:
    out = "noise\nspecmon-stop result=killed pid=12 signal=INT\n"
    assert parse_result_line(out, "specmon-stop") == {"result": "killed", "pid": "12", "signal": "INT"}
    assert parse_result_line("nothing here", "specmon-stop") == {}
