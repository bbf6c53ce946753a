"""A fleet of four real ``llama-server`` replicas (``shared/real_server_llamacpp``), tailed over the real OpenSSH sshd.

Four servers on their own ports, each logging to its own file: two with the kit's draft
model at depth 3, two without speculation, each under the kit's load generator. A profile
lists them as replicas on 127.0.0.1 (the sshd's port and key shared), and the fleet view at
80×24 must show all four live with their own configuration, and one row per configuration.
Two replicas also have their ``/metrics`` in the profile, read through SSH port forwards.
Then one replica is stopped (SIGTERM: llama-server logs its exit) and two killed (SIGKILL:
their logs just stop): the view marks the stopped one ``stopped``, the killed one with
``/metrics`` ``down`` within seconds, the killed one without ``quiet`` 30 s after its last
sample, while the fourth (its ``/metrics`` read all along) stays live and keeps counting. Marked ``realserver``; every wait bounded; servers and
loads stopped by PID.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from specmon.cli import build_parser
from specmon.commands.replicas import replica_members
from specmon.config import load_config
from specmon.ingest.fleet import Fleet, Member
from specmon.model.fleet import QUIET_AFTER_S, ReplicaState
from specmon.ui.fleet_app import FleetOptions, followed_fleet_app
from tests.support.realkits import (
    background_load,
    free_port,
    llama_missing,
    llama_profile,
    require,
    shared_dir,
    stop_group,
    wait_until,
)
from tests.support.sshd import ClientHome, OpenSSHServer, local_user

pytestmark = pytest.mark.realserver

START_S = 60.0
SAMPLES_WAIT_S = 180.0


#: The fleet's ports: a range of their own (free_port returns the first free one, so four calls before
#: any server binds would all get the same one).
FLEET_PORTS = range(18420, 18460)


def start_replica(folder: Path, name: str, steps: int | None, after: int) -> tuple[subprocess.Popen[bytes], int, Path]:
    """A llama-server of the kit's profile on a free port above ``after``, logging to ``folder/name.log``."""
    port = free_port(range(max(after + 1, FLEET_PORTS.start), FLEET_PORTS.stop))
    launch = llama_profile(folder, port)
    argv = launch.argv if steps is not None else launch.nospec_argv
    assert argv is not None
    argv = [a.replace("{port}", str(port)).replace("{steps}", str(steps)) for a in argv]
    log = folder / f"{name}.log"
    with open(log, "wb") as sink:
        proc = subprocess.Popen(argv, stdout=sink, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
    return proc, port, log


def samples(app: object, name: str) -> int:
    return sum(len(r.throughput) for r in next(r for r in app.fleet.replicas  # type: ignore[attr-defined]
                                        if r.name == name).feeder.session.runs)


def rows(app: object) -> dict[str, object]:
    snap = app.model.snapshot(app.fleet.inputs(), time.time(), "")  # type: ignore[attr-defined]
    return {row.name: row for row in snap.replicas}


def seen(app: object, servers: dict[str, tuple[subprocess.Popen[bytes], int, Path]]) -> str:
    """What the fleet and the logs say, for a failure message (the CI log is all there is afterwards)."""
    out = []
    shown = rows(app)
    for replica in app.fleet.replicas:  # type: ignore[attr-defined]
        proc, _, log = servers[replica.name]
        status, session = replica.source.status, replica.feeder.session
        current = session.current
        tail = [line for line in log.read_bytes().splitlines()[-400:] if b"prompt 0x" not in line][-4:]
        out.append(f"{replica.name}: row {shown[replica.name].state} {shown[replica.name].state_text!r}; "  # type: ignore[attr-defined]
                   f"source {status.state} {status.detail!r} {status.lines:,} lines, read to byte "
                   f"{replica.source.position[1]:,} of {log.stat().st_size:,}; run {current.state if current else None} of {len(session.runs)}; "
                   f"exit {proc.poll()}; log ends: {[line.decode(errors='replace')[:100] for line in tail]}")
    return "\n".join(out)


def screen_text(app: object) -> str:
    table = app.fleet_screen.replica_table  # type: ignore[attr-defined]
    return "\n".join(table.render_line(y).text for y in range(table.size.height))


PLAN = {"draft-a": 3, "draft-b": 3, "plain-a": None, "plain-b": None}
#: Replicas whose profile entry gives their /metrics (llama-server --metrics), beside the log.
WITH_METRICS = ("draft-a", "draft-b")


@contextmanager
def llama_fleet(tmp_path: Path, loads_out: list[Any] | None = None
                ) -> Iterator[dict[str, tuple[subprocess.Popen[bytes], int, Path]]]:
    """:data:`PLAN`'s four llama-servers, ready, each under the kit's load (concurrency 1); all stopped after.

    ``loads_out`` receives the loads' context managers (``__exit__`` stops one; again at the end is harmless).
    """
    require(llama_missing())
    folder = tmp_path / "fleet"
    folder.mkdir()
    servers: dict[str, tuple[subprocess.Popen[bytes], int, Path]] = {}
    loads = []
    try:
        for name, steps in PLAN.items():
            servers[name] = start_replica(folder, name, steps, max((p for _, p, _ in servers.values()), default=0))
        deadline = time.monotonic() + START_S
        while time.monotonic() < deadline and not all(
                "listening on http" in log.read_text(errors="replace") for _, _, log in servers.values()):
            time.sleep(0.2)
        for name, (proc, _, log) in servers.items():
            assert proc.poll() is None and "listening on http" in log.read_text(errors="replace"), (
                name, log.read_text(errors="replace")[-2000:])
        kit = shared_dir() / "real_server_llamacpp"
        for name, (_, port, _) in servers.items():
            load = background_load(kit, port, tmp_path / f"load-{name}.json", "--requests", "1000000",
                                   "--duration", "400", "--concurrency", "1")
            loads.append(load)
            load.__enter__()
        if loads_out is not None:
            loads_out.extend(loads)
        yield servers
    finally:
        for load in loads:
            load.__exit__(None, None, None)
        for proc, _, _ in servers.values():
            if proc.poll() is None:
                stop_group(proc.pid, wait_s=20.0)
            proc.wait(10)


def replicas_profile(tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer,
                     servers: dict[str, tuple[subprocess.Popen[bytes], int, Path]]) -> list[Member]:
    """The fleet's followers from a replicas profile: each log over the real sshd."""
    config = tmp_path / "config.toml"
    lines = ["[profiles.fleet]", f"user = {json.dumps(local_user())}", f"port = {openssh_server.port}",
             f"identity = {json.dumps(str(client_home.ssh_dir / 'id_ed25519'))}", 'engine = "llamacpp"']
    for name, (_, port, log) in servers.items():
        lines += ["[[profiles.fleet.replicas]]", f"name = {json.dumps(name)}", 'host = "127.0.0.1"',
                  f"log = {json.dumps(str(log))}"]
        if name in WITH_METRICS:  # read through an SSH port forward on the replica's host
            lines.append(f'metrics_url = "http://127.0.0.1:{port}/metrics"')
    config.write_text("\n".join(lines) + "\n")
    args = build_parser().parse_args(["connect", "fleet", "--config", str(config), "--no-record"])
    return replica_members(args, load_config(config).profile("fleet"))


async def test_four_real_llama_replicas_over_openssh_live_then_one_stopped_and_one_killed(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    plan = PLAN
    loads: list[Any] = []
    with llama_fleet(tmp_path, loads) as servers:
        members = replicas_profile(tmp_path, client_home, openssh_server, servers)
        app = followed_fleet_app(Fleet(members), options=FleetOptions(animations=False), user_themes=None)
        async with app.run_test(size=(80, 24)) as pilot:
            await wait_until(pilot, lambda: all(samples(app, n) >= 5 for n in plan)
                             and all(r.state is ReplicaState.LIVE for r in rows(app).values()),  # type: ignore[attr-defined]
                             "five samples and 'live' on every replica", SAMPLES_WAIT_S,
                             lambda: seen(app, servers))
            now = rows(app)
            assert {n: now[n].config for n in plan} == {  # type: ignore[attr-defined]
                "draft-a": now["draft-b"].config, "draft-b": now["draft-a"].config,  # type: ignore[attr-defined]
                "plain-a": now["plain-b"].config, "plain-b": now["plain-a"].config}  # type: ignore[attr-defined]
            assert now["draft-a"].config != now["plain-a"].config  # type: ignore[attr-defined]
            assert all(now[n].accept_len is not None for n in ("draft-a", "draft-b"))  # type: ignore[attr-defined]
            app.refresh_fleet()
            await pilot.pause()
            shown = screen_text(app)
            for name in plan:  # all four whole at 80x24
                assert name in shown, shown
            assert shown.count("live") >= 4, shown
            pools = app.model.snapshot(app.fleet.inputs(), time.time(), "").configs
            assert sorted(p.replicas for p in pools) == [2, 2]

            # One stopped (SIGTERM: it logs its exit); two killed (SIGKILL: their logs stop), one of
            # them with its /metrics in the profile. The one stopped is idle first: llama-server's
            # SIGTERM handler takes its task queue's mutex (server_queue::terminate), so a signal
            # that lands on a thread holding it (a request being queued or taken) deadlocks the
            # server: no exit, no last line (seen once in CI, the log silent 60 s after SIGTERM).
            # specmon's own stop escalates to SIGKILL after its grace; this test is of the view.
            loads[list(plan).index("plain-b")].__exit__(None, None, None)
            await pilot.pause(2.0)
            os.kill(servers["plain-b"][0].pid, signal.SIGTERM)
            os.kill(servers["draft-b"][0].pid, signal.SIGKILL)
            os.kill(servers["plain-a"][0].pid, signal.SIGKILL)
            killed_at = time.monotonic()
            behind = {r.name: servers[r.name][2].stat().st_size - r.source.position[1]
                      for r in app.fleet.replicas}  # type: ignore[attr-defined]
            await wait_until(pilot, lambda: rows(app)["plain-b"].state is ReplicaState.STOPPED,  # type: ignore[attr-defined]
                             "the stopped replica marked stopped", 60.0, lambda: seen(app, servers))
            print(f"\nfleet of four real llama-servers: bytes not yet read at the stop {behind}; "
                  f"'stopped' shown {time.monotonic() - killed_at:.1f} s after SIGTERM")
            # The killed one with its /metrics: down as soon as its port stops answering (through the
            # forward: the connection closes without an answer), long before a quiet log would say.
            await wait_until(pilot, lambda: rows(app)["draft-b"].state is ReplicaState.DOWN,  # type: ignore[attr-defined]
                             "the killed replica with /metrics marked down", 30.0, lambda: seen(app, servers))
            down_after = time.monotonic() - killed_at
            assert down_after < QUIET_AFTER_S - 5, down_after
            assert "/metrics does not answer" in rows(app)["draft-b"].detail  # type: ignore[attr-defined]
            print(f"the killed replica with /metrics shown down {down_after:.1f} s after SIGKILL")
            going = samples(app, "draft-a")
            # The killed one without: quiet 30 s after its last sample, not before.
            await wait_until(pilot, lambda: rows(app)["plain-a"].state is ReplicaState.QUIET,  # type: ignore[attr-defined]
                             "the killed replica without /metrics marked quiet", QUIET_AFTER_S + 60.0,
                             lambda: seen(app, servers))
            assert time.monotonic() - killed_at >= QUIET_AFTER_S - 5  # quiet from its last sample, not before
            after = rows(app)
            # The one left, its /metrics read all along, is live and went on counting.
            assert after["draft-a"].state is ReplicaState.LIVE, after["draft-a"]  # type: ignore[attr-defined]
            assert samples(app, "draft-a") > going
            assert after["draft-b"].state is ReplicaState.DOWN, after["draft-b"]  # type: ignore[attr-defined]
            app.refresh_fleet()
            await pilot.pause()
            shown = screen_text(app)
            assert "stopped" in shown and "quiet" in shown and "down" in shown, shown
            await pilot.press("q")
