"""``specmon sweep --demo --grid ... --strategy guided``: the real entry point over SGLang's tree dimensions.

The simulated server really restarts with ``--topk``/``--draft-tokens`` per setting;
asserted are the behaviours (each restart shows and runs its own tree, restarts are
counted, skipped settings say why, nothing is left running), not which tree wins.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_demo_guided_sweep_over_steps_topk_and_draft_tokens(tmp_path: Path) -> None:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "sweep", "--demo", "--grid", "steps=0,2,3", "topk=1,4",
         "draft_tokens=3,4,8", "--strategy", "guided", "--min-samples", "20", "--max-samples", "60",
         "--looks", "2", "--format", "json", "--seed", "3", "--no-record"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    err = proc.stderr
    # Refused combinations are named before anything runs.
    assert "left out 2 steps, topk 1, draft_tokens 4: top-k 1 makes SGLang use steps+1 = 3" in err
    assert doc["dimensions"] == ["steps", "topk", "draft_tokens"]
    runs = doc["runs"]
    assert doc["settings"] == len(runs) == 9
    measured = [r for r in runs if r["status"] == "done"]
    skipped = [r for r in runs if r["status"] == "skipped"]
    assert doc["restarts"] == len(measured) == len(runs) - len(skipped)
    assert all("cost model bounds it" in r["stop_text"] for r in skipped)
    # Each restart showed its own tree on stderr before running it.
    shown = re.findall(r"--steps (\d+) --topk (\d+) --draft-tokens (\d+)|--steps (\d+) --draft-tokens (\d+) --topk (\d+)",
                       err)
    trees = {(int(a or d), int(b or f), int(c or e)) for a, b, c, d, e, f in shown}
    for r in measured:
        if r["steps"]:
            assert (r["steps"], r["dims"]["topk"], r["dims"]["draft_tokens"]) in trees, (r, trees)
    # The rows are the settings, each labelled as the server reported it.
    assert len({r["label"] for r in runs}) == len(runs)
    v = doc["verdict"]
    assert v["best_setting"] in {r["setting"] for r in measured}
    pids = [int(p) for p in re.findall(r"start: result=started pid=(\d+)", err)]
    assert len(pids) == doc["restarts"] and not any(alive(p) for p in pids)


def test_demo_sweep_over_workloads_gives_a_verdict_for_each(tmp_path: Path) -> None:
    from specmon.control.load import bundled_workload
    from specmon.sim.model import task_acceptance

    # The simulated drafter is told apart by task: code above long-form above chat, for every bundled prompt.
    for name, want in (("code", 1.35), ("long", 1.1), ("chat", 0.75)):
        assert {task_acceptance(p) for p in bundled_workload(name)} == {want}, name
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    proc = subprocess.run(
        [sys.executable, "-m", "specmon", "sweep", "--demo", "--order", "given", "--steps", "0,2", "--workload",
         "chat,code", "--min-samples", "20", "--max-samples", "60", "--looks", "2", "--format", "json", "--seed", "5",
         "--no-record"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=400, stdin=subprocess.DEVNULL)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert [v["workload"] for v in doc["verdicts"]] == ["chat", "code"]
    assert doc["restarts"] == 2  # one launch per setting serves both workloads
    assert {(r["steps"], r["workload"]) for r in doc["runs"]} == {(0, "chat"), (0, "code"), (2, "chat"),
                                                                   (2, "code")}
    assert "--task-acceptance" in proc.stderr and "on the code prompts" in doc["verdicts"][1]["sentence"]
    by = {(r["steps"], r["workload"]): r for r in doc["runs"]}
    # Code is accepted more than chat by the same drafter at the same depth.
    assert by[(2, "code")]["accept_len"]["mean"] > by[(2, "chat")]["accept_len"]["mean"]
    pids = [int(p) for p in re.findall(r"start: result=started pid=(\d+)", proc.stderr)]
    assert len(pids) == 2 and not any(alive(p) for p in pids)
