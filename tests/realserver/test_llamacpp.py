"""The proof on a real llama.cpp ``llama-server`` (``shared/real_server_llamacpp``), over a real OpenSSH sshd.

The profile of ``docs/llamacpp.md`` (a draft model, ``--spec-draft-n-max {steps}``)
started over SSH on 127.0.0.1; the dashboard tailing it (Pilot); ``r`` → another
draft depth → confirm, and the new run's per-request samples and configuration
(read from llama.cpp's own start-up lines); a headless ``specmon sweep`` over two
depths to a verdict or an honest "not separated", leaving the server on the depth
asked last.

llama.cpp logs one ``draft acceptance`` line and one ``eval time`` line per
request: samples are requests. The tiny model serves a request in 0.02-0.05 s
and starts in 0.1 s, so these tests take seconds once the kit is built (about
16 minutes, once per machine: ``setup.sh`` keeps its build under /tmp). Marked
``realserver``; every wait bounded; servers stopped by their pidfile, load by its
PID, in a finally. Nothing asserts which depth is faster.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from specmon.commands.remote import connect_app, plan_connect, with_restart
from specmon.control.eta import EtaStore
from specmon.control.restart_progress import Phase
from specmon.model.session import Run
from specmon.records import Engine
from tests.support.connecting import connect_args, start_through_controller, write_config
from tests.support.dialogs import screen_state
from tests.support.realkits import (
    background_load,
    free_port,
    llama_missing,
    llama_profile,
    require,
    run_specmon,
    server_argv,
    shared_dir,
    stop_server,
    sweep_json,
    wait_until,
)
from tests.support.sshd import ClientHome, OpenSSHServer, local_user

pytestmark = pytest.mark.realserver

SAMPLES_WAIT_S = 180.0  # a request in flight at the restart waits up to the load generator's 60 s timeout
RESTART_WAIT_S = 120.0
SWEEP_WAIT_S = 600.0


def runs_by_steps(app: object, steps: int) -> list[Run]:
    return [r for r in app.feeder.session.runs  # type: ignore[attr-defined]
            if r.config is not None and r.config.steps == steps]


def ssh_profile(client_home: ClientHome, openssh_server: OpenSSHServer, log: Path) -> dict[str, object]:
    return {"host": f"{local_user()}@127.0.0.1", "port": openssh_server.port,
            "identity": str(client_home.ssh_dir / "id_ed25519"), "log": str(log), "engine": "llamacpp"}


async def test_dashboard_restarts_a_real_llama_server_from_depth_4_to_2_over_openssh(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
    from specmon.ui.screens.restart_dialog import RestartDialog
    from tests.support.app_factory import options

    require(llama_missing())
    folder = tmp_path / "llama"
    folder.mkdir()
    port = free_port()
    launch = llama_profile(folder, port)
    config = write_config(tmp_path / "config.toml", "cpu-llama",
                          ssh_profile(client_home, openssh_server, folder / "llama_4.log"), launch)
    plan = plan_connect(connect_args(config, "cpu-llama"))
    assert plan.launch is not None
    eta = EtaStore(tmp_path / "eta.json")
    runner = None
    try:
        await start_through_controller(plan, 4, eta)
        # The dashboard opens before any load: at -lv 4 a busy llama-server writes ~100 lines per request,
        # and the last 1000 lines of a busy log no longer hold the start-up lines that name the depth.
        plan, flow, runner = with_restart(plan, eta_store=eta)
        app = connect_app(plan, controller=flow, options=options(window=plan.window), user_themes=None)
        async with app.run_test(size=(120, 36)) as pilot:
            await wait_until(pilot, lambda: bool(runs_by_steps(app, 4)), "the depth-4 run, from its start-up", 60)
            with background_load(shared_dir() / "real_server_llamacpp", port, tmp_path / "load.json",
                                 "--requests", "1000000", "--duration", "240", "--concurrency", "2") as load:
                await wait_until(pilot, lambda: any(len(r.accept_len) >= 5 for r in runs_by_steps(app, 4)),
                                 "five requests' draft acceptance at depth 4", SAMPLES_WAIT_S, load.describe)
                await pilot.press("r")
                await wait_until(pilot, lambda: isinstance(app.screen, RestartDialog), "the depth dialog", 30)
                await pilot.press("2", "enter")
                await wait_until(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands", 30,
                                 lambda: screen_state(app))
                confirm = app.screen
                assert isinstance(confirm, ConfirmCommandsScreen)
                shown = confirm.text
                assert "--spec-draft-n-max 2 " in shown and "llama_2.log" in shown, shown
                await pilot.press("y")
                await wait_until(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                                 and not flow.controller.busy, "the restart to end", RESTART_WAIT_S)
                assert flow.controller is not None
                final = flow.controller.progress
                assert final is not None
                assert final.phase is Phase.READY, (
                    f"the restart from the dashboard did not reach ready: {final.phase.value}: {final.message}\n"
                    + "\n".join(final.last_lines))
                await wait_until(pilot, lambda: any(len(r.accept_len) >= 5 and len(r.throughput) >= 5
                                                    for r in runs_by_steps(app, 2)),
                                 "five requests at depth 2", SAMPLES_WAIT_S, load.describe)
                session = app.feeder.session
                four = max(runs_by_steps(app, 4), key=lambda r: len(r.accept_len))
                two = max(runs_by_steps(app, 2), key=lambda r: len(r.accept_len))
                print("\nreal llama-server over OpenSSH, restarted from the dashboard:")
                for run in (four, two):
                    print(f"  {run.label}: requests={len(run.accept_len)} "
                          f"mean accept len={statistics.fmean(run.accept_len):.2f} "
                          f"pooled acceptance={run.accepted}/{run.drafted} tok/s(request mean)="
                          f"{statistics.fmean(run.throughput):.0f}")
                assert session.engine is Engine.LLAMACPP
                # The new run carries the configuration read from llama-server's own start-up lines (its
                # label); the progress panel may reach ready before those lines are parsed, so it is not asked.
                assert [four.label, two.label] == ["draft-simple 4 tokens", "draft-simple 2 tokens"]
                assert four.id < two.id
                # Per request: 1 <= mean length <= depth + 1; acceptance within [0, 1].
                for run, depth in ((four, 4), (two, 2)):
                    assert all(1.0 <= v <= depth + 1 for v in run.accept_len), (depth, list(run.accept_len))
                    assert all(0.0 <= v <= 1.0 for v in run.accept_rate), list(run.accept_rate)
                    assert 0 <= run.accepted <= run.drafted and run.drafted > 0
                    assert all(t > 0 for t in run.throughput)
                argv = server_argv(launch.pidfile)
                assert argv[argv.index("--spec-draft-n-max") + 1] == "2", argv
    finally:
        if runner is not None:
            runner.close()
        stop_server(launch.pidfile)


def test_headless_sweep_over_two_draft_depths_ends_with_a_verdict_and_leaves_the_winner(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    require(llama_missing())
    folder = tmp_path / "llama"
    folder.mkdir()
    launch = llama_profile(folder, free_port())
    config = write_config(tmp_path / "config.toml", "cpu-llama",
                          ssh_profile(client_home, openssh_server, folder / "llama_4.log"), launch)
    try:
        recording = tmp_path / "sweep.jsonl"
        result = run_specmon(["sweep", "cpu-llama", "--config", str(config), "--steps", "4,2", "--yes", "--order", "given",
                              "--record", str(recording), "--finish", "winner", "--state", str(tmp_path / "sweep.json"), "--format", "json",
                              "--min-samples", "10", "--max-samples", "60", "--looks", "3", "--max-minutes", "1",
                              "--concurrency", "2", "--max-tokens", "48", "--request-timeout", "30"],
                             SWEEP_WAIT_S)
        doc = sweep_json(result)
        print(f"\nreal llama-server sweep over OpenSSH: {doc['verdict']['sentence']}")
        for run in doc["runs"]:
            tp = run["throughput"] or {}
            print(f"  {run['label']}: status={run['status']} requests={run['samples']} stop={run['stop_reason']} "
                  f"tok/s={tp.get('mean')} ci95={tp.get('ci95_low')}..{tp.get('ci95_high')}")
        assert result.returncode in (0, 1), result.stderr[-3000:]
        assert [(r["steps"], r["status"]) for r in doc["runs"]] == [(4, "done"), (2, "done")], doc["runs"]
        assert [r["label"] for r in doc["runs"]] == ["draft-simple 4 tokens", "draft-simple 2 tokens"]
        assert all(r["samples"] >= 10 for r in doc["runs"]), doc["runs"]
        assert all(r["client"]["requests"] > 0 and r["client"]["errors"] == 0 for r in doc["runs"]), [
            (r["client"]["errors"], r["client"]["requests"], r["client"].get("first_error")) for r in doc["runs"]]
        # Prompts paired (issue 44, item 3): every completed request counted once, under its prompt, at its
        # setting; llama-server's answers say each request's drafted and accepted tokens (its timings).
        (group,) = doc["prompts"]
        for run in doc["runs"]:
            per_prompt = group["settings"][run["key"]]
            ok = run["client"]["requests"] - run["client"]["errors"]
            assert sum(v[0] for v in per_prompt.values()) == ok, (per_prompt, run["client"])
            assert sum(v[2] for v in per_prompt.values()) > 0, per_prompt  # drafted tokens, from the answers
            assert all(0 <= v[3] <= v[2] for v in per_prompt.values()), per_prompt
        assert len(group["rows"]) >= 2 and group["baseline"] is False
        report = run_specmon(["report", str(recording)], 60)
        assert report.returncode == 0, report.stderr[-2000:]
        assert "Per prompt, concurrency 2" in report.stdout and "accepted" in report.stdout, report.stdout[-3000:]
        verdict = doc["verdict"]
        if verdict["separated"]:
            assert verdict["winner_steps"] in (2, 4) and result.returncode == 0, verdict
        else:
            assert verdict["winner_steps"] is None and "not" in verdict["sentence"], verdict
        # --finish winner: the server ends on the winner when there is one, else on the last setting.
        left = doc["server_left_on"]
        expected = verdict["winner_steps"] if verdict["separated"] else doc["runs"][-1]["steps"]
        assert left["running"] is True and left["steps"] == expected, left
        argv = server_argv(launch.pidfile)
        assert argv[argv.index("--spec-draft-n-max") + 1] == str(expected), argv
    finally:
        stop_server(launch.pidfile)
