"""Named prompt sets for ``--workload``: the bundled chat, code and long-form sets, and JSONL files."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specmon.control.load import BUNDLED_WORKLOADS, LoadError, bundled_workload, load_workloads


def test_the_bundled_sets_are_small_distinct_and_shipped() -> None:
    sets = {name: bundled_workload(name) for name in BUNDLED_WORKLOADS}
    assert set(sets) == {"chat", "code", "long"}
    for prompts in sets.values():
        assert 4 <= len(prompts) <= 32 and all(p.strip() for p in prompts)
    assert not set(sets["chat"]) & set(sets["code"])
    assert any("def " in p or "function" in p for p in sets["code"])


def test_workload_items(tmp_path: Path) -> None:
    f = tmp_path / "mine.jsonl"
    f.write_text('{"prompt": "a"}\n"b"\n')
    got = load_workloads(["chat", f"ours={f}", str(f)])
    assert list(got) == ["chat", "ours", "mine"] and got["ours"] == ("a", "b") == got["mine"]
    for items, why in [(["chat", "chat"], "given twice"), (["poetry"], "not a bundled set"),
                       ([f"bad name={f}"], "letters, digits"), ([f"x={tmp_path / 'none.jsonl'}"], "No such file")]:
        with pytest.raises(LoadError, match=why):
            load_workloads(items)


@pytest.mark.parametrize(("args", "message"), [
    (["--workload", "chat,poetry"], "not a bundled set"),
    (["--workload", "chat", "--prompts", "x.jsonl"], "not both"),
    (["--workload", "chat", "--no-load"], "cannot go with --no-load"),
    (["--grid", "steps=1,2", "prompt_lookup_max=2,4"], "the demo server's command has no {prompt_lookup_max}"),
    (["--grid", "steps=1", "topk=1", "draft_tokens=9"], "no combination of these values"),
    (["--grid", "steps=1", "--steps", "1,2"], "give the step counts once"),
    (["--grid", "topk=x"], "not a whole number"),
])
def test_bad_sweep_options_are_one_sentence_and_exit_2(args: list[str], message: str, tmp_path: Path) -> None:
    r = subprocess.run([sys.executable, "-m", "specmon", "sweep", "--demo", "--no-record", *args],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert message in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_a_profile_after_the_grid_is_still_the_profile(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[profiles.other]\nlog = "/tmp/x.log"\n')
    r = subprocess.run([sys.executable, "-m", "specmon", "sweep", "--grid", "steps=1,2", "topk=1,4", "nosuch",
                        "--config", str(config), "--no-record"],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, stdin=subprocess.DEVNULL)
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert "nosuch" in r.stderr and "NAME=V1" not in r.stderr, r.stderr
