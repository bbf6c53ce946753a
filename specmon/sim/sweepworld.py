"""A simulated server for the sweep runner: instant restarts, decode lines made on ``sleep``.

The world behind ``bench/bench_guided.py`` and the sweep tests: the sweep
runner (:class:`specmon.experiment.sweep_run.Sweep`) restarts it with a setting —
a step count and, for SGLang trees, top-k and draft tokens — and every poll
makes decode lines drawn from the simulator's cost model
(:class:`specmon.sim.model.CostModel`), with its per-line noise. So a bench
run goes through exactly the code path of a real sweep: looks, the stopping
rule, the guided strategy's choices, the verdict.

Each setting's lines come from a generator seeded by ``(seed, setting)``:
two sweeps over the same world (grid and guided) read the same lines for a
setting both measure.

With ``launch_cv`` each restart draws its own speed factor
(:func:`specmon.sim.model.launch_speed`, seeded by ``(seed, restart number)``)
and ``drift_pct_per_hour`` moves it with the simulated clock: the known truth
of a setting stays :meth:`SweepWorld.expected`, and one launch misses it by
its factor, as real starts do.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
import zlib
from collections.abc import Callable

from specmon.control.load_report import LoadReport, RequestResult
from specmon.model.session import Session
from specmon.records import Config, Decode, Engine
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig, launch_speed

Sampler = Callable[[], tuple[float | None, float | None, float]]


def line_sampler(spec: SpecConfig, rng: random.Random, model: CostModel = DEFAULT_MODEL, batch: int = 1) -> Sampler:
    """Decode lines of ``spec``: ``(accept_len, accept_rate, gen_throughput)`` per call.

    The tokens of one line are the sum of ``decode_log_interval`` independent
    cycles drawn from ``model.accept_distribution``; that sum's distribution is
    computed once by convolution, so a line costs one draw instead of 40. The
    machine noise is the model's own AR(1)-plus-dips process.
    """
    cycles = model.decode_log_interval
    one = model.accept_distribution(spec) if spec.enabled else (1.0,)
    total = [1.0]
    for _ in range(cycles):
        nxt = [0.0] * (len(total) + len(one) - 1)
        for i, a in enumerate(total):
            if a:
                for j, b in enumerate(one):
                    nxt[i + j] += a * b
        total = nxt
    cum = list(itertools.accumulate(total))
    cycle_s = model.cycle_ms(spec, batch) / 1000.0
    noise = model.noise(rng)

    def sample() -> tuple[float | None, float | None, float]:
        factor = noise.next()
        tokens = cycles + bisect.bisect_right(cum, rng.random() * cum[-1])
        elapsed = cycles * cycle_s / factor
        if not spec.enabled:
            return None, None, batch * tokens / elapsed
        accept_len = tokens / cycles
        return accept_len, (accept_len - 1) / (spec.draft_tokens - 1), batch * tokens / elapsed

    return sample


class SweepWorld:
    """A simulated SGLang server the sweep restarts (see the module docstring).

    Args:
        seed: Seeds every setting's lines.
        model: The deployment's cost model (the bench varies it per seed).
        lines_per_poll: Decode lines produced by each sweep poll.
    """

    def __init__(self, seed: int, model: CostModel = DEFAULT_MODEL, *, lines_per_poll: int = 50,
                 workloads: dict[str, float] | None = None, launch_cv: float = 0.0,
                 drift_pct_per_hour: float = 0.0, restart_s: float = 0.0,
                 alias: dict[int, int] | None = None, requests: bool = False, request_tokens: int = 256,
                 request_cv: float = 0.15) -> None:
        self.seed = seed
        #: Step counts that run like another (``{3: 2}``: "3 steps" logs 3 steps, runs like 2): known equals.
        self.alias = dict(alias or {})
        #: Simulated seconds a restart takes (the clock moves on by that much).
        self.restart_s = restart_s
        #: Run-to-run CV of a launch's speed (a fraction) and the slow drift, percent per hour.
        self.launch_cv = launch_cv
        self.drift_pct_per_hour = drift_pct_per_hour
        #: The speed factor of the launch running now, and of every launch so far.
        self.speed = 1.0
        self.speeds: list[float] = []
        self.model = model
        #: Acceptance per named prompt set, as a factor on the model's (code repeats more than chat).
        self.workloads = dict(workloads or {})
        self.workload: str | None = None
        self.session = Session()
        self.now = 0.0
        self.log_time = 1.77e9
        self.line = 0
        self.lines_per_poll = lines_per_poll
        #: Every restart asked for: ``(steps, topk, draft_tokens)``.
        self.restarts: list[tuple[int, int, int]] = []
        self._samplers: dict[tuple[SpecConfig, int, str | None], Sampler] = {}
        self.sampler: Sampler | None = None
        self._spec: SpecConfig | None = None
        #: Requests in flight (the sweep's load sets it: the world is its own load driver too).
        self.batch = 1
        #: With ``requests``, the world's load reports each request as a client would (TTFT, latency,
        #: tokens): what a latency or goodput objective is judged on.
        self.requests = requests
        self.request_tokens = request_tokens
        self.request_cv = request_cv
        self._load: LoadReport | None = None
        self._slots: list[tuple[float, tuple[float, float] | None]] = []
        self._req_rng = random.Random(0)
        self._loads = 0
        #: The schedule the running launch follows (None: one K at every load).
        self._table: list[tuple[int, int, int]] | None = None

    def clock(self) -> float:
        """The simulated monotonic clock."""
        return self.now

    def spec_for(self, steps: int, dims: dict[str, int | str] | None = None) -> SpecConfig:
        """The configuration a restart with ``steps`` and ``dims`` runs (SGLang's own rules)."""
        d = dims or {}
        topk = d.get("topk")
        dt = d.get("draft_tokens")
        return SpecConfig.make(steps, int(topk) if topk is not None else None, int(dt) if dt is not None else None)

    def expected(self, steps: int, dims: dict[str, int | str] | None = None) -> float:
        """The true mean throughput of a setting (the known truth)."""
        if steps in self.alias and not dims:
            return self.model.expected_throughput(SpecConfig.make(self.alias[steps]))
        return self.model.expected_throughput(self.spec_for(steps, dims))

    async def restart(self, steps: int, dims: dict[str, int | str] | None = None) -> object:
        """Restart on a setting: a new run in the session, announced like SGLang's server_args line."""
        from specmon.experiment.sweep_plan import RestartOutcome

        spec = self.spec_for(steps, dims)
        self._table = None
        self.now += self.restart_s
        self.restarts.append((spec.steps, spec.topk, spec.draft_tokens))
        rng = random.Random(zlib.crc32(repr((self.seed, "launch", len(self.restarts))).encode()))
        self.speed = launch_speed(rng, self.launch_cv, hours=self.now / 3600.0,
                                  drift_pct_per_hour=self.drift_pct_per_hour)
        self.speeds.append(self.speed)
        self.session.begin_source(f"sim launch {len(self.restarts)}")
        on = spec.enabled
        self.line += 1
        self.session.ingest(Config(self.line, self.log_time, None, engine=Engine.SGLANG,
                                   algorithm="EAGLE3" if on else None, steps=spec.steps,
                                   topk=spec.topk if on else None, draft_tokens=spec.draft_tokens if on else None))
        self._spec = spec
        self._pick()
        return RestartOutcome(True, "ready")

    def schedule_restart(self, ranges: list[tuple[int, int, int]]) -> Callable[..., object]:
        """A restart that runs a schedule: K by batch size (inclusive ranges, the last K carried on),
        announced with its largest K as vLLM announces a table."""

        async def restart(steps: int, dims: dict[str, int | str] | None = None) -> object:
            outcome = await self.restart(steps, dims)
            self._table = list(ranges)
            self._pick()
            return outcome

        return restart

    def adaptive_steps(self, batch: int, tiers: dict[int, list[int]] | None = None) -> int:
        """Where an SGLang-like adaptive controller settles at ``batch``: it probes one step beyond the
        drafts it sees accepted, among the candidate tiers of the batch's slot (SGLang's default tiers)."""
        slots = tiers or {1: [1, 3, 5, 7], 8: [0, 1, 3], 32: [0, 1], 64: [0]}
        key = max((k for k in slots if k <= batch), default=min(slots))
        cands = sorted(slots[key])
        i = len(cands) // 2
        for _ in range(2 * len(cands)):
            k = cands[i]
            accepted = self.model.expected_accept_len(SpecConfig.make(k)) - 1 if k else -1.0
            if i + 1 < len(cands) and (k == 0 or accepted > k - 0.5):
                i += 1
            elif i > 0 and accepted <= (cands[i - 1] - 0.5 if cands[i - 1] else 0.5) - 0.25:
                i -= 1
            else:
                break
        return cands[i]

    def _k_at(self, batch: int) -> int | None:
        table = self._table
        if not table:
            return None
        for lo, hi, k in table:
            if lo <= batch <= hi:
                return k
        return table[-1][2]

    def _pick(self) -> None:
        spec = self._spec
        if spec is None:
            return
        scheduled = self._k_at(self.batch)
        if scheduled is not None:
            spec = SpecConfig.make(scheduled)
        k = (spec, self.batch, self.workload)
        if k not in self._samplers:
            salt = zlib.crc32(repr((self.seed, spec.steps, spec.topk, spec.draft_tokens, self.batch,
                                    self.workload)).encode())
            runs_as = SpecConfig.make(self.alias[spec.steps]) if spec.steps in self.alias else spec
            self._samplers[k] = line_sampler(runs_as, random.Random(salt), self.model_for(self.workload), self.batch)
        self.sampler = self._samplers[k]

    def expected_at(self, steps: int, dims: dict[str, int | str] | None, batch: int) -> float:
        """The true mean throughput of a setting at ``batch`` requests in flight."""
        return self.model.expected_throughput(self.spec_for(steps, dims), batch)

    def model_for(self, workload: str | None) -> CostModel:
        """The cost model under one workload's prompts (acceptance scaled, capped below 1)."""
        factor = self.workloads.get(workload, 1.0) if workload else 1.0
        if factor == 1.0:
            return self.model
        from dataclasses import replace

        return replace(self.model, acceptance=tuple(min(0.98, p * factor) for p in self.model.acceptance))

    async def start(self, concurrency: int, workload: str | None = None) -> None:
        """The load: keep ``concurrency`` requests in flight with one workload's prompts (the sweep's LoadControl)."""
        self.batch = concurrency
        self.workload = workload
        self._pick()
        if self.requests:
            from specmon.control.load_report import LoadReport

            self._loads += 1
            self._req_rng = random.Random(zlib.crc32(repr((self.seed, "load", self._loads)).encode()))
            self._load = LoadReport(concurrency, self.now, self.now)
            self._slots = [(self.now, None)] * concurrency

    @property
    def completed(self) -> int | None:
        """Requests the current load has finished (None without ``requests``: the sweep then goes by samples)."""
        return len(self._load.results) if self._load is not None else None

    def request_truth(self, steps: int, batch: int) -> tuple[float, float]:
        """A setting's true per-request ``(ITL s, TTFT s)`` medians at ``batch`` (launch factor 1)."""
        spec = SpecConfig.make(self.alias.get(steps, steps))
        rate = self.model.expected_throughput(spec, batch) / batch
        return 1.0 / rate, self._prefill_s(batch)

    def _prefill_s(self, batch: int) -> float:
        # A prompt's prefill waits for the batch's decode steps it joins: longer with more in flight.
        return 0.08 * (1.0 + 0.1 * (batch - 1))

    def _advance_requests(self) -> None:
        """Requests that have finished by now, each slot one after another (per-request noise, launch speed)."""
        load, spec = self._load, self._spec
        if load is None or spec is None:
            return
        k = self._k_at(self.batch)
        itl, _ = self.request_truth(spec.steps if k is None else k, self.batch)
        for i, (t, pending) in enumerate(self._slots):
            while True:
                if pending is None:  # drawn once per request, kept until it finishes (no survivor bias)
                    noise = math.exp(self._req_rng.gauss(0.0, self.request_cv))
                    ttft = self._prefill_s(self.batch) * math.exp(self._req_rng.gauss(0.0, 0.2)) / self.speed
                    pending = (ttft, ttft + (self.request_tokens - 1) * itl * noise / self.speed)
                ttft, latency = pending
                if t + latency > self.now:
                    break
                load.results.append(RequestResult(len(load.results), 0, True, t, latency, ttft, self.request_tokens,
                                                  chunks=self.request_tokens, first_token_s=ttft,
                                                  last_token_s=latency))
                t += latency
                pending = None
            self._slots[i] = (t, pending)
        load.ended_at = self.now

    async def stop(self) -> LoadReport | None:
        """The load stops: its requests (with ``requests``), else nothing (the simulated server has no client)."""
        load, self._load = self._load, None
        return load

    async def sleep(self, seconds: float) -> None:
        """Advance the clock; the running server writes ``lines_per_poll`` decode lines."""
        self.now += seconds
        self._advance_requests()
        if self.sampler is None:
            return
        for _ in range(self.lines_per_poll):
            accept_len, accept_rate, tps = self.sampler()
            self.log_time += 0.9
            self.line += 1
            self.session.ingest(Decode(self.line, self.log_time, "TP0", running_req=self.batch, accept_len=accept_len,
                                       accept_rate=accept_rate, gen_throughput=tps * self.speed))
