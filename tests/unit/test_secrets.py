"""Issue 34, item 3: secret values hidden from what specmon keeps and shows; its files private.

The redactor is driven with generated secret names (env style, flags, keyword arguments,
JSON keys) and values in the shapes servers print them; the writers (sweep state, server
registry, restart times, recordings, exports) are checked for 0600 files in 0700 folders,
also over folders an older specmon left 0755, and a sweep whose start fails with a token in
its log keeps no trace of the token in its state file.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from pathlib import Path

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from specmon import paths
from specmon.control.eta import EtaStore
from specmon.control.launch import LaunchProfile, build_plan
from specmon.control.runner import LocalRunner
from specmon.experiment.plan_restarter import LogFollower, PlanRestarter
from specmon.experiment.sweep_plan import SweepPlan
from specmon.experiment.sweep_run import Sweep
from specmon.model.session import Session
from specmon.output.recording import RecordedIngest, Recorder
from specmon.redact import MASK, is_secret_flag, redact_argv, redact_text
from specmon.sources.local import LocalTailSource

WORDS = ("token", "secret", "password", "passwd", "credential", "auth", "cookie", "private", "api_key", "key",
         "apikey", "passphrase")
ident = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_"), max_size=6)
# Values as tokens look: long enough that they cannot appear in the text by chance.
values = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_+/.~-"),
                 min_size=10, max_size=40).filter(lambda v: not v.startswith("-"))


@st.composite
def secret_names(draw: st.DrawFn) -> str:
    word = draw(st.sampled_from(WORDS))
    word = "".join(c.upper() if draw(st.booleans()) else c for c in word)
    prefix = draw(ident)
    suffix = draw(ident)
    # "tokens" is a count, "tokenizer" a path: a suffix that makes one of those is another name.
    if suffix[:1].lower() == "s" or suffix.lower().startswith("izer"):
        suffix = "_" + suffix
    return f"{prefix}{'_' if prefix else ''}{word}{'_' if suffix else ''}{suffix}"


SHAPES = (
    "{name}={value}",                      # env, argv --x=y without dashes
    "export {name}={value}",
    "--{flag}={value}",
    "--{flag} {value}",
    "['python', '-m', 'sglang', '--{flag}', '{value}', '--port', '30000']",
    "ServerArgs(model_path='/m', {name}='{value}', port=30000)",
    '{{"{name}": "{value}", "port": 30000}}',
    "{name}: {value}",
    "-{flag} {value}",
)


@settings(max_examples=300, deadline=None)
@given(secret_names(), values, st.sampled_from(SHAPES), st.text(max_size=20), st.text(max_size=20))
def test_a_secret_value_never_survives_in_any_shape(name: str, value: str, shape: str, before: str,
                                                    after: str) -> None:
    assume(value not in before + " " + after)
    flag = name.replace("_", "-")
    line = before + " " + shape.format(name=name, flag=flag, value=value) + " " + after
    out = redact_text(line)
    assert value not in out
    assert name in out or flag in out  # the name is kept: the reader sees what was hidden


@settings(max_examples=200, deadline=None)
@given(secret_names(), values, st.lists(st.text(min_size=1, max_size=8), max_size=4))
def test_argv_keeps_every_token_but_secret_values(name: str, value: str, rest: list[str]) -> None:
    flag = "--" + name.replace("_", "-")
    rest = [t for t in rest if not is_secret_flag(t.partition("=")[0]) and value not in t]
    for argv in (["prog", flag, value, *rest], ["prog", f"{flag}={value}", *rest]):
        out = redact_argv(argv)
        assert value not in " ".join(out)
        assert len(out) == len(argv) and out[0] == "prog" and out[-len(rest):] == rest if rest else True


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=80), values)
def test_known_values_are_hidden_anywhere(text: str, value: str) -> None:
    out = redact_text(text + value + text, known=[value])
    assert value not in out and MASK in out


@pytest.mark.parametrize("line", [
    "Decode batch. #running-req: 1, #token: 1234, token usage: 0.01, accept len: 2.50, "
    "gen throughput (token/s): 100.0",
    "max_total_num_tokens=123456, max_tokens=512, num_tokens: 7",
    "tokenizer_path=/models/llama/tokenizer.json",
    "Avg prompt throughput: 10.0 tokens/s, Avg generation throughput: 50.0 tokens/s",
])
def test_counts_and_paths_are_not_secrets(line: str) -> None:
    assert redact_text(line) == line


def test_well_known_token_shapes_are_hidden_anywhere() -> None:
    for token in ("hf_" + "a" * 34, "sk-" + "b" * 40, "ghp_" + "c" * 36, "AKIA" + "D" * 16):
        assert token not in redact_text(f"loaded with {token} ok")
    assert "Bearer abcdefgh123" not in redact_text("Authorization: Bearer abcdefgh123")


# --------------------------------------------------------------------------- files


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_write_private_is_0600_in_0700_folders_and_tightens_our_own(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    old = paths.data_dir() / "sweeps"
    old.mkdir(parents=True, mode=0o755)
    os.chmod(old, 0o755)
    os.chmod(paths.data_dir(), 0o755)  # what an older specmon left
    target = paths.write_private(old / "a.json", "{}")
    assert mode(target) == 0o600 and mode(old) == 0o700 and mode(paths.data_dir()) == 0o700
    elsewhere = tmp_path / "shared"
    elsewhere.mkdir(mode=0o755)
    os.chmod(elsewhere, 0o755)
    out = paths.write_private(elsewhere / "new" / "deeper" / "r.md", "x")
    assert mode(out) == 0o600 and mode(out.parent) == 0o700 and mode(out.parent.parent) == 0o700
    assert mode(elsewhere) == 0o755  # the user's own folder is theirs to set
    assert [p.name for p in out.parent.iterdir()] == ["r.md"]  # no temporary left


def test_every_writer_is_private(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    store = EtaStore()
    store.record("gpu", {"stopping": 1.0, "starting": 2.0, "loading": 3.0, "capturing": 4.0})
    assert mode(paths.eta_history_file()) == 0o600
    rec = Recorder(paths.recordings_dir() / "r.jsonl", meta={"k": 1})
    try:
        assert mode(paths.recordings_dir()) == 0o700 and mode(paths.recordings_dir() / "r.jsonl") == 0o600
    finally:
        rec.close()
    plan = SweepPlan((1,), max_minutes=0.01)
    sweep = Sweep(plan, session=Session(), restart=lambda s, d=None: None,  # type: ignore[arg-type,return-value]
                  state_path=paths.sweeps_dir() / "s.json")
    sweep.save()
    assert mode(paths.sweeps_dir()) == 0o700 and mode(paths.sweeps_dir() / "s.json") == 0o600
    assert mode(paths.data_dir()) == 0o700


FAILING = r'''
import sys
print("ServerArgs(model_path='/m', api_key='%s', port=1)" % sys.argv[1], flush=True)
print("Traceback (most recent call last):", flush=True)
print("ValueError: token %s rejected" % sys.argv[1], flush=True)
sys.exit(1)
'''


async def test_a_failed_start_keeps_no_secret_in_the_sweep_state(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    secret = "sk-" + "Zq9" * 10
    script = tmp_path / "server.py"
    script.write_text(FAILING)
    profile = LaunchProfile(mode="managed", engine="sglang",
                            argv=[sys.executable, str(script), secret, "--api-key", secret, "--steps", "{steps}"],
                            env={"MY_API_TOKEN": secret}, log=str(tmp_path / "s.log"),
                            pidfile=str(tmp_path / "s.pid"), ready_marker="ready", start_timeout_s=20,
                            stop_grace_s=2, stop_signal="TERM", steps_min=1, steps_max=4)
    assert secret not in build_plan(profile, 1).describe()
    session = Session()
    ingest = RecordedIngest(session, None)
    follower = LogFollower(ingest, lambda p, from_end: LocalTailSource(p, lines=0 if from_end else None,
                                                                       poll_interval=0.05))
    shown: list[str] = []
    restarter = PlanRestarter(profile, LocalRunner(), follower=follower, show=shown.append, ready_poll_s=0.1)
    events: list[str] = []
    state = paths.sweeps_dir() / "x.json"
    sweep = Sweep(SweepPlan((1,), max_minutes=0.05, attach_s=2), session=session, restart=restarter,
                  state_path=state, on_event=lambda e: events.append(e.text))
    try:
        result = await sweep.run()
    finally:
        await follower.stop()
    assert result.cells[0].status == "failed"
    assert secret in (tmp_path / "s.log").read_text()  # the server really printed it
    text = state.read_text()
    assert "rejected" in text or "exited" in text  # the failure is kept...
    assert secret not in text  # ...without the secret
    assert all(secret not in e for e in events) and all(secret not in s for s in shown)
    assert mode(state) == 0o600
    await asyncio.sleep(0)
    json.loads(text)
