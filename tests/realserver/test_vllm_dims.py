"""A guided sweep of a real vLLM over two dimensions: ``num_speculative_tokens`` × ``prompt_lookup_max``.

The kit's CPU vLLM (``shared/real_server``) in a managed local profile whose
``--speculative-config`` JSON carries both placeholders, ``{steps}`` and
``{prompt_lookup_max}``; ``specmon sweep --grid steps=1,2 prompt_lookup_max=2,4
--strategy guided`` as a user runs it. Asserted: the sweep ends with a verdict
or an honest "not separated", counts its restarts (at most one per setting),
and every restart ran a command with the setting's own values (read back from
the server's own start lines). Nothing asserts which setting is faster on this
toy model. Ports 18300-18349; the server is stopped by its pidfile in a finally.
"""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest

from tests.support.connecting import write_config
from tests.support.realkits import require, run_specmon, stop_server, sweep_json, vllm_missing, vllm_profile

pytestmark = pytest.mark.realserver

SWEEP_WAIT_S = 1800.0  # a bound, not an expectation: vLLM takes 25-40 s to start on an idle machine
PORTS = range(18300, 18350)


def free_port() -> int:
    for port in PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port in 18300-18349")


def test_guided_sweep_over_tokens_and_lookup_window_ends_with_a_verdict(tmp_path: Path) -> None:
    require(vllm_missing())
    folder = tmp_path / "vllm"
    folder.mkdir()
    port = free_port()
    base = vllm_profile(folder, port)
    assert base.argv is not None
    # --enforce-eager: no torch.compile warm-up (95 s of the first start at load 15, measured); four
    # starts are most of this test's time.
    argv = [*base.argv[:-2], "--enforce-eager", base.argv[-2],
            '{"method": "ngram", "num_speculative_tokens": {steps}, "prompt_lookup_max": {prompt_lookup_max}, '
            '"prompt_lookup_min": 1}']
    launch = base.model_copy(update={"argv": argv, "log": str(folder / "vllm_{steps}_{prompt_lookup_max}.log"),
                                     "steps_min": 1})
    config = write_config(tmp_path / "config.toml", "vllm-dims", {"engine": "vllm"}, launch)
    ended = False
    try:
        result = run_specmon(["sweep", "vllm-dims", "--config", str(config), "--grid", "steps=1,2",
                              "prompt_lookup_max=2,4", "--strategy", "guided", "--yes", "--no-record",
                              "--state", str(tmp_path / "sweep.json"), "--format", "json", "--finish", "none",
                              "--min-samples", "10", "--max-samples", "15", "--looks", "2", "--max-minutes", "1",
                              "--concurrency", "2", "--max-tokens", "48", "--request-timeout", "60"], SWEEP_WAIT_S)
        doc = sweep_json(result)
        ended = True  # --finish none: the sweep stopped its server and removed the pidfile
        print(f"\nreal vLLM guided sweep, num_speculative_tokens x prompt_lookup_max: "
              f"{doc['restarts']} restarts for {doc['settings']} settings")
        for run in doc["runs"]:
            print(f"  {run['setting']:<30} status={run['status']:<8} samples={run['samples']:>3} "
                  f"tok/s={(run['throughput'] or {}).get('mean')} stop={run['stop_reason']}")
        print(f"  verdict: {doc['verdict']['sentence']}")
        assert result.returncode in (0, 1), result.stderr[-3000:]
        assert doc["dimensions"] == ["steps", "prompt_lookup_max"]
        settings = {(r["steps"], r["dims"]["prompt_lookup_max"]) for r in doc["runs"]}
        assert settings == {(1, 2), (1, 4), (2, 2), (2, 4)}, doc["runs"]
        measured = [r for r in doc["runs"] if r["status"] == "done"]
        assert all(r["status"] in ("done", "skipped") for r in doc["runs"]), doc["runs"]
        # One restart per measured setting: the guided strategy restarts only for what it measures.
        assert doc["restarts"] == len(measured) >= 2, doc
        assert all(r["samples"] >= 10 and r["client"]["errors"] == 0 for r in measured), measured
        assert "server stopped as asked" in result.stderr
        verdict = doc["verdict"]
        if verdict["separated"]:
            assert verdict["best_setting"] in {r["setting"] for r in measured}, verdict
        else:
            assert "not" in verdict["sentence"] and verdict["winner_steps"] is None, verdict
        # Each restart showed, and ran, the setting's own values in vLLM's --speculative-config.
        shown = re.findall(r'"num_speculative_tokens": (\d), "prompt_lookup_max": (\d)', result.stderr)
        assert {(int(a), int(b)) for a, b in shown} >= {(r["steps"], r["dims"]["prompt_lookup_max"])
                                                        for r in measured}, result.stderr[-3000:]
        for r in measured:
            log = folder / f"vllm_{r['steps']}_{r['dims']['prompt_lookup_max']}.log"
            text = log.read_text(errors="replace")
            assert re.search(rf"'?prompt_lookup_max'?[\"']?:\s*{r['dims']['prompt_lookup_max']}\b", text), log
    finally:
        # After a finished sweep, a missing pidfile means "stopped", not "not written yet".
        stop_server(launch.pidfile, late_s=2.0 if ended else 90.0)
