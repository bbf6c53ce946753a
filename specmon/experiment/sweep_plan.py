"""What a sweep measures and how: :class:`SweepPlan` and its validation, and the parts a sweep is given.

The plan names the settings (step counts, or points of several launch
dimensions from :mod:`specmon.control.dims`), the load concurrencies and
workloads, the measuring order and strategy, and the stopping rule; it refuses
anything malformed with a :class:`SweepError`. The injected parts
(:class:`Restarter`, :class:`LoadControl`) are what the runner,
:class:`~specmon.experiment.sweep_run.Sweep`, is handed to act on the world;
:class:`SweepEvent` is what it says while it runs.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any, Protocol

from specmon.control import dims as dimensions
from specmon.control.dims import Point
from specmon.control.load import LoadReport
from specmon.model.launches import DEFAULT_LAUNCH_CV
from specmon.model.objective import Objective
from specmon.model.stopping import StoppingRule

ORDERS = ("given", "random", "interleave", "launches")
#: ``grid`` measures every setting; ``guided`` only those the cost model says could win (model/guided.py).
STRATEGIES = ("grid", "guided")


class SweepError(Exception):
    """A sweep cannot start or continue (bad plan, incompatible state file); the message says why."""


# --------------------------------------------------------------------------- injected parts


@dataclass(frozen=True, slots=True)
class RestartOutcome:
    """What a restart did: ``ok`` means started *and* ready."""

    ok: bool
    detail: str = ""
    log: str | None = None


class Restarter(Protocol):
    """Restarts the server with ``steps`` speculative steps and waits until it is ready.

    A sweep over more dimensions than the step count also passes ``dims``, the
    setting's other launch parameters (``{"topk": 4, "draft_tokens": 8}``); a
    steps-only sweep calls ``restart(steps)``, so restarters that know only the
    step count keep working.
    """

    def __call__(self, steps: int, dims: dict[str, int | str] | None = None) -> Awaitable[RestartOutcome]:
        """Apply ``steps`` (0 = no speculation) and ``dims``."""
        ...


class LoadControl(Protocol):
    """Starts and stops the workload a sweep measures."""

    async def start(self, concurrency: int, workload: str | None = None) -> None:
        """Start keeping ``concurrency`` requests in flight (with the named prompt set ``workload``).

        A sweep without workloads calls ``start(concurrency)`` only.
        """
        ...

    async def stop(self) -> LoadReport | None:
        """Stop; return the client-side report of the run."""
        ...


@dataclass(frozen=True, slots=True)
class SweepEvent:
    """A progress message for the user (stderr, the dashboard's event log)."""

    kind: str  # plan, restart, ready, start, look, done, failed, resume, verdict, advice
    text: str
    cell: str | None = None


# --------------------------------------------------------------------------- plan and state


# --------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class SweepPlan:
    """What to sweep and how.

    Attributes:
        steps: Step counts to try; 0 = no speculation (the baseline).
        concurrency: Load concurrencies to measure at each step count.
        order: ``given``, ``random`` or ``interleave``.
        seed: Seed of the random order (None: drawn once and kept in the state).
        rule: The sequential stopping rule.
        max_minutes: Collection budget per setting, minutes (None: samples only).
        settle: Samples skipped after the load starts or changes.
        stall_s: A setting fails when no sample arrives for this long.
        attach_s: How long to wait for the restarted server's run to show in the log.
        poll_s: How often the session is read.
        strategy: ``grid`` (every setting) or ``guided`` (the cost model picks what to measure).
        points: The settings when they have more dimensions than the step count:
            ``(steps, point)`` pairs from :func:`specmon.control.dims.expand_grid`
            (empty: one setting per step count). ``steps`` must then list their step counts.
    """

    steps: tuple[int, ...]
    concurrency: tuple[int, ...] = (1,)
    order: str = "given"
    seed: int | None = None
    rule: StoppingRule = field(default_factory=StoppingRule)
    max_minutes: float | None = 10.0
    settle: int = 2
    stall_s: float = 180.0
    attach_s: float = 120.0
    poll_s: float = 1.0
    strategy: str = "grid"
    points: tuple[tuple[int, Point], ...] = ()
    #: Named prompt sets, each measured at every setting (empty: the load's one set).
    workloads: tuple[str, ...] = ()
    #: Launch CV assumed while no setting has two launches (a fraction; ``--launch-cv`` in percent).
    launch_cv: float = DEFAULT_LAUNCH_CV
    #: The difference worth resolving, percent (``--resolve-pct``): with it (or ``order="launches"``) the
    #: sweep buys launches as well as samples (:mod:`specmon.experiment.rounds`).
    resolve_pct: float | None = None
    #: Start-up time assumed before the first restart is timed, seconds (a restart's cost).
    restart_s: float = 60.0
    #: What the verdict decides on (``--objective``): tok/s, a latency percentile or goodput.
    objective: Objective = field(default_factory=Objective)
    #: Rounds of launches fixed in advance (the launch design plans its own when None): a deployed
    #: schedule is measured in as many launches as asked, whatever it finds.
    rounds: int | None = None
    #: Samples a second assumed before any was measured, in the run's clock (the demo's runs faster).
    sample_rate: float = 1.0
    #: What the run's clock is when it is not a real server's (the demo: ``simulated ×100``): said beside
    #: every time the plan states, so that a plan's time matches the clock the run uses.
    clock: str = ""
    #: Which launches a round of the launch design makes: ``today`` (every undecided setting) or ``bai``
    #: (the leader and its most ambiguous challenger, :mod:`specmon.experiment.stats.bai`).
    design: str = "today"

    def __post_init__(self) -> None:
        if len(set(self.workloads)) != len(self.workloads):
            raise SweepError("a workload is listed twice")
        for w in self.workloads:
            if not isinstance(w, str) or not w or any(not (ch.isalnum() or ch in "-_") for ch in w):
                raise SweepError(f"a workload name is letters, digits, - and _: {w!r}")
        if self.points:
            try:
                checked = tuple((s, dimensions.check_point(dict(p))) for s, p in self.points)
            except ValueError as exc:
                raise SweepError(str(exc)) from None
            if checked != tuple(self.points):
                raise SweepError("points must be validated and in canonical order (use dims.expand_grid)")
            if len(set(self.points)) != len(self.points):
                raise SweepError("a setting is listed twice")
            if tuple(dict.fromkeys(s for s, _ in self.points)) != tuple(self.steps):
                raise SweepError("steps must list the step counts of the points, in order")
        if not self.steps:
            raise SweepError("give at least one step count")
        for s in self.steps:
            if type(s) is not int or s < 0:
                raise SweepError(f"step counts are whole numbers >= 0, not {s!r}")
        if len(set(self.steps)) != len(self.steps):
            raise SweepError("a step count is listed twice")
        for s, p in self.settings:
            problem = dimensions.point_problem(s, dict(p))
            if problem:
                raise SweepError(f"{dimensions.label(s, p)}: {problem}")
        if not self.concurrency or any(type(c) is not int or c < 1 for c in self.concurrency):
            raise SweepError("concurrency values are whole numbers >= 1")
        if len(set(self.concurrency)) != len(self.concurrency):
            raise SweepError("a concurrency is listed twice")
        if self.strategy not in STRATEGIES:
            raise SweepError(f"strategy must be one of {', '.join(STRATEGIES)}, not {self.strategy!r}")
        if not self.objective.is_tps:
            if self.strategy == "guided":
                raise SweepError("the guided strategy's cost model predicts tok/s: use --strategy grid "
                                 "with --objective")
            if self.order != "launches":
                raise SweepError(f"the {self.objective.name} objective is judged launch by launch: it needs "
                                 "--order launches (the default with --objective)")
        if self.strategy == "guided" and self.order == "interleave":
            raise SweepError("the guided strategy chooses its own order: use --order given or random")
        if self.order not in ORDERS:
            raise SweepError(f"order must be one of {', '.join(ORDERS)}, not {self.order!r}")
        if not (0 <= self.launch_cv < 1):
            raise SweepError("the launch CV is a percentage from 0 to below 100")
        if self.resolve_pct is not None and not 0 < self.resolve_pct < 100:
            raise SweepError("--resolve-pct must be between 0 and 100")
        if self.restart_s < 0:
            raise SweepError("restart_s must be >= 0")
        if not self.sample_rate > 0:
            raise SweepError("sample_rate must be positive")
        if self.order == "launches" and self.strategy == "guided":
            raise SweepError("the guided strategy chooses its own order: use --order given or random")
        if self.max_minutes is not None and not self.max_minutes > 0:
            raise SweepError("max_minutes must be positive")
        if self.rounds is not None and (type(self.rounds) is not int or self.rounds < 1 or self.order != "launches"):
            raise SweepError("fixed rounds are whole numbers >= 1, for the launch design only")
        if self.settle < 0 or self.stall_s <= 0 or self.attach_s <= 0 or self.poll_s <= 0:
            raise SweepError("settle must be >= 0; stall_s, attach_s and poll_s positive")

    def identity(self) -> dict[str, Any]:
        """The fields a resumed sweep must share with the interrupted one."""
        r = self.rule
        return {"steps": list(self.steps), "concurrency": list(self.concurrency), "order": self.order,
                "rule": {"alpha": r.alpha, "looks": r.looks, "min_samples": r.min_samples,
                         "max_samples": r.max_samples, "margin_pct": r.margin_pct,
                         "precision_pct": r.precision_pct},
                "max_minutes": self.max_minutes, "settle": self.settle,
                **({"strategy": self.strategy} if self.strategy != "grid" else {}),
                **({"points": [dimensions.key(s, p) for s, p in self.points]} if self.points else {}),
                **({"workloads": list(self.workloads)} if self.workloads else {}),
                **({"launch_cv": self.launch_cv} if self.launch_cv != DEFAULT_LAUNCH_CV else {}),
                **({"resolve_pct": self.resolve_pct} if self.resolve_pct is not None else {}),
                **({"objective": self.objective.token} if not self.objective.is_tps else {}),
                **({"rounds": self.rounds} if self.rounds is not None else {}),
                **({"design": self.design} if self.design != "today" else {})}

    def to_json(self) -> dict[str, Any]:
        """Everything, JSON-ready."""
        return {**self.identity(), "seed": self.seed, "stall_s": self.stall_s, "attach_s": self.attach_s,
                "poll_s": self.poll_s}

    @property
    def settings(self) -> tuple[tuple[int, Point], ...]:
        """Every ``(steps, point)`` setting (a point is empty for a steps-only sweep)."""
        return self.points or tuple((s, ()) for s in self.steps)

    @property
    def dimensions(self) -> tuple[str, ...]:
        """The dimensions swept: ``("steps",)`` or e.g. ``("steps", "topk", "draft_tokens")``."""
        used = {k for _, p in self.settings for k, _ in p}
        return ("steps", *(d for d in dimensions.EXTRA if d in used))

    def ordered_settings(self, seed: int) -> list[tuple[int, int, Point, str | None]]:
        """``(steps, concurrency, point, workload)`` in measuring order (the concurrencies and workloads of
        one setting stay together: one restart serves them all)."""
        settings = list(self.settings)
        if self.order == "random":
            random.Random(seed).shuffle(settings)
        loads: tuple[str | None, ...] = self.workloads or (None,)
        return [(s, c, p, w) for s, p in settings for c in self.concurrency for w in loads]

    def ordered_cells(self, seed: int) -> list[tuple[int, int]]:
        """``(steps, concurrency)`` in measuring order (a steps-only sweep's settings)."""
        return [(s, c) for s, c, _, _ in self.ordered_settings(seed)]

    @property
    def groups(self) -> list[tuple[int, str | None]]:
        """Every ``(concurrency, workload)`` a verdict is given for."""
        return [(c, w) for c in self.concurrency for w in (self.workloads or (None,))]
