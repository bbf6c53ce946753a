"""Adopting a running server: classification, argv rewriting, the host probe, restart."""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from specmon.control.adopt import (
    PROBE_COMMAND,
    PROBE_SCRIPT,
    AdoptError,
    ServerProcess,
    SpecSettings,
    classify,
    current_spec,
    env_name_allowed,
    parse_probe,
    probe_servers,
    profile_from_server,
    rewrite_steps,
    strip_spec,
)
from specmon.control.launch import ProcessIdentity, build_plan
from specmon.control.runner import LocalRunner, execute
from tests.support.fakeserver import FAKE_SERVER

PY = "/usr/bin/python3"
SG = [PY, "-m", "sglang.launch_server", "--model-path", "/m", "--speculative-algorithm", "EAGLE3"]
VSPEC = '{"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}'
VL = ["/venv/bin/python", "/venv/bin/vllm", "serve", "/m", "--port", "8011"]


# --------------------------------------------------------------------------- classify


@pytest.mark.parametrize(
    ("argv", "engine"),
    [
        ([PY, "-m", "sglang.launch_server", "--port", "1"], "sglang"),
        (["python", "-u", "-X", "dev", "-m", "sglang.launch_server"], "sglang"),
        (["python3.11", "/opt/sglang/python/sglang/launch_server.py"], "sglang"),
        (["vllm", "serve", "/m"], "vllm"),
        (["/venv/bin/python3", "/venv/bin/vllm", "serve", "/m"], "vllm"),
        ([PY, "-m", "vllm.entrypoints.openai.api_server", "--model", "/m"], "vllm"),
        ([PY, "-m", "vllm.entrypoints.cli.main", "serve", "/m"], "vllm"),
        (["tail", "-F", "/logs/sglang.log"], None),
        (["pgrep", "-f", "sglang.launch_server"], None),
        (["bash", "-c", "python -m sglang.launch_server"], None),
        ([PY, "-c", "import sglang.launch_server"], None),
        (["vllm", "bench", "serve"], None),
        (["sglang::scheduler_TP0"], None),
        (["VLLM::EngineCore"], None),
        ([PY, "-m", "http.server"], None),
        ([], None),
    ],
)
def test_classify_recognises_only_real_entry_points(argv: list[str], engine: str | None) -> None:
    assert classify(argv) == engine


# --------------------------------------------------------------------------- current settings


@pytest.mark.parametrize(
    ("argv", "spec"),
    [
        (SG + ["--speculative-num-steps", "3", "--speculative-num-draft-tokens", "4"],
         SpecSettings(3, 4, None, "EAGLE3")),
        (SG + ["--speculative-num-steps=5", "--speculative-eagle-topk=2", "--speculative-num-draft-tokens=8"],
         SpecSettings(5, 8, 2, "EAGLE3")),
        (SG, SpecSettings(None, None, None, "EAGLE3")),  # SGLang picks the values itself
        (SG[:5], SpecSettings(0)),
        (VL + ["--speculative-config", VSPEC], SpecSettings(3, method="ngram")),
        (VL + ["--speculative_config=" + VSPEC], SpecSettings(3, method="ngram")),
        (VL + ["--speculative-config.method", "ngram", "--speculative-config.num_speculative_tokens", "6"],
         SpecSettings(6)),
        (VL + ["--speculative-model", "/d", "--num-speculative-tokens", "5"], SpecSettings(5, method="/d")),
        (VL, SpecSettings(0)),
    ],
)
def test_current_spec_reads_the_step_count(argv: list[str], spec: SpecSettings) -> None:
    assert current_spec(argv) == spec


def test_current_spec_refuses_garbage() -> None:
    with pytest.raises(AdoptError, match="not valid JSON"):
        current_spec(VL + ["--speculative-config", "{nope"])
    with pytest.raises(AdoptError, match="not a number"):
        current_spec(SG + ["--speculative-num-steps", "three"])
    with pytest.raises(AdoptError, match="not an SGLang or vLLM"):
        current_spec(["tail", "-F", "x"])


# --------------------------------------------------------------------------- rewrite


def test_rewrite_sglang_separate_and_equals_forms() -> None:
    argv = SG + ["--speculative-num-steps", "3", "--speculative-num-draft-tokens=4", "--speculative-eagle-topk", "1"]
    out = rewrite_steps(argv, 5)
    assert out == SG + ["--speculative-num-steps", "5", "--speculative-num-draft-tokens=6",
                        "--speculative-eagle-topk", "1"]
    assert current_spec(out) == SpecSettings(5, 6, 1, "EAGLE3")


def test_rewrite_sglang_adds_missing_flags_together() -> None:
    assert rewrite_steps(SG, 2) == SG + ["--speculative-num-steps", "2", "--speculative-num-draft-tokens", "3",
                                         "--speculative-eagle-topk", "1"]


def test_rewrite_sglang_draft_tokens_with_topk() -> None:
    argv = SG + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8"]
    with pytest.raises(AdoptError, match="top-k is 4"):
        rewrite_steps(argv, 2)
    assert current_spec(rewrite_steps(argv, 2, 9)) == SpecSettings(2, 9, 4, "EAGLE3")
    with pytest.raises(AdoptError, match=r"steps\*topk\+1"):
        rewrite_steps(argv, 2, 10)
    with pytest.raises(AdoptError, match=r"steps\*topk\+1"):
        rewrite_steps(SG, 2, 4)  # topk 1: at most 3


def test_rewrite_vllm_json_keeps_the_other_keys() -> None:
    out = rewrite_steps(VL + ["--speculative-config", VSPEC, "--max-model-len", "1024"], 7)
    assert out[:-3] == VL + ["--speculative-config"]
    assert json.loads(out[-3]) == {"method": "ngram", "num_speculative_tokens": 7, "prompt_lookup_max": 4}
    assert out[-2:] == ["--max-model-len", "1024"]
    inline = rewrite_steps(VL + ["--speculative_config=" + VSPEC], 1)
    assert inline[-1].startswith("--speculative_config=")
    assert json.loads(inline[-1].split("=", 1)[1])["num_speculative_tokens"] == 1


def test_rewrite_vllm_dotted_and_old_flags() -> None:
    dotted = VL + ["--speculative-config.num_speculative_tokens=3", "--speculative-config.method", "ngram"]
    assert rewrite_steps(dotted, 4)[-3] == "--speculative-config.num_speculative_tokens=4"
    old = VL + ["--speculative-model", "/d", "--num-speculative-tokens", "5"]
    assert rewrite_steps(old, 2)[-2:] == ["--num-speculative-tokens", "2"]
    with pytest.raises(AdoptError, match="no separate draft-token"):
        rewrite_steps(old, 2, 3)


def test_rewrite_to_zero_strips_speculation() -> None:
    argv = SG + ["--speculative-num-steps", "3", "--speculative-draft-model-path", "/d", "--port", "30000"]
    assert rewrite_steps(argv, 0) == [PY, "-m", "sglang.launch_server", "--model-path", "/m", "--port", "30000"]
    assert rewrite_steps(VL + ["--speculative-config", VSPEC], 0) == VL
    assert strip_spec(VL + ["--speculative-config=" + VSPEC, "--enforce-eager"]) == VL + ["--enforce-eager"]


def test_rewrite_refuses_a_server_without_speculation() -> None:
    with pytest.raises(AdoptError, match="without speculative decoding"):
        rewrite_steps(SG[:5], 3)
    with pytest.raises(AdoptError, match="without speculative decoding"):
        rewrite_steps(VL, 3)


@pytest.mark.parametrize("bad", [True, 4.5, "4; reboot", "$(id)", "4\n", -1, 65])
def test_rewrite_rejects_hostile_steps(bad: object) -> None:
    with pytest.raises(AdoptError, match="steps must be"):
        rewrite_steps(SG, bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- parse_probe


def record(pid: int, ppid: int, argv: list[str], env: list[str], held: list[str] = (), *,  # type: ignore[assignment]
           stdout: str = "/logs/s.log") -> str:
    fields = ["specmon-proc", str(pid), "1000", str(ppid), str(pid), "/srv", stdout, "argv", str(len(argv)), *argv,
              "env", str(len(env)), *env, "withheld", str(len(held)), *held, "end"]
    return "\0".join(fields) + "\0"


def test_parse_probe_keeps_main_servers_only() -> None:
    out = (
        record(10, 1, SG + ["--speculative-num-steps", "3"], ["NCCL_PROTO=LL"], ["HF_TOKEN"])
        + record(11, 10, SG + ["--speculative-num-steps", "3"], [])  # its own child
        + record(12, 1, ["bash", "-c", "echo sglang vllm"], [])
        + record(13, 1, VL + ["--speculative-config", VSPEC], ["VLLM_HOST_IP=127.0.0.1"], stdout="pipe:[99]")
        + "specmon-done\0"
    )
    servers = parse_probe(out)
    assert [(s.pid, s.engine) for s in servers] == [(10, "sglang"), (13, "vllm")]
    sg, vl = servers
    assert sg.env == {"NCCL_PROTO": "LL"} and sg.withheld_env == ("HF_TOKEN",)
    assert sg.cwd == "/srv" and sg.log_path == "/logs/s.log" and sg.port == 30000
    assert sg.identity.pid == 10 and sg.identity.starttime == 1000
    assert vl.log_path is None and vl.port == 8011 and vl.spec.steps == 3


def test_parse_probe_filters_env_again() -> None:
    out = record(10, 1, SG, ["NCCL_PROTO=LL", "HF_TOKEN=hf_leak", "HOME=/root", "SGLANG_X=a\x1bb"]) + "specmon-done\0"
    (server,) = parse_probe(out)
    assert server.env == {"NCCL_PROTO": "LL"}
    assert set(server.withheld_env) == {"HF_TOKEN", "HOME", "SGLANG_X"}


@pytest.mark.parametrize("out", ["", "garbage", record(10, 1, SG, []), record(10, 1, SG, [])[:-5] + "specmon-done\0",
                                 "specmon-proc\0x\0specmon-done\0"])
def test_parse_probe_refuses_mangled_output(out: str) -> None:
    with pytest.raises(AdoptError):
        parse_probe(out)


@pytest.mark.parametrize(
    ("name", "allowed"),
    [("NCCL_PROTO", True), ("CUDA_VISIBLE_DEVICES", True), ("PATH", True), ("VLLM_HOST_IP", True),
     ("HF_HUB_OFFLINE", True), ("HF_TOKEN", False), ("VLLM_API_KEY", False), ("AWS_SECRET_ACCESS_KEY", False),
     ("SGLANG_PASSWORD", False), ("NCCL_IB_AUTH", False), ("HOME", False), ("SSH_AUTH_SOCK", False),
     ("OPENAI_API_KEY", False)],
)
def test_env_allow_list(name: str, allowed: bool) -> None:
    assert env_name_allowed(name) is allowed


# --------------------------------------------------------------------------- real processes


SECRETS = {
    "HF_TOKEN": "hf_SECRETVALUE1",
    "AWS_SECRET_ACCESS_KEY": "aws_SECRETVALUE2",
    "MY_SERVICE_KEY": "key_SECRETVALUE3",
    "VLLM_API_KEY": "vllm_SECRETVALUE4",
    "NCCL_IB_AUTH_TOKEN": "nccl_SECRETVALUE5",
}


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(") ", 1)[1].split()[0] not in ("Z", "X")


def cmdline(pid: int) -> list[str]:
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


@pytest.fixture
def fakes(tmp_path: Path) -> Path:
    """A fake ``sglang`` package and a fake ``vllm`` executable in tmp_path."""
    pkg = tmp_path / "pkg" / "sglang"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "launch_server.py").write_text(FAKE_SERVER)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    vllm = bin_dir / "vllm"
    vllm.write_text(f"#!{sys.executable}\n" + FAKE_SERVER)
    vllm.chmod(0o755)
    return tmp_path


@pytest.fixture
def procs() -> Iterator[list[subprocess.Popen[bytes] | int]]:
    """Processes a test started; killed by their PID at the end."""
    started: list[subprocess.Popen[bytes] | int] = []
    yield started
    for p in started:
        pid = p if isinstance(p, int) else p.pid
        if alive(pid):
            os.kill(pid, signal.SIGKILL)
        if not isinstance(p, int):
            p.wait()


async def wait_for_text(path: Path, text: str) -> None:
    while text not in path.read_text():
        await asyncio.sleep(0.025)


async def test_probe_finds_servers_and_never_prints_secrets(fakes: Path, procs: list) -> None:
    sg_log = fakes / "sglang.log"
    env = SECRETS | {"NCCL_PROTO": "LL", "CUDA_VISIBLE_DEVICES": "0,1", "SGLANG_BAD": "a\nb",
                     "UNRELATED_SETTING": "notcopied"}
    sg_argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
               "--speculative-num-steps", "3", "--port", "30123", "--spawn-child"]
    with sg_log.open("w") as out:
        sg = subprocess.Popen(sg_argv, cwd=fakes, stdout=out, stderr=subprocess.STDOUT,
                              env={"PATH": os.environ["PATH"], "PYTHONPATH": str(fakes / "pkg")} | env)
    procs.append(sg)
    vl_log = fakes / "vllm.log"
    vl_argv = [str(fakes / "bin" / "vllm"), "serve", "/m", "--port", "8123", "--speculative-config", VSPEC]
    with vl_log.open("w") as out:
        vl = subprocess.Popen(vl_argv, cwd=fakes / "bin", stdout=out, stderr=subprocess.STDOUT,
                              env={"PATH": os.environ["PATH"], "VLLM_HOST_IP": "127.0.0.1"} | SECRETS)
    procs.append(vl)
    await wait_for_text(sg_log, "ready to roll")
    await wait_for_text(vl_log, "ready to roll")
    child = int(sg_log.read_text().split("child ", 1)[1].split()[0])
    procs.append(child)

    result = await LocalRunner().run(PROBE_COMMAND, 30)
    assert result.ok, result.stderr
    for value in [*SECRETS.values(), "notcopied", "a\nb"]:
        assert value not in result.stdout
    servers = {s.pid: s for s in parse_probe(result.stdout)}
    assert child not in servers  # a child of a server is not another server
    s = servers[sg.pid]
    assert s.engine == "sglang" and list(s.argv) == sg_argv
    assert s.cwd == str(fakes) and s.stdout == str(sg_log) and s.log_path == str(sg_log)
    assert s.env == {"NCCL_PROTO": "LL", "CUDA_VISIBLE_DEVICES": "0,1", "PATH": os.environ["PATH"],
                     "PYTHONPATH": str(fakes / "pkg")}
    assert set(s.withheld_env) == set(SECRETS) | {"SGLANG_BAD"}
    assert s.spec.steps == 3 and s.port == 30123
    v = servers[vl.pid]
    assert v.engine == "vllm" and v.argv[1:] == tuple(vl_argv) and v.argv[0] == sys.executable
    assert v.env == {"PATH": os.environ["PATH"], "VLLM_HOST_IP": "127.0.0.1"}
    assert v.spec.steps == 3 and v.port == 8123
    assert [x.pid for x in await probe_servers(LocalRunner()) if x.pid in (sg.pid, vl.pid)] == sorted(
        [sg.pid, vl.pid])


def test_probe_is_one_fixed_command() -> None:
    # No argument: nothing variable reaches the host; secrets are filtered there by pattern.
    assert shlex.split(PROBE_COMMAND) == ["bash", "-c", PROBE_SCRIPT]
    assert "*TOKEN*" in PROBE_SCRIPT and "*KEY*" in PROBE_SCRIPT and "NCCL_*" in PROBE_SCRIPT


async def test_adopt_then_restart_with_another_step_count(fakes: Path, procs: list) -> None:
    log = fakes / "adopted.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
            "--speculative-num-steps=3", "--speculative-num-draft-tokens", "4", "--port", "30124"]
    with log.open("w") as out:
        old = subprocess.Popen(argv, cwd=fakes, stdout=out, stderr=subprocess.STDOUT,
                               env={"PATH": os.environ["PATH"], "PYTHONPATH": str(fakes / "pkg"),
                                    "NCCL_PROTO": "LL", "HF_TOKEN": "hf_SECRETVALUE1"})
    procs.append(old)
    await wait_for_text(log, "ready to roll")
    (server,) = [s for s in await probe_servers(LocalRunner()) if s.pid == old.pid]

    prof = profile_from_server(server, pidfile=str(fakes / "adopted.pid"), stop_grace_s=5)
    assert prof.engine == "sglang" and prof.log == str(log) and prof.cwd == str(fakes)
    assert "--speculative-num-steps={steps}" in (prof.argv or [])
    assert prof.health_url == "http://127.0.0.1:{port}/health" and prof.port == 30124
    assert "HF_TOKEN" not in prof.env and prof.env["NCCL_PROTO"] == "LL"

    plan = build_plan(prof, 5, adopted=server.identity)
    assert "hf_SECRETVALUE1" not in plan.start.command
    report = await execute(plan, LocalRunner())
    assert report.ok, [o.summary() for o in report.outcomes]
    assert report.outcomes[0].fields == {"result": "stopped", "pid": str(old.pid), "signal": "INT"}
    assert old.wait(timeout=30) == 0
    new = report.server_pid
    assert new is not None
    procs.append(new)
    assert cmdline(new) == [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3",
                            "--speculative-num-steps=5", "--speculative-num-draft-tokens", "6", "--port", "30124",
                            "--speculative-eagle-topk", "1"]
    environ = Path(f"/proc/{new}/environ").read_bytes().split(b"\0")
    assert b"NCCL_PROTO=LL" in environ
    assert not any(e.startswith(b"HF_TOKEN=") for e in environ)
    await wait_for_text(log, "ready to roll")

    # Later restarts go through the pidfile; steps 0 drops speculation.
    again = await execute(build_plan(prof, 0), LocalRunner())
    assert again.ok and again.outcomes[0].fields["pid"] == str(new)
    assert again.server_pid is not None
    procs.append(again.server_pid)
    assert not alive(new)
    assert cmdline(again.server_pid) == [sys.executable, "-m", "sglang.launch_server", "--port", "30124"]
    stop = await LocalRunner().run(build_plan(prof, 0).stop.command, 30)
    assert "result=stopped" in stop.stdout


async def test_adopted_identity_protects_against_a_new_process(fakes: Path, procs: list) -> None:
    """Stopping an adopted server that already went away never hits a newcomer with its PID."""
    log = fakes / "a.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--speculative-algorithm", "EAGLE3"]
    with log.open("w") as out:
        old = subprocess.Popen(argv, cwd=fakes, stdout=out, stderr=subprocess.STDOUT,
                               env={"PATH": os.environ["PATH"], "PYTHONPATH": str(fakes / "pkg")})
    procs.append(old)
    await wait_for_text(log, "ready to roll")
    (server,) = [s for s in await probe_servers(LocalRunner()) if s.pid == old.pid]
    prof = profile_from_server(server, pidfile=str(fakes / "a.pid"))
    # Same PID, another start time: what a reused PID looks like.
    plan = build_plan(prof, 2, adopted=ProcessIdentity(server.pid, server.starttime + 1))
    r = await LocalRunner().run(plan.stop.command, 30)
    assert "result=not-running reason=pid-reused" in r.stdout
    assert alive(old.pid)


def test_profile_from_server_refusals() -> None:
    base = {"pid": 10, "starttime": 5, "ppid": 1, "pgid": 10, "engine": "sglang", "cwd": "/srv",
            "stdout": "/logs/s.log"}
    nospec = ServerProcess(argv=tuple(SG[:5]), **base)  # type: ignore[arg-type]
    with pytest.raises(AdoptError, match="without speculative decoding"):
        profile_from_server(nospec)
    piped = ServerProcess(argv=tuple(SG), **base | {"stdout": "pipe:[123]"})  # type: ignore[arg-type]
    with pytest.raises(AdoptError, match=r"pipe:\[123\]"):
        profile_from_server(piped)
    assert profile_from_server(piped, log="/logs/new_{steps}.log").log == "/logs/new_{steps}.log"
    braces = ServerProcess(argv=tuple(SG + ["--chat-template", "{model}.jinja"]), **base)  # type: ignore[arg-type]
    with pytest.raises(AdoptError, match="placeholder"):
        profile_from_server(braces)
    evil = ServerProcess(argv=tuple(SG + ["a\nb"]), **base)  # type: ignore[arg-type]
    with pytest.raises(AdoptError, match="control character"):
        profile_from_server(evil)


def test_profile_from_a_topk_server_keeps_its_draft_rule() -> None:
    base = {"pid": 10, "starttime": 5, "ppid": 1, "pgid": 10, "engine": "sglang", "cwd": "/srv",
            "stdout": "/logs/s.log"}
    tree = SG + ["--speculative-num-steps", "3", "--speculative-eagle-topk", "2", "--speculative-num-draft-tokens", "7"]
    prof = profile_from_server(ServerProcess(argv=tuple(tree), **base))  # type: ignore[arg-type]
    assert prof.topk == 2 and prof.draft_tokens == "steps*topk+1"
    assert build_plan(prof, 4).draft_tokens == 9
    vprof = profile_from_server(ServerProcess(argv=tuple(VL + ["--host", "0.0.0.0", "--speculative-config", VSPEC]),
                                              **base | {"engine": "vllm"}))  # type: ignore[arg-type]
    token = build_plan(vprof, 6).argv[-1]  # type: ignore[index]
    assert json.loads(token)["num_speculative_tokens"] == 6
    assert vprof.ready_marker == "Application startup complete." and vprof.port == 8011
