"""What a load run measured: each request as the client saw it, and a run's counts and summaries.

Per-request decode speed is the tokens after the first streamed chunk over the time between
the first and the last token-carrying chunk; a request with nothing to time (one chunk, one
token after the first, a stream that arrived in one burst) has none and is counted as
untimed. See :mod:`specmon.control.load` for the driver that fills these in.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from specmon.model.stats import Summary, summarize

__all__ = ["BURST_SHARE", "LoadReport", "RequestResult", "summarize_reports", "summary_or_none"]

#: A stream whose token-carrying chunks span less than this share of the request's latency
#: arrived in a burst and is not timed (counted as untimed).
BURST_SHARE = 0.5


@dataclass(slots=True)
class RequestResult:
    """One request as the client saw it (times in wall seconds from the driver's clock)."""

    index: int
    prompt_index: int
    ok: bool
    started_at: float
    latency_s: float
    ttft_s: float | None = None
    output_tokens: int = 0
    prompt_tokens: int | None = None
    status: int | None = None
    error: str | None = None
    #: Token-carrying chunks received (1 for a non-streamed answer).
    chunks: int = 0
    #: Seconds from the start to the first / last chunk that carried tokens.
    first_token_s: float | None = None
    last_token_s: float | None = None
    #: Tokens in the first chunk, when the server gave a running count (else assumed 1).
    first_tokens: int | None = None
    #: Sent again on a fresh connection: the first went out on a kept-alive one the server had closed.
    retried: bool = False
    #: Draft tokens proposed and accepted for this request, where the engine's answer says
    #: (``EngineAdapter.request_drafts``); None: not said.
    drafted: int | None = None
    accepted: int | None = None

    @property
    def timed(self) -> bool:
        """Whether this request has an interval between tokens to time (see :meth:`decode_tps`)."""
        return self.decode_tps() is not None

    def decode_tps(self, time_scale: float = 1.0) -> float | None:
        """Decode speed of this request in tokens per (simulated) second, or None.

        The tokens after the first chunk over the time from the first to the last
        token-carrying chunk. None when there is nothing to time: a failed request,
        a single chunk (or a non-streamed answer), no token after the first chunk,
        or no measurable time between them.
        """
        if not self.ok or self.chunks < 2 or self.first_token_s is None or self.last_token_s is None:
            return None
        span = self.last_token_s - self.first_token_s
        after = self.output_tokens - (self.first_tokens if self.first_tokens is not None else 1)
        if after < 1 or span <= 0:
            return None
        if self.latency_s > 0 and span < BURST_SHARE * self.latency_s:
            # The chunks arrived in one burst (a buffering hop: seen through an SSH forward on a
            # loaded host): their spacing says nothing about the server's pace.
            return None
        return after / span / time_scale


@dataclass
class LoadReport:
    """What one load run did."""

    concurrency: int
    started_at: float
    ended_at: float
    time_scale: float = 1.0
    results: list[RequestResult] = field(default_factory=list)
    stopped_by: str = ""

    @property
    def ok(self) -> list[RequestResult]:
        """Requests that completed."""
        return [r for r in self.results if r.ok]

    @property
    def errors(self) -> int:
        """Requests that failed or timed out."""
        return sum(1 for r in self.results if not r.ok)

    @property
    def output_tokens(self) -> int:
        """Tokens received in completed requests."""
        return sum(r.output_tokens for r in self.results if r.ok)

    @property
    def output_tps(self) -> float | None:
        """Aggregate output tokens per (simulated) second over the run's wall time."""
        span = self.ended_at - self.started_at
        if span <= 0 or not self.output_tokens:
            return None
        return self.output_tokens / span / self.time_scale

    @property
    def untimed(self) -> int:
        """Completed requests too short to time (left out of :meth:`decode_tps`)."""
        return sum(1 for r in self.results if r.ok and not r.timed)

    def decode_tps(self) -> list[float]:
        """Per-request decode speeds (tokens per simulated second) of the timed requests."""
        out = []
        for r in self.results:
            v = r.decode_tps(self.time_scale)
            if v is not None:
                out.append(v)
        return out

    def ttft(self) -> list[float]:
        """Per-request time to first token, in (simulated) seconds, where streamed."""
        return [r.ttft_s * self.time_scale for r in self.results if r.ok and r.ttft_s is not None]

    def to_json(self) -> dict[str, Any]:
        """Counts and summaries, JSON-ready."""
        dec = summarize(self.decode_tps())
        tt = summarize(self.ttft())
        errors = [r.error for r in self.results if r.error]
        tps = self.output_tps
        return {
            "concurrency": self.concurrency,
            "requests": len(self.results),
            "completed": len(self.ok),
            "errors": self.errors,
            "first_error": errors[0] if errors else None,
            "retried": sum(r.retried for r in self.results),
            "output_tokens": self.output_tokens,
            "output_tps": None if tps is None else round(tps, 3),
            "decode_tps": dec.to_json() if dec else None,
            "untimed": self.untimed,
            "ttft_s": tt.to_json() if tt else None,
            "stopped_by": self.stopped_by,
        }


def summarize_reports(reports: Sequence[LoadReport]) -> dict[str, Any]:
    """Pool several runs' per-request figures (one sweep setting measured in several visits)."""
    decode: list[float] = [v for r in reports for v in r.decode_tps()]
    ttft: list[float] = [v for r in reports for v in r.ttft()]
    return {
        "requests": sum(len(r.results) for r in reports),
        "errors": sum(r.errors for r in reports),
        "first_error": next((r.error for rep in reports for r in rep.results if r.error), None),
        "retried": sum(r.retried for rep in reports for r in rep.results),
        "output_tokens": sum(r.output_tokens for r in reports),
        "untimed": sum(r.untimed for r in reports),
        "decode_tps": decode,
        "ttft_s": ttft,
    }


def summary_or_none(values: Sequence[float]) -> Summary | None:
    """``stats.summarize`` that tolerates an empty list."""
    return summarize(values) if values else None
