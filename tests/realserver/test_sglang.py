"""The proof on a real SGLang 0.5.23 (the CPU-engine kit of ``shared/real_server_sglang``), over a real OpenSSH sshd.

What the seeds' user does, end to end, on SGLang's own scheduler, EAGLE-3 worker, log and
``/metrics`` (the kit replaces only the compiled kernel library by a PyTorch stand-in):

* a managed profile (``python -m sglang.launch_server`` with the kit's flags: ``--device cpu``,
  the intel_amx prefill/decode attention backends, ``SGLANG_USE_CPU_ENGINE=1``) started over
  SSH; the dashboard tailing it; ``r`` → 1 step → confirm, the new run's samples labelled from
  SGLang's ``server_args={...}`` dict; ``r`` → 2 steps, whose draft is missing on the host (a
  per-depth draft folder holds 1 and 3 only): the real failed start, then ``g`` back to 1 step;
* a server started by hand with either entry point (``python -m sglang.launch_server`` and
  ``sglang serve``) found in ``/proc`` over SSH, adopted, and restarted with another step count
  through its own rewritten command line;
* a headless ``specmon sweep`` over 0, 1 and 3 steps to a verdict or an honest "equivalent",
  ``--finish winner``; a ``--grid steps=2 topk=1,2`` sweep of EAGLE-3 chain against tree;
* ``/metrics`` counters against the log and the client.

Marked ``realserver``. SGLang starts in 28-35 s on 2 idle cores and took up to 250 s at a load
average of 12 (the kit's NOTES.md): every wait is bounded generously, the bounds only turn a
hang into a failure. One server at a time; each stopped (SIGINT, then its process group
killed) in a finally. Nothing asserts which setting is faster on this toy model.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

from specmon.commands.remote import connect_app, plan_connect, with_restart
from specmon.control.adopt import SpecSettings
from specmon.control.adopt_controller import controller_for_running_server
from specmon.control.connecting_runner import ConnectingRunner
from specmon.control.eta import EtaStore
from specmon.control.restart_progress import Phase
from specmon.model.session import Run
from specmon.parsing import parse_lines
from specmon.records import Config, Decode, Engine
from specmon.sources import metrics
from tests.support.connecting import connect_args, pid_in, start_through_controller, write_config
from tests.support.dialogs import screen_state
from tests.support.realkits import (
    SGLANG_ENV,
    SGLANG_READY,
    background_load,
    free_port,
    require,
    run_specmon,
    server_argv,
    sglang_args,
    sglang_eagle3_args,
    sglang_missing,
    sglang_model,
    sglang_profile,
    sglang_venv,
    shared_dir,
    stop_group,
    sweep_json,
    wait_until,
)
from tests.support.sshd import ClientHome, OpenSSHServer, local_user

pytestmark = pytest.mark.realserver

START_WAIT_S = 600.0  # 28-35 s idle, 250 s measured at load 12
SAMPLES_WAIT_S = 240.0
RESTART_WAIT_S = 700.0
SWEEP_WAIT_S = 2400.0
#: The counters' pooled accept length (Δtokens / Δverify passes, each request's prefill token
#: included) against the mean of the log's decode lines (accepted tokens per verify pass, per
#: interval): they differ by construction by up to ~1/(verify passes per request) and by the
#: weighting (docs/sglang.md); on the kit's recorded run 1.846 against 1.844.
ACCEPT_LEN_TOLERANCE = 0.1


def runs_by_steps(app: object, steps: int) -> list[Run]:
    return [r for r in app.feeder.session.runs  # type: ignore[attr-defined]
            if r.config is not None and r.config.steps == steps]


def ssh_profile(client_home: ClientHome, openssh_server: OpenSSHServer, log: Path) -> dict[str, object]:
    return {"host": f"{local_user()}@127.0.0.1", "port": openssh_server.port,
            "identity": str(client_home.ssh_dir / "id_ed25519"), "log": str(log), "engine": "sglang"}


def stop_pidfile(pidfile: str | None, late_s: float = 90.0) -> None:
    """Stop the server a pidfile names and its whole process group (waiting for a late pidfile)."""
    deadline = time.monotonic() + late_s
    while pid_in(pidfile) is None and time.monotonic() < deadline:
        time.sleep(0.5)
    pid = pid_in(pidfile)
    if pid is not None:
        stop_group(pid)


def wait_healthy(port: int, proc: subprocess.Popen[bytes], log: Path, limit_s: float = START_WAIT_S) -> float:
    """Seconds until GET /health answers 200 (the server's own ready check); fails if it exits first."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit_s:
        if proc.poll() is not None:
            raise AssertionError(f"SGLang exited ({proc.returncode}) before ready:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as r:
                if r.status == 200 and SGLANG_READY in log.read_text(errors="replace"):
                    return time.monotonic() - t0
        except OSError:
            pass
        time.sleep(1.0)
    raise AssertionError(f"SGLang not ready within {limit_s:g} s:\n{log.read_text()[-3000:]}")


def hand_start(entry: str, port: int, log: Path, steps: int, cwd: Path) -> subprocess.Popen[bytes]:
    """Start SGLang the way a user does by hand (its own session, output to a file)."""
    venv = sglang_venv()
    head = ([str(venv / "bin" / "python"), "-m", "sglang.launch_server"] if entry == "launch_server"
            else [str(venv / "bin" / "sglang"), "serve"])
    argv = [*head, *sglang_args(port), *sglang_eagle3_args(steps, steps + 1)]
    env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "HOME": os.environ.get("HOME", str(cwd)), **SGLANG_ENV}
    with log.open("wb") as out:
        return subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=cwd, env=env, start_new_session=True)


def scrape(port: int) -> metrics.Snapshot:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        return metrics.parse_snapshot(r.read().decode(), time.monotonic())


def log_records(log: Path) -> list[object]:
    return list(parse_lines(log.read_text(errors="replace").split("\n"), year=2026))


# --------------------------------------------------------------------------- dashboard: r, then g


async def test_dashboard_restarts_a_real_sglang_from_3_to_1_step_and_goes_back_after_a_failed_start(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    from specmon.ui.screens.confirm_commands import ConfirmCommandsScreen
    from specmon.ui.screens.restart_dialog import RestartDialog
    from tests.support.app_factory import options

    require(sglang_missing())
    folder = tmp_path / "sglang"
    drafts = folder / "drafts"
    drafts.mkdir(parents=True)
    for steps in (1, 3):  # a draft per depth, as some deployments keep them; none for 2 steps
        (drafts / f"eagle3_{steps}").symlink_to(f"{sglang_model()}-eagle3")
    port = free_port()
    launch = sglang_profile(folder, port, draft=str(drafts / "eagle3_{steps}"))
    config = write_config(tmp_path / "config.toml", "cpu-sglang",
                          ssh_profile(client_home, openssh_server, folder / "sglang_3.log"), launch)
    plan = plan_connect(connect_args(config, "cpu-sglang"))
    assert plan.launch is not None
    eta = EtaStore(tmp_path / "eta.json")
    runner = None
    try:
        await start_through_controller(plan, 3, eta)
        plan, flow, runner = with_restart(plan, eta_store=eta)
        app = connect_app(plan, controller=flow, options=options(window=plan.window), user_themes=None)

        async def restart_to(steps: int) -> None:
            await pilot.press("r")
            await wait_until(pilot, lambda: isinstance(app.screen, RestartDialog), "the step-count dialog", 30)
            await pilot.press(str(steps), "enter")
            await wait_until(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen), "the commands", 30,
                             lambda: screen_state(app))
            shown = app.screen.text  # type: ignore[attr-defined]
            assert f"--speculative-num-steps {steps} " in shown and f"sglang_{steps}.log" in shown, shown
            assert f"--speculative-num-draft-tokens {steps + 1}" in shown, shown
            await pilot.press("y")
            await wait_until(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                             and not flow.controller.busy, f"the restart to {steps} steps to end", RESTART_WAIT_S)

        async with app.run_test(size=(120, 36)) as pilot:
            with background_load(shared_dir() / "real_server_sglang", port, tmp_path / "load.json",
                                 "--duration", "1500", "--concurrency", "4") as load:
                await wait_until(pilot, lambda: any(len(r.accept_len) >= 5 for r in runs_by_steps(app, 3)),
                                 "five decode lines at 3 steps", SAMPLES_WAIT_S, load.describe)
                await restart_to(1)
                assert flow.controller is not None and flow.controller.progress is not None
                final = flow.controller.progress
                assert final.phase is Phase.READY, (final.phase, final.message, final.last_lines)
                await wait_until(pilot, lambda: any(len(r.accept_len) >= 5 for r in runs_by_steps(app, 1)),
                                 "five decode lines at 1 step", SAMPLES_WAIT_S, load.describe)
                # 2 steps: no draft folder for it on the host, SGLang's start fails for real.
                await restart_to(2)
                failed = flow.controller.progress
                assert failed is not None
                print(f"\nfailed SGLang start: {failed.phase.value} after {failed.elapsed_s:.0f} s: {failed.message}")
                print("\n".join("  | " + line for line in failed.last_lines[-8:]))
                assert failed.phase is not Phase.READY and failed.phase in (Phase.CRASHED, Phase.FAILED), failed.phase
                assert "eagle3_2" in "\n".join(failed.last_lines) + failed.message, failed.last_lines
                await wait_until(pilot, lambda: flow.panel.view is not None and flow.panel.view.failed,
                                 "the panel to show the failure", 30)
                await pilot.press("g")
                await wait_until(pilot, lambda: isinstance(app.screen, ConfirmCommandsScreen),
                                 "the go-back commands", 30, lambda: screen_state(app))
                back = app.screen
                assert back.plan.steps == 1, back.plan  # type: ignore[attr-defined]
                assert "--speculative-num-steps 1 " in back.text  # type: ignore[attr-defined]
                await pilot.press("y")
                await wait_until(pilot, lambda: flow.controller is not None and flow.controller.progress is not None
                                 and flow.controller.progress.steps == 1 and not flow.controller.busy,
                                 "the go-back to end", RESTART_WAIT_S)
                assert flow.controller.progress.phase is Phase.READY, flow.controller.progress.message
                await wait_until(pilot, lambda: sum(1 for r in runs_by_steps(app, 1) if len(r.accept_len) >= 3) >= 2,
                                 "decode lines at 1 step again, in a new run", SAMPLES_WAIT_S, load.describe)
                session = app.feeder.session
                three = max(runs_by_steps(app, 3), key=lambda r: len(r.accept_len))
                ones = sorted(runs_by_steps(app, 1), key=lambda r: r.id)
                print("real SGLang over OpenSSH, restarted from the dashboard and back:")
                for run in (three, *ones):
                    print(f"  run {run.id} {run.label}: lines={len(run.accept_len)} "
                          f"accept len={statistics.fmean(run.accept_len):.2f} "
                          f"tok/s={statistics.fmean(run.throughput):.0f}" if run.throughput else "")
                assert session.engine is Engine.SGLANG
                assert three.label == "EAGLE3 3 steps" and all(r.label == "EAGLE3 1 step" for r in ones)
                assert three.id < ones[0].id < ones[-1].id
                for run, steps in ((three, 3), *((r, 1) for r in ones)):
                    assert all(1.0 <= v <= steps + 1 for v in run.accept_len), (steps, list(run.accept_len))
                    assert all(0.0 <= v <= 1.0 for v in run.accept_rate), list(run.accept_rate)
                argv = server_argv(launch.pidfile)
                assert argv[argv.index("--speculative-num-steps") + 1] == "1", argv
                assert argv[argv.index("--speculative-draft-model-path") + 1] == str(drafts / "eagle3_1"), argv
    finally:
        if runner is not None:
            runner.close()
        stop_pidfile(launch.pidfile)


# --------------------------------------------------------------------------- adoption


@pytest.mark.parametrize("entry", ["launch_server", "serve"])
async def test_a_hand_started_sglang_is_adopted_over_openssh_and_restarted_with_another_step_count(
        entry: str, tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    require(sglang_missing())
    folder = tmp_path / "hand"
    folder.mkdir()
    port = free_port()
    log = folder / "sglang.log"
    pidfile = folder / "adopted.pid"
    # A profile without [launch]: connect finds the server writing the followed log instead.
    config = tmp_path / "config.toml"
    config.write_text("[profiles.hand]\n" + "".join(
        f"{k} = {json.dumps(v)}\n" for k, v in ssh_profile(client_home, openssh_server, log).items()))
    target = plan_connect(connect_args(config, "hand")).source.target
    from specmon.ssh import connect as sshconfig

    runner = ConnectingRunner(lambda: sshconfig.connect(target))
    proc = hand_start(entry, port, log, 3, folder)
    try:
        ready_s = wait_healthy(port, proc, log)
        print(f"\nhand-started SGLang ({entry}) ready in {ready_s:.0f} s")
        shown: list[str] = []
        controller, server = await controller_for_running_server(
            runner, host=target.label, log=str(log), pidfile=str(pidfile), show=shown.append,
            eta_store=EtaStore(tmp_path / "eta.json"))
        assert server.pid == proc.pid and server.engine == "sglang"
        if entry == "launch_server":
            assert server.argv == tuple(proc.args), server.argv
        else:  # the console script runs under its shebang's interpreter: /proc shows that first
            assert server.argv[1:] == tuple(proc.args) and "python" in os.path.basename(server.argv[0]), server.argv
        assert server.spec == SpecSettings(3, 4, 1, "EAGLE3")
        assert server.env.get("SGLANG_USE_CPU_ENGINE") == "1"
        assert server.writes(str(log)) == "stdout" and server.port == port
        plan = controller.plan_for(1)
        text = controller.describe(plan)
        assert "--speculative-num-steps 1 " in text and "--speculative-num-draft-tokens 2 " in text, text
        assert f"PID {proc.pid}" in text or str(proc.pid) in text, text
        final = await controller.run(plan)
        assert final.phase is Phase.READY, (final.phase, final.message, final.last_lines)
        assert proc.wait(timeout=60) is not None  # the hand-started process was stopped by its PID
        argv = server_argv(str(pidfile))
        # The same entry point, the same flags, only the speculative values rewritten.
        want = list(proc.args)
        want[want.index("--speculative-num-steps") + 1] = "1"
        want[want.index("--speculative-num-draft-tokens") + 1] = "2"
        if entry == "serve":
            assert argv[1:] == want, (argv, want)  # /proc shows the script's interpreter first
        else:
            assert argv == want, (argv, want)
        configs = [r for r in log_records(log) if isinstance(r, Config)]
        assert [(c.algorithm, c.steps, c.draft_tokens) for c in configs[-1:]] == [("EAGLE3", 1, 2)], configs
    finally:
        runner.close()
        stop_pidfile(str(pidfile), late_s=5)
        stop_group(proc.pid)


# --------------------------------------------------------------------------- sweep


def test_headless_sweep_over_0_1_3_steps_decides_or_says_equivalent_and_finishes_on_the_winner(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    require(sglang_missing())
    folder = tmp_path / "sglang"
    folder.mkdir()
    launch = sglang_profile(folder, free_port())
    config = write_config(tmp_path / "config.toml", "cpu-sglang",
                          ssh_profile(client_home, openssh_server, folder / "sglang_0.log"), launch)
    try:
        result = run_specmon(["sweep", "cpu-sglang", "--config", str(config), "--steps", "0,1,3", "--yes", "--order", "given",
                              "--no-record", "--finish", "winner", "--state", str(tmp_path / "sweep.json"),
                              "--format", "json", "--min-samples", "10", "--max-samples", "40", "--looks", "2",
                              "--max-minutes", "30", "--concurrency", "4", "--max-tokens", "64",
                              "--request-timeout", "60"], SWEEP_WAIT_S)
        doc = sweep_json(result)
        print(f"\nreal SGLang sweep over OpenSSH: {doc['verdict']['sentence']}")
        print("  setting          samples  tok/s     95% interval")
        for run in doc["runs"]:
            tp = run["throughput"] or {}
            print(f"  {run['label']:<16} {run['samples']:>7}  {tp.get('mean')!s:<8}  "
                  f"{tp.get('ci95_low')}..{tp.get('ci95_high')}  ({run['status']}, {run['stop_reason']})")
        assert result.returncode in (0, 1), result.stderr[-3000:]
        assert [(r["steps"], r["status"]) for r in doc["runs"]] == [(0, "done"), (1, "done"), (3, "done")], doc["runs"]
        assert [r["label"] for r in doc["runs"]] == ["no speculation", "EAGLE3 1 step", "EAGLE3 3 steps"]
        assert all(r["samples"] >= 10 for r in doc["runs"]), doc["runs"]
        assert all(r["client"]["requests"] > 0 and r["client"]["errors"] == 0 for r in doc["runs"]), [
            (r["client"]["errors"], r["client"]["requests"], r["client"].get("first_error")) for r in doc["runs"]]
        verdict = doc["verdict"]
        if verdict["separated"]:
            assert verdict["winner_steps"] in (0, 1, 3) and result.returncode == 0, verdict
        else:
            assert verdict["winner_steps"] is None and "not" in verdict["sentence"], verdict
        left = doc["server_left_on"]
        expected = verdict["winner_steps"] if verdict["separated"] else doc["runs"][-1]["steps"]
        assert left["running"] is True and left["steps"] == expected, left
        argv = server_argv(launch.pidfile)
        if expected == 0:
            assert "--speculative-algorithm" not in argv, argv
        else:
            assert argv[argv.index("--speculative-num-steps") + 1] == str(expected), argv
    finally:
        stop_pidfile(launch.pidfile)


# --------------------------------------------------------------------------- counters


def test_metrics_counters_agree_with_the_log_and_the_client(tmp_path: Path) -> None:
    """``/metrics`` against the log's decode lines and the load generator's own count."""
    require(sglang_missing())
    folder = tmp_path / "sglang"
    folder.mkdir()
    port = free_port()
    log = folder / "sglang.log"
    proc = hand_start("launch_server", port, log, 3, folder)
    try:
        wait_healthy(port, proc, log)
        before = scrape(port)
        assert before.engine == "sglang"
        out = tmp_path / "load.json"
        with background_load(shared_dir() / "real_server_sglang", port, out,
                             "--requests", "40", "--duration", "600", "--concurrency", "4") as load:
            deadline = time.monotonic() + 900
            while not load.exits and time.monotonic() < deadline:
                time.sleep(1.0)
            assert load.exits and load.exits[0][0] == 0, load.describe()
        text = out.read_text()
        client = json.loads(text[text.rindex("\n{") + 1:] if "\n{" in text else text)
        time.sleep(2.0)  # the last finished request reaches the counters through the tokenizer manager
        after = scrape(port)
        got = metrics.sglang_accept_length(before, after)
        assert got is not None, (before.values, after.values)
        accept_len, tokens, verifies = got
        decodes = [r for r in log_records(log) if isinstance(r, Decode) and r.accept_len is not None]
        log_mean = statistics.fmean(d.accept_len for d in decodes if d.accept_len is not None)
        print(f"\nreal SGLang counters: {tokens:.0f} tokens / {verifies:.0f} verify passes = {accept_len:.3f}; "
              f"log mean accept len {log_mean:.3f} over {len(decodes)} lines; client {client['ok']} requests, "
              f"{client['completion_tokens']} completion tokens; gauges "
              f"{after.get(metrics.SGL_ACCEPT_LEN)}/{after.get(metrics.SGL_ACCEPT_RATE)}")
        # The client and the counters count the same tokens and requests exactly.
        assert client["err"] == 0 and client["ok"] == 40, client
        assert tokens == client["completion_tokens"], (tokens, client)
        assert (after.get(metrics.SGL_REQUESTS) or 0) - (before.get(metrics.SGL_REQUESTS) or 0) == 40
        # Acceptance: the counters' pooled figure against the log's lines (docs/sglang.md).
        assert abs(accept_len - log_mean) <= ACCEPT_LEN_TOLERANCE, (accept_len, log_mean)
        assert 1.0 <= accept_len <= 4.0
        # The gauges are the last decode line's own figures, and the active setting.
        last = decodes[-1]
        assert round(after.get(metrics.SGL_ACCEPT_LEN) or 0, 2) == last.accept_len
        assert round(after.get(metrics.SGL_ACCEPT_RATE) or 0, 2) == last.accept_rate
        assert after.sglang_setting == (3, 4)
    finally:
        stop_group(proc.pid)


# --------------------------------------------------------------------------- EAGLE-3 trees


def test_grid_sweep_over_eagle3_tree_width_reads_each_tree_from_server_args(
        tmp_path: Path, client_home: ClientHome, openssh_server: OpenSSHServer) -> None:
    """``--grid steps=2 topk=1,2``: a chain (3 draft tokens) and a tree (steps*topk+1 = 5), each
    started with its own flags and labelled from SGLang's own ``server_args``; a verdict or "not"."""
    require(sglang_missing())
    folder = tmp_path / "sglang"
    folder.mkdir()
    base = sglang_profile(folder, free_port())
    launch = base.model_copy(update={"draft_tokens": "steps*topk+1", "log": str(folder / "sglang_{steps}_{topk}.log"),
                                     "steps_min": 1})
    config = write_config(tmp_path / "config.toml", "cpu-sglang-tree",
                          ssh_profile(client_home, openssh_server, folder / "sglang_2_1.log"), launch)
    ended = False
    try:
        result = run_specmon(["sweep", "cpu-sglang-tree", "--config", str(config), "--grid", "steps=2", "topk=1,2",
                              "--yes", "--order", "given", "--no-record", "--state", str(tmp_path / "sweep.json"), "--format", "json",
                              "--finish", "none", "--min-samples", "10", "--max-samples", "30", "--looks", "2",
                              "--max-minutes", "20", "--concurrency", "4", "--max-tokens", "64",
                              "--request-timeout", "60"], SWEEP_WAIT_S)
        doc = sweep_json(result)
        ended = True  # --finish none: the sweep stopped its server
        print(f"\nreal SGLang grid sweep, steps x topk: {doc['verdict']['sentence']}")
        for run in doc["runs"]:
            tp = run["throughput"] or {}
            print(f"  {run['label']:<22} samples={run['samples']:>3} tok/s={tp.get('mean')} "
                  f"ci95={tp.get('ci95_low')}..{tp.get('ci95_high')} ({run['status']})")
        assert result.returncode in (0, 1), result.stderr[-3000:]
        assert doc["dimensions"] == ["steps", "topk"]
        assert [(r["steps"], r["dims"]["topk"], r["status"]) for r in doc["runs"]] == [(2, 1, "done"), (2, 2, "done")]
        assert [r["label"] for r in doc["runs"]] == ["EAGLE3 2 steps", "EAGLE3 2 steps topk 2 draft 5"], doc["runs"]
        assert all(r["samples"] >= 10 and r["client"]["errors"] == 0 for r in doc["runs"]), doc["runs"]
        for topk, draft in ((1, 3), (2, 5)):
            cfg = [r for r in log_records(folder / f"sglang_2_{topk}.log") if isinstance(r, Config)]
            assert [(c.steps, c.topk, c.draft_tokens) for c in cfg] == [(2, topk, draft)], cfg
        verdict = doc["verdict"]
        if not verdict["separated"]:
            assert "not" in verdict["sentence"] and verdict["winner_steps"] is None, verdict
    finally:
        stop_pidfile(launch.pidfile, late_s=2.0 if ended else 90.0)
