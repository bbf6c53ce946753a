"""``--prometheus-port``: the live figures as Prometheus metrics, for fleets.

:func:`render_metrics` turns a session into the Prometheus text exposition
format (version 0.0.4); :class:`PrometheusExporter` serves it at
``GET /metrics`` from the application's own asyncio loop.

The format is written by hand rather than with ``prometheus_client``: it is a
dozen gauges in a line-oriented text format (``# HELP``, ``# TYPE``, then
``name{label="value"} number``), and a hand-written renderer keeps the
dependency list short and lets the figures come straight from the session at
scrape time instead of being mirrored into a second registry.

What is exported (all gauges except ``specmon_lines_total``):

=====================================  ==========================================================
``specmon_run_info{run,config,...}``   1 for the current run, labels say what it is
``specmon_run_id``                     the current run's number (changes at every restart)
``specmon_speculative_steps``          its step count (0 = no speculation; absent when unknown)
``specmon_accept_length``              latest accept length (tokens per verify cycle)
``specmon_accept_rate``                latest accept rate (0..1)
``specmon_throughput_tokens_per_second``  latest generation throughput (whole batch)
``specmon_*_mean``                     the run's mean over counted samples (warm-up excluded)
``specmon_run_samples``                counted throughput samples in the run
``specmon_server_state{state}``        1 for the server's current state
``specmon_lines_total``                log lines read (counter)
=====================================  ==========================================================

The exporter binds to 127.0.0.1 by default: the metrics describe the user's
servers, and exposing them on every interface must be a deliberate choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Callable, Iterable
from typing import Any

from specmon.model.session import ServerState, Session

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_MAX_REQUEST = 8192


def escape_label(value: str) -> str:
    """Escape a label value: backslash, double quote and newline (the exposition format's rules)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _number(value: float | int) -> str:
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "+Inf" if value > 0 else "-Inf"
        return repr(value)
    return str(value)


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def metric(self, name: str, kind: str, help_text: str,
               samples: Iterable[tuple[dict[str, str], float | int]]) -> None:
        samples = list(samples)
        if not samples:
            return
        self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        for labels, value in samples:
            if labels:
                text = ",".join(f'{k}="{escape_label(str(v))}"' for k, v in labels.items())
                self.lines.append(f"{name}{{{text}}} {_number(value)}")
            else:
                self.lines.append(f"{name} {_number(value)}")


def _mean(values: Any) -> float | None:
    n = len(values)
    return float(sum(values)) / n if n else None


def render_metrics(session: Session, *, instance_labels: dict[str, str] | None = None) -> str:
    """The session's live figures in the Prometheus text format.

    Args:
        session: The live session (read, never modified).
        instance_labels: Extra labels on every sample (``host``, ``profile``) so one
            Prometheus can tell several specmon instances apart.

    Returns:
        The exposition text, ending with a newline.
    """
    base = dict(instance_labels or {})
    w = _Writer()
    run = session.current if session.current is not None else (session.runs[-1] if session.runs else None)
    w.metric("specmon_lines_total", "counter", "Log lines read.", [(base, session.lines)])
    w.metric("specmon_server_state", "gauge", "1 for the server's current state, as its log tells.",
             [({**base, "state": s.value}, 1 if session.state is s else 0) for s in ServerState])
    if run is None:
        return "\n".join(w.lines) + "\n"
    cfg = run.config
    info = {**base, "run": str(run.id), "config": run.label, "engine": cfg.engine.value if cfg else "unknown",
            "algorithm": (cfg.algorithm or "none") if cfg else "unknown", "source": run.source}
    w.metric("specmon_run_info", "gauge", "The current run (one server launch); labels describe it.", [(info, 1)])
    w.metric("specmon_run_id", "gauge", "Number of the current run; changes at every restart.", [(base, run.id)])
    if cfg is not None and cfg.steps is not None:
        w.metric("specmon_speculative_steps", "gauge", "Speculative steps of the current run (0 = none).",
                 [(base, cfg.steps)])
    if cfg is not None and cfg.draft_tokens is not None:
        w.metric("specmon_speculative_draft_tokens", "gauge", "Draft tokens verified per cycle.",
                 [(base, cfg.draft_tokens)])
    latest = [
        ("specmon_accept_length", "Latest accept length: tokens per verify cycle, bonus included.",
         run.live_accept_len),
        ("specmon_accept_rate", "Latest accept rate (0..1).", run.live_accept_rate),
        ("specmon_throughput_tokens_per_second", "Latest generation throughput of the whole batch, tok/s.",
         run.live_throughput),
    ]
    for name, help_text, series in latest:
        if len(series):
            w.metric(name, "gauge", help_text, [(base, float(series[-1]))])
    means = [
        ("specmon_accept_length_mean", "Mean accept length of the run (warm-up excluded).", run.accept_len),
        ("specmon_accept_rate_mean", "Mean accept rate of the run (warm-up excluded).", run.accept_rate),
        ("specmon_throughput_tokens_per_second_mean", "Mean throughput of the run (warm-up and idle excluded).",
         run.throughput),
    ]
    for name, help_text, values in means:
        m = _mean(values)
        if m is not None:
            w.metric(name, "gauge", help_text, [(base, m)])
    w.metric("specmon_run_samples", "gauge", "Counted throughput samples in the current run.",
             [(base, len(run.throughput))])
    return "\n".join(w.lines) + "\n"


class PrometheusExporter:
    """Serves ``GET /metrics`` on the running asyncio loop.

    Args:
        render: Returns the exposition text (called at every scrape).
        port: TCP port (0 = any free port; see :attr:`port` after :meth:`start`).
        host: Address to bind; loopback by default (see the module docstring).
    """

    def __init__(self, render: Callable[[], str], port: int, host: str = "127.0.0.1") -> None:
        self._render = render
        self.host = host
        self.port = port
        self._server: asyncio.base_events.Server | None = None
        self.scrapes = 0

    @classmethod
    def for_session(cls, session: Session, port: int, host: str = "127.0.0.1",
                    instance_labels: dict[str, str] | None = None) -> PrometheusExporter:
        """An exporter of :func:`render_metrics` for ``session``."""
        return cls(lambda: render_metrics(session, instance_labels=instance_labels), port, host)

    async def start(self) -> None:
        """Listen.

        Raises:
            OSError: the port is taken or not allowed (the message names it).
        """
        try:
            self._server = await asyncio.start_server(self._handle, self.host, self.port)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot serve Prometheus metrics on {self.host}:{self.port}: "
                                     f"{exc.strerror or exc}") from None
        sockets = self._server.sockets or ()
        if sockets:
            self.port = sockets[0].getsockname()[1]

    async def close(self) -> None:
        """Stop listening."""
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None

    async def __aenter__(self) -> PrometheusExporter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(10):
                head = await reader.readuntil(b"\r\n\r\n")
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        try:
            request_line = head.split(b"\r\n", 1)[0].decode("latin-1")
            parts = request_line.split()
            method, target = (parts[0], parts[1]) if len(parts) >= 2 else ("", "")
            path = target.split("?", 1)[0]
            if method not in ("GET", "HEAD"):
                status, body, ctype = "405 Method Not Allowed", b"use GET\n", "text/plain; charset=utf-8"
            elif path in ("/metrics", "/"):
                self.scrapes += 1
                status, body, ctype = "200 OK", self._render().encode("utf-8"), CONTENT_TYPE
            else:
                status, body, ctype = "404 Not Found", b"metrics are at /metrics\n", "text/plain; charset=utf-8"
            head_out = (f"HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                        "Connection: close\r\n\r\n").encode("latin-1")
            writer.write(head_out + (b"" if method == "HEAD" else body))
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
