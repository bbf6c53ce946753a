"""A sweep that decides on inter-token latency, on the real vLLM kit over a real OpenSSH sshd (issue 32).

``specmon sweep --objective itl-p50``: no speculation against 2 n-gram tokens, two rounds of
launches (the leader and the baseline launched twice), each launch measured until its load
has completed the requests the percentile needs after its first wave. The verdict is on ITL
p50 in milliseconds with its interval over launches; the test checks what the JSON says
against what the client itself timed (each launch's requests), never which setting is
faster on this toy model.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.realserver.test_vllm import SWEEP_WAIT_S, vllm_over_ssh
from tests.support.realkits import run_specmon, server_argv, stop_server, sweep_json
from tests.support.sshd import ClientHome, OpenSSHServer

pytestmark = pytest.mark.realserver


def test_a_real_vllm_sweep_decides_on_itl_p50_with_an_interval_over_launches(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    launch, config = vllm_over_ssh(tmp_path, client_home, openssh_server, "vllm_0.log")
    try:
        result = run_specmon(["sweep", "cpu-vllm", "--config", str(config), "--steps", "0,2", "--yes",
                              "--objective", "itl-p50", "--resolve-pct", "50", "--no-record", "--finish", "winner",
                              "--state", str(tmp_path / "sweep.json"), "--format", "json",
                              "--min-samples", "8", "--max-samples", "40", "--max-minutes", "10",
                              "--concurrency", "1", "--max-tokens", "128", "--request-timeout", "60"],
                             SWEEP_WAIT_S)
        doc = sweep_json(result)
        ov = doc["objective_verdict"]
        print(f"\nreal vLLM sweep on ITL p50: {ov['sentence']}")
        for row in ov["rows"]:
            print(f"  {row['label']}: {row['value']} ms {row['ci95']} over {row['launches']} launches, "
                  f"{row['requests']} requests")
        assert result.returncode in (0, 1), result.stderr[-3000:]
        assert doc["objective"]["objective"] == "itl-p50" and ov["unit"] == "ms"
        assert "launches" in ov["sentence"] and "ITL p50" in ov["sentence"]
        assert {r["steps"] for r in ov["rows"]} == {0, 2}
        for row in ov["rows"]:
            # Every counted launch had the ten requests a median needs, after its first wave.
            assert row["launches"] >= 1 and row["requests"] >= 10 * row["launches"], row
            lo, hi = row["ci95"]  # the upper end is None (unbounded) when the rate's interval reaches 0
            assert 0 < lo <= row["value"] and (hi is None or row["value"] <= hi), row
        for run in doc["runs"]:
            assert run["client"]["errors"] == 0, run["client"]
            # The objective's figure agrees with what the client timed otherwise: the median request's
            # decode speed between its first and last chunk (a different clock span, the same requests).
            speeds = run["client"]["decode_tps"]
            print(f"  {run['label']}: client median {speeds and speeds['median']} tok/s, "
                  f"untimed {run['client']['untimed']} of {run['client']['requests']}")
            if speeds and run["objective"].get("value"):
                ms_from_chunks = 1000.0 / speeds["median"]
                assert abs(run["objective"]["value"] - ms_from_chunks) / ms_from_chunks < 0.35, (run, speeds)
        # --finish winner follows the objective's verdict, and the server really runs it.
        left = doc["server_left_on"]
        if ov["separated"]:
            assert left["running"] is True and left["steps"] == ov["winner_steps"], left
        argv = server_argv(launch.pidfile)
        assert argv, "the server should be left running"
        steps_left = left["steps"]
        if steps_left:
            assert any(f'"num_speculative_tokens": {steps_left}' in a for a in argv), argv
        else:
            assert not any("--speculative-config" in a for a in argv), argv
        launches = statistics.fmean(r["launches"] for r in ov["rows"])
        assert launches >= 1
    finally:
        stop_server(launch.pidfile)


def test_a_real_vllm_runs_the_sweeps_schedule_and_it_is_measured_against_the_fixed_settings(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    # Two speculative settings (so a schedule is always there to deploy), two loads, one launch each (the
    # sample rule); then the schedule in two launches per load, over the real sshd: its replicated
    # launches give the launch spread the comparison uses (no assumption of launches alike).
    launch, config = vllm_over_ssh(tmp_path, client_home, openssh_server, "vllm_1.log")
    folder = tmp_path / "vllm"
    try:
        result = run_specmon(["sweep", "cpu-vllm", "--config", str(config), "--steps", "1,3", "--yes",
                              "--concurrency", "1,4", "--order", "given",
                              "--measure-schedule", "2", "--no-record", "--format", "json",
                              "--state", str(tmp_path / "sweep.json"), "--min-samples", "8",
                              "--max-samples", "30", "--max-minutes", "10", "--max-tokens", "48",
                              "--request-timeout", "60"], SWEEP_WAIT_S)
        doc = sweep_json(result)
        assert result.returncode in (0, 1), result.stderr[-3000:]
        (schedule,) = doc["schedules"]
        checks = doc["schedule_check"]
        print(f"\nreal vLLM schedule {schedule['vllm_speculative_config']}:")
        for c in checks:
            print(f"  {c['sentence']}")
        assert [c["concurrency"] for c in checks] == [1, 4]
        for c in checks:
            assert c["schedule_launches"] == 2 and c["change_ci95"] is not None, c
            assert "launch CV 0" not in c["sentence"] and "launches assumed alike" not in c["sentence"], c
            lo, hi = c["change_ci95"]
            assert lo <= c["change_pct"] <= hi and c["schedule_value"] > 0 and c["best_value"] > 0, c
        # The server is left on the schedule, and vLLM took the table (it would refuse one it cannot read).
        left = doc["server_left_on"]
        assert left["running"] is True and left["schedule"] == schedule["ranges"], left
        argv = server_argv(launch.pidfile)
        table = schedule["vllm_speculative_config"]["num_speculative_tokens_per_batch_size"]
        assert any('"num_speculative_tokens_per_batch_size": ' + str(table).replace("'", '"') in a
                   for a in argv), argv
        log = (folder / f"vllm_{schedule['vllm_speculative_config']['num_speculative_tokens']}.log").read_text(
            errors="replace")
        assert "num_speculative_tokens_per_batch_size" in log
    finally:
        stop_server(launch.pidfile)
