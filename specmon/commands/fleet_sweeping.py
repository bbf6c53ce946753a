"""``specmon sweep FLEET``: a parallel A/B sweep on the replicas of a profile (:mod:`specmon.experiment.fleet_sweep`).

The profile lists ``replicas`` (host, log, ``launch_port``) and one ``[launch]`` section they
share; ``{port}`` in it becomes each replica's port. Before anything runs, every replica's first
restart is shown in full (the others differ in the step count only) and confirmed. Each replica
then gets its own SSH connection (or none, on this machine), its own log follower, load driver
(through an SSH port forward to its port) and lease on its server: two specmon never drive one
replica, and one replica that cannot be reached stops nothing but the start (nothing restarted).
At the end the replicas are left as ``--finish`` says: on the winner (all restarted in
parallel), as they are, or stopped; each "left running" is checked on its host.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import tempfile
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from specmon.commands.exits import EXIT_INCOMPLETE, EXIT_INPUT, EXIT_NOTHING, EXIT_OK, fail
from specmon.commands.sweep_output import _err
from specmon.commands.sweep_parts import (
    _finish_choice,
    _free_port,
    _left_note,
    _load_options,
    _NoRunner,
    _recorder,
    check_steps,
    left_note_on_signal,
)
from specmon.config import Profile
from specmon.control.demo import DEMO_STEPS_MAX
from specmon.control.launch import LaunchError
from specmon.control.lease import LeaseHeld, lease_for
from specmon.control.load import BackgroundLoad, LoadDriver, LoadError, forwarded_base_url
from specmon.control.runner import LocalRunner, SSHRunner
from specmon.experiment.fleet_sweep import Arm, FleetSweep
from specmon.experiment.plan_restarter import LogFollower, PlanRestarter
from specmon.experiment.stats.rotation import assign
from specmon.experiment.sweep_plan import SweepError
from specmon.model.fleet import short_names
from specmon.model.launches import DEFAULT_LAUNCH_CV
from specmon.model.session import Session
from specmon.output.parallel_sweep import markdown_report, text_report
from specmon.output.recording import RecordedIngest
from specmon.sources.local import LocalTailSource
from specmon.sources.ssh import SSHTailSource
from specmon.ssh.connect import SSHError, connect, target_from_options

if TYPE_CHECKING:
    import contextlib

    from specmon.config import Profile, ReplicaEntry
    from specmon.control.launch import LaunchProfile
    from specmon.experiment.fleet_sweep import Arm, FleetSweepResult
    from specmon.experiment.plan import ExperimentPlan
    from specmon.experiment.plan_restarter import LogFollower, PlanRestarter

def replica_names(profile: Profile) -> list[str]:
    """What the tables call each replica: its name, or what differs between their places."""

    assert profile.replicas is not None
    wheres = [f"{r.host or 'local'}:{r.launch_port or (profile.launch.port if profile.launch else '')}"
              for r in profile.replicas]
    names = short_names(wheres)
    for i, entry in enumerate(profile.replicas):
        if entry.name is not None:
            names[i] = entry.name
    return [f"{n}#{i + 1}" if names.count(n) > 1 else n for i, n in enumerate(names)]


class _Replica:
    """One replica's parts for the sweep: launch profile, connection, follower, restarter, load."""

    def __init__(self, name: str, entry: ReplicaEntry, launch: LaunchProfile, profile: Profile) -> None:
        self.name = name
        self.entry = entry
        self.launch = launch
        self.profile = profile
        self.host = entry.host or "localhost"
        self.link: Any = None
        self.follower: LogFollower | None = None
        self.restarter: PlanRestarter | None = None
        self.lease: Any = None

    def show(self, text: str) -> None:
        _err("\n".join(f"[{self.name}] {line}" for line in text.splitlines()))

    async def open(self, exp: ExperimentPlan, stack: contextlib.AsyncExitStack) -> Arm:
        """Connect (for a replica on a host) and build its arm; raises ValueError with the sentence."""

        session = Session()
        ingest = RecordedIngest(session, None)
        port = self.launch.port
        assert port is not None  # the profile's check
        if self.entry.host is None:
            self.follower = LogFollower(ingest, lambda path, from_end: LocalTailSource(
                path, lines=0 if from_end else None))
            runner: Any = LocalRunner()
            base = f"http://127.0.0.1:{port}"
        else:
            one = self.profile.model_copy(update={"replicas": None, "launch": None, "host": self.entry.host})
            target = target_from_options(None, profile=one)
            try:
                self.link = await connect(target)
            except SSHError as exc:
                raise ValueError(str(exc)) from None
            stack.callback(self.link.close)
            self.host = target.label
            self.follower = LogFollower(ingest, lambda path, from_end: SSHTailSource(
                target, path, lines=0 if from_end else None))
            runner = SSHRunner(self.link.conn)
            try:
                base = await stack.enter_async_context(forwarded_base_url(self.link.conn, port))
            except Exception as exc:
                raise ValueError(f"cannot forward a local port to 127.0.0.1:{port} on {target.label}: {exc}") from None
        self.restarter = PlanRestarter(self.launch, runner, host=self.host, follower=self.follower, show=self.show,
                                       record_servers=True)
        load = None
        if not exp.no_load:
            try:
                load = BackgroundLoad(LoadDriver(_load_options(exp, base)))
            except LoadError as exc:
                raise ValueError(str(exc)) from None
        return Arm(self.name, self.restarter, session, load)


async def run_fleet_sweep(exp: ExperimentPlan, profile: Profile, profile_name: str) -> int:
    """Run a parallel sweep on ``profile``'s replicas; returns the exit code."""

    assert profile.replicas is not None
    if profile.launch is None:
        return fail(f"profile {profile_name!r} lists replicas but has no [launch] section: a parallel sweep needs "
                    "to know how to restart them (one [launch] they share, {port} for each one's launch_port)")
    try:
        plan = exp.fleet_plan()
    except SweepError as exc:
        return fail(str(exc), EXIT_INPUT)
    if plan.seed is None:  # drawn now, so the layout shown before the start is the one that runs

        plan = replace(plan, seed=random.SystemRandom().randrange(1 << 31))
    assert plan.seed is not None
    names = replica_names(profile)
    replicas: list[_Replica] = []
    for name, entry in zip(names, profile.replicas, strict=True):
        launch = profile.launch.model_copy(update={"port": entry.launch_port or profile.launch.port})
        replicas.append(_Replica(name, entry, launch, profile))
    problem = check_steps(replicas[0].launch, plan.steps, f"profile {profile_name!r}")
    if problem:
        return fail(problem)
    if not exp.no_load and any(r.launch.port is None for r in replicas):
        return fail("every replica needs a launch_port for the load driver to reach it")
    first = assign(names, list(plan.steps), 0, plan.seed)
    try:
        # Every setting's commands are built (and so checked) before the first restart; round 1's are shown.
        built = {r.name: {s: PlanRestarter(r.launch, _NoRunner(), host=r.host).plan_for(s) for s in plan.steps}
                 for r in replicas}
        shown = {name: built[name][steps] for name, steps in first.items()}
    except LaunchError as exc:
        return fail(f"profile {profile_name!r}: {exc}")
    _err(f"sweep: a parallel sweep of {len(plan.steps)} settings on {len(replicas)} replicas, up to "
         f"{plan.max_rounds} rounds (a restart of every replica each round); round 1:")
    for r in replicas:
        if r.name in shown:
            r.show(shown[r.name].describe())
    _err("sweep: the later rounds run the same commands with the step count the layout gives each replica")
    if not exp.yes:
        if not sys.stdin.isatty():
            return fail("this restarts every replica; pass --yes to confirm when not at a terminal")
        answer = input(f"Restart {len(replicas)} replicas, up to {plan.max_rounds} times each? [y/N] ").strip().lower()
        if answer not in ("y", "yes"):
            return fail("cancelled", 1)
    rec = _recorder(exp, "parallel-sweep", None, {"command": "sweep", "profile": profile_name, "parallel": True,
                                                   "replicas": names, "steps": list(plan.steps)})
    async with contextlib.AsyncExitStack() as stack:
        arms = []
        for r in replicas:
            try:
                arms.append(await r.open(exp, stack))
            except ValueError as exc:
                await _stop_followers(replicas)
                return fail(f"replica {r.name}: {exc}; nothing was restarted")
        held = []
        try:
            for r in replicas:
                assert r.restarter is not None
                lease = lease_for(r.launch, r.restarter.runner, r.host, "a parallel sweep")
                try:
                    await lease.acquire()
                except (LeaseHeld, ConnectionError, OSError) as exc:
                    return fail(f"replica {r.name}: {exc}; nothing was restarted")
                held.append(lease)
            sweep = FleetSweep(plan, arms, on_event=_on_event, recorder=rec)
            result = await sweep.run()
            left = await _finish(exp, result, replicas, sweep.running)
        except asyncio.CancelledError:  # SIGTERM, SIGHUP: no replica was stopped; what each does is checked
            await asyncio.gather(*(left_note_on_signal(r.restarter) for r in replicas if r.restarter is not None))
            raise
        finally:
            for lease in held:
                with contextlib.suppress(Exception):
                    await lease.release()
            await _stop_followers(replicas)
            if rec is not None:
                rec.close()
    _print(exp.format, result.to_json() | {"recording": str(rec.path) if rec else None, "left": left},
           [f"{k}: {v['text']}" for k, v in left.items()])
    if result.decision is None:
        return EXIT_NOTHING
    unmeasured = [s for s in plan.steps if not (result.fit and s in result.fit.launches)]
    if unmeasured:
        _err(f"sweep: {len(unmeasured)} setting(s) have no launch on any replica (exit {EXIT_INCOMPLETE})")
        return EXIT_INCOMPLETE
    return EXIT_OK


#: The simulated replicas' own speeds differ by this much (``specmon.sim.server --replica-cv``).
DEMO_REPLICA_CV_PCT = 10.0


async def run_fleet_demo(exp: ExperimentPlan) -> int:
    """``sweep --demo --replicas N``: a parallel sweep on N simulated servers on this machine.

    Each runs the demo's simulated SGLang on its own port, with its own speed (replica CV 10%,
    drawn from the seed and its port) and each launch its own luck (``--launch-cv``, 5% by
    default); everything lives in a temporary folder and every server is stopped at the end.
    """

    scale = min(exp.time_scale, 1000.0)
    seed = exp.seed if exp.seed is not None else random.SystemRandom().randrange(1 << 30)
    launch_cv = DEFAULT_LAUNCH_CV if exp.launch_cv is None else exp.launch_cv
    with tempfile.TemporaryDirectory(prefix="specmon-demo-") as tmp:
        ports: list[int] = []
        while len(ports) < (exp.replicas or 2):
            port = _free_port()
            if port not in ports:
                ports.append(port)
        server = [sys.executable, "-m", "specmon.sim.server", "--log", "{log}", "--append", "--port", "{port}",
                  "--time-scale", f"{scale:g}", "--startup-seconds", "0.5", "--seed", str(seed),
                  "--replica-cv", f"{DEMO_REPLICA_CV_PCT:g}", "--launch-cv", f"{100 * launch_cv:g}"]
        launch = {"mode": "managed", "engine": "sglang",
                  "argv": [*server, "--steps", "{steps}", "--topk", "{topk}", "--draft-tokens", "{draft_tokens}"],
                  "nospec_argv": [*server, "--steps", "0"], "log": f"{tmp}/sim_{{port}}_{{steps}}.log",
                  "pidfile": f"{tmp}/sim_{{port}}.pid", "cwd": tmp, "health_url": "http://127.0.0.1:{port}/health",
                  "steps_min": 0, "steps_max": DEMO_STEPS_MAX, "start_timeout_s": 60, "stop_grace_s": 5,
                  "stop_signal": "TERM"}
        profile = Profile.model_validate({"launch": launch, "replicas": [
            {"name": f"sim-{i}", "log": f"{tmp}/view-{i}.log", "launch_port": port}
            for i, port in enumerate(ports, start=1)]})
        # Simulated servers in a folder of their own: nothing of the user's restarts (yes), and nothing
        # is left running (finish none); the seed drawn is the one the layout and the servers use.
        return await run_fleet_sweep(exp.replaced(seed=seed, yes=True, finish="none"), profile, "demo")


def _print(fmt: str, doc: dict[str, Any], left: list[str]) -> None:
    if fmt == "json":
        sys.stdout.write(json.dumps(doc, indent=2) + "\n")
    else:
        sys.stdout.write(markdown_report(doc, left) if fmt == "markdown" else text_report(doc, left))


def _on_event(ev: Any) -> None:
    _err(f"  {ev.text}" if ev.kind in ("look", "done") else f"sweep: {ev.text}")


async def _stop_followers(replicas: list[_Replica]) -> None:
    for r in replicas:
        if r.follower is not None:
            await r.follower.stop()


async def _finish(exp: ExperimentPlan, result: FleetSweepResult, replicas: list[_Replica],
                  running: dict[str, int | None]) -> dict[str, dict[str, Any]]:
    """Leave the replicas as ``--finish`` says; returns, per replica, what is left (checked on its host)."""

    winner = result.winner
    choice = _finish_choice(exp, (winner, ()) if winner is not None else None)
    if choice == "winner" and winner is None:
        choice = "last"
        _err("sweep: no winner: every replica is left on its last setting")

    async def one(r: _Replica) -> dict[str, Any]:
        assert r.restarter is not None
        now = running.get(r.name)
        doc: dict[str, Any] = {"steps": now, "running": now is not None}
        if choice == "none":
            said = await r.restarter.stop_server()
            doc.update(steps=None, running=False, text="stopped as asked (--finish none)"
                       + (f": {said}" if said else ""))
            return doc
        if choice == "winner" and winner is not None and now != winner:
            outcome = await r.restarter(winner)
            if outcome.ok:
                doc.update(steps=winner, running=True)
            else:
                doc.update(steps=None, running=None, text=f"restart on the winner failed: {outcome.detail}")
                return doc
        note = await _left_note(r.restarter)
        if note is not None and not note[0]:
            doc.update(steps=None, running=False, text=note[1])
        elif doc["steps"] is not None:
            doc["text"] = f"left running with {doc['steps']} steps" + (" (the winner)" if doc["steps"] == winner else "")
        else:
            doc.setdefault("text", "not running a measured setting")
        return doc

    docs = await asyncio.gather(*(one(r) for r in replicas))
    return {r.name: d for r, d in zip(replicas, docs, strict=True)}
