"""``specmon sweep`` through the real entry point: ``--demo``, a config profile, and the errors.

The demo here is the full path — simulated server restarted per step count,
local tail, load driver, JSON verdict — at a smaller sample budget than the
default so the file stays fast.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from specmon.cli import main
from tests.support.sweepcli import sim_launch

ROOT = Path(__file__).resolve().parents[2]


def specmon(args: list[str], tmp_path: Path, timeout: float = 170) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    return subprocess.run([sys.executable, "-m", "specmon", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=timeout, stdin=subprocess.DEVNULL)


def pids_started(stderr: str) -> list[int]:
    return [int(p) for p in re.findall(r"start: result=started pid=(\d+)", stderr)]


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_demo_sweep_prints_a_json_verdict(tmp_path: Path) -> None:
    proc = specmon(["sweep", "--demo", "--steps", "0,2,5", "--max-samples", "200", "--format", "json",
                    "--seed", "4"], tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    v = doc["verdict"]
    assert v["best_steps"] == 2 and isinstance(v["separated"], bool)
    assert v["speedup_pct"] is not None and v["speedup_ci95"][0] <= v["speedup_pct"] <= v["speedup_ci95"][1]
    assert [r["steps"] for r in doc["runs"]] == [0, 2, 5]
    assert all(r["status"] == "done" and r["samples"] >= 40 for r in doc["runs"])
    assert all(r["client"]["requests"] > 0 and r["client"]["errors"] == 0 for r in doc["runs"])
    assert doc["cost_model"]["points"] and doc["finished"] is True
    # Each source's check names its own fastest setting and its phrase says the same: the client's is the
    # client_best_steps beside it (a demo's JSON held checks[0].best_steps 5, client_best_steps 2 and
    # "the same fastest setting").
    checks = {c["name"]: c for c in v["checks"]}
    assert checks["client"]["best_steps"] == v["client_best_steps"] is not None
    for c in checks.values():
        same = c["best_steps"] == v["best_steps"]
        assert ("the same fastest setting" in c["phrase"]) is same, c
        assert same or f"ranks {c['best_steps']} steps fastest" in c["phrase"], c
    # Every command was shown on stderr before it ran, and every server it started is gone.
    err = proc.stderr
    # The default design launches every setting at least twice: one start per launch.
    launches = sum(r["launches"] for r in doc["runs"])
    assert all(r["launches"] >= 2 for r in doc["runs"]) and doc["restarts"] == launches
    assert err.count("start: cd ") == launches and "specmon.sim.server" in err
    pids = pids_started(err)
    assert len(pids) == launches and not any(alive(p) for p in pids)
    # The session was recorded under the user's data directory, and reports from it.
    rec = Path(doc["recording"])
    assert rec.parent == tmp_path / "data" / "specmon" / "recordings" and rec.exists()
    report = specmon(["report", str(rec), "--format", "json"], tmp_path)
    assert report.returncode == 0, report.stderr
    rdoc = json.loads(report.stdout)
    assert rdoc["report"]["sweep_verdict"]["verdict"]["best_steps"] == 2
    assert rdoc["report"]["sentence"] == v["sentence"]


def test_profile_sweep_restarts_the_configured_server(tmp_path: Path) -> None:
    work = tmp_path / "srv"
    work.mkdir()
    config = tmp_path / "specmon.toml"
    config.write_text(f"[profiles.sim]\nlog = {json.dumps(str(work / 'sim.log'))}\n" + sim_launch("sim", work))
    state = tmp_path / "state.json"
    try:
        proc = specmon(["sweep", "--order", "given", "sim", "--config", str(config), "--steps", "2,0", "--min-samples", "40",
                        "--max-samples", "160", "--looks", "3", "--yes", "--state", str(state),
                        "--format", "markdown", "--no-record", "--finish", "winner"], tmp_path)
        assert proc.returncode == 0, proc.stderr[-3000:]
        # The verdict with its mark and words: ★ only for a declared winner, ☆ for a leader not separated.
        assert "### Concurrency 1" in proc.stdout and re.search(
            r"\*\*Verdict \((★ winner|☆ leads, undecided[^)]*)\):\*\* EAGLE3 2 steps", proc.stdout), proc.stdout
        assert ("★ winner" in proc.stdout) is ("faster than no speculation" in proc.stdout)
        assert "Cost model (concurrency 1)" in proc.stdout
        # The simulator has no /metrics: the sweep says it falls back to the log, and rests on it.
        assert "falling back to the server log" in proc.stderr and "Rests on the server log" in proc.stdout
        saved = json.loads(state.read_text())
        assert saved["finished"] is True and [c["status"] for c in saved["cells"]] == ["done", "done"]
        # --finish winner: measured 2 then 0, so a declared winner (2) means one more restart.
        if "faster than no speculation" in proc.stdout:
            assert "left running on the winner (2 speculative steps)" in proc.stderr
            assert proc.stderr.count("start: result=started") == 3
        else:
            assert "no winner declared" in proc.stderr
        pid = int((work / "sim.pid").read_text().split()[0])
        assert alive(pid)
        # Run again: the finished sweep's verdict, without restarting anything.
        again = specmon(["sweep", "--order", "given", "sim", "--config", str(config), "--steps", "2,0", "--min-samples", "40",
                         "--max-samples", "160", "--looks", "3", "--yes", "--state", str(state),
                         "--format", "json", "--no-record"], tmp_path)
        assert again.returncode == 0 and "already finished" in again.stderr and "start:" not in again.stderr
        assert "restart(s)" not in again.stderr
        assert json.loads(again.stdout)["verdict"]["best_steps"] == 2
    finally:
        try:
            os.killpg(int((work / "sim.pid").read_text().split()[0]), signal.SIGTERM)
        except (OSError, ValueError, IndexError):
            pass


def run_cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_sweep_usage_errors(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path))
    code, _, err = run_cli(["sweep"], capsys)
    assert code == 2 and "give a PROFILE" in err
    code, _, err = run_cli(["sweep", "x", "--demo"], capsys)
    assert code == 2 and "not both" in err
    code, _, err = run_cli(["sweep", "x"], capsys)  # the profile first: its [sweep] may hold the steps
    assert code == 2 and "unknown profile 'x'" in err
    code, _, err = run_cli(["sweep", "nosuch", "--steps", "0,2"], capsys)
    assert code == 2 and "unknown profile 'nosuch'" in err
    cfg = tmp_path / "c.toml"
    cfg.write_text('[profiles.bare]\nlog = "/x.log"\n')
    code, _, err = run_cli(["sweep", "bare", "--config", str(cfg)], capsys)
    assert code == 2 and "--steps" in err
    code, _, err = run_cli(["sweep", "bare", "--config", str(cfg), "--steps", "0,2"], capsys)
    assert code == 2 and "no [launch] section" in err
    cfg.write_text('[profiles.p.launch]\nargv = ["srv", "--n", "{steps}"]\nlog = "/x.log"\n'
                   'ready_marker = "up"\n')
    code, _, err = run_cli(["sweep", "p", "--config", str(cfg), "--steps", "0,2"], capsys)
    assert code == 2 and "allows step counts 1 to 16" in err  # 0 is below steps_min (no nospec_argv)
    code, _, err = run_cli(["sweep", "p", "--config", str(cfg), "--steps", "1,2"], capsys)
    assert code == 2 and "no `port`" in err
    code, _, err = run_cli(["sweep", "p", "--config", str(cfg), "--steps", "1,2", "--no-load"], capsys)
    assert code == 2 and "--yes" in err  # not a terminal: restarting needs explicit consent
    with pytest.raises(SystemExit):
        run_cli(["sweep", "--demo", "--steps", "1,1"], capsys)
    code, _, err = run_cli(["sweep", "--demo", "--min-samples", "2"], capsys)
    assert code == 2 and "min_samples" in err
