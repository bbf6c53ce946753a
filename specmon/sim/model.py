"""Cost model of a simulated SGLang EAGLE-3 deployment (Kimi-K2.5 INT4 on 8 GPUs).

Everything here is pure: no I/O, no clock, randomness only through a
``random.Random`` the caller passes in, so a seed reproduces a run exactly.

The numbers come from one real tuning campaign (see DESIGN.md, "Who uses it"):

==========  ==============  =========================================
steps       mean tok/s      notes
==========  ==============  =========================================
none        88.8            plain decode step 11.26 ms ("11.3 ms")
1           85.1
2           94.0            best, +5.9 %
5           86.7
10          ~60             accept len only ~2.5-2.95
==========  ==============  =========================================

Verify cost was measured at 17.4 ms (2 draft tokens), 18.7 ms (3) and 21.7 ms
(6); the least-squares line through them is ``15.39 + 1.058 * D`` ms. A draft
step costs 1.892 ms, the value that makes the cycle times reproduce the
campaign. One cycle (draft ``steps`` tokens, verify ``D`` tokens) yields on
average ``accept_len`` tokens, so the steady throughput is
``accept_len / cycle_time``.

Acceptance is given per draft position as the *marginal* probability that
position ``k`` is accepted (what vLLM calls per-position acceptance). It
decays with depth and collapses after position 5 — past the horizon the
drafter was trained for — which is why 10 steps buy almost no accept length
while every cycle gets longer. Those marginals are what the campaign implies
once the measured costs are fixed; with them 3 steps lands at ~92 tok/s, below
2 steps by a margin a few hundred log lines can resolve.

Noise: each decode log line covers ``decode_log_interval`` (40) cycles. Its
throughput varies because (a) the accept length of 40 cycles is itself
random, and (b) the machine is not perfectly steady: a multiplicative factor
per line follows an AR(1) process (real batches drift together) with
occasional dips (host stalls, a prefill squeezed in, GC). The factor has mean
1, so the mean of per-line throughput is the steady throughput. With these
settings per-line throughput swings over ~30 tok/s inside one configuration
(baseline roughly 58-100 tok/s over 500 lines), so no single reading decides.

Batch > 1 (a bonus for the demo server): every extra token in a forward pass
adds ``per_token_ms``, drafting gets a little dearer per request, and without
CUDA graphs (batch above ``cuda_graph_max_bs``) steps cost more. Throughput
rises with batch while the gain from speculation shrinks and turns into a
loss past a few concurrent requests.
"""

from __future__ import annotations

import bisect
import itertools
import math
import random
from dataclasses import dataclass, field
from functools import lru_cache

#: Marginal acceptance per draft position (position 1 first), fitted to the campaign.
KIMI_EAGLE3_ACCEPTANCE: tuple[float, ...] = (
    0.651,
    0.450,
    0.218,
    0.199,
    0.187,
    0.020,
    0.013,
    0.009,
    0.006,
    0.004,
    0.0025,
    0.0015,
    0.001,
    0.0006,
    0.0004,
    0.0002,
)

def task_acceptance(prompt: str) -> float:
    """How much more (or less) a prompt's answer is accepted than the campaign's average, as a factor.

    Drafters agree with the target more on code (identifiers, syntax and whole
    lines repeat) and long structured text than on open chat: published EAGLE
    results show higher speedups on HumanEval than on MT-bench, and n-gram
    drafting lives on repetition. The demo server applies this (only when asked,
    ``--task-acceptance``) so a sweep over ``--workload chat,code,long`` can find
    that the best setting depends on the task. The words are the bundled sets'.
    """
    text = prompt.lower()
    if any(w in text for w in ("def ", "function", "class ", "sql", "implement", "script", "refactor", "```",
                               "typescript", "python", "rust")):
        return 1.35
    if any(w in text for w in ("essay", "outline", "in depth", "comprehensive", "thorough", "report",
                               "chapter", "long-form", "long letter", "feature")):
        return 1.1
    return 0.75


#: The real campaign, steps -> mean gen throughput (tok/s); 0 = no speculation.
CAMPAIGN_TARGETS: dict[int, float] = {0: 88.8, 1: 85.1, 2: 94.0, 5: 86.7, 10: 60.0}


class SpecConfigError(ValueError):
    """A speculative configuration SGLang would refuse."""


@dataclass(frozen=True, slots=True)
class SpecConfig:
    """The speculative flags of one server launch.

    ``steps == 0`` means no speculation (``speculative_algorithm=None``).
    With ``topk == 1`` SGLang forces ``draft_tokens = steps + 1``; so does
    :meth:`make` (the server logs a warning when it overrides a value).
    """

    steps: int = 0
    topk: int = 1
    draft_tokens: int = 0  # 0 when steps == 0

    @property
    def enabled(self) -> bool:
        """Whether speculation is on."""
        return self.steps > 0

    @classmethod
    def make(cls, steps: int | None, topk: int | None = None, draft_tokens: int | None = None) -> SpecConfig:
        """Validate flags the way SGLang does and fill the defaults.

        Args:
            steps: ``--speculative-num-steps``; ``None`` or 0 disables speculation.
            topk: ``--speculative-eagle-topk`` (default 1).
            draft_tokens: ``--speculative-num-draft-tokens`` (default ``steps + 1``).

        Returns:
            The normalised configuration.

        Raises:
            SpecConfigError: for values SGLang would reject.
        """
        if not steps:
            return cls(0, 1, 0)
        if steps < 0 or steps > 32:
            raise SpecConfigError(f"speculative_num_steps must be 1..32, got {steps}")
        topk = 1 if topk is None else topk
        if topk < 1 or topk > 16:
            raise SpecConfigError(f"speculative_eagle_topk must be 1..16, got {topk}")
        if topk == 1:
            # SGLang adjusts num_draft_tokens to steps + 1 for a chain (topk 1).
            return cls(steps, 1, steps + 1)
        ceiling = topk * steps + 1
        if draft_tokens is None:
            draft_tokens = min(ceiling, 2 * steps + 1)
        if draft_tokens < 2 or draft_tokens > ceiling:
            raise SpecConfigError(
                f"speculative_num_draft_tokens must be 2..{ceiling} for topk={topk}, got {draft_tokens}"
            )
        return cls(steps, topk, draft_tokens)


@dataclass(frozen=True)
class CostModel:
    """Timing and acceptance of the simulated GPU; all times in milliseconds."""

    plain_step_ms: float = 11.26
    verify_base_ms: float = 15.39
    verify_per_token_ms: float = 1.058
    draft_step_ms: float = 1.892
    acceptance: tuple[float, ...] = KIMI_EAGLE3_ACCEPTANCE
    # Batch > 1: cost of each extra token in one forward pass, and how much a
    # draft step grows per extra request.
    per_token_ms: float = 0.25
    draft_batch_growth: float = 0.03
    cuda_graph_max_bs: int = 64
    no_graph_penalty: float = 1.15
    # Tree drafting (topk > 1): a position is accepted when any of its branches
    # matches, with branches far from independent: q = 1 - (1 - p)**(1 + g*(topk-1)).
    # The real campaign used top-k 1, so g and the draft cost per branch are set
    # from public EAGLE results, and bench/bench_guided.py varies g over 0.15-0.5
    # so no conclusion rests on one value:
    # - xserv's EAGLE-3 tree with top-2 siblings (Qwen3-8B) raised the acceptance
    #   rate from 11.3% to 14.1% (+25% relative) at the same 4 verified tokens; with
    #   g = 0.35 a second branch lifts position 1 here from 0.651 to 0.76 (+17%),
    #   position 3 from 0.218 to 0.28 (+28%);
    # - a published EAGLE-3 sweep on vLLM (gpt-oss-120b, H100, batch 8) found a
    #   2-wide tree 2% slower than a depth-4 chain at 4 verified tokens, and
    #   per-position acceptance 0.58, 0.31, 0.16, 0.08: width buys less than depth,
    #   which a fractional exponent (not independent branches, g = 1) reproduces;
    # - EAGLE-2's dynamic trees are 20-40% faster than EAGLE-1's static ones, so
    #   tree shape matters, but by tens of percent, not multiples.
    # Each extra branch makes a draft step 10% dearer (wider draft batches on the
    # small draft model); the verify cost follows the draft tokens as in the campaign.
    topk_accept_gain: float = 0.35
    topk_draft_growth: float = 0.10
    # Per-line noise (throughput multiplier, mean 1).
    decode_log_interval: int = 40
    noise_sigma: float = 0.03
    noise_phi: float = 0.4
    dip_prob: float = 0.06
    dip_min: float = 0.08
    dip_max: float = 0.32
    #: This launch's speed against the deployment's typical one (1 = typical): two starts of one
    #: configuration differ (see :func:`launch_speed`); every cycle takes ``1 / speed`` as long.
    speed: float = 1.0

    # -- deterministic part -------------------------------------------------

    def position_acceptance(self, spec: SpecConfig) -> tuple[float, ...]:
        """Marginal acceptance of each usable draft position for ``spec``."""
        if not spec.enabled:
            return ()
        depth = min(spec.steps, spec.draft_tokens - 1, len(self.acceptance))
        probs = self.acceptance[:depth]
        if spec.topk > 1:
            # More candidates per position: accepted if any branch matches,
            # with branches far from independent (hence a fractional exponent).
            exponent = 1.0 + self.topk_accept_gain * (spec.topk - 1)
            probs = tuple(1.0 - (1.0 - p) ** exponent for p in probs)
        return probs

    def accept_distribution(self, spec: SpecConfig) -> tuple[float, ...]:
        """Probability of accepting exactly 0, 1, ..., depth draft tokens in one cycle."""
        probs = self.position_acceptance(spec)
        out = []
        prev = 1.0
        for p in probs:
            out.append(max(prev - p, 0.0))
            prev = p
        out.append(prev)
        return tuple(out)

    def expected_accept_len(self, spec: SpecConfig) -> float:
        """Mean tokens per verify cycle, bonus token included (SGLang's ``accept len``)."""
        return 1.0 + sum(self.position_acceptance(spec))

    def expected_accept_rate(self, spec: SpecConfig) -> float:
        """SGLang's 2026 ``accept rate``: accepted drafts / offered drafts, bonus excluded."""
        if not spec.enabled:
            return 0.0
        return (self.expected_accept_len(spec) - 1.0) / (spec.draft_tokens - 1)

    def cycle_ms(self, spec: SpecConfig, batch: int = 1) -> float:
        """Time of one decode step (no speculation) or one draft+verify cycle.

        Args:
            spec: The speculative configuration.
            batch: Running requests in the batch (>= 1).

        Returns:
            Milliseconds on the simulated GPU, before noise.
        """
        batch = max(1, batch)
        if not spec.enabled:
            ms = self.plain_step_ms + self.per_token_ms * (batch - 1)
        else:
            tokens = spec.draft_tokens
            verify = self.verify_base_ms + self.verify_per_token_ms * tokens + self.per_token_ms * (batch - 1) * tokens
            draft_step = self.draft_step_ms * (1 + self.topk_draft_growth * (spec.topk - 1))
            draft = draft_step * spec.steps * (1 + self.draft_batch_growth * (batch - 1))
            ms = verify + draft
        if not self.cuda_graph(batch):
            ms *= self.no_graph_penalty
        return ms / self.speed

    def cuda_graph(self, batch: int) -> bool:
        """Whether a batch this size runs from a captured CUDA graph."""
        return batch <= self.cuda_graph_max_bs

    def expected_throughput(self, spec: SpecConfig | int, batch: int = 1) -> float:
        """Steady gen throughput (tok/s, whole batch) — the mean of per-line values.

        Args:
            spec: A configuration, or a step count (topk 1).
            batch: Running requests.

        Returns:
            Tokens per second summed over the batch.
        """
        if isinstance(spec, int):
            spec = SpecConfig.make(spec)
        tokens_per_cycle = batch * self.expected_accept_len(spec)
        return 1000.0 * tokens_per_cycle / self.cycle_ms(spec, batch)

    # -- random part -------------------------------------------------------

    def noise(self, rng: random.Random) -> LineNoise:
        """A fresh per-line noise process drawing from ``rng``."""
        return LineNoise(self, rng)

    def sample_batch(
        self, spec: SpecConfig | int, rng: random.Random, noise: LineNoise | None = None, batch: int = 1
    ) -> BatchSample:
        """Sample one decode log line's worth (``decode_log_interval`` cycles).

        Pass the same ``noise`` object for consecutive lines so their noise is
        autocorrelated; without one, each call draws independent noise.

        Args:
            spec: Configuration or step count.
            rng: Source of randomness.
            noise: The run's noise process (see :meth:`noise`).
            batch: Running requests.

        Returns:
            The line's accept length, accept rate and gen throughput.
        """
        if isinstance(spec, int):
            spec = SpecConfig.make(spec)
        factor = (noise or self.noise(rng)).next()
        cycles = self.decode_log_interval
        sampler = AcceptSampler(self, spec)
        tokens = sum(sampler.draw(rng) for _ in range(cycles * batch))
        elapsed = cycles * self.cycle_ms(spec, batch) / 1000.0 / factor
        accept_len = tokens / (cycles * batch) if spec.enabled else None
        rate = (accept_len - 1.0) / (spec.draft_tokens - 1) if accept_len is not None else None
        return BatchSample(accept_len, rate, tokens / elapsed, tokens, elapsed)


@dataclass(frozen=True, slots=True)
class BatchSample:
    """One decode log interval: what SGLang prints, plus the raw counts."""

    accept_len: float | None
    accept_rate: float | None
    gen_throughput: float
    tokens: int
    elapsed_s: float


@dataclass(slots=True)
class LineNoise:
    """Throughput multiplier per log line: AR(1) drift plus rare dips, mean 1."""

    model: CostModel
    rng: random.Random
    _x: float = field(init=False)

    def __post_init__(self) -> None:
        # Start from the stationary distribution so line 1 is not special.
        self._x = self.rng.gauss(0.0, self.model.noise_sigma)

    def next(self) -> float:
        """Advance one line and return its throughput factor."""
        m = self.model
        innovation = m.noise_sigma * math.sqrt(1.0 - m.noise_phi**2)
        self._x = m.noise_phi * self._x + self.rng.gauss(0.0, innovation)
        dip = self.rng.uniform(m.dip_min, m.dip_max) if self.rng.random() < m.dip_prob else 0.0
        mean_dip = m.dip_prob * (m.dip_min + m.dip_max) / 2.0
        return max(0.2, (1.0 + self._x - dip) / (1.0 - mean_dip))


class AcceptSampler:
    """Draws the tokens one request gains in one cycle (accepted drafts + 1)."""

    def __init__(self, model: CostModel, spec: SpecConfig) -> None:
        self._cum = _cumulative(model.accept_distribution(spec))

    def draw(self, rng: random.Random) -> int:
        """Tokens produced by one request in one cycle (1 without speculation)."""
        if len(self._cum) == 1:
            return 1
        # Index of the first cumulative bound above u = number of accepted drafts.
        return bisect.bisect_right(self._cum, rng.random() * self._cum[-1]) + 1


@lru_cache(maxsize=64)
def _cumulative(dist: tuple[float, ...]) -> tuple[float, ...]:
    # Cached: the server builds a sampler per request.
    return tuple(itertools.accumulate(dist))


DEFAULT_MODEL = CostModel()


def launch_speed(rng: random.Random, cv: float, *, hours: float = 0.0, drift_pct_per_hour: float = 0.0) -> float:
    """One launch's speed factor: lognormal with mean 1 and coefficient of variation ``cv``, times a drift.

    Real servers differ between starts of the same configuration (vLLM issue 53436: 7.5-19.7%
    run-to-run CV at low concurrency with speculation); a slow drift (a host warming up, a
    neighbour's job) moves every setting measured later by ``drift_pct_per_hour`` per hour.

    Args:
        rng: The launch's randomness.
        cv: Launch CV, a fraction (0 = every launch alike).
        hours: Hours since the campaign started, for the drift.
        drift_pct_per_hour: Linear drift, percent per hour.
    """
    factor = 1.0
    if cv > 0:
        sigma = math.sqrt(math.log1p(cv * cv))
        factor = math.exp(rng.gauss(-sigma * sigma / 2, sigma))
    return max(0.05, factor * (1.0 + drift_pct_per_hour / 100.0 * hours))


def expected_throughput(steps: int, batch: int = 1) -> float:
    """Steady gen throughput (tok/s) of the default model at ``steps`` (0 = no speculation)."""
    return DEFAULT_MODEL.expected_throughput(SpecConfig.make(steps), batch)


def sample_batch(steps: int, rng: random.Random) -> tuple[float | None, float | None, float]:
    """One independent decode line of the default model: (accept_len, accept_rate, gen_throughput)."""
    s = DEFAULT_MODEL.sample_batch(steps, rng)
    return s.accept_len, s.accept_rate, s.gen_throughput
