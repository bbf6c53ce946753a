"""``specmon sweep FLEET``: a parallel sweep through the real entry point, on simulated servers on this machine.

Three replicas of the simulated server (``specmon.sim.server``), each on its own port, share one
``[launch]`` section; the sweep restarts them in parallel round by round, drives load to each,
and prints the allocation and a verdict. Also the profile's checks and the options refused.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest

from specmon.config import ConfigError, parse_config
from tests.support.net import free_port
from tests.unit.test_sweep_cli import alive, specmon


def fleet_config(tmp_path: Path, ports: list[int], *, pidfile: str = "sim_{port}.pid",
                 log: str = "sim_{port}_{steps}.log", fail_port: int | None = None) -> Path:
    work = tmp_path / "srv"
    work.mkdir(exist_ok=True)
    server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
              "--time-scale", "200", "--startup-seconds", "0.3", "--launch-cv", "3"]
    lines = ["[profiles.fleet]", "[profiles.fleet.launch]", 'mode = "managed"', 'engine = "sglang"',
             f"argv = {json.dumps([*server, '--steps', '{steps}'])}",
             f"nospec_argv = {json.dumps([*server, '--steps', '0'])}",
             f"log = {json.dumps(str(work / log))}", f"pidfile = {json.dumps(str(work / pidfile))}",
             f"cwd = {json.dumps(str(work))}", 'health_url = "http://127.0.0.1:{port}/health"',
             "steps_min = 0", "start_timeout_s = 60", "stop_grace_s = 5", 'stop_signal = "TERM"']
    for i, port in enumerate(ports, start=1):
        lines += ["[[profiles.fleet.replicas]]", f'name = "sim-{i}"', f"log = {json.dumps(str(work / f'view-{i}.log'))}",
                  f"launch_port = {port}"]
    config = tmp_path / "specmon.toml"
    config.write_text("\n".join(lines) + "\n")
    return config


def pids(tmp_path: Path) -> list[int]:
    out = []
    for f in (tmp_path / "srv").glob("sim_*.pid"):
        try:
            out.append(int(f.read_text().split()[0]))
        except (OSError, ValueError, IndexError):
            pass
    return out


def stop_servers(tmp_path: Path) -> None:
    """SIGTERM every simulated server the profile's pidfiles name (their process groups)."""
    for pid in pids(tmp_path):
        try:
            os.killpg(pid, signal.SIGTERM)
        except OSError:
            pass


def test_a_parallel_sweep_over_three_local_replicas_names_the_faster_setting_and_leaves_them_as_asked(
        tmp_path: Path) -> None:
    ports = []
    for _ in range(3):
        port = free_port()
        while port in ports:
            port = free_port()
        ports.append(port)
    config = fleet_config(tmp_path, ports)
    try:
        proc = specmon(["sweep", "fleet", "--config", str(config), "--steps", "10,2", "--rounds", "4",
                        "--min-samples", "30", "--yes", "--seed", "7", "--format", "json", "--finish", "winner"],
                       tmp_path, timeout=240)
        assert proc.returncode == 0, proc.stderr[-4000:]
        doc = json.loads(proc.stdout)
        # Every command shown before anything ran: each replica's first restart, prefixed by its name.
        for i in (1, 2, 3):
            assert f"[sim-{i}] " in proc.stderr
        first_start = proc.stderr.index("start: result=")
        assert all(proc.stderr.index(f"[sim-{i}] ") < first_start for i in (1, 2, 3))
        assert doc["kind"] == "parallel-sweep" and doc["replicas"] == ["sim-1", "sim-2", "sim-3"]
        rounds = doc["rounds_run"]
        assert 1 <= rounds <= 4 and len(doc["launches"]) == 3 * rounds
        assert all(x["ok"] and x["samples"] == 30 and x["requests"] > 0 for x in doc["launches"]), doc["launches"]
        # Balanced within each round; each replica alternates between the two settings.
        for k in range(1, rounds + 1):
            steps = sorted(x["steps"] for x in doc["launches"] if x["round"] == k)
            assert steps in ([2, 2, 10], [2, 10, 10])
        for name in doc["replicas"]:
            mine = [x["steps"] for x in sorted(doc["launches"], key=lambda x: x["round"]) if x["replica"] == name]
            assert all(a != b for a, b in zip(mine, mine[1:], strict=False)), mine
        verdict = doc["verdict"]
        assert verdict["winner_steps"] == 2, verdict  # the simulator: 2 steps 94 tok/s, 10 steps 60
        assert "replica" in verdict["rests_on"] and verdict["sentence"].startswith("2 steps: ")
        assert "; faster than 10 steps by " in verdict["sentence"] and verdict["answer"]["mark"] == "★"
        # Left on the winner, checked on the host.
        for name, left in doc["left"].items():
            assert left["running"] is True and left["steps"] == 2, (name, left)
        assert len(pids(tmp_path)) == 3 and all(alive(p) for p in pids(tmp_path))
        # The recording holds the rounds' layouts and the verdict with the allocation.
        rec = Path(doc["recording"])
        events = [json.loads(line).get("event") for line in rec.read_text().splitlines() if line.strip()]
        assert events.count("fleet-sweep-round") == rounds, events
        # ... and its report shows the settings, the allocation and the sweep's verdict.
        report = specmon(["report", str(rec), "--format", "markdown"], tmp_path, timeout=60)
        assert report.returncode == 0, report.stderr
        # (the report wraps its text at 80 columns: compared word by word)
        assert " ".join(verdict["sentence"].split()) in " ".join(report.stdout.replace("\\", "").split())
        assert "| replica | round 1 |" in report.stdout
    finally:
        stop_servers(tmp_path)


def test_the_text_answer_fits_80_columns(tmp_path: Path) -> None:
    import asyncio

    from specmon.experiment.fleet_sweep import FleetPlan, FleetSweep
    from specmon.output.parallel_sweep import text_report
    from tests.support.fleetsim import FleetWorld

    world = FleetWorld(3, {0: 100.0, 1: 120.0, 2: 131.0, 3: 128.0, 5: 118.0}, replicas=8)
    sweep = FleetSweep(FleetPlan((0, 1, 2, 3, 5), samples=10, settle=1, seed=2, rounds=10), world.arms(),
                       clock=world.clock, sleep=world.sleep)
    result = asyncio.run(sweep.run())
    text = text_report(result.to_json(), ["r1: left running with 2 steps"])
    assert all(len(line) <= 80 for line in text.splitlines()), max(text.splitlines(), key=len)
    assert "Verdict (" in text and "allocation" in text


@pytest.mark.parametrize(("kw", "says"), [
    ({"pidfile": "sim.pid"}, "would share the launch's pidfile"),
    ({"log": "sim_{steps}.log"}, "would share the launch's log"),
])
def test_replicas_on_one_host_must_not_share_a_pidfile_or_a_log(tmp_path: Path, kw: dict[str, str],
                                                                 says: str) -> None:
    config = fleet_config(tmp_path, [18001, 18002], **kw)
    with pytest.raises(ConfigError) as err:
        parse_config(config.read_text())
    assert says in str(err.value) and "{port}" in str(err.value)


def test_replicas_on_one_host_must_not_share_a_port_and_each_needs_one(tmp_path: Path) -> None:
    config = fleet_config(tmp_path, [18001, 18001])
    with pytest.raises(ConfigError) as err:
        parse_config(config.read_text())
    assert "launch_port" in str(err.value)
    text = fleet_config(tmp_path, [18001]).read_text().replace("launch_port = 18001", "")
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert "no launch_port" in str(err.value)
    # On two hosts, the same port is fine.
    text = fleet_config(tmp_path, [18001, 18001]).read_text()
    text = text.replace('name = "sim-1"', 'name = "sim-1"\nhost = "gpu-1"').replace(
        'name = "sim-2"', 'name = "sim-2"\nhost = "gpu-2"')
    assert parse_config(text).profile("fleet").replicas is not None


@pytest.mark.parametrize(("extra", "says"), [
    (["--order", "interleave"], "--order does not apply to a parallel sweep"),
    (["--concurrency", "1,4"], "one concurrency"),
    (["--state", "x.json"], "--state does not apply"),
    (["--grid", "steps=1,2"], "--grid does not apply"),
    (["--steps", "2"], "two or more settings"),
    (["--objective", "itl-p50"], "--objective does not apply"),
    (["--measure-schedule"], "--measure-schedule does not apply"),
    (["--compare-adaptive"], "--compare-adaptive does not apply"),
])
def test_one_server_options_are_refused_before_anything_runs(tmp_path: Path, extra: list[str], says: str) -> None:
    config = fleet_config(tmp_path, [18001, 18002])
    args = ["sweep", "fleet", "--config", str(config), "--yes", *extra]
    if "--steps" not in extra and "--grid" not in extra:
        args += ["--steps", "0,2"]
    proc = specmon(args, tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert says in proc.stderr and "start:" not in proc.stderr and "Traceback" not in proc.stderr


def test_rounds_is_refused_for_one_server_and_the_demo(tmp_path: Path) -> None:
    proc = specmon(["sweep", "--demo", "--rounds", "3"], tmp_path, timeout=60)
    assert proc.returncode == 2 and "--rounds is for a parallel sweep" in proc.stderr
    proc = specmon(["sweep", "x", "--replicas", "3", "--steps", "1,2"], tmp_path, timeout=60)
    assert proc.returncode == 2 and "--replicas is for the demo" in proc.stderr


def test_a_custom_launch_on_one_host_needs_the_port_in_its_stop_command(tmp_path: Path) -> None:
    def text(stop: str) -> str:
        lines = ["[profiles.fleet]", "[profiles.fleet.launch]", 'mode = "custom"', 'engine = "sglang"',
                 'start = ["/opt/start.sh", "{steps}", "{port}"]', f"stop = {json.dumps(['/opt/stop.sh', stop])}",
                 'log = "/l/{port}.log"', 'health_url = "http://127.0.0.1:{port}/health"']
        for i, port in enumerate((18001, 18002), start=1):
            lines += ["[[profiles.fleet.replicas]]", f'name = "r{i}"', f'log = "/v{i}.log"', f"launch_port = {port}"]
        return "\n".join(lines) + "\n"

    with pytest.raises(ConfigError) as err:
        parse_config(text("all"))
    assert "stop command" in str(err.value) and "{port}" in str(err.value)
    profile = parse_config(text("{port}")).profile("fleet")
    from specmon.control.lease import lease_for

    assert profile.launch is not None and profile.replicas is not None
    pidfiles = {lease_for(profile.launch.model_copy(update={"port": r.launch_port}), None, "h", "x").pidfile  # type: ignore[arg-type]
                for r in profile.replicas}
    assert len(pidfiles) == 2


def test_sigterm_during_a_parallel_sweep_ends_it_cleanly_and_says_what_it_checked_of_each_replica(
        tmp_path: Path) -> None:
    import subprocess
    import time

    from tests.unit.test_sweep_cli import ROOT

    ports: list[int] = []
    while len(ports) < 2:
        port = free_port()
        if port not in ports:
            ports.append(port)
    config = fleet_config(tmp_path, ports)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data"), "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "HOME": str(tmp_path / "home")}
    err = tmp_path / "stderr.txt"
    try:
        with err.open("w") as sink:
            proc = subprocess.Popen([sys.executable, "-m", "specmon", "sweep", "fleet", "--config", str(config),
                                     "--steps", "10,2", "--rounds", "6", "--min-samples", "5000", "--yes",
                                     "--no-record"], cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=sink,
                                    stdin=subprocess.DEVNULL, text=True)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and err.read_text().count("start: result=started") < 2:
            time.sleep(0.2)
        assert err.read_text().count("start: result=started") == 2, err.read_text()[-3000:]
        # One replica's server dies just before the signal: what is said of each is what was checked
        # on its host after the signal ("every replica is left as it was" was said unchecked).
        gone, kept = sorted(pids(tmp_path))
        os.killpg(gone, signal.SIGKILL)
        while alive(gone):
            time.sleep(0.02)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
        text = err.read_text()
        assert proc.returncode == 128 + signal.SIGTERM, text[-3000:]
        assert "a parallel sweep is not resumed" in text and "every replica is left as it was" not in text
        said = text[text.index("sweep stopped by SIGTERM"):]
        assert f"(PID {gone}) has exited" in said and f"is left running (PID {kept}," in said, said
        assert f"left running (PID {gone}," not in said
        assert "Traceback" not in text and out == ""
        assert alive(kept)  # left running, as said
    finally:
        stop_servers(tmp_path)


HOLD = r'''
import asyncio, sys
from specmon.control.lease import ServerLease

class NoHost:
    async def run(self, command, timeout):
        raise AssertionError("nothing runs")

async def main():
    lease = ServerLease(NoHost(), "localhost", sys.argv[1], "dashboard restarts")
    await lease.acquire()
    print("held", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
'''


def test_a_replica_another_specmon_controls_stops_the_start_and_nothing_is_restarted(tmp_path: Path) -> None:
    import subprocess

    from tests.unit.test_sweep_cli import ROOT

    ports = [free_port()]
    while len(ports) < 2:
        port = free_port()
        if port not in ports:
            ports.append(port)
    config = fleet_config(tmp_path, ports)
    env = {**os.environ, "XDG_DATA_HOME": str(tmp_path / "data")}
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / "srv" / f"sim_{ports[1]}.pid")], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        proc = specmon(["sweep", "fleet", "--config", str(config), "--steps", "10,2", "--yes", "--no-record"],
                       tmp_path, timeout=60)
        assert proc.returncode == 2, proc.stderr
        assert "replica sim-2:" in proc.stderr and f"specmon PID {holder.pid}" in proc.stderr
        assert "nothing was restarted" in proc.stderr and "start: result=" not in proc.stderr
        assert pids(tmp_path) == []
    finally:
        holder.kill()
        holder.wait()
        stop_servers(tmp_path)


def test_a_replica_whose_host_cannot_be_reached_stops_the_start_with_its_name(tmp_path: Path) -> None:
    ports = [free_port()]
    while len(ports) < 2:
        port = free_port()
        if port not in ports:
            ports.append(port)
    closed = free_port()
    text = fleet_config(tmp_path, ports).read_text()
    text = text.replace("[profiles.fleet]\n", f'[profiles.fleet]\nport = {closed}\nuser = "nobody"\n', 1)
    text = text.replace('name = "sim-2"', 'name = "sim-2"\nhost = "127.0.0.1"')
    config = tmp_path / "unreachable.toml"
    config.write_text(text)
    proc = specmon(["sweep", "fleet", "--config", str(config), "--steps", "10,2", "--yes", "--no-record"],
                   tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    assert "replica sim-2:" in proc.stderr and "nothing was restarted" in proc.stderr
    assert "start: result=" not in proc.stderr and "Traceback" not in proc.stderr
    assert pids(tmp_path) == []


def test_the_demo_runs_a_parallel_sweep_on_simulated_replicas_and_leaves_nothing_running(tmp_path: Path) -> None:
    import re

    proc = specmon(["sweep", "--demo", "--replicas", "3", "--steps", "2,10", "--seed", "4", "--min-samples", "20",
                    "--rounds", "4", "--format", "json", "--no-record"], tmp_path, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    assert doc["replicas"] == ["sim-1", "sim-2", "sim-3"] and doc["verdict"]["winner_steps"] == 2, doc["verdict"]
    assert all(x["ok"] for x in doc["launches"])
    assert all(left["running"] is False for left in doc["left"].values()), doc["left"]
    # Each replica's last server, as its stop reported it: gone (other tests' servers are not this one's).
    stopped = [int(m.group(1)) for left in doc["left"].values() if (m := re.search(r"pid=(\d+)", left["text"]))]
    assert len(stopped) == 3 and not any(alive(pid) for pid in stopped), (stopped, doc["left"])
