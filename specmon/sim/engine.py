"""A simulated SGLang scheduler running on a virtual clock.

The engine owns requests, runs prefill and decode cycles with the costs of
:class:`~specmon.sim.model.CostModel`, and prints ``Prefill batch`` /
``Decode batch`` lines the way SGLang does: a decode line every
``decode_log_interval`` decode cycles, whose ``gen throughput`` is the tokens
generated since the previous decode line divided by the time since it —
idle time included, so the first line after a pause is tiny, as on a real
server.

It never sleeps and never reads a clock: ``now`` only moves when the driver
calls :meth:`SimEngine.step` (work) or :meth:`SimEngine.advance_to` (idle).
The offline sweep drives it as fast as it can; the demo server paces it
against the wall clock.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from specmon.sim.logwriter import MAX_TOTAL_TOKENS, LogWriter, decode_message, prefill_message
from specmon.sim.model import DEFAULT_MODEL, AcceptSampler, CostModel, SpecConfig

#: Prefill cost: fixed overhead plus a rate (Kimi-K2.5 on 8 GPUs, short prompts).
PREFILL_BASE_MS = 8.0
PREFILL_TOKENS_PER_MS = 20.0


@dataclass(slots=True)
class SimRequest:
    """One generation request inside the engine."""

    prompt_tokens: int
    max_tokens: int
    cached_tokens: int = 0
    client_port: int = 0
    rid: str = ""
    generated: int = 0
    submitted_at: float = 0.0
    finished_at: float | None = None
    #: The task's acceptance, as a factor on the model's (1: the campaign's; see sim.model.task_acceptance).
    accept_scale: float = 1.0

    @property
    def done(self) -> bool:
        """Whether the request has all its tokens."""
        return self.generated >= self.max_tokens

    @property
    def seq_len(self) -> int:
        """Tokens this request holds in the KV cache."""
        return self.prompt_tokens + self.generated


class SimEngine:
    """Prefill/decode scheduler of one simulated server launch.

    Args:
        spec: Speculative configuration of the launch.
        writer: Where log lines go.
        now: Simulated time (naive seconds) when the engine becomes ready.
        rng: Randomness for acceptance and noise.
        model: Cost model.
    """

    def __init__(
        self, spec: SpecConfig, writer: LogWriter, now: float, rng: random.Random, model: CostModel = DEFAULT_MODEL
    ) -> None:
        self.spec = spec
        self.model = model
        self.writer = writer
        self.rng = rng
        self.now = now
        self.waiting: list[SimRequest] = []
        self.running: list[SimRequest] = []
        #: Requests finished since the driver last emptied this list.
        self.finished: list[SimRequest] = []
        self.decode_lines = 0
        self._sampler = AcceptSampler(model, spec)
        self._samplers: dict[float, AcceptSampler] = {1.0: self._sampler}
        self._noise = model.noise(rng)
        self._factor = self._noise.next()
        self._cycles = 0  # decode cycles since the last Decode line
        self._tokens = 0  # tokens generated since the last Decode line
        self._drawn = 0  # accepted+bonus tokens, before clipping at max_tokens
        self._req_cycles = 0  # request x cycle pairs since the last Decode line
        self._last_decode_log = now
        self._last_prefill_log = now

    def _sampler_for(self, scale: float) -> AcceptSampler:
        if scale not in self._samplers:
            from dataclasses import replace

            scaled = replace(self.model, acceptance=tuple(min(0.98, p * scale) for p in self.model.acceptance))
            self._samplers[scale] = AcceptSampler(scaled, self.spec)
        return self._samplers[scale]

    @property
    def idle(self) -> bool:
        """No request waiting or running."""
        return not self.waiting and not self.running

    def submit(self, req: SimRequest) -> None:
        """Queue a request; it is prefilled at the next :meth:`step`."""
        req.submitted_at = self.now
        self.waiting.append(req)

    def advance_to(self, t: float) -> None:
        """Let time pass without work (never moves backwards)."""
        self.now = max(self.now, t)

    def step(self, max_cycles: int = 8) -> None:
        """Do the next piece of work: one prefill, or up to ``max_cycles`` decode cycles.

        Stops early after a decode line or when a request finishes, so the
        driver can react (answer the client, submit the next request).
        """
        if self.waiting:
            self._prefill()
            return
        for _ in range(max_cycles):
            if not self.running:
                return
            logged, finished = self._cycle()
            if logged or finished:
                return

    # -- internals ---------------------------------------------------------

    def _prefill(self) -> None:
        reqs, self.waiting = self.waiting, []
        new_tokens = sum(r.prompt_tokens - r.cached_tokens for r in reqs)
        self.now += (PREFILL_BASE_MS + new_tokens / PREFILL_TOKENS_PER_MS) / 1000.0
        gap = max(self.now - self._last_prefill_log, 1e-3)
        used = sum(r.seq_len for r in self.running) + sum(r.prompt_tokens for r in reqs)
        cached = sum(r.cached_tokens for r in reqs)
        usage = used / MAX_TOTAL_TOKENS
        msg = prefill_message(len(reqs), new_tokens, cached, usage, len(self.running), 0, new_tokens / gap)
        self.writer.line(self.now, msg)
        self._last_prefill_log = self.now
        for r in reqs:
            r.generated = 1  # prefill samples the first output token
            if r.done:
                self._finish(r)
            else:
                self.running.append(r)

    def _cycle(self) -> tuple[bool, bool]:
        batch = len(self.running)
        self.now += self.model.cycle_ms(self.spec, batch) / 1000.0 / self._factor
        seq_tokens = 0
        finished = False
        for r in list(self.running):
            drawn = self._sampler_for(r.accept_scale).draw(self.rng)
            got = min(drawn, r.max_tokens - r.generated)
            r.generated += got
            seq_tokens += r.seq_len
            self._tokens += got
            self._drawn += drawn
            self._req_cycles += 1
            if r.done:
                self.running.remove(r)
                self._finish(r)
                finished = True
        self._cycles += 1
        if self._cycles >= self.model.decode_log_interval:
            self._log_decode(batch, seq_tokens)
            return True, finished
        return False, finished

    def _finish(self, r: SimRequest) -> None:
        r.finished_at = self.now
        self.finished.append(r)

    def _log_decode(self, batch: int, seq_tokens: int) -> None:
        gap = max(self.now - self._last_decode_log, 1e-6)
        accept_len = accept_rate = None
        if self.spec.enabled:
            accept_len = self._drawn / self._req_cycles
            accept_rate = (accept_len - 1.0) / (self.spec.draft_tokens - 1)
        msg = decode_message(
            batch,
            seq_tokens,
            seq_tokens / MAX_TOTAL_TOKENS,
            self._tokens / gap,
            accept_len=accept_len,
            accept_rate=accept_rate,
            cuda_graph=self.model.cuda_graph(batch),
            queue_req=len(self.waiting),
        )
        self.writer.line(self.now, msg)
        self.decode_lines += 1
        self._last_decode_log = self.now
        self._cycles = self._tokens = self._drawn = self._req_cycles = 0
        self._factor = self._noise.next()
