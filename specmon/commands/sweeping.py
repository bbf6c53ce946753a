"""Running ``specmon sweep``: against the simulated demo server or a real one (a profile, local or over SSH).

The recording, the Prometheus endpoint, the lease on the server and what the sweep leaves
running at its end. Imported only when a sweep runs (``cmd_sweep``), so it imports what it uses at
its top: the CLI's start-up (``summarize``) never pays for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import sys
import tempfile
import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from pydantic import ValidationError

from specmon import paths
from specmon.commands.exits import EXIT_INPUT, fail
from specmon.commands.fleet_sweeping import run_fleet_demo, run_fleet_sweep
from specmon.commands.sweep_output import _err, _on_event, _print_result
from specmon.commands.sweep_parts import (
    _finish_choice,
    _free_port,
    _left_note,
    _load_options,
    _NoRunner,
    _recorder,
    _steps_text,
    check_steps,
    left_note_on_signal,
)
from specmon.config import ConfigError, load_config
from specmon.control.demo import DEMO_LAUNCH_CV, DEMO_STEPS_MAX
from specmon.control.dims import used_placeholders
from specmon.control.eta import EtaStore
from specmon.control.launch import LaunchError, LaunchProfile
from specmon.control.lease import LeaseHeld, lease_for
from specmon.control.load import BackgroundLoad, LoadDriver, LoadError, forwarded_base_url
from specmon.control.runner import LocalRunner, SSHRunner
from specmon.experiment.plan_restarter import LogFollower, PlanRestarter
from specmon.experiment.rounds import known_restart_s, plan_budget
from specmon.experiment.schedule_check import adaptive_profile, measure_deployed, measure_schedule, schedule_profile
from specmon.experiment.sweep_plan import SweepError
from specmon.experiment.sweep_run import Sweep
from specmon.experiment.sweep_state import STATE_LIMIT, finished_state
from specmon.model.schedule import Schedule, ScheduleEntry
from specmon.model.session import Session
from specmon.output.prometheus import PrometheusExporter
from specmon.output.recording import RecordedIngest
from specmon.smallfile import InputError, check_input
from specmon.sources.local import LocalTailSource
from specmon.sources.metrics import MetricsScraper, metrics_url_for
from specmon.sources.ssh import SSHTailSource
from specmon.ssh.connect import SSHError, connect, target_from_options

if TYPE_CHECKING:  # annotations only
    from collections.abc import Coroutine

    from specmon.config import Profile
    from specmon.control.launch import LaunchProfile
    from specmon.experiment.plan import ExperimentPlan
    from specmon.experiment.sweep_plan import LoadControl, SweepPlan
    from specmon.experiment.sweep_result import SweepResult
    from specmon.model.session import Session
    from specmon.output.recording import RecordedIngest, Recorder


def check_dims(profile: LaunchProfile, plan: SweepPlan, whose: str) -> str | None:
    """One sentence when the sweep varies a dimension the profile's command does not use.

    A grid over ``topk`` with a command that has no ``{topk}`` would restart the
    same server again and again under different names: refused before any restart.
    """

    templates = [*(profile.argv or []), *(profile.start or []), *profile.env.values()]
    used = used_placeholders(templates)
    missing = [d for d in plan.dimensions if d != "steps" and d not in used]
    if not missing:
        return None
    names = ", ".join("{" + d + "}" for d in missing)
    return f"--grid varies {', '.join(missing)}, but {whose}'s command has no {names}; nothing was restarted"


async def _with_prometheus(exp: ExperimentPlan, session: Session,
                           coro: Coroutine[Any, Any, SweepResult]) -> SweepResult | None:
    if exp.prometheus_port is None:
        return await coro

    exporter = PrometheusExporter.for_session(session, exp.prometheus_port)
    try:
        await exporter.start()
    except OSError as exc:
        _err(f"specmon: {exc.strerror or exc}")
        coro.close()
        return None
    _err(f"sweep: Prometheus metrics at http://127.0.0.1:{exporter.port}/metrics")
    try:
        return await coro
    finally:
        await exporter.close()


async def _sweep_main(exp: ExperimentPlan, plan: SweepPlan) -> int:
    if exp.demo and exp.replicas:
        return await run_fleet_demo(exp)
    if exp.demo:
        return await _demo(exp, plan)
    return await _real(exp, plan)


async def _demo(exp: ExperimentPlan, plan: SweepPlan) -> int:
    scale = min(exp.time_scale, 1000.0)
    with tempfile.TemporaryDirectory(prefix="specmon-demo-") as tmp:
        port = _free_port()
        server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
                  "--time-scale", f"{scale:g}", "--startup-seconds", "0.5"]
        if exp.seed is not None:
            server += ["--seed", str(exp.seed)]
        # The simulated server's own launches differ by this much (a factor per launch drawn from the seed).
        demo_cv = DEMO_LAUNCH_CV if exp.launch_cv is None else exp.launch_cv
        if demo_cv:
            server += ["--launch-cv", f"{100 * demo_cv:g}"]
        _err(f"sweep: demo: a simulated SGLang server running {scale:g}× faster than a real one; its launches "
             f"differ by a {100 * demo_cv:g}% launch spread (a speed factor per launch, drawn from the seed; real "
             "servers: 2-20%; --launch-cv sets it)")
        if exp.drift_pct_per_hour:
            server += ["--drift-pct-per-hour", f"{exp.drift_pct_per_hour:g}", "--drift-origin", f"{time.time():.3f}"]
        if exp.workload_sets:
            server += ["--task-acceptance"]  # the simulated drafter does better on code than on chat
        profile = LaunchProfile(
            mode="managed", engine="sglang",
            argv=[*server, "--steps", "{steps}", "--topk", "{topk}", "--draft-tokens", "{draft_tokens}"],
            nospec_argv=[*server, "--steps", "0"],
            log=f"{tmp}/sim_{{steps}}step.log", pidfile=f"{tmp}/sim.pid", port=port, cwd=tmp,
            health_url="http://127.0.0.1:{port}/health", steps_min=0, start_timeout_s=60,
            # One limit for the demo's dialog, `demo --steps` and `sweep --demo` (they said 16 and 32).
            steps_max=DEMO_STEPS_MAX,
            stop_grace_s=5, stop_signal="TERM")
        problem = check_steps(profile, plan.steps, "the demo server") or check_dims(profile, plan, "the demo server")
        if problem:
            return fail(problem, EXIT_INPUT)
        try:
            # Longer answers: at 100× the client's gap between two requests (milliseconds of wall time) is
            # seconds of simulated idle in the log's throughput, the same for every setting, which shrinks
            # their differences (with 1024 tokens 2 steps led no speculation by 4.0%, with 4096 by 4.8%;
            # the truth: 5.3%). 2048: a short launch still completes requests for the client's check.
            load_cfg = _load_options(exp, f"http://127.0.0.1:{port}", scale, 2048)
        except LoadError as exc:
            return fail(str(exc), EXIT_INPUT)
        session = Session()
        rec = _recorder(exp, "sweep-demo", None, {"command": "sweep --demo", "steps": list(plan.steps)})
        ingest = RecordedIngest(session, rec)
        follower = LogFollower(ingest, lambda path, from_end: LocalTailSource(
            path, lines=0 if from_end else None, poll_interval=0.05))
        restarter = PlanRestarter(profile, LocalRunner(), follower=follower, ready_poll_s=0.2, show=_err)
        load = None if exp.no_load else BackgroundLoad(LoadDriver(load_cfg), cap_s=600.0,
                                                             workloads=exp.workload_sets)
        try:
            sweep = Sweep(plan, session=session, restart=restarter, load=load, state_path=f"{tmp}/sweep.json",
                          resume=False, recorder=rec, on_event=_on_event)
        except SweepError as exc:
            return fail(str(exc), EXIT_INPUT)
        try:
            result = await _with_prometheus(exp, session, sweep.run())
        finally:
            if load is not None:
                await load.stop()
            outcome = await restarter.stop_server()
            if outcome:
                _err(f"  {outcome}")
            await follower.stop()
            ingest.close()
            if rec is not None:
                rec.close()
        if result is None:
            return EXIT_INPUT
        extra = {"demo": {"time_scale": scale, "port": port}, "recording": str(rec.path) if rec else None}
        return _print_result(exp, result, extra)


async def _real(exp: ExperimentPlan, plan: SweepPlan) -> int:
    name = exp.profile
    assert name is not None  # (the plan refuses a sweep with neither a profile nor the demo)
    try:
        config = load_config(exp.config)
        profile = config.profile(exp.profile)
    except ConfigError as exc:
        return fail(str(exc))
    if profile.replicas is not None:
        return await run_fleet_sweep(exp, profile, name)
    if not profile.launch:
        return fail(f"profile {exp.profile!r} has no [launch] section: the sweep needs to know how to restart "
                     "the server (see `specmon sweep --help` and the README's launch profiles)")
    try:
        launch = LaunchProfile.model_validate(profile.launch)
    except ValidationError as exc:
        msgs = "; ".join(e["msg"].removeprefix("Value error, ") for e in exc.errors())
        return fail(f"profile {exp.profile!r} [launch]: {msgs}")
    host = profile.host or "localhost"

    known = known_restart_s(EtaStore(), host)
    if known is not None:  # the budget stated up front at this host's remembered restart cost
        plan = replace(plan, restart_s=known)
    problem = check_steps(launch, plan.steps, f"profile {exp.profile!r}") or check_dims(
        launch, plan, f"profile {exp.profile!r}")
    if problem:
        return fail(problem)
    restarter_probe = PlanRestarter(launch, _NoRunner(), host=host)
    try:
        # Every setting's commands are built (and so validated) before the first restart.
        plans = [restarter_probe.plan_for(s, dict(p) or None) for s, p in plan.settings]
    except LaunchError as exc:
        return fail(f"profile {exp.profile!r}: {exc}")
    problem = _schedule_problem(exp, plan, launch)
    if problem:
        return fail(problem)
    if not exp.no_load and launch.port is None:
        return fail("the launch profile has no `port`, so the load driver cannot reach the server: add it, "
                     "or pass --no-load to measure the server's own traffic")
    # One state file per profile *and plan*: rerunning the same command resumes it; a sweep with
    # other steps or settings starts its own instead of tripping over the old one.
    digest = hashlib.sha256(json.dumps(plan.identity(), sort_keys=True).encode()).hexdigest()[:10]
    state = exp.state or str(paths.sweeps_dir() /
                              f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}-{digest}.json")

    if os.path.lexists(state):  # a FIFO, a device or a huge file: said now, before any restart

        try:
            check_input(state, "sweep state file", limit=STATE_LIMIT)
        except InputError as exc:
            return fail(str(exc))
    if exp.fresh and os.path.exists(state):
        os.remove(state)
    if not finished_state(state, plan):  # a finished sweep only shows its verdict: nothing restarts
        upto = "up to " if plan.strategy == "guided" else ""
        # A launch design restarts every setting in rounds: the count asked for is its budget's.
        stated = plan_budget(plan)
        restarts = stated.restarts if stated is not None else len(plans)
        rounds = ""
        if stated is not None:
            upto = "up to "
            rounds = (f" (at most {stated.rounds} rounds of {stated.settings} settings; settings clearly behind "
                      "leave early)" if stated.pairs is None else
                      f" (every setting in the first {stated.pairs[0]} rounds, then {stated.pairs[1]} a round, at "
                      f"most {stated.rounds} rounds)")
        _err(f"sweep: {upto}{restarts} restart(s) on {host}{rounds}; the first one:")
        _err(plans[0].describe())
        if plan.points:
            _err("the others differ in: " + "; ".join(
                f"{p.describe().splitlines()[0].split('(', 1)[-1].rstrip(')')}" for p in plans[1:]))
        if not exp.yes:
            if not sys.stdin.isatty():
                return fail("this restarts the server; pass --yes to confirm when not at a terminal")
            answer = input(f"Restart the server on {host} up to {restarts} times? [y/N] ").strip().lower()
            if answer not in ("y", "yes"):
                return fail("cancelled", 1)
    session = Session()
    rec = _recorder(exp, "sweep", None, {"command": "sweep", "profile": exp.profile, "host": host,
                                          "steps": list(plan.steps)})
    ingest = RecordedIngest(session, rec)
    try:
        if profile.host:
            return await _real_remote(exp, plan, launch, profile, session, ingest, rec, state)

        follower = LogFollower(ingest, lambda path, from_end: LocalTailSource(path, lines=0 if from_end else None))
        restarter = PlanRestarter(launch, LocalRunner(), host=host, follower=follower, show=_err,
                                  record_servers=True)
        load = None
        if not exp.no_load:
            try:
                load = BackgroundLoad(LoadDriver(_load_options(exp, f"http://127.0.0.1:{launch.port}")),
                                      workloads=exp.workload_sets)
            except LoadError as exc:
                return fail(str(exc), EXIT_INPUT)
        target_url = _metrics_target(exp, profile, launch)
        counters = _scraper(target_url) if target_url else None
        return await _run_profile_sweep(exp, plan, session, restarter, load, state, rec, follower, counters)
    finally:
        ingest.close()
        if rec is not None:
            rec.close()


async def _run_profile_sweep(exp: ExperimentPlan, plan: SweepPlan, session: Session, restarter: Any,
                             load: LoadControl | None, state: str, rec: Recorder | None, follower: Any,
                             counters: Any = None) -> int:
    """Run a profile's sweep (local or remote alike), finish as asked, and print its result.

    The server's lease is taken first and held to the end (the --finish restart included): no
    other specmon restarts or stops it meanwhile, and this sweep does not start while another
    one, or a dashboard that restarted it, controls it.
    """

    if finished_state(state, plan):  # only its verdict is shown: nothing to control
        return await _run_leased(exp, plan, session, restarter, load, state, rec, follower, counters)
    lease = lease_for(restarter.profile, restarter.runner, restarter.host, "a sweep")
    try:
        await lease.acquire()
    except LeaseHeld as exc:
        await follower.stop()
        return fail(f"{exc}; nothing was restarted")
    except (ConnectionError, OSError) as exc:
        await follower.stop()
        return fail(f"{exc}; nothing was restarted")
    if lease.host_note:
        _err(f"sweep: {lease.host_note}")
    try:
        return await _run_leased(exp, plan, session, restarter, load, state, rec, follower, counters)
    except asyncio.CancelledError:  # SIGTERM, SIGHUP: the server was not stopped; what it does is checked
        await left_note_on_signal(restarter)
        raise
    finally:
        await lease.release()


async def _run_leased(exp: ExperimentPlan, plan: SweepPlan, session: Session, restarter: Any,
                      load: LoadControl | None, state: str, rec: Recorder | None, follower: Any,
                      counters: Any) -> int:
    try:
        # At every look (and every few seconds) the sweep checks that its server is the one it started.
        sweep = Sweep(plan, session=session, restart=restarter, load=load, state_path=state,
                      recorder=rec, on_event=_on_event, counters=counters, server_check=restarter.check_server)
    except SweepError as exc:
        await follower.stop()
        return fail(str(exc), EXIT_INPUT)
    if counters is not None:
        _err(f"sweep: reading the engine's counters at {counters.url} (about once a second)")
    checks = None
    try:
        result = await _with_prometheus(exp, session, sweep.run())
        left = None
        on_deployed = None
        done = result is not None and result.finished and not sweep.lost
        if done and exp.compare_adaptive is not None:
            assert result is not None
            on_deployed, adaptive = await _measure_adaptive(exp, plan, result, session, restarter, load, rec,
                                                            counters)
            checks = (checks or []) + (adaptive or [])
        if done and exp.measure_schedule:
            assert result is not None
            on_schedule, scheduled = await _measure_schedule(exp, plan, result, session, restarter, load, rec,
                                                             counters)
            on_deployed = on_schedule or on_deployed
            checks = (checks or []) + (scheduled or [])
        if rec is not None and checks and result is not None:
            # The deployed measurements wrote their own verdicts: the sweep's comes last again, with them.
            rec.verdict({**result.to_json(), "schedule_check": checks})
        if on_deployed is not None and exp.finish != "winner":
            left = await _finish_on_deployed(exp, on_deployed)
            restarter = on_deployed[0]
        elif result is not None and sweep.server_setting is not None:
            left = await _finish(exp, result, restarter, sweep.server_setting)
        # Checked on the host before it is said: PID *and* start time still running.
        note = await _left_note(restarter)
    finally:
        await follower.stop()
    if result is None:
        return EXIT_INPUT
    if note is not None and isinstance(left, dict) and left.get("running") and not note[0]:
        left.update(steps=None, running=False, text=note[1])
        note = None
    if rec is not None and left is not None:
        rec.meta("sweep-finish", **left)
    extra: dict[str, Any] = {"recording": str(rec.path) if rec else None, "server_left_on": left,
                             "_left_note": note[1] if note else None, "server_lost": sweep.lost,
                             "_launch": getattr(restarter, "profile", None)}
    if exp.measure_schedule or exp.compare_adaptive is not None:
        extra["schedule_check"] = checks
    return _print_result(exp, result, extra)


def _schedule_problem(exp: ExperimentPlan, plan: SweepPlan, launch: LaunchProfile) -> str | None:
    """Why ``--measure-schedule`` or ``--compare-adaptive`` cannot run on this profile's server (None: they
    can), said before any restart. The rules between the plan's own fields are the plan's."""
    if exp.compare_adaptive is not None:
        _, why = adaptive_profile(launch, exp.compare_adaptive or None)
        if why:
            return f"--compare-adaptive: {why}"
    if not exp.measure_schedule:
        return None

    probe = Schedule(tuple(ScheduleEntry(c, max(plan.steps), "winner", max(plan.steps), "")
                           for c in sorted(plan.concurrency)))
    _, why = schedule_profile(launch, probe)
    return f"--measure-schedule: {why}" if why else None


async def _measure_schedule(exp: ExperimentPlan, plan: SweepPlan, result: SweepResult, session: Session,
                            restarter: Any, load: LoadControl | None, rec: Recorder | None, counters: Any
                            ) -> tuple[tuple[Any, dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """Restart on the sweep's schedule (shown first, confirmed) and measure it against the fixed settings."""

    schedules = result.schedules()
    if not schedules:
        _err("sweep: no schedule to measure (the verdicts gave none)")
        return None, None
    schedule = schedules[0]
    profile, why = schedule_profile(restarter.profile, schedule)
    if profile is None:
        _err(f"sweep: the schedule is not deployed: {why}")
        return None, None
    deploy = PlanRestarter(profile, restarter.runner, host=restarter.host, follower=restarter.follower,
                           show=_err, record_servers=restarter.record_servers)
    n = exp.measure_schedule or 2  # (the plan refuses the schedule's measurement without it)
    if not _confirm_deployed(exp, deploy, schedule.max_steps, "the schedule", n, len(schedule.entries)):
        return None, None
    measured, checks = await measure_schedule(
        plan, result, schedule, launches=n, session=session, restart=deploy, load=load, recorder=rec,
        on_event=_on_event, counters=counters, server_check=deploy.check_server)
    _say_checks(measured, checks, "the schedule's")
    ranges = [list(r) for r in schedule.ranges]
    left = {"steps": schedule.max_steps, "schedule": ranges,
            "text": f"the server is left running on the deployed schedule (K by batch size {ranges})"}
    return (deploy, left), [c.to_json() for c in checks]


async def _measure_adaptive(exp: ExperimentPlan, plan: SweepPlan, result: SweepResult, session: Session,
                            restarter: Any, load: LoadControl | None, rec: Recorder | None, counters: Any
                            ) -> tuple[tuple[Any, dict[str, Any]] | None, list[dict[str, Any]] | None]:
    """Restart in the engine's own adaptive mode (shown first, confirmed) and measure it at every load."""

    profile, why = adaptive_profile(restarter.profile, exp.compare_adaptive or None)
    if profile is None:
        _err(f"sweep: the adaptive mode is not measured: {why}")
        return None, None
    deploy = PlanRestarter(profile, restarter.runner, host=restarter.host, follower=restarter.follower,
                           show=_err, record_servers=restarter.record_servers)
    n = exp.measure_schedule or 2
    steps = max(plan.steps)  # its first tier; the engine moves between its candidate tiers from there
    if not _confirm_deployed(exp, deploy, steps, "the engine's adaptive mode", n, len(plan.concurrency)):
        return None, None
    measured, checks = await measure_deployed(
        plan, result, steps, [(c, None) for c in plan.concurrency], launches=n, what="adaptive",
        session=session, restart=deploy, load=load, recorder=rec, on_event=_on_event, counters=counters,
        server_check=deploy.check_server)
    _say_checks(measured, checks, "the adaptive mode's")
    left = {"steps": steps, "adaptive": True,
            "text": "the server is left running in the engine's adaptive mode (--speculative-adaptive)"}
    return (deploy, left), [c.to_json() for c in checks]


def _say_checks(measured: Any, checks: Any, whose: str) -> None:
    """A deployed measurement's comparisons on stderr, and whether it was cut short."""
    for check in checks:
        _err(f"sweep: {check.sentence}")
    if not measured.finished:
        _err(f"sweep: {whose} measurement was cut short")


def _confirm_deployed(exp: ExperimentPlan, deploy: Any, steps: int, what: str, n: int, loads: int) -> bool:
    """Show the deployed configuration's restart and get consent (``--yes``, or an answer at a terminal)."""

    _err(f"sweep: {what}, measured in {n} launch(es) at each of {loads} load(s) ({n * loads} restart(s)); "
         "the restart:")
    _err(deploy.plan_for(steps).describe())
    if exp.yes:
        return True
    if not sys.stdin.isatty():
        _err(f"sweep: {what} is not measured: pass --yes to confirm when not at a terminal")
        return False
    answer = input(f"Restart the server on {what} {n * loads} times? [y/N] ").strip().lower()
    if answer not in ("y", "yes"):
        _err(f"sweep: {what} is not measured (cancelled)")
        return False
    return True


async def _finish_on_deployed(exp: ExperimentPlan, on_deployed: tuple[Any, dict[str, Any]]) -> dict[str, Any]:
    """After a deployed configuration was measured the server runs it: left so (or stopped with --finish none)."""
    deploy, left = on_deployed
    if exp.finish == "none":
        outcome = await deploy.stop_server()
        return {"finish": "none", "steps": None, "running": False,
                "text": f"server stopped as asked (--finish none){': ' + outcome if outcome else ''}"}
    return {"finish": exp.finish or "last", "running": True, **left}


async def _finish(exp: ExperimentPlan, result: SweepResult, restarter: Any,
                  last: tuple[int, Any]) -> dict[str, Any]:
    """Leave the server as asked; returns what the report records about it."""
    winner = result.winner()  # on the objective the sweep decided on
    choice = _finish_choice(exp, winner)
    doc: dict[str, Any] = {"finish": choice, "steps": last[0], "running": True}
    if last[1]:
        doc["dims"] = dict(last[1])
    if choice == "none":
        outcome = await restarter.stop_server()
        doc.update(steps=None, running=False, text=f"server stopped as asked (--finish none){': ' + outcome if outcome else ''}")
        doc.pop("dims", None)
    elif choice == "winner" and winner is None:
        doc["text"] = (f"no winner declared: the server is left running with the last setting measured "
                       f"({_steps_text(last)})")
    elif choice == "winner" and winner != last:
        assert winner is not None
        _err(f"sweep: restarting on the winner ({_steps_text(winner)})")
        outcome = await (restarter(winner[0], dict(winner[1])) if winner[1] else restarter(winner[0]))
        if outcome.ok:
            doc.update(steps=winner[0], text=f"the server is left running on the winner ({_steps_text(winner)})")
            if winner[1]:
                doc["dims"] = dict(winner[1])
        else:
            doc.update(steps=None, running=None,
                       text=f"restart on the winner ({_steps_text(winner)}) failed: {outcome.detail}")
    elif choice == "winner":
        doc["text"] = f"the server is left running on the winner ({_steps_text(winner)}), the last setting measured"
    else:
        doc["text"] = (f"the server is left running with the last setting measured ({_steps_text(last)}); "
                       "restart it with the winner with --finish winner, from the dashboard (r) or your own command")
    return doc


async def _real_remote(exp: ExperimentPlan, plan: SweepPlan, launch: LaunchProfile, profile: Profile,
                       session: Session, ingest: RecordedIngest, rec: Recorder | None, state: str) -> int:
    try:
        target = target_from_options(None, profile=profile)
    except ValueError as exc:
        return fail(str(exc))
    try:
        link = await connect(target)
    except SSHError as exc:
        return fail(str(exc))
    try:
        follower = LogFollower(ingest, lambda path, from_end: SSHTailSource(target, path,
                                                                           lines=0 if from_end else None))
        restarter = PlanRestarter(launch, SSHRunner(link.conn), host=target.label, follower=follower, show=_err,
                                  record_servers=True)

        # The server's ports stay on the host: the load and the /metrics scrapes go through SSH
        # local forwards (one per host:port).

        metrics = _metrics_target(exp, profile, launch)
        wanted: list[tuple[str, int]] = []
        if not exp.no_load:
            assert launch.port is not None  # checked before connecting
            wanted.append(("127.0.0.1", launch.port))
        if metrics:
            m = urlsplit(metrics)
            key = (m.hostname or "127.0.0.1", m.port or (443 if m.scheme == "https" else 80))
            if key not in wanted:
                wanted.append(key)
        async with contextlib.AsyncExitStack() as stack:
            local: dict[tuple[str, int], str] = {}
            for host, port in wanted:
                try:
                    local[(host, port)] = await stack.enter_async_context(
                        forwarded_base_url(link.conn, port, remote_host=host))
                except Exception as exc:
                    return fail(f"cannot forward a local port to {host}:{port} on {target.label}: {exc}")
            load = None
            if not exp.no_load:
                try:
                    load = BackgroundLoad(LoadDriver(_load_options(exp, local[wanted[0]])),
                                          workloads=exp.workload_sets)
                except LoadError as exc:
                    return fail(str(exc), EXIT_INPUT)
            counters = None
            if metrics:
                m = urlsplit(metrics)
                base = local[(m.hostname or "127.0.0.1", m.port or (443 if m.scheme == "https" else 80))]
                counters = _scraper(base + (m.path or "/metrics") + (f"?{m.query}" if m.query else ""))
            return await _run_profile_sweep(exp, plan, session, restarter, load, state, rec, follower, counters)
    finally:
        link.close()


def _metrics_target(exp: ExperimentPlan, profile: Profile, launch: LaunchProfile) -> str | None:
    """The engine's /metrics URL as seen from the server's host, or None (``--no-metrics``, ``off``, no port)."""
    if exp.no_metrics or profile.metrics_url == "off":
        return None
    if profile.metrics_url:
        return profile.metrics_url
    if launch.port is None:
        return None

    return metrics_url_for(launch.port, engine=launch.engine if launch.engine != "unknown" else getattr(profile, "engine", None))


def _scraper(url: str) -> Any:
    return MetricsScraper(url)

