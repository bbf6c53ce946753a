"""A built-in load driver: a fixed, repeatable workload against an OpenAI-compatible endpoint.

Decode speed at batch 1 is what a user feels, so by default one request is in
flight at a time; ``concurrency`` keeps more going. The prompts are a fixed
bundled set (or a JSONL file), sent in order with greedy sampling and a fixed
``max_tokens`` (``ignore_eos`` so every request really produces them), so two
settings see the same work.

The driver measures on the client side too — time to first token (when the
server streams), per-request decode speed and aggregate output tok/s — so a
sweep's verdict does not rest on the server's log alone.

Per-request decode speed is the tokens generated after the first streamed
chunk over the time between the first and the last chunk that carried tokens
(the token count from the server's ``usage``; ``continuous_usage_stats`` gives
the first chunk's own count). Prefill and the wait for the final usage chunk
are outside that window. A request with no interval to time — one chunk, a
non-streamed answer, or a single token after the first — has no decode speed:
it is left out and counted (``untimed``), never divided by a near-zero time. So is a
stream whose chunks arrived in one burst (spanning less than half the request's
latency): a buffering hop between server and client (seen through an SSH forward
on a loaded host) makes their spacing meaningless.

HTTP is ``httpx`` (keep-alive pool per run, streamed bodies read with
``aiter_lines``). Every request is bounded by ``request_timeout_s``; a run
ends by itself after ``max_requests`` or ``max_seconds``, or when its
``stop`` event is set.

Remote servers are reached through an SSH local port forward
(:func:`forwarded_base_url`): the server's port is never exposed.

What a run measured (:class:`RequestResult`, :class:`LoadReport`) is in
:mod:`specmon.control.load_report`; its names are importable from here too.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import httpx

from specmon.control.guard import refuse
from specmon.control.load_report import BURST_SHARE as BURST_SHARE
from specmon.control.load_report import LoadReport as LoadReport
from specmon.control.load_report import RequestResult as RequestResult
from specmon.control.load_report import summarize_reports as summarize_reports
from specmon.control.load_report import summary_or_none as summary_or_none
from specmon.engines import ADAPTERS
from specmon.smallfile import InputError, read_small_text

#: The bundled prompt set: varied, ordinary requests, each asking for a long answer.
BUNDLED_PROMPTS: tuple[str, ...] = (
    "Explain how a hash map handles collisions, with a short example in Python.",
    "Write a detailed travel itinerary for three days in Kyoto, including food suggestions.",
    "Summarise the causes and consequences of the French Revolution for a high-school student.",
    "Describe, step by step, how to bake a sourdough loaf from an existing starter.",
    "Compare TCP and UDP, and give three applications that suit each one.",
    "Write a short story about a lighthouse keeper who finds a message in a bottle.",
    "Explain the difference between supervised, unsupervised and reinforcement learning.",
    "Draft a polite email asking a landlord to repair a broken heating system.",
    "How does a refrigerator move heat from inside to outside? Explain the cycle.",
    "List the main steps of reviewing a pull request and what to look for in each.",
    "Explain what a Fourier transform does, using sound as the running example.",
    "Write a beginner's guide to keeping a small vegetable garden on a balcony.",
    "Describe how vaccines train the immune system, without jargon.",
    "Write a Python function that parses a CSV file and reports column statistics; explain it.",
    "What were the key ideas of the Industrial Revolution and why did it start in Britain?",
    "Explain how speculative decoding speeds up text generation in large language models.",
)

Endpoint = Literal["completions", "chat"]
_PATHS = {"completions": "/v1/completions", "chat": "/v1/chat/completions"}
MAX_BODY_BYTES = 64 * 1024 * 1024


class LoadError(Exception):
    """The load cannot run (bad URL, unreadable prompt file); the message says why."""


#: Most bytes a prompts file may have: it is held in memory whole (ShareGPT's 90k conversations as
#: prompts are about 100 MB); a bigger one is a mistake, or /dev/zero's sparse cousin.
PROMPTS_LIMIT = 256_000_000
#: Seconds its read may take (256 MB from a slow disk).
PROMPTS_TIMEOUT_S = 60.0


def load_prompts(path: str | Path) -> tuple[str, ...]:
    """Read prompts from a JSONL file: one ``{"prompt": "..."}`` object or JSON string per line.

    Raises:
        LoadError: unreadable file, a malformed line (with its number), or no prompts.
    """
    p = Path(path)
    try:
        # Bounded and non-blocking (specmon.smallfile): a FIFO, /dev/zero or a sparse 2 GB file is
        # refused in one sentence before anything is read.
        text = read_small_text(p, limit=PROMPTS_LIMIT, timeout=PROMPTS_TIMEOUT_S, what="prompts file")
    except InputError as exc:  # its sentence names the file
        raise LoadError(str(exc)) from None
    except OSError as exc:
        raise LoadError(f"{p}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise LoadError(f"{p}: not UTF-8 text") from None
    prompts: list[str] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except ValueError:
            raise LoadError(f"{p}:{lineno}: not JSON") from None
        if isinstance(item, dict):
            item = item.get("prompt", item.get("text"))
        if not isinstance(item, str) or not item.strip():
            raise LoadError(f'{p}:{lineno}: expected {{"prompt": "..."}} or a JSON string')
        prompts.append(item)
    if not prompts:
        raise LoadError(f"{p}: no prompts")
    return tuple(prompts)


#: The bundled named prompt sets (``--workload chat,code,long``), in ``control/prompts/*.jsonl``:
#: acceptance depends on the task (code and long-form text repeat more than chat), so a verdict
#: per workload says when the best setting for one is not the best for another.
BUNDLED_WORKLOADS: tuple[str, ...] = ("chat", "code", "long")


def bundled_workload(name: str) -> tuple[str, ...]:
    """The prompts of one bundled set (``chat``, ``code``, ``long``)."""
    from importlib import resources

    if name not in BUNDLED_WORKLOADS:
        raise LoadError(f"no bundled prompt set {name!r} (bundled: {', '.join(BUNDLED_WORKLOADS)})")
    text = (resources.files("specmon.control") / "prompts" / f"{name}.jsonl").read_text(encoding="utf-8")
    return tuple(json.loads(line)["prompt"] for line in text.splitlines() if line.strip())


def load_workloads(specs: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Named prompt sets from ``--workload`` items: a bundled name, ``NAME=FILE.jsonl`` or ``FILE.jsonl``.

    Raises:
        LoadError: an unknown name, an unreadable or malformed file, a name given twice (one sentence).
    """
    out: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        spec = spec.strip()
        name, eq, path = spec.partition("=")
        if not eq:
            if spec in BUNDLED_WORKLOADS:
                name, prompts = spec, bundled_workload(spec)
            elif spec.endswith(".jsonl") or "/" in spec:
                name, prompts = Path(spec).stem, load_prompts(spec)
            else:
                raise LoadError(f"--workload {spec!r}: not a bundled set ({', '.join(BUNDLED_WORKLOADS)}) "
                                "nor a .jsonl file; write NAME=FILE.jsonl for your own")
        else:
            if not name or not name.replace("-", "").replace("_", "").isalnum() or not name.isascii():
                raise LoadError(f"--workload {spec!r}: a workload name is letters, digits, - and _")
            prompts = load_prompts(path)
        if name in out:
            raise LoadError(f"workload {name!r} is given twice")
        out[name] = prompts
    return out


@dataclass(frozen=True)
class LoadConfig:
    """What to send, where.

    Attributes:
        base_url: ``http://127.0.0.1:30000`` (for a remote server: the forwarded local port).
        endpoint: ``completions`` (``/v1/completions``) or ``chat`` (``/v1/chat/completions``).
        model: The model name to send; None asks ``GET /v1/models`` once (vLLM checks it).
        prompts: The prompt set, used in order, round-robin.
        max_tokens: Tokens to generate per request.
        stream: Ask for server-sent events (gives time to first token); a server that
            answers with plain JSON is handled too.
        ignore_eos: Ask the server to generate all ``max_tokens`` (SGLang/vLLM extension).
        request_timeout_s: Upper bound on one request, connection included.
        time_scale: Simulated seconds per wall second (the demo's simulator); client speeds
            are reported per simulated second so they compare with the server's log.
        api_key: Sent as a bearer token when set (never shown).
    """

    base_url: str
    endpoint: Endpoint = "completions"
    model: str | None = None
    prompts: tuple[str, ...] = BUNDLED_PROMPTS
    max_tokens: int = 512
    stream: bool = True
    ignore_eos: bool = True
    request_timeout_s: float = 300.0
    time_scale: float = 1.0
    api_key: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise LoadError(f"load URL must be http(s)://HOST[:PORT], not {self.base_url!r}")
        if self.endpoint not in _PATHS:
            raise LoadError(f"endpoint must be 'completions' or 'chat', not {self.endpoint!r}")
        if not self.prompts:
            raise LoadError("the prompt set is empty")
        if not 1 <= self.max_tokens <= 1_000_000:
            raise LoadError("max_tokens must be 1..1000000")
        if not self.request_timeout_s > 0 or not self.time_scale > 0:
            raise LoadError("request_timeout_s and time_scale must be positive")


# --------------------------------------------------------------------------- driver


class _HTTPError(Exception):
    pass



def _read_drafts(answer: dict[str, Any], result: RequestResult) -> None:
    """The request's drafted and accepted tokens, where its engine puts them in an answer (the engines
    say where: llama.cpp's ``timings``, vLLM's ``metrics``); the last figures seen are the request's."""
    for adapter in ADAPTERS:
        pair = adapter.request_drafts(answer)
        if pair is not None:
            result.drafted, result.accepted = pair
            return

class LoadDriver:
    """Sends the workload; one instance per target server.

    Args:
        config: What to send, where.
        clock: Monotonic seconds (injected in tests).
    """

    def __init__(self, config: LoadConfig, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.config = config
        self._clock = clock
        self._base = config.base_url.rstrip("/")
        self._model = config.model
        self._next_prompt = 0
        self._next_index = 0

    def _headers(self) -> dict[str, str]:
        h = {"Content-Type": "application/json", "Accept": "text/event-stream, application/json"}
        if self.config.api_key:
            h["Authorization"] = f"Bearer {self.config.api_key}"
        return h

    def _client(self, connections: int = 1) -> httpx.AsyncClient:
        # Bounded by the per-request timeout below; httpx's own is the same bound per read.
        # trust_env=False: a proxy variable must never route the load off this machine's forward.
        return httpx.AsyncClient(
            timeout=httpx.Timeout(self.config.request_timeout_s),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            trust_env=False,
        )

    async def discover_model(self) -> str | None:
        """The first model ``GET /v1/models`` lists (None when the server does not say)."""
        try:
            async with self._client() as client, asyncio.timeout(min(30.0, self.config.request_timeout_s)):
                resp = await client.get(self._base + "/v1/models", headers=self._headers())
                if resp.status_code != 200:
                    return None
                data = resp.json()
        except (httpx.HTTPError, OSError, TimeoutError, ValueError):
            return None
        models = data.get("data") if isinstance(data, dict) else None
        if isinstance(models, list) and models and isinstance(models[0], dict):
            mid = models[0].get("id")
            return mid if isinstance(mid, str) else None
        return None

    def _body(self, prompt: str) -> dict[str, Any]:
        c = self.config
        data: dict[str, Any] = {"model": self._model or "default", "max_tokens": c.max_tokens,
                                "temperature": 0.0, "stream": c.stream}
        if c.stream:
            # continuous_usage_stats (vLLM, SGLang): every chunk carries the running token count, so
            # the tokens of the first chunk are known exactly, not assumed.
            data["stream_options"] = {"include_usage": True, "continuous_usage_stats": True}
        if c.ignore_eos:
            data["ignore_eos"] = True
        if c.endpoint == "chat":
            data["messages"] = [{"role": "user", "content": prompt}]
        else:
            data["prompt"] = prompt
        return data

    async def request_once(self, client: httpx.AsyncClient | None = None) -> RequestResult:
        """Send the next prompt of the set and wait for the whole answer (bounded by the timeout)."""
        own = client is None
        client = client or self._client()
        index, pidx = self._next_index, self._next_prompt
        self._next_index += 1
        self._next_prompt = (self._next_prompt + 1) % len(self.config.prompts)
        try:
            for attempt in range(2):
                start = self._clock()
                result = RequestResult(index, pidx, False, start, 0.0, retried=attempt > 0)
                try:
                    async with asyncio.timeout(self.config.request_timeout_s):
                        if attempt == 0:
                            await self._exchange(client, self.config.prompts[pidx], result, start)
                        else:
                            # A fresh connection: the pool's other kept-alive ones may be as stale.
                            async with self._client() as fresh:
                                await self._exchange(fresh, self.config.prompts[pidx], result, start)
                except (TimeoutError, httpx.TimeoutException):
                    result.error = f"timed out after {self.config.request_timeout_s:g} s"
                except httpx.RemoteProtocolError as exc:
                    unanswered = result.status is None and result.chunks == 0
                    result.error = "the server closed the connection before answering" if unanswered else _describe(exc)
                    # A kept-alive connection the server closed before this request reached it
                    # (cpp-httplib closes after a few requests, uvicorn after 5 s idle): nothing
                    # was answered, so one retry on a fresh connection is not a second request.
                    if attempt == 0 and unanswered:
                        continue
                except (httpx.HTTPError, OSError, _HTTPError, ValueError) as exc:
                    result.error = _describe(exc)
                result.latency_s = self._clock() - start
                return result
            result.latency_s = self._clock() - start
            return result
        finally:
            if own:
                await client.aclose()

    async def _exchange(self, client: httpx.AsyncClient, prompt: str, result: RequestResult, start: float) -> None:
        url = self._base + _PATHS[self.config.endpoint]
        async with client.stream("POST", url, json=self._body(prompt), headers=self._headers()) as resp:
            result.status = resp.status_code
            if resp.status_code != 200:
                text = (await resp.aread())[:300].decode("utf-8", "replace")
                result.error = f"HTTP {resp.status_code}: {text.strip()}"
                return
            if "text/event-stream" in resp.headers.get("content-type", ""):
                await self._read_events(resp, result, start)
            else:
                raw = await resp.aread()
                if len(raw) > MAX_BODY_BYTES:
                    raise _HTTPError("response body too large")
                data = json.loads(raw)
                usage = data.get("usage") if isinstance(data, dict) else None
                tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
                if not isinstance(tokens, int):
                    raise _HTTPError("the response has no usage.completion_tokens")
                result.output_tokens = tokens
                pt = usage.get("prompt_tokens") if isinstance(usage, dict) else None
                result.prompt_tokens = pt if isinstance(pt, int) else None
                # One piece: there is no interval between tokens to time.
                result.chunks = 1 if tokens else 0
                _read_drafts(data, result)
        result.ok = result.output_tokens > 0
        if not result.ok and result.error is None:
            result.error = "the server returned no tokens"

    async def _read_events(self, resp: httpx.Response, result: RequestResult, start: float) -> None:
        """Read server-sent events; time the first and the last chunk that carries tokens.

        httpx's ``aiter_lines`` splits the stream at line ends; an event ends at a blank
        line and its ``data:`` lines are joined (the SSE rule), which is all the
        OpenAI-compatible servers use.
        """
        pieces = 0
        usage_tokens: int | None = None
        data_lines: list[str] = []
        size = 0

        def event(payload: str) -> None:
            nonlocal pieces, usage_tokens
            if payload.strip() == "[DONE]":
                return
            data = json.loads(payload)
            if not isinstance(data, dict):
                return
            now = self._clock() - start
            _read_drafts(data, result)  # (llama.cpp: the last chunk's timings; vLLM: the usage chunk)
            usage = data.get("usage")
            running: int | None = None
            if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
                running = usage["completion_tokens"]
                if isinstance(usage.get("prompt_tokens"), int):
                    result.prompt_tokens = usage["prompt_tokens"]
            choices = [c for c in data.get("choices") or [] if isinstance(c, dict)]
            if running is not None:
                # With a running count, a chunk carries tokens when the count grew (its text may
                # be empty: a token that ends mid-character is held back by the detokenizer).
                carried = bool(choices) and running > (usage_tokens or 0)
            else:
                carried = any(c.get("text") or (c.get("delta") or {}).get("content") for c in choices)
            if carried:
                pieces += 1
                if result.first_token_s is None:
                    result.first_token_s = now
                    result.ttft_s = now
                    result.first_tokens = running if running is not None else None
                result.last_token_s = now
            if running is not None:
                usage_tokens = running if usage_tokens is None else max(usage_tokens, running)

        async for line in resp.aiter_lines():
            size += len(line)
            if size > MAX_BODY_BYTES:
                raise _HTTPError("response body too large")
            line = line.rstrip("\r")
            if not line:
                if data_lines:
                    event("\n".join(data_lines))
                    data_lines = []
                continue
            if line.startswith("data:"):
                data_lines.append(line[5:].lstrip(" "))
        if data_lines:
            event("\n".join(data_lines))
        result.chunks = pieces
        # A streamed piece may carry several tokens (speculation accepts them together):
        # the usage count is the truth; pieces are the fallback.
        result.output_tokens = usage_tokens if usage_tokens is not None else pieces

    async def run(
        self,
        concurrency: int = 1,
        *,
        max_requests: int | None = None,
        max_seconds: float | None = None,
        stop: asyncio.Event | None = None,
        on_result: Callable[[RequestResult], None] | None = None,
    ) -> LoadReport:
        """Keep ``concurrency`` requests in flight until a limit or ``stop``.

        At least one of ``max_requests``, ``max_seconds`` or ``stop`` must be
        given: the driver always ends by itself. Requests still in flight when
        it ends are cancelled and not counted.

        Args:
            concurrency: Requests in flight at once (1 = what a single user feels).
            max_requests: End after this many requests have been started and finished.
            max_seconds: End after this many wall seconds.
            stop: End when this event is set.
            on_result: Called with each finished request.

        Returns:
            Every finished request and the aggregate figures.
        """
        refuse("drive load against the server")
        if concurrency < 1:
            raise LoadError("concurrency must be at least 1")
        if max_requests is None and max_seconds is None and stop is None:
            raise LoadError("give max_requests, max_seconds or a stop event: the load must end by itself")
        if self._model is None and self.config.model is None:
            self._model = await self.discover_model()
        report = LoadReport(concurrency, self._clock(), self._clock(), self.config.time_scale)
        budget = [max_requests if max_requests is not None else math.inf]
        done = asyncio.Event()
        client = self._client(concurrency)

        async def worker() -> None:
            while not done.is_set() and budget[0] > 0:
                budget[0] -= 1
                res = await self.request_once(client)
                report.results.append(res)
                if on_result is not None:
                    on_result(res)
                if not res.ok:
                    # A failing server must not be hammered: a short pause between errors.
                    await asyncio.sleep(0.2)

        workers = [asyncio.ensure_future(worker()) for _ in range(concurrency)]
        waiters: list[asyncio.Future[Any]] = []
        all_workers = asyncio.ensure_future(asyncio.gather(*workers, return_exceptions=True))
        waiters.append(all_workers)
        if stop is not None:
            waiters.append(asyncio.ensure_future(stop.wait()))
        try:
            finished, _ = await asyncio.wait(waiters, timeout=max_seconds, return_when=asyncio.FIRST_COMPLETED)
            if all_workers in finished:
                report.stopped_by = "max_requests"
            elif stop is not None and stop.is_set():
                report.stopped_by = "stop"
            else:
                report.stopped_by = "max_seconds"
        finally:
            done.set()
            for w in workers:
                w.cancel()
            for waiter in waiters:
                waiter.cancel()
            await asyncio.gather(*workers, *waiters, return_exceptions=True)
            report.ended_at = self._clock()
            await client.aclose()
        return report


def _describe(exc: BaseException) -> str:
    text = str(exc)
    if isinstance(exc, ConnectionRefusedError) or (
            isinstance(exc, httpx.ConnectError) and ("refused" in text.lower() or "all connection attempts" in text.lower())):
        return "connection refused (is the server up?)"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {text or type(exc).__name__}"
    if isinstance(exc, httpx.RemoteProtocolError):
        return "the server closed the connection mid-answer"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    return str(exc) or type(exc).__name__


class BackgroundLoad:
    """Runs a :class:`LoadDriver` in the background between :meth:`start` and :meth:`stop`.

    This is the load a sweep drives: it implements the sweep's ``LoadControl``
    protocol. ``cap_s`` bounds every run even when nobody calls :meth:`stop`.
    """

    def __init__(self, driver: LoadDriver, *, cap_s: float = 6 * 3600.0,
                 workloads: dict[str, tuple[str, ...]] | None = None) -> None:
        self.driver = driver
        self.cap_s = cap_s
        #: Named prompt sets a sweep can switch between (``start(c, workload=...)``).
        self.workloads = dict(workloads or {})
        self._task: asyncio.Task[LoadReport] | None = None
        self._stop: asyncio.Event | None = None
        #: Requests completed (or failed) in the current run, and of them the timed ones (their tokens
        #: spread over more than one chunk): a launch measured on a latency objective goes on until it
        #: has the timed requests that objective needs.
        self.completed = 0
        self.timed = 0

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._task is not None and not self._task.done()

    async def start(self, concurrency: int, workload: str | None = None) -> None:
        """Start keeping ``concurrency`` requests in flight (stops a previous run first).

        Args:
            concurrency: Requests in flight.
            workload: One of :attr:`workloads`: its prompts from now on (None: keep the current set).

        Raises:
            ReadOnlyError: specmon runs read-only (``--read-only``).
            LoadError: an unknown workload.
        """
        refuse("drive load against the server")
        if self.running:
            await self.stop()
        if workload is not None:
            if workload not in self.workloads:
                raise LoadError(f"no workload {workload!r} (known: {', '.join(self.workloads) or 'none'})")
            from dataclasses import replace

            self.driver.config = replace(self.driver.config, prompts=self.workloads[workload])
            self.driver._next_prompt = 0
        # Every launch sends the same prompts in the same order: a prompt's requests pair across
        # launches and settings (the per-prompt table of a sweep's result).
        self.driver._next_prompt = 0
        self._stop = asyncio.Event()
        self.completed = self.timed = 0
        self._task = asyncio.ensure_future(self.driver.run(concurrency, max_seconds=self.cap_s, stop=self._stop,
                                                           on_result=self._count))

    def _count(self, result: RequestResult) -> None:
        self.completed += 1
        self.timed += result.timed

    async def stop(self) -> LoadReport | None:
        """End the run; returns its report (None when nothing ran)."""
        task, self._task = self._task, None
        if task is None:
            return None
        if self._stop is not None:
            self._stop.set()
        try:
            return await task
        except asyncio.CancelledError:
            return None


@contextlib.asynccontextmanager
async def forwarded_base_url(conn: Any, remote_port: int, remote_host: str = "127.0.0.1",
                             scheme: str = "http") -> AsyncIterator[str]:
    """Forward a free local port to ``remote_host:remote_port`` as seen from the SSH host.

    Args:
        conn: An open, host-key-verified ``asyncssh.SSHClientConnection``.
        remote_port: The server's port on the host.
        remote_host: The address the host connects to (its loopback by default).
        scheme: ``http`` or ``https``.

    Yields:
        The local base URL (``http://127.0.0.1:PORT``) that reaches the server.
    """
    listener = await conn.forward_local_port("127.0.0.1", 0, remote_host, remote_port)
    try:
        yield f"{scheme}://127.0.0.1:{listener.get_port()}"
    finally:
        listener.close()
        with contextlib.suppress(Exception):
            await listener.wait_closed()
