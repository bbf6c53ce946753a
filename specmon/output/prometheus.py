"""``--prometheus-port``: the live figures as Prometheus metrics, for fleets.

:class:`SessionCollector` is a ``prometheus_client`` custom collector: at every
scrape it reads the session and yields the metric families below — nothing is
mirrored into a second registry and no work is done per log line.
:class:`PrometheusExporter` serves it at ``/metrics`` with ``prometheus_client``'s
own HTTP server (a daemon thread), and :func:`render_metrics` gives the same
text without a server.

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

The scrape runs on the HTTP server's thread while the event loop keeps
ingesting, so the collector only makes reads that are atomic under the GIL:
attribute reads, ``deque[-1]``, and a slice copy of a sample array before
averaging it. It never takes a buffer view of a live ``array`` (numpy's
``frombuffer``): an append on the loop thread while the view exists would
raise ``BufferError`` there.

The exporter binds to 127.0.0.1 by default: the metrics describe the user's
servers, and exposing them on every interface must be a deliberate choice.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator, Sequence
from typing import Any
from wsgiref.simple_server import WSGIServer

from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily, Metric
from prometheus_client.registry import Collector

from specmon.model.session import ServerState, Session
from specmon.model.stats import as_array

#: The content type ``prometheus_client`` serves (text format 0.0.4).
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def _mean(values: Sequence[float]) -> float | None:
    snapshot = values[:]  # one C-level copy: atomic against an append on the loop thread
    return float(as_array(snapshot).mean()) if len(snapshot) else None


class SessionCollector(Collector):
    """Reads a session at scrape time and yields specmon's metric families.

    Args:
        session: The session, or a function returning it at each scrape (a looped
            replay replaces the feeder's session).
        instance_labels: Extra labels on every sample (``host``, ``profile``) so one
            Prometheus can tell several specmon instances apart.
    """

    def __init__(self, session: Session | Callable[[], Session],
                 instance_labels: dict[str, str] | None = None) -> None:
        self._session: Callable[[], Session] = session if callable(session) else (lambda: session)
        self._base = dict(instance_labels or {})
        self.scrapes = 0

    def _gauge(self, name: str, help_text: str, value: float, **labels: str) -> GaugeMetricFamily:
        all_labels = {**self._base, **labels}
        family = GaugeMetricFamily(name, help_text, labels=list(all_labels))
        family.add_metric(list(all_labels.values()), value)
        return family

    def collect(self) -> Iterator[Metric]:
        """The metric families of the session as it is now (called by the registry at each scrape)."""
        self.scrapes += 1
        session = self._session()
        base = self._base
        lines = CounterMetricFamily("specmon_lines", "Log lines read.", labels=list(base))
        lines.add_metric(list(base.values()), session.lines)
        yield lines
        state = GaugeMetricFamily("specmon_server_state", "1 for the server's current state, as its log tells.",
                                  labels=[*base, "state"])
        current_state = session.state
        for s in ServerState:
            state.add_metric([*base.values(), s.value], 1 if current_state is s else 0)
        yield state
        run = session.current
        if run is None and session.runs:
            run = session.runs[-1]
        if run is None:
            return
        cfg = run.config
        info = InfoMetricFamily("specmon_run", "The current run (one server launch); labels describe it.",
                                labels=list(base))
        info.add_metric(list(base.values()), {
            "run": str(run.id), "config": run.label, "engine": cfg.engine.value if cfg else "unknown",
            "algorithm": (cfg.algorithm or "none") if cfg else "unknown", "source": run.source})
        yield info
        yield self._gauge("specmon_run_id", "Number of the current run; changes at every restart.", run.id)
        if cfg is not None and cfg.steps is not None:
            yield self._gauge("specmon_speculative_steps", "Speculative steps of the current run (0 = none).",
                              cfg.steps)
        if cfg is not None and cfg.draft_tokens is not None:
            yield self._gauge("specmon_speculative_draft_tokens", "Draft tokens verified per cycle.",
                              cfg.draft_tokens)
        latest: list[tuple[str, str, Any]] = [
            ("specmon_accept_length", "Latest accept length: tokens per verify cycle, bonus included.",
             run.live_accept_len),
            ("specmon_accept_rate", "Latest accept rate (0..1).", run.live_accept_rate),
            ("specmon_throughput_tokens_per_second", "Latest generation throughput of the whole batch, tok/s.",
             run.live_throughput),
        ]
        for name, help_text, series in latest:
            if len(series):
                yield self._gauge(name, help_text, float(series[-1]))
        means: list[tuple[str, str, Any]] = [
            ("specmon_accept_length_mean", "Mean accept length of the run (warm-up excluded).", run.accept_len),
            ("specmon_accept_rate_mean", "Mean accept rate of the run (warm-up excluded).", run.accept_rate),
            ("specmon_throughput_tokens_per_second_mean", "Mean throughput of the run (warm-up and idle excluded).",
             run.throughput),
        ]
        for name, help_text, values in means:
            m = _mean(values)
            if m is not None:
                yield self._gauge(name, help_text, m)
        yield self._gauge("specmon_run_samples", "Counted throughput samples in the current run.",
                          len(run.throughput))
        # Alert on it (specmon_acceptance_collapsed == 1 for a minute): the drafter stopped paying
        # while the server serves on, which nothing else reports (specmon.model.collapse).
        yield self._gauge("specmon_acceptance_collapsed",
                          "1 while the run's acceptance is well below its own level (the collapse guard), else 0.",
                          1 if run.guard.collapsed else 0)
        if run.guard.level is not None:
            yield self._gauge("specmon_acceptance_gain_level",
                              "The run's own level of accepted draft tokens per step, as the collapse guard knows it.",
                              run.guard.level)


def registry_for(session: Session | Callable[[], Session],
                 instance_labels: dict[str, str] | None = None) -> tuple[CollectorRegistry, SessionCollector]:
    """A registry holding only specmon's collector (no process or platform metrics)."""
    registry = CollectorRegistry(auto_describe=False)
    collector = SessionCollector(session, instance_labels)
    registry.register(collector)
    return registry, collector


def render_metrics(session: Session, *, instance_labels: dict[str, str] | None = None) -> str:
    """The session's live figures in the Prometheus text format, as a scrape would get them.

    Args:
        session: The live session (read, never modified).
        instance_labels: Extra labels on every sample.

    Returns:
        The exposition text, ending with a newline.
    """
    registry, _ = registry_for(session, instance_labels)
    return generate_latest(registry).decode("utf-8")


class PrometheusExporter:
    """Serves ``/metrics`` from ``prometheus_client``'s HTTP server while the application runs.

    Args:
        session: The session, or a function returning it at each scrape.
        port: TCP port (0 = any free port; see :attr:`port` after :meth:`start`).
        host: Address to bind; loopback by default (see the module docstring).
        instance_labels: Extra labels on every sample.
    """

    def __init__(self, session: Session | Callable[[], Session], port: int, host: str = "127.0.0.1",
                 instance_labels: dict[str, str] | None = None) -> None:
        self.registry, self.collector = registry_for(session, instance_labels)
        self.host = host
        self.port = port
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def for_session(cls, session: Session | Callable[[], Session], port: int, host: str = "127.0.0.1",
                    instance_labels: dict[str, str] | None = None) -> PrometheusExporter:
        """An exporter of ``session`` (kept for the callers that predate the plain constructor)."""
        return cls(session, port, host, instance_labels)

    @property
    def scrapes(self) -> int:
        """How many times the metrics were collected."""
        return self.collector.scrapes

    async def start(self) -> None:
        """Listen (binding is immediate; requests are answered on a daemon thread).

        Raises:
            OSError: the port is taken or not allowed (the message names it).
        """
        try:
            self._server, self._thread = start_http_server(self.port, addr=self.host, registry=self.registry)
        except OSError as exc:
            raise OSError(exc.errno, f"cannot serve Prometheus metrics on {self.host}:{self.port}: "
                                     f"{exc.strerror or exc}") from None
        self.port = int(self._server.server_port)

    async def close(self) -> None:
        """Stop listening and wait for the server thread (off the event loop: shutdown polls)."""
        server, thread = self._server, self._thread
        self._server = self._thread = None
        if server is None:
            return

        def stop() -> None:
            server.shutdown()
            server.server_close()
            if thread is not None:
                thread.join(timeout=5)

        await asyncio.to_thread(stop)

    async def __aenter__(self) -> PrometheusExporter:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
