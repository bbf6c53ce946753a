"""A parallel A/B sweep on four real ``llama-server`` replicas over the real OpenSSH sshd (issue 31).

A replicas profile lists four replicas on 127.0.0.1 (the sshd's port and key shared), each with
its own ``launch_port``, and one ``[launch]`` section they share (the kit's server with its draft
model; ``{port}`` in its command, log, pidfile and health URL). ``specmon sweep`` restarts all
four in parallel each round, with the settings the rotated layout gives them, drives the same
load to each through SSH port forwards, and decides with the replica as a random effect. The
test checks the layout, every launch, the verdict and what is left running (the winner, or the
last setting, on every replica, read back from each server's command line). Marked
``realserver``; every wait bounded; the servers stopped by PID.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.connecting import toml_value
from tests.support.fleet_verdict import rounds_agree_with_launches
from tests.support.realkits import (
    free_port,
    llama_missing,
    llama_profile,
    require,
    run_specmon,
    server_argv,
    stop_server,
    sweep_json,
)
from tests.support.sshd import ClientHome, OpenSSHServer, local_user

pytestmark = pytest.mark.realserver

#: Ports of their own (the four-replica view test uses 18420-18459).
PORTS = range(18460, 18500)
SWEEP_WAIT_S = 900.0
STEPS = (0, 2, 4)


def fleet_config(tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer,
                 folder: Path) -> tuple[Path, dict[str, str]]:
    """The replicas profile and each replica's pidfile."""
    ports: list[int] = []
    while len(ports) < 4:
        ports.append(free_port(range(max(ports, default=PORTS.start - 1) + 1, PORTS.stop)))
    launch = llama_profile(folder, ports[0]).model_dump(exclude_none=True, mode="json")
    launch.pop("port")
    launch.update(log=str(folder / "llama_{port}_{steps}.log"), pidfile=str(folder / "llama_{port}.pid"),
                  health_url="http://127.0.0.1:{port}/health")
    lines = ["[profiles.fleet]", f"user = {json.dumps(local_user())}", f"port = {openssh_server.port}",
             f"identity = {json.dumps(str(client_home.ssh_dir / 'id_ed25519'))}", 'engine = "llamacpp"', "",
             "[profiles.fleet.launch]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in launch.items()]
    pidfiles = {}
    for i, port in enumerate(ports, start=1):
        name = f"llama-{i}"
        lines += ["", "[[profiles.fleet.replicas]]", f'name = "{name}"', 'host = "127.0.0.1"',
                  f"log = {json.dumps(str(folder / f'view-{port}.log'))}", f"launch_port = {port}"]
        pidfiles[name] = str(folder / f"llama_{port}.pid")
    config = tmp_path / "config.toml"
    config.write_text("\n".join(lines) + "\n")
    return config, pidfiles


def test_parallel_sweep_of_three_depths_on_four_real_llama_replicas_over_openssh(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    require(llama_missing())
    folder = tmp_path / "llama"
    folder.mkdir()
    config, pidfiles = fleet_config(tmp_path, client_home, openssh_server, folder)
    began = time.monotonic()
    try:
        result = run_specmon(["sweep", "fleet", "--config", str(config), "--steps", ",".join(map(str, STEPS)),
                              "--rounds", "3", "--min-samples", "8", "--concurrency", "2", "--max-tokens", "48",
                              "--request-timeout", "30", "--max-minutes", "3", "--seed", "5", "--yes", "--no-record",
                              "--finish", "winner", "--format", "json"], SWEEP_WAIT_S)
        took = time.monotonic() - began
        doc = sweep_json(result)
        print(f"\nparallel sweep on 4 real llama-servers over OpenSSH in {took:.0f} s: {doc['verdict']['sentence']}")
        for x in doc["launches"]:
            print(f"  round {x['round']} {x['replica']}: {x['steps']} steps ok={x['ok']} tok/s={x['tok_s']} "
                  f"n={x['samples']} requests={x['requests']} errors={x['errors']} {x['seconds']} s {x['text'] or ''}")
        for r in doc.get("rounds") or []:
            for x in r["left_out"]:
                print(f"  after round {r['round']}: {x['steps']} steps left the rotation ({x['why']})")
        assert result.returncode == 0, result.stderr[-4000:]
        # Every replica's first restart was shown before any ran, each with its own port.
        first_start = result.stderr.index("start: result=")
        for name in pidfiles:
            assert result.stderr.index(f"[{name}] ") < first_start
        rounds = doc["rounds_run"]
        assert 1 <= rounds <= 3 and len(doc["launches"]) == 4 * rounds
        assert all(x["ok"] and x["samples"] == 8 and x["errors"] == 0 for x in doc["launches"]), doc["launches"]
        # 4 replicas over 3 settings: every setting still open runs in every round, balanced; a setting
        # shown slower at a look leaves the later rounds, and the rounds record says when and why.
        rounds_agree_with_launches(doc, STEPS)
        assert set(doc["rounds"][0]["layout"].values()) == set(STEPS)
        full = [r for r in doc["rounds"] if set(r["layout"].values()) == set(STEPS)]
        for name in pidfiles:  # the rotation: while all three are open, no replica runs one twice
            mine = [r["layout"][name] for r in full]
            assert len(mine) == len(set(mine)), (name, doc["rounds"])
        for r in doc["rounds"]:
            for x in r["left_out"]:
                assert x["why"].startswith("slower than ") and f"left out of the next rounds ({x['why']}): " in result.stderr
        verdict = doc["verdict"]
        assert verdict["kind"] in ("winner", "equivalent", "undecided") and verdict["rests_on"], verdict
        assert f"{4 * rounds} launches on 4 replicas" in verdict["rests_on"]
        # --finish winner: each replica on the winner when there is one, else on its last setting,
        # read back from the running server's own command line.
        for name, left in doc["left"].items():
            assert left["running"] is True, (name, left)
            if verdict["winner_steps"] is not None:
                assert left["steps"] == verdict["winner_steps"], (name, left)
            argv = server_argv(pidfiles[name])
            if left["steps"] == 0:
                assert "-md" not in argv, argv
            else:
                assert argv[argv.index("--spec-draft-n-max") + 1] == str(left["steps"]), argv
            assert argv[argv.index("--port") + 1] == pidfiles[name].rsplit("_", 1)[1].split(".")[0]
    finally:
        for pidfile in pidfiles.values():
            stop_server(pidfile)
