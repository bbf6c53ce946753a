"""The load driver against the simulated server's HTTP endpoint, small HTTP servers, and an SSH forward.

Every server here listens on 127.0.0.1 and is stopped by the test; waits are
bounded polls, and nothing asserts how long anything took.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path

import pytest

from specmon.control.load import (
    BUNDLED_PROMPTS,
    BackgroundLoad,
    LoadConfig,
    LoadDriver,
    LoadError,
    LoadReport,
    RequestResult,
    forwarded_base_url,
    load_prompts,
)
from specmon.ingest.files import ingest_file
from specmon.model.session import Session
from specmon.sim.logwriter import MODEL_PATH
from specmon.ssh.connect import SSHTarget, connect
from tests.support.net import free_port
from tests.support.sshd import AsyncSSHServer

ROOT = Path(__file__).resolve().parents[2]




class SimServer:
    def __init__(self, port: int, log: Path, proc: subprocess.Popen[bytes]) -> None:
        self.port, self.log, self.proc = port, log, proc

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def decode_lines(self) -> list[str]:
        return [ln for ln in self.log.read_text().splitlines() if "Decode batch" in ln]


@pytest.fixture
def sim_server(tmp_path: Path) -> Iterator[SimServer]:
    """``python -m specmon.sim.server`` with HTTP, 200x time, ready in a fraction of a second."""
    with _sim(tmp_path, 200) as server:
        yield server


@pytest.fixture
def slow_sim_server(tmp_path: Path) -> Iterator[SimServer]:
    """The simulator at 10x time: a request lasts long enough that scheduling jitter does not matter."""
    with _sim(tmp_path, 10) as server:
        yield server


@contextlib.contextmanager
def _sim(tmp_path: Path, scale: float) -> Iterator[SimServer]:
    port = free_port()
    log = tmp_path / "sim.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "specmon.sim.server", "--steps", "2", "--log", str(log), "--port", str(port),
         "--time-scale", f"{scale:g}", "--startup-seconds", "0.2", "--seed", "1"],
        cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "the simulated server exited"
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                    s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
                    if s.recv(64).startswith(b"HTTP/1.1 200"):
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "the simulated server never became ready"
            time.sleep(0.05)
        yield SimServer(port, log, proc)
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


Handler = Callable[[str, str, bytes, asyncio.StreamWriter], Awaitable[None]]


@pytest.fixture
async def http_server() -> AsyncIterator[Callable[[Handler], Awaitable[tuple[str, list[tuple[str, bytes]]]]]]:
    """Start a tiny HTTP/1.1 server with a handler; returns its URL and the requests it saw."""
    servers: list[asyncio.base_events.Server] = []

    async def start(handler: Handler) -> tuple[str, list[tuple[str, bytes]]]:
        seen: list[tuple[str, bytes]] = []

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                while True:
                    line = await reader.readline()
                    if not line:
                        return
                    method, path, _ = line.decode().split()
                    length = 0
                    while (h := await reader.readline()) not in (b"\r\n", b""):
                        k, _, v = h.decode().partition(":")
                        if k.lower() == "content-length":
                            length = int(v)
                    body = await reader.readexactly(length)
                    seen.append((path, body))
                    await handler(method, path, body, writer)
            except (ConnectionError, asyncio.IncompleteReadError):
                pass
            finally:
                writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        servers.append(server)
        return f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", seen

    yield start
    for s in servers:
        s.close()
        await s.wait_closed()


def sse_chunks(events: list[dict[str, object] | str]) -> bytes:
    out = b""
    for ev in events:
        data = ev if isinstance(ev, str) else json.dumps(ev)
        payload = f"data: {data}\n\n".encode()
        out += f"{len(payload):x}\r\n".encode() + payload + b"\r\n"
    return out + b"0\r\n\r\n"


# --------------------------------------------------------------------------- against the simulator


async def test_fixed_workload_against_the_simulated_server(sim_server: SimServer) -> None:
    driver = LoadDriver(LoadConfig(sim_server.url, max_tokens=64, time_scale=200))
    report = await driver.run(1, max_requests=4)
    assert report.stopped_by == "max_requests"
    assert [r.ok for r in report.results] == [True] * 4, [r.error for r in report.results]
    assert [r.prompt_index for r in report.results] == [0, 1, 2, 3]  # the bundled set, in order
    assert all(r.output_tokens == 64 for r in report.results)
    assert report.output_tokens == 256 and report.errors == 0
    # 64 tokens at 200x last a few ms: some streams arrive too fast to time. Each one is either
    # timed or counted as untimed, never divided by a near-zero interval.
    assert len(report.decode_tps()) + report.untimed == 4 and all(0 < v < 1000 for v in report.decode_tps())
    assert len(report.ttft()) == 4  # the simulator streams
    assert all(r.chunks >= 2 and r.first_tokens is not None for r in report.results)
    assert driver._model == MODEL_PATH  # asked GET /v1/models once
    doc = report.to_json()
    assert doc["completed"] == 4 and doc["untimed"] == report.untimed
    access = [ln for ln in sim_server.log.read_text().splitlines() if '"POST /v1/completions' in ln]
    assert len(access) == 4
    assert all("#running-req: 1," in ln for ln in sim_server.decode_lines())


async def test_client_decode_speed_matches_the_servers_throughput_at_concurrency_1(
        slow_sim_server: SimServer) -> None:
    """The per-request figure is decode speed: it agrees with the log's gen throughput within 10%."""
    sim_server = slow_sim_server
    report = await LoadDriver(LoadConfig(sim_server.url, max_tokens=512, time_scale=10)).run(1, max_requests=12)
    assert report.errors == 0 and report.untimed == 0
    # Medians: the simulator keeps simulated time, so a request that the shared machine starves of
    # CPU looks slow on the wall clock only; the median is what the simulated engine did.
    client = statistics.median(report.decode_tps())
    # The server side as specmon counts it: the log's decode lines, warm-up excluded.
    session = Session()
    ingest_file(session, str(sim_server.log))
    server = list(session.runs[-1].throughput)
    assert len(server) >= 5
    assert abs(client / statistics.median(server) - 1) < 0.10, (client, statistics.median(server))


async def test_non_streamed_answers_are_left_out_and_counted(sim_server: SimServer) -> None:
    report = await LoadDriver(LoadConfig(sim_server.url, max_tokens=64, time_scale=200, stream=False)).run(
        1, max_requests=3)
    assert len(report.ok) == 3 and report.decode_tps() == [] and report.untimed == 3
    assert report.output_tps is not None and report.to_json()["untimed"] == 3


def test_a_stream_that_arrives_in_one_burst_is_not_timed() -> None:
    """Chunks bunched at the end (a buffering hop) would give an absurd speed: left out, counted."""
    burst = RequestResult(0, 0, True, 0.0, 0.45, output_tokens=512, chunks=200, first_token_s=0.41,
                          last_token_s=0.44, first_tokens=1)
    paced = RequestResult(1, 0, True, 0.0, 0.45, output_tokens=512, chunks=200, first_token_s=0.01,
                          last_token_s=0.44, first_tokens=1)
    assert burst.decode_tps() is None and not burst.timed
    assert paced.decode_tps() == pytest.approx(511 / 0.43)
    report = LoadReport(1, 0.0, 1.0, results=[burst, paced])
    assert report.untimed == 1 and len(report.decode_tps()) == 1


async def test_concurrency_keeps_that_many_requests_in_flight(sim_server: SimServer) -> None:
    driver = LoadDriver(LoadConfig(sim_server.url, max_tokens=400, time_scale=200))
    report = await driver.run(3, max_requests=9)
    assert len(report.ok) == 9
    running = [int(m.group(1)) for ln in sim_server.decode_lines()
               if (m := re.search(r"#running-req: (\d+),", ln))]
    assert max(running) == 3  # three at once, never more
    assert sorted(r.prompt_index for r in report.results) == list(range(9))


async def test_background_load_stops_on_request_and_by_itself(sim_server: SimServer) -> None:
    bg = BackgroundLoad(LoadDriver(LoadConfig(sim_server.url, max_tokens=32, time_scale=200)))
    await bg.start(1)
    for _ in range(2000):  # until a few requests completed (bounded)
        if len(sim_server.decode_lines()) >= 1:
            break
        await asyncio.sleep(0.01)
    assert bg.running
    report = await bg.stop()
    assert report is not None and report.stopped_by == "stop" and not bg.running
    assert await bg.stop() is None
    # Without anyone stopping it, the cap ends it.
    capped = await LoadDriver(LoadConfig(sim_server.url, max_tokens=32, time_scale=200)).run(1, max_seconds=0.3)
    assert capped.stopped_by == "max_seconds"


# --------------------------------------------------------------------------- protocol details


async def test_streamed_answer_gives_first_token_time_and_usage_wins(http_server) -> None:
    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        await w.drain()
        await asyncio.sleep(0.05)  # prefill
        # Speculation: one streamed piece may carry several tokens; usage has the true count.
        w.write(sse_chunks([{"choices": [{"text": "Hello there"}]}, {"choices": [{"text": ", friend"}]},
                            {"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 7}}, "[DONE]"]))
        await w.drain()

    url, seen = await http_server(handler)
    driver = LoadDriver(LoadConfig(url, model="m", max_tokens=7))
    result = await driver.request_once()
    assert result.ok and result.output_tokens == 7 and result.prompt_tokens == 12
    assert result.ttft_s is not None and 0 < result.ttft_s <= result.latency_s
    body = json.loads(seen[0][1])
    assert seen[0][0] == "/v1/completions" and body["stream"] is True and body["prompt"] == BUNDLED_PROMPTS[0]
    assert body["ignore_eos"] is True and body["temperature"] == 0.0 and body["model"] == "m"
    assert body["stream_options"] == {"include_usage": True, "continuous_usage_stats": True}
    # Two pieces without running counts, written at once after the prefill: a burst, not timed.
    assert result.chunks == 2 and result.first_tokens is None and result.decode_tps() is None


async def test_chat_endpoint_and_pieces_when_no_usage(http_server) -> None:
    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        events = [{"choices": [{"delta": {"role": "assistant"}}]}] + \
                 [{"choices": [{"delta": {"content": f"t{i}"}}]} for i in range(5)] + ["[DONE]"]
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
                + sse_chunks(events))
        await w.drain()

    url, seen = await http_server(handler)
    report = await LoadDriver(LoadConfig(url, model="m", endpoint="chat")).run(1, max_requests=2)
    assert [r.output_tokens for r in report.results] == [5, 5]
    assert seen[0][0] == "/v1/chat/completions"
    assert json.loads(seen[1][1])["messages"] == [{"role": "user", "content": BUNDLED_PROMPTS[1]}]


async def test_http_errors_are_recorded_not_raised(http_server) -> None:
    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        msg = b'{"error": "model not found"}'
        w.write(b"HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: "
                + str(len(msg)).encode() + b"\r\n\r\n" + msg)
        await w.drain()

    url, _ = await http_server(handler)
    report = await LoadDriver(LoadConfig(url, model="m")).run(1, max_requests=2)
    assert report.errors == 2 and not report.ok
    assert report.results[0].status == 404 and "model not found" in (report.results[0].error or "")
    assert report.output_tps is None and report.to_json()["first_error"].startswith("HTTP 404")


class _Dropped(ConnectionError):
    """Raised by a handler to close the connection without a byte of answer."""


def _answer(w: asyncio.StreamWriter, tokens: int = 3) -> None:
    w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
    w.write(sse_chunks([{"choices": [{"text": "a"}]}, {"choices": [{"text": "b"}]},
                        {"choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": tokens}}, "[DONE]"]))


@pytest.mark.parametrize(("per_connection", "concurrency"), [(1, 1), (2, 1), (5, 2), (3, 4)])
async def test_a_kept_alive_connection_closed_before_answering_is_retried_once(
        http_server, per_connection: int, concurrency: int) -> None:
    """cpp-httplib (llama-server) closes a kept-alive connection after a few requests, uvicorn (vLLM,
    SGLang) after 5 s idle: a request sent on it just then gets no answer at all. It was never
    served, so it is sent again on a fresh connection, once, and is not a client error."""
    # Keyed by the writer itself, not id(w): a closed connection's writer, once collected, may
    # lend its id to the next one, which then looked used up and dropped a retry (seen in CI).
    served: dict[asyncio.StreamWriter, int] = {}

    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        n = served.get(w, 0)
        if n == per_connection:
            raise _Dropped
        served[w] = n + 1
        _answer(w)
        await w.drain()

    url, seen = await http_server(handler)
    report = await LoadDriver(LoadConfig(url, model="m")).run(concurrency, max_requests=12)
    assert report.errors == 0 and len(report.ok) == 12, [r.error for r in report.results]
    retried = sum(r.retried for r in report.results)
    # Every request the server dropped was sent again, and nothing else was: what the server saw
    # is the 12 answered plus one per retry.
    assert retried >= 1 and len(seen) == 12 + retried
    assert sum(served.values()) == 12


async def test_a_server_that_never_answers_is_an_error_after_one_retry(http_server) -> None:
    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        raise _Dropped

    url, seen = await http_server(handler)
    report = await LoadDriver(LoadConfig(url, model="m")).run(1, max_requests=3)
    assert report.errors == 3 and len(seen) == 6
    assert all(r.retried and r.error == "the server closed the connection before answering" for r in report.results)


async def test_a_connection_closed_mid_answer_is_an_error_not_retried(http_server) -> None:
    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        w.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n")
        w.write(sse_chunks([{"choices": [{"text": "a"}]}])[:-5])  # the stream's end never comes
        await w.drain()
        raise _Dropped

    url, seen = await http_server(handler)
    report = await LoadDriver(LoadConfig(url, model="m")).run(1, max_requests=2)
    # Part of an answer arrived: the server did serve it, so sending it again would count it twice.
    assert report.errors == 2 and len(seen) == 2
    assert all(not r.retried and r.error == "the server closed the connection mid-answer" for r in report.results)


async def test_every_request_is_bounded_by_its_timeout(http_server) -> None:
    async def silent(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        await asyncio.sleep(3600)  # accepts, never answers

    url, _ = await http_server(silent)
    report = await LoadDriver(LoadConfig(url, model="m", request_timeout_s=0.2)).run(1, max_requests=2)
    assert [r.error for r in report.results] == ["timed out after 0.2 s"] * 2


async def test_refused_connection_is_an_error() -> None:
    report = await LoadDriver(LoadConfig(f"http://127.0.0.1:{free_port()}", model="m")).run(1, max_requests=1)
    assert report.errors == 1 and "refused" in (report.results[0].error or "")


async def test_the_load_must_be_able_to_end() -> None:
    with pytest.raises(LoadError, match="must end by itself"):
        await LoadDriver(LoadConfig("http://127.0.0.1:1", model="m")).run(1)
    with pytest.raises(LoadError, match="concurrency"):
        await LoadDriver(LoadConfig("http://127.0.0.1:1", model="m")).run(0, max_requests=1)


@pytest.mark.parametrize("kw, message", [
    (dict(base_url="ftp://x"), "http"), (dict(base_url="http://x", endpoint="edit"), "endpoint"),
    (dict(base_url="http://x", prompts=()), "empty"), (dict(base_url="http://x", max_tokens=0), "max_tokens"),
])
def test_config_validation(kw: dict[str, object], message: str) -> None:
    with pytest.raises(LoadError, match=message):
        LoadConfig(**kw)  # type: ignore[arg-type]


def test_api_key_is_never_shown() -> None:
    assert "sk-secret" not in repr(LoadConfig("http://x", api_key="sk-secret"))


def test_prompt_file(tmp_path: Path) -> None:
    good = tmp_path / "p.jsonl"
    good.write_text('{"prompt": "one"}\n\n"two"\n{"text": "three"}\n')
    assert load_prompts(good) == ("one", "two", "three")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "one"}\n{"prompt": 5}\n')
    with pytest.raises(LoadError, match=r"bad.jsonl:2"):
        load_prompts(bad)
    (tmp_path / "e.jsonl").write_text("\n")
    with pytest.raises(LoadError, match="no prompts"):
        load_prompts(tmp_path / "e.jsonl")
    with pytest.raises(LoadError, match="No such file"):
        load_prompts(tmp_path / "missing.jsonl")


# --------------------------------------------------------------------------- through SSH


async def test_load_through_an_ssh_local_forward(asyncssh_server: AsyncSSHServer, sim_server: SimServer) -> None:
    link = await connect(SSHTarget("127.0.0.1", port=asyncssh_server.port))
    try:
        async with forwarded_base_url(link.conn, sim_server.port) as url:
            assert url.startswith("http://127.0.0.1:") and not url.endswith(f":{sim_server.port}")
            report = await LoadDriver(LoadConfig(url, max_tokens=32, time_scale=200)).run(1, max_requests=2)
    finally:
        link.close()
    assert len(report.ok) == 2
    assert ("127.0.0.1", sim_server.port) in asyncssh_server.forwards  # it really went through the SSH server


async def test_a_sweep_switches_between_named_prompt_sets(http_server) -> None:
    from specmon.control.load import bundled_workload, load_workloads

    async def handler(method: str, path: str, body: bytes, w: asyncio.StreamWriter) -> None:
        data = json.dumps({"choices": [{"text": "ok"}], "usage": {"prompt_tokens": 3, "completion_tokens": 2}})
        w.write(f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
                f"{data}".encode())
        await w.drain()

    url, seen = await http_server(handler)
    sets = load_workloads(["code", "chat"])
    load = BackgroundLoad(LoadDriver(LoadConfig(url, model="m", max_tokens=2, stream=False)), workloads=sets)
    for name in ("code", "chat"):
        before = len(seen)
        await load.start(1, workload=name)
        for _ in range(400):
            if len(seen) - before >= 3:
                break
            await asyncio.sleep(0.01)
        report = await load.stop()
        assert report is not None and report.ok
        prompts = [json.loads(body)["prompt"] for _, body in seen[before:]]
        assert len(prompts) >= 3 and set(prompts) <= set(bundled_workload(name))
        assert prompts[0] == bundled_workload(name)[0]  # each workload starts from its first prompt
    with pytest.raises(LoadError, match="no workload 'long'"):
        await load.start(1, workload="long")
