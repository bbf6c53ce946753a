"""A simulated SGLang EAGLE-3 server: a real process that writes a real-looking log.

Usage::

    python -m specmon.sim.server --steps N [--draft-tokens D] [--topk K] --log PATH
        [--port P] [--time-scale S] [--startup-seconds T] [--seed S]
        [--crash-on-start] [--pidfile F] [--append] [--load-concurrency C]

What it does:

* Start-up: prints SGLang's launch sequence (server args, 8 ranks loading 64
  weight shards, KV cache, CUDA-graph capture, the EAGLE-3 draft model, uvicorn,
  warm-up, ``The server is fired up and ready to roll!``) over
  ``--startup-seconds`` of wall-clock time (default 6).
* With ``--port``: a tiny HTTP server on 127.0.0.1 (stdlib asyncio).
  ``GET /health`` answers 503 until ready, then 200. ``POST /v1/completions``
  takes a JSON body (``prompt``, ``max_tokens``), spends the simulated
  prefill+decode time, and answers an OpenAI-shaped completion with
  ``usage`` (with ``"stream": true``: server-sent events, one chunk per
  scheduling step that produced tokens, each with the running ``usage``, as
  vLLM's ``continuous_usage_stats`` gives). Decode lines reflect the load actually served
  (``#running-req`` = requests decoding together); an idle server prints no
  decode lines, like SGLang. Also ``GET /v1/models`` and ``GET /get_server_info``.
* Without ``--port``: a built-in client keeps ``--load-concurrency``
  (default 1) requests in flight, so the log always moves.
* SIGTERM / SIGINT: prints SGLang's shutdown lines and exits 0 at once.
* ``--crash-on-start``: dies 40 % into start-up with ``Scheduler hit an
  exception: Traceback ...`` and exit code 1.

Time (``--time-scale S``, default 1): the simulated clock starts at the wall
time of the launch and runs S times faster than the wall clock. Every
simulated duration — start-up phases, prefill, each decode cycle, a
request's latency — takes 1/S of it in real time. Log timestamps print the
simulated clock, and throughput figures are tokens per *simulated* second,
so ``gen throughput`` is the same at any S; only the pace changes (S=10 prints
ten times as many decode lines per real second). ``--startup-seconds`` is
wall-clock time, so the log shows ``T × S`` simulated seconds of start-up.

Lines are written line-buffered and flushed as they happen. A decode line
may be written up to one scheduling chunk (4 cycles, < 0.2 simulated
seconds) before the wall clock reaches its timestamp.
"""

from __future__ import annotations

import argparse
import asyncio
import calendar
import contextlib
import json
import math
import os
import random
import signal
import sys
import time
import uuid
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from specmon.sim.engine import SimEngine, SimRequest
from specmon.sim.logwriter import (
    HTTP,
    MODEL_PATH,
    LogWriter,
    access_message,
    shutdown_script,
    startup_script,
)
from specmon.sim.model import DEFAULT_MODEL, CostModel, SpecConfig, SpecConfigError, launch_speed, task_acceptance

CRASH_AT = 0.4  # share of the start-up after which --crash-on-start dies
MAX_PROMPT_TOKENS = 8192
MAX_NEW_TOKENS = 32768
MAX_BODY = 1 << 20
_WORDS = ["the", "model", "drafts", "tokens", "and", "verifies", "them", "in", "one", "pass", "so", "decoding", "runs", "faster"]


class SimClock:
    """Simulated time: starts at the launch's wall time, runs ``scale`` times faster."""

    def __init__(self, scale: float) -> None:
        self.scale = scale
        # Naive local seconds, so timestamps read like SGLang's local-time logs.
        now = time.time()
        self._epoch = calendar.timegm(time.localtime(now)) + (now % 1.0)
        self._t0 = time.monotonic()

    def now(self) -> float:
        """Current simulated time (naive seconds)."""
        return self._epoch + (time.monotonic() - self._t0) * self.scale

    def real_delay(self, sim_t: float) -> float:
        """Wall-clock seconds until the simulated clock reaches ``sim_t``."""
        return max(0.0, (sim_t - self.now()) / self.scale)


@dataclass(frozen=True, slots=True)
class ServerOptions:
    """The simulated server's command line, checked (:func:`parse_args`)."""

    steps: int
    log: Path
    draft_tokens: int | None = None
    topk: int | None = None
    append: bool = False
    port: int | None = None
    time_scale: float = 1.0
    startup_seconds: float = 6.0
    seed: int | None = None
    crash_on_start: bool = False
    task_acceptance: bool = False
    pidfile: Path | None = None
    launch_cv: float = 0.0
    replica_cv: float = 0.0
    drift_pct_per_hour: float = 0.0
    drift_origin: float | None = None
    load_concurrency: int = 1


class SimServer:
    """One launch of the simulated server."""

    def __init__(self, args: ServerOptions, spec: SpecConfig, log: TextIO) -> None:
        self.args = args
        self.spec = spec
        self.seed: int = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
        self.rng = random.Random(self.seed)
        self.clock = SimClock(args.time_scale)
        self.writer = LogWriter(log, flush_each=True)
        self.stop = asyncio.Event()
        self.ready = False
        self.engine: SimEngine | None = None
        self._wake = asyncio.Event()
        self._pending: dict[int, tuple[str, asyncio.Future[SimRequest]]] = {}
        # Streamed requests: the running token count goes to their queue after every scheduling chunk.
        self._streams: dict[int, tuple[SimRequest, asyncio.Queue[int]]] = {}
        self._shutdown_logged = False
        self._remaining: list[str] = []

    # -- lifecycle ---------------------------------------------------------

    async def run(self) -> int:
        """Start up, serve until stopped; returns the exit code."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._on_signal)
        server = None
        if self.args.port is not None:
            try:
                server = await asyncio.start_server(self._handle, "127.0.0.1", self.args.port)
            except OSError as exc:
                print(f"error: cannot listen on 127.0.0.1:{self.args.port}: {exc.strerror or exc}", file=sys.stderr)
                return 2
        try:
            crashed = await self._start_up()
            if crashed:
                return 1
            if not self.stop.is_set():
                self.ready = True
                await self._serve()
            if not self._shutdown_logged:
                self._on_signal()
            drain = shutdown_script(self._remaining)[1]
            self.writer.line(self.clock.now() + drain.at, drain.message, drain.ranks)
            return 0
        finally:
            if server is not None:
                server.close()

    def _on_signal(self) -> None:
        """SIGTERM/SIGINT: log it at once (before any aborted request's access line), then stop."""
        if not self._shutdown_logged:
            self._shutdown_logged = True
            self._remaining = [rid for rid, _ in self._pending.values()]
            first = shutdown_script(self._remaining)[0]
            self.writer.line(self.clock.now(), first.message, first.ranks)
        self.stop.set()

    async def _sleep_until(self, sim_t: float) -> None:
        """Sleep until the simulated clock reaches ``sim_t`` or a stop is requested."""
        delay = self.clock.real_delay(sim_t)
        if delay > 0:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.stop.wait(), delay)

    async def _start_up(self) -> bool:
        """Play the start-up script in (scaled) real time; True if it crashed."""
        start = self.clock.now()
        duration = self.args.startup_seconds * self.args.time_scale
        crash_at = CRASH_AT if self.args.crash_on_start else None
        script = startup_script(
            self.spec,
            self.rng,
            duration,
            port=self.args.port or 30000,
            pid=os.getpid(),
            seed=self.seed,
            crash_at=crash_at,
        )
        for line in script:
            await self._sleep_until(start + line.at)
            if self.stop.is_set():
                return False
            self.writer.line(start + line.at, line.message, line.ranks)
        return crash_at is not None

    def launch_model(self) -> CostModel:
        """The cost model of this launch: its own speed factor (``--launch-cv``) and the drift.

        The factor is drawn from ``(seed, steps, how many earlier logs of this setting sit beside
        the log)``: a seeded demo sweep replays the same launches, and each restart differs.
        """
        a = self.args
        if not a.launch_cv and not a.drift_pct_per_hour and not a.replica_cv:
            return DEFAULT_MODEL
        folder = a.log.parent
        try:
            earlier = sum(1 for p in folder.iterdir() if p.name.startswith(a.log.name + "."))
        except OSError:
            earlier = 0
        rng = random.Random(zlib.crc32(repr((self.seed, self.spec, earlier, "launch")).encode()))
        # Each launch draws its own lines too: with one seed for every launch, the launches of a setting
        # replayed the same noise, so their errors did not average out over launches as real ones do.
        self.rng = random.Random(zlib.crc32(repr((self.seed, self.spec, earlier, "lines")).encode()))
        hours = (time.time() - a.drift_origin) / 3600.0 * a.time_scale if a.drift_origin else 0.0
        speed = launch_speed(rng, a.launch_cv / 100.0, hours=hours, drift_pct_per_hour=a.drift_pct_per_hour)
        if a.replica_cv:  # the machine's own factor: the same for every launch on this port
            machine = random.Random(zlib.crc32(repr((self.seed, a.port, "replica")).encode()))
            speed *= math.exp(machine.gauss(0.0, a.replica_cv / 100.0))
        return replace(DEFAULT_MODEL, speed=speed)

    async def _serve(self) -> None:
        """Run the scheduler against the wall clock until stopped."""
        model = self.launch_model()  # first: a launch that differs draws its own lines (self.rng)
        engine = self.engine = SimEngine(self.spec, self.writer, self.clock.now(), self.rng, model)
        builtin = self.args.port is None
        while not self.stop.is_set():
            if engine.idle:
                # Idle time is real time; busy time is the engine's own, so a
                # late wake-up never shows up as a slower GPU.
                engine.advance_to(self.clock.now())
            if builtin:
                while len(engine.running) + len(engine.waiting) < self.args.load_concurrency:
                    prompt, output = self.rng.randint(200, 1200), self.rng.randint(1024, 2048)
                    req = SimRequest(prompt, output, client_port=self.rng.randint(40000, 60000))
                    # The built-in client streams: uvicorn logs the request at its start.
                    self.writer.line(engine.now, access_message(req.client_port, "POST", "/v1/completions"), HTTP)
                    engine.submit(req)
            if engine.idle:
                self._wake.clear()
                waiter = asyncio.ensure_future(self._wake.wait())
                stopper = asyncio.ensure_future(self.stop.wait())
                await asyncio.wait({waiter, stopper}, return_when=asyncio.FIRST_COMPLETED)
                waiter.cancel()
                stopper.cancel()
                continue
            engine.step(max_cycles=4)
            await self._sleep_until(engine.now)
            for req, queue in self._streams.values():
                queue.put_nowait(req.generated)
            for req in engine.finished:
                pending = self._pending.pop(id(req), None)
                if pending is not None and not pending[1].done():
                    pending[1].set_result(req)
            engine.finished.clear()

    # -- HTTP ----------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Serve HTTP/1.1 requests on one connection (keep-alive supported)."""
        peer = writer.get_extra_info("peername")
        port = peer[1] if isinstance(peer, tuple) and len(peer) > 1 else 0
        try:
            while not self.stop.is_set():
                request_line = await reader.readline()
                if not request_line:
                    break
                parts = request_line.decode("latin-1").split()
                if len(parts) != 3:
                    await self._respond(writer, 400, {"error": "bad request line"}, close=True)
                    break
                method, target, version = parts
                headers: dict[str, str] = {}
                while True:
                    raw = await reader.readline()
                    if raw in (b"\r\n", b"\n", b""):
                        break
                    key, _, value = raw.decode("latin-1").partition(":")
                    headers[key.strip().lower()] = value.strip()
                try:
                    length = int(headers.get("content-length", "0"))
                except ValueError:
                    length = -1
                if length < 0 or length > MAX_BODY:
                    await self._respond(writer, 400, {"error": "bad content-length"}, close=True)
                    break
                body = await reader.readexactly(length) if length else b""
                status, payload = await self._route(method, target.split("?", 1)[0], body)
                if self.ready:
                    self.writer.line(self.clock.now(), access_message(port, method, target, status), HTTP)
                close = headers.get("connection", "").lower() == "close" or version == "HTTP/1.0"
                await self._respond(writer, status, payload, close=close)
                if close:
                    break
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        finally:
            writer.close()

    async def _respond(self, writer: asyncio.StreamWriter, status: int, payload: Any, *, close: bool) -> None:
        if isinstance(payload, _Stream):
            await self._respond_stream(writer, payload, close=close)
            return
        reason = {200: "OK", 400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed"}
        reason[503] = "Service Unavailable"
        data = b"" if payload is None else json.dumps(payload).encode()
        head = (
            f"HTTP/1.1 {status} {reason.get(status, 'Error')}\r\n"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\n"
            f"connection: {'close' if close else 'keep-alive'}\r\n\r\n"
        )
        writer.write(head.encode("latin-1") + data)
        await writer.drain()

    async def _respond_stream(self, writer: asyncio.StreamWriter, st: _Stream, *, close: bool) -> None:
        """Server-sent events, one chunk per scheduling step that produced tokens (running usage in each)."""
        head = ("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n"
                f"connection: {'close' if close else 'keep-alive'}\r\n\r\n")
        writer.write(head.encode("latin-1"))
        sent = 0

        def chunk(payload: str) -> bytes:
            data = f"data: {payload}\n\n".encode()
            return f"{len(data):x}\r\n".encode() + data + b"\r\n"

        def usage(n: int) -> dict[str, int]:
            return {"prompt_tokens": st.prompt_tokens, "completion_tokens": n, "total_tokens": st.prompt_tokens + n}

        last_sent = 0.0

        async def send(n: int) -> None:
            nonlocal sent, last_sent
            words = " ".join(self.rng.choice(_WORDS) for _ in range(n - sent))
            event = {"id": st.rid, "object": "text_completion", "model": MODEL_PATH,
                     "choices": [{"index": 0, "text": words, "finish_reason": None}], "usage": usage(n)}
            writer.write(chunk(json.dumps(event)))
            await writer.drain()
            sent, last_sent = n, time.monotonic()

        try:
            while True:
                getter = asyncio.ensure_future(st.queue.get())
                stopper = asyncio.ensure_future(self.stop.wait())
                waits: list[asyncio.Future[Any]] = [getter, st.done, stopper]
                await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
                n = getter.result() if getter.done() else st.req.generated
                getter.cancel()
                stopper.cancel()
                if self.stop.is_set():
                    break
                finished = st.done.done() and st.queue.empty()
                # The first token at once; then at most one chunk per STREAM_CHUNK_S of wall time, so a
                # fast-forwarded simulation does not drown the client in tiny chunks.
                if n > sent and (sent == 0 or finished or time.monotonic() - last_sent >= STREAM_CHUNK_S):
                    await send(n)
                if finished:
                    if st.req.generated > sent:
                        await send(st.req.generated)
                    break
            final = {"id": st.rid, "object": "text_completion", "model": MODEL_PATH, "choices": [],
                     "usage": usage(sent)}
            writer.write(chunk(json.dumps(final)) + chunk("[DONE]") + b"0\r\n\r\n")
            await writer.drain()
        finally:
            self._streams.pop(id(st.req), None)

    async def _route(self, method: str, path: str, body: bytes) -> tuple[int, Any]:
        if path in ("/health", "/health_generate"):
            return (200, None) if self.ready else (503, {"error": "server is starting"})
        if path == "/v1/models" and method == "GET":
            return 200, {"object": "list", "data": [{"id": MODEL_PATH, "object": "model", "owned_by": "sglang"}]}
        if path == "/get_server_info" and method == "GET":
            return 200, self._server_info()
        if path == "/v1/completions":
            if method != "POST":
                return 405, {"error": "use POST"}
            if not self.ready or self.engine is None:
                return 503, {"error": "server is starting"}
            return await self._complete(body)
        return 404, {"error": f"no route {path}"}

    def _server_info(self) -> dict[str, Any]:
        s = self.spec
        return {
            "model_path": MODEL_PATH,
            "speculative_algorithm": "EAGLE3" if s.enabled else None,
            "speculative_num_steps": s.steps or None,
            "speculative_eagle_topk": s.topk if s.enabled else None,
            "speculative_num_draft_tokens": s.draft_tokens or None,
            "decode_log_interval": DEFAULT_MODEL.decode_log_interval,
            "simulated": True,
            "time_scale": self.args.time_scale,
        }

    async def _complete(self, body: bytes) -> tuple[int, Any]:
        try:
            data = json.loads(body or b"{}")
            if not isinstance(data, dict):
                raise ValueError("body must be a JSON object")
            max_tokens = data.get("max_tokens", 16)
            if not isinstance(max_tokens, int) or isinstance(max_tokens, bool) or not 1 <= max_tokens <= MAX_NEW_TOKENS:
                raise ValueError(f"max_tokens must be an integer 1..{MAX_NEW_TOKENS}")
            prompt = data.get("prompt", "")
            text = prompt if isinstance(prompt, str) else json.dumps(prompt)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            return 400, {"object": "error", "message": str(exc), "code": 400}
        assert self.engine is not None
        prompt_tokens = min(MAX_PROMPT_TOKENS, max(1, len(text) // 4))
        req = SimRequest(prompt_tokens, max_tokens, rid=uuid.uuid4().hex,
                         accept_scale=task_acceptance(text) if self.args.task_acceptance else 1.0)
        fut: asyncio.Future[SimRequest] = asyncio.get_running_loop().create_future()
        self._pending[id(req)] = (req.rid, fut)
        if self.engine.idle:
            self.engine.advance_to(self.clock.now())
        self.engine.submit(req)
        self._wake.set()
        if data.get("stream") is True:
            queue: asyncio.Queue[int] = asyncio.Queue()
            self._streams[id(req)] = (req, queue)
            return 200, _Stream(req, queue, fut, prompt_tokens, f"cmpl-{uuid.uuid4().hex}")
        stopper = asyncio.ensure_future(self.stop.wait())
        waiting: set[asyncio.Future[Any]] = {fut, stopper}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        stopper.cancel()
        if not fut.done():
            self._pending.pop(id(req), None)
            return 503, {"object": "error", "message": "server is shutting down", "code": 503}
        words = " ".join(self.rng.choice(_WORDS) for _ in range(req.generated))
        return 200, {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": MODEL_PATH,
            "choices": [{"index": 0, "text": words, "logprobs": None, "finish_reason": "length", "matched_stop": None}],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": req.generated,
                "total_tokens": prompt_tokens + req.generated,
            },
        }


#: Wall seconds between streamed chunks (after the first).
STREAM_CHUNK_S = 0.02


@dataclass
class _Stream:
    """A streamed completion in progress (answered as server-sent events)."""

    req: SimRequest
    queue: asyncio.Queue[int]
    done: asyncio.Future[SimRequest]
    prompt_tokens: int
    rid: str


def parse_args(argv: Sequence[str] | None) -> ServerOptions:
    """Parse the command line (see the module docstring)."""
    ap = argparse.ArgumentParser(
        prog="python -m specmon.sim.server", description="Simulated SGLang EAGLE-3 server (no GPU)."
    )
    ap.add_argument("--steps", type=int, required=True, help="speculative steps; 0 = no speculation")
    ap.add_argument("--draft-tokens", type=int, default=None, help="speculative draft tokens (default steps+1)")
    ap.add_argument("--topk", type=int, default=None, help="EAGLE top-k (default 1)")
    ap.add_argument("--log", type=Path, required=True, help="log file to write")
    ap.add_argument("--append", action="store_true", help="append to the log instead of truncating it")
    ap.add_argument("--port", type=int, default=None, help="serve HTTP on 127.0.0.1:PORT (else a built-in load runs)")
    ap.add_argument("--time-scale", type=float, default=1.0, help="simulated seconds per real second (default 1)")
    ap.add_argument("--startup-seconds", type=float, default=6.0, help="wall-clock length of the start-up (default 6)")
    ap.add_argument("--seed", type=int, default=None, help="random seed (default: random)")
    ap.add_argument("--crash-on-start", action="store_true", help="die during start-up with a traceback, exit 1")
    ap.add_argument("--task-acceptance", action="store_true",
                    help="acceptance depends on the prompt (code > long-form > chat), for workload sweeps")
    ap.add_argument("--pidfile", type=Path, default=None, help="write this process's PID here")
    ap.add_argument("--launch-cv", type=float, default=0.0, metavar="PCT",
                    help="run-to-run CV of a launch's speed, percent (default 0: every launch alike)")
    ap.add_argument("--replica-cv", type=float, default=0.0, metavar="PCT",
                    help="this machine's own speed, drawn once from (seed, port) with this CV, percent: "
                         "replicas of one launch command differ like hosts do (default 0)")
    ap.add_argument("--drift-pct-per-hour", type=float, default=0.0, metavar="D",
                    help="slow drift of every launch's speed, percent per simulated hour (default 0)")
    ap.add_argument("--drift-origin", type=float, default=None, metavar="EPOCH",
                    help="when the drift starts (Unix time; default: no drift)")
    ap.add_argument(
        "--load-concurrency", type=int, default=1, help="requests the built-in load keeps in flight (default 1)"
    )
    args = ap.parse_args(argv)
    if args.time_scale <= 0 or args.time_scale > 1000:
        ap.error("--time-scale must be in (0, 1000]")
    if args.startup_seconds < 0:
        ap.error("--startup-seconds must be >= 0")
    if args.port is not None and not 0 < args.port < 65536:
        ap.error("--port must be 1..65535")
    if not 0 <= args.launch_cv < 100:
        ap.error("--launch-cv must be a percentage from 0 to below 100")
    if not 0 <= args.replica_cv < 100:
        ap.error("--replica-cv must be a percentage from 0 to below 100")
    if args.load_concurrency < 1:
        ap.error("--load-concurrency must be >= 1")
    return ServerOptions(**vars(args))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the process exit code."""
    args = parse_args(argv)
    try:
        spec = SpecConfig.make(args.steps, args.topk, args.draft_tokens)
    except SpecConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        log = open(args.log, "a" if args.append else "w", encoding="utf-8", buffering=1)
    except OSError as exc:
        print(f"error: cannot open log {args.log}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    pid = str(os.getpid())
    if args.pidfile is not None:
        try:
            args.pidfile.write_text(pid + "\n")
        except OSError as exc:
            print(f"error: cannot write pidfile {args.pidfile}: {exc.strerror or exc}", file=sys.stderr)
            return 2
    try:
        with log:
            return asyncio.run(SimServer(args, spec, log).run())
    finally:
        if args.pidfile is not None:
            with contextlib.suppress(OSError):
                if args.pidfile.read_text().strip() == pid:
                    args.pidfile.unlink()


if __name__ == "__main__":
    sys.exit(main())

