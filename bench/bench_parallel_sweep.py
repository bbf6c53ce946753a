"""A parallel sweep across replicas against the sequential sweep of the same settings (issue 31).

Two parts:

* **Simulated truth** (always): :class:`tests.support.fleetsim.FleetWorld` replicas (replica CV
  10%, launch CV 5%, 5% per-line noise), three settings, through the real runner
  (:class:`specmon.experiment.fleet_sweep.FleetSweep`). Parallel: 4 replicas, up to 6 rounds.
  Sequential: the same settings on 1 replica, up to 24 launches (the same launch budget), each
  launch a restart. Reported per condition: verdicts (winner named, the right one), launches,
  restart cycles, and hours at 15-minute restarts and 40 one-second samples per launch.
* **Real** (``--real``): four real ``llama-server`` replicas of ``shared/real_server_llamacpp``
  on this machine, the same three depths through ``specmon sweep`` on a replicas profile: 4
  replicas × 3 rounds, against 1 replica × 12 rounds (the same 12 launches, one at a time) and
  the one-server sweep (``specmon sweep`` on one replica's profile, its own rule). Wall times.

    python bench/bench_parallel_sweep.py [--seeds 500] [--real]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specmon.experiment.fleet_sweep import FleetPlan, FleetSweep  # noqa: E402
from tests.support.fleetsim import FleetWorld  # noqa: E402

RESTART_S = 15 * 60.0
SAMPLES = 40
TRUTHS = {"equal": {1: 100.0, 2: 100.0, 3: 100.0},
          "+10% ahead": {1: 100.0, 2: 110.0, 3: 100.0},
          "+5% ahead": {1: 100.0, 2: 105.0, 3: 100.0}}


def simulated(seeds: int) -> None:
    print(f"simulated: replica CV 10%, launch CV 5%, {SAMPLES} samples a launch, restarts of "
          f"{RESTART_S / 60:g} min, {seeds} seeds per row")
    print(f"{'truth':<12}{'layout':<26}{'winner':>8}{'right':>7}{'launches':>10}{'cycles':>8}{'hours':>7}")
    for name, truth in TRUTHS.items():
        best = max(truth, key=lambda s: truth[s])
        for replicas, rounds, label in ((4, 6, "parallel 4 × ≤6 rounds"), (1, 24, "sequential 1 × ≤24")):
            wins = right = launches = cycles = 0
            for seed in range(seeds):
                world = FleetWorld(seed, truth, replicas=replicas)
                sweep = FleetSweep(FleetPlan(tuple(truth), samples=SAMPLES, settle=2, seed=seed, rounds=rounds),
                                   world.arms(), clock=world.clock, sleep=world.sleep)
                result = asyncio.run(sweep.run())
                wins += result.winner is not None
                right += result.winner == best and truth[best] > min(truth.values())
                launches += len(result.records)
                cycles += result.rounds_run
            hours = cycles / seeds * (RESTART_S + (SAMPLES + 2) * 1.0) / 3600
            print(f"{name:<12}{label:<26}{wins / seeds:>8.1%}{right / seeds:>7.1%}{launches / seeds:>10.1f}"
                  f"{cycles / seeds:>8.1f}{hours:>7.2f}")


def _llama_launch(folder: Path) -> dict[str, object]:
    sys.path.insert(0, str(ROOT))
    from tests.support.realkits import llama_profile

    launch = llama_profile(folder, 1).model_dump(exclude_none=True, mode="json")
    launch.pop("port")
    launch.update(log=str(folder / "llama_{port}_{steps}.log"), pidfile=str(folder / "llama_{port}.pid"),
                  health_url="http://127.0.0.1:{port}/health")
    return launch


def _config(path: Path, launch: dict[str, object], ports: list[int]) -> Path:
    from tests.support.connecting import toml_value

    lines = ["[profiles.fleet]", 'engine = "llamacpp"', "[profiles.fleet.launch]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in launch.items()]
    for i, port in enumerate(ports, start=1):
        lines += ["[[profiles.fleet.replicas]]", f'name = "llama-{i}"', f"log = \"{path.parent}/view-{port}.log\"",
                  f"launch_port = {port}"]
    one = {**launch, "port": ports[0]}
    lines += ["[profiles.one]", 'engine = "llamacpp"', f"log = \"{path.parent}/view-one.log\"", "[profiles.one.launch]"]
    lines += [f"{k} = {toml_value(v)}" for k, v in one.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def _run(args: list[str]) -> tuple[float, dict[str, object], str]:
    began = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "specmon", *args], capture_output=True, text=True, cwd=ROOT,
                          stdin=subprocess.DEVNULL, timeout=3600)
    took = time.monotonic() - began
    try:
        doc = json.loads(proc.stdout)
    except json.JSONDecodeError:
        raise SystemExit(f"specmon {' '.join(args)} printed no JSON (exit {proc.returncode}):\n{proc.stderr[-3000:]}") from None
    return took, doc, proc.stderr


def real() -> None:
    from tests.support.realkits import free_port, stop_server

    steps = "0,2,4"
    common = ["--steps", steps, "--min-samples", "8", "--concurrency", "2", "--max-tokens", "48",
              "--request-timeout", "30", "--max-minutes", "3", "--yes", "--no-record", "--finish", "none",
              "--format", "json"]
    with tempfile.TemporaryDirectory(prefix="specmon-bench-") as tmp:
        folder = Path(tmp)
        ports: list[int] = []
        while len(ports) < 4:
            ports.append(free_port(range(max(ports, default=18559) + 1, 18600)))
        config = _config(folder / "config.toml", _llama_launch(folder), ports)
        try:
            t4, d4, _ = _run(["sweep", "fleet", "--config", str(config), "--rounds", "3", "--seed", "5", *common])
            one = config.read_text().replace("\n".join(
                f"[[profiles.fleet.replicas]]\nname = \"llama-{i}\"\nlog = \"{folder}/view-{p}.log\"\nlaunch_port = {p}"
                for i, p in list(enumerate(ports, start=1))[1:]), "")
            config1 = folder / "config1.toml"
            config1.write_text(one)
            t1, d1, _ = _run(["sweep", "fleet", "--config", str(config1), "--rounds", "12", "--seed", "5", *common])
            ts, ds, _ = _run(["sweep", "one", "--config", str(config), "--max-samples", "64", "--looks", "3",
                              "--state", str(folder / "one.json"), *common])
        finally:
            for p in ports:
                stop_server(str(folder / f"llama_{p}.pid"), late_s=0.0)  # --finish none stopped them
    print("\nreal llama-server replicas on this machine (2 cores), depths 0, 2, 4; 8 samples a launch:")
    print(f"  parallel, 4 replicas × {d4['rounds_run']} rounds ({len(d4['launches'])} launches): {t4:.0f} s — "  # type: ignore[arg-type]
          f"{d4['verdict']['sentence']}")  # type: ignore[index]
    print(f"  sequential, 1 replica × {d1['rounds_run']} rounds ({len(d1['launches'])} launches): {t1:.0f} s — "  # type: ignore[arg-type]
          f"{d1['verdict']['sentence']}")  # type: ignore[index]
    print(f"  one-server sweep (its own rule, 3 looks, 8..64 samples): {ts:.0f} s — {ds['verdict']['sentence']}")  # type: ignore[index]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=500)
    ap.add_argument("--real", action="store_true", help="also the real llama-server replicas (needs the kit)")
    args = ap.parse_args()
    os.environ.setdefault("SPECMON_SHARED", str(ROOT.parent / "shared"))
    if args.seeds:
        simulated(args.seeds)
    if args.real:
        real()


if __name__ == "__main__":
    main()
