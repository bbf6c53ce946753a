"""``specmon connect REPLICASPROFILE``: the fleet view on replicas tailed over the real OpenSSH sshd.

The profile lists replicas on 127.0.0.1 through Debian's sshd (the profile's user, port and
key shared by all), one on a port where nothing listens, one whose log does not exist yet,
and one on this machine without SSH. Each replica is followed by its own SSH tail: the
test checks that every state is its own (live, quiet from the host's modification time,
unreachable, no file yet), that lines written later reach their replica while another is
unreachable, and that a dropped link is a replica's state and comes back without the others
noticing. Waits are bounded polls.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from specmon.cli import build_parser
from specmon.commands.replicas import replica_members
from specmon.config import load_config
from specmon.ingest.fleet import Fleet
from specmon.model.fleet import ReplicaState
from specmon.ui.fleet_app import FleetOptions, followed_fleet_app
from specmon.ui.screens.replica import ReplicaScreen
from specmon.ui.widgets.status_header import StatusHeader
from tests.support.app_factory import wait_for
from tests.support.logtext import campaign, decode
from tests.support.sshd import ClientHome, OpenSSHServer, _free_port, local_user


def profile_text(openssh_server: OpenSSHServer, client_home: ClientHome, logs: dict[str, str | None],
                 dead_port: int) -> str:
    lines = ["[profiles.fleet]", f"user = {json.dumps(local_user())}", f"port = {openssh_server.port}",
             f"identity = {json.dumps(str(client_home.ssh_dir / 'id_ed25519'))}", "lines = 500"]
    for name, log in logs.items():
        host = {"dead": f"127.0.0.1:{dead_port}", "here": None}.get(name, "127.0.0.1")
        lines += ["[[profiles.fleet.replicas]]", f"name = {json.dumps(name)}", f"log = {json.dumps(log)}"]
        if host is not None:
            lines.append(f"host = {json.dumps(host)}")
    return "\n".join(lines) + "\n"


def states(app: object) -> dict[str, ReplicaState]:
    snap = app.model.snapshot(app.fleet.inputs(), time.time(), "")  # type: ignore[attr-defined]
    return {row.name: row.state for row in snap.replicas}


async def test_replicas_over_openssh_each_with_its_own_state(tmp_path: Path, client_home: ClientHome,
                                                              openssh_server: OpenSSHServer) -> None:
    logs = {name: tmp_path / f"{name}.log" for name in ("a", "b", "old", "dead", "later", "here")}
    for name in ("a", "b", "old", "dead", "here"):
        logs[name].write_text("\n".join(campaign(3 if name != "b" else 2, 90.0, 30)) + "\n")
    os.utime(logs["old"], (time.time() - 600, time.time() - 600))  # its history is ten minutes old
    config = tmp_path / "config.toml"
    config.write_text(profile_text(openssh_server, client_home, {k: str(v) for k, v in logs.items()}, _free_port()))
    profile = load_config(config).profile("fleet")
    args = build_parser().parse_args(["connect", "fleet", "--config", str(config), "--no-record"])
    members = replica_members(args, profile)
    assert [m.name for m in members] == list(logs)
    app = followed_fleet_app(Fleet(members), options=FleetOptions(animations=False), user_themes=None)
    async with app.run_test(size=(80, 24)) as pilot:
        want = {"a": ReplicaState.LIVE, "b": ReplicaState.LIVE, "old": ReplicaState.QUIET,
                "dead": ReplicaState.UNREACHABLE, "later": ReplicaState.MISSING, "here": ReplicaState.LIVE}
        await wait_for(pilot, lambda: states(app) == want, f"the replicas' states {want}", rounds=3000)
        by_name = {r.name: r for r in app.fleet.replicas}
        dead = app.model.snapshot(app.fleet.inputs(), time.time(), "").replicas[3]
        assert dead.name == "dead" and "retrying" in dead.detail  # the link's own sentence
        # New lines reach their replica while another is unreachable; the missing log appears.
        before = by_name["a"].feeder.session.counts.get("decode", 0)
        with logs["a"].open("a") as f:
            f.write("\n".join(decode(100.0 + i, 90.0 + i, 3.1, 0.7) for i in range(5)) + "\n")
        logs["later"].write_text("\n".join(campaign(3, 90.0, 30)) + "\n")
        await wait_for(pilot, lambda: by_name["a"].feeder.session.counts.get("decode", 0) >= before + 5,
                       "replica a's new lines", rounds=3000)
        await wait_for(pilot, lambda: states(app)["later"] is ReplicaState.LIVE, "the later log read", rounds=3000)
        assert states(app)["dead"] is ReplicaState.UNREACHABLE
        # Every link to sshd dropped: the SSH replicas say so or come back; none is lost for good,
        # and the local one never noticed.
        b_before = by_name["b"].feeder.session.counts.get("decode", 0)
        assert openssh_server.drop() > 0
        with logs["b"].open("a") as f:
            f.write("\n".join(decode(200.0 + i, 91.0, 2.4, 0.6) for i in range(3)) + "\n")
        await wait_for(pilot, lambda: by_name["b"].feeder.session.counts.get("decode", 0) >= b_before + 3,
                       "replica b's lines after the drop", rounds=6000)
        await pilot.pause(0.5)
        assert by_name["b"].feeder.session.counts.get("decode", 0) == b_before + 3  # none twice after the resume
        assert states(app)["here"] is ReplicaState.LIVE
        shown = "\n".join(app.fleet_screen.replica_table.render_line(y).text
                          for y in range(app.fleet_screen.replica_table.size.height))
        for name in logs:
            assert name in shown, shown
        # enter on a replica read over SSH: its own dashboard, on the follower the fleet keeps running.
        app.fleet_screen.replica_table.focus()
        await pilot.press("home", "enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplicaScreen), "replica a's dashboard", rounds=3000)
        screen = app.screen
        assert isinstance(screen, ReplicaScreen)
        screen.refresh_now()
        await pilot.pause()
        header = screen.query_one(StatusHeader)
        assert header.view is not None and str(logs["a"]) in header.view.source, header.view.source
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.fleet_screen, "back to the fleet", rounds=3000)
        await pilot.press("q")
