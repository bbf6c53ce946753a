"""The demo server is a real process: HTTP on 127.0.0.1, a live log, SGLang's start, crash and stop."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from specmon.parsing import parse_lines
from specmon.records import Config, Decode, Unparsed

DEADLINE = 30.0  # generous bound for every wait: machines are shared


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(check: Callable[[], object], what: str, timeout: float = DEADLINE) -> object:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = check()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def request(port: int, method: str, path: str, body: object | None = None) -> tuple[int, object]:
    # http.client, not urllib: no proxy settings can reroute 127.0.0.1.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=DEADLINE)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data, headers={"content-type": "application/json"})
        resp = conn.getresponse()
        raw = resp.read()
        return resp.status, json.loads(raw) if raw else None
    finally:
        conn.close()


def health(port: int) -> int | None:
    try:
        return request(port, "GET", "/health")[0]
    except OSError:
        return None


class Server:
    def __init__(self, tmp: Path, *args: str) -> None:
        self.log = tmp / "server.log"
        self.pidfile = tmp / "server.pid"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "specmon.sim.server", "--log", str(self.log), "--pidfile", str(self.pidfile), *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def text(self) -> str:
        return self.log.read_text(encoding="utf-8") if self.log.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=DEADLINE)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    started: list[Server] = []

    def start(*args: str) -> Server:
        sub = tmp_path / str(len(started))
        sub.mkdir()
        s = Server(sub, *args)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()  # our own child, by its Popen handle
            s.proc.wait(timeout=DEADLINE)
        for stream in (s.proc.stdout, s.proc.stderr):
            if stream:
                stream.close()


def test_serves_completions_and_logs_what_it_serves(servers: Callable[..., Server]) -> None:
    port = free_port()
    srv = servers("--steps", "2", "--port", str(port), "--startup-seconds", "1", "--time-scale", "20", "--seed", "4")
    wait_for(lambda: srv.pidfile.exists() and srv.pidfile.read_text().strip(), "pidfile")
    assert int(srv.pidfile.read_text()) == srv.proc.pid
    wait_for(lambda: health(port) == 200, "/health 200")
    assert "The server is fired up and ready to roll!" in srv.text()

    payload = {"model": "x", "prompt": "Hello there, " * 40, "max_tokens": 300}
    status, body = request(port, "POST", "/v1/completions", payload)
    assert status == 200
    assert isinstance(body, dict) and body["object"] == "text_completion"
    assert body["usage"]["completion_tokens"] == 300
    assert body["usage"]["total_tokens"] == body["usage"]["prompt_tokens"] + 300
    assert len(body["choices"][0]["text"].split()) == 300

    wait_for(lambda: "Decode batch" in srv.text(), "decode lines")
    assert srv.stop() == 0
    text = srv.text()
    assert "SIGTERM received. signum=None frame=None. Draining requests and shutting down..." in text
    assert text.rstrip().endswith("Remaining requests remaining_rids=[].")
    assert not srv.pidfile.exists()

    records = list(parse_lines(text.splitlines()))
    assert not [r for r in records if isinstance(r, Unparsed)]
    cfg = next(r for r in records if isinstance(r, Config))
    assert (cfg.algorithm, cfg.steps, cfg.draft_tokens) == ("EAGLE3", 2, 3)
    decodes = [r for r in records if isinstance(r, Decode)]
    # ~300 tokens at ~2.1 tokens per cycle, a line per 40 cycles: a few lines, all at batch 1.
    assert 2 <= len(decodes) <= 6
    assert all(d.running_req == 1 and d.accept_len is not None for d in decodes)
    assert '"POST /v1/completions HTTP/1.1" 200 OK' in text


def test_concurrent_requests_share_a_batch(servers: Callable[..., Server]) -> None:
    import threading

    port = free_port()
    srv = servers("--steps", "3", "--port", str(port), "--startup-seconds", "0.5", "--time-scale", "10", "--seed", "1")
    wait_for(lambda: health(port) == 200, "/health 200")
    results: list[int] = []

    def one() -> None:
        results.append(request(port, "POST", "/v1/completions", {"prompt": "x" * 400, "max_tokens": 1500})[0])

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=DEADLINE)
    assert results == [200, 200, 200]
    assert srv.stop() == 0
    running = [d.running_req for d in parse_lines(srv.text().splitlines()) if isinstance(d, Decode)]
    assert max(running) == 3  # requests decoding together show as one batch


def test_sigterm_with_a_request_in_flight(servers: Callable[..., Server]) -> None:
    import threading

    port = free_port()
    srv = servers("--steps", "2", "--port", str(port), "--startup-seconds", "0.2", "--seed", "2")
    wait_for(lambda: health(port) == 200, "/health 200")
    answer: list[int] = []
    client = threading.Thread(
        target=lambda: answer.append(request(port, "POST", "/v1/completions", {"max_tokens": 30000})[0])
    )
    client.start()
    wait_for(lambda: "Decode batch" in srv.text(), "the request to be decoding")
    assert srv.stop() == 0
    client.join(timeout=DEADLINE)
    assert answer == [503]
    lines = srv.text().splitlines()
    sigterm = next(i for i, x in enumerate(lines) if "SIGTERM received." in x)
    assert "Gracefully exiting... Remaining number of requests 1. Remaining requests remaining_rids=['" in lines[-1]
    # SGLang logs the signal first; the aborted request's access line comes after it.
    assert all("503" not in x for x in lines[:sigterm])


def test_health_is_503_during_startup_and_sigterm_stops_it(servers: Callable[..., Server]) -> None:
    port = free_port()
    srv = servers("--steps", "0", "--port", str(port), "--startup-seconds", "120")
    status = wait_for(lambda: health(port), "listening")
    assert status == 503
    code, _ = request(port, "POST", "/v1/completions", {"max_tokens": 5})
    assert code == 503
    wait_for(lambda: "Load weight begin" in srv.text(), "start-up lines")
    assert srv.stop(signal.SIGINT) == 0
    text = srv.text()
    assert "speculative_algorithm=None" in text
    assert "fired up" not in text
    assert "Draining requests and shutting down" in text


def test_bad_requests_get_clear_errors(servers: Callable[..., Server]) -> None:
    port = free_port()
    srv = servers("--steps", "1", "--port", str(port), "--startup-seconds", "0", "--time-scale", "50")
    wait_for(lambda: health(port) == 200, "/health 200")
    assert request(port, "POST", "/v1/completions", {"max_tokens": 0})[0] == 400
    assert request(port, "POST", "/v1/completions", {"max_tokens": "ten"})[0] == 400
    assert request(port, "GET", "/nope")[0] == 404
    status, info = request(port, "GET", "/get_server_info")
    assert status == 200 and isinstance(info, dict)
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"], info["simulated"]) == (1, 2, True)
    assert srv.stop() == 0


def test_crash_on_start_exits_1_with_a_traceback(servers: Callable[..., Server]) -> None:
    srv = servers("--steps", "5", "--startup-seconds", "1", "--crash-on-start")
    assert srv.proc.wait(timeout=DEADLINE) == 1
    text = srv.text()
    assert "Scheduler hit an exception: Traceback (most recent call last):" in text
    assert '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py"' in text
    assert "torch.OutOfMemoryError: CUDA out of memory." in text
    assert "Received sigquit from a child process. It usually means the child failed." in text
    assert "fired up" not in text
    assert not srv.pidfile.exists()


def test_builtin_load_keeps_the_log_moving(servers: Callable[..., Server]) -> None:
    srv = servers("--steps", "0", "--startup-seconds", "0.2", "--time-scale", "50", "--seed", "9")
    wait_for(lambda: srv.text().count("Decode batch") >= 5, "decode lines from the built-in load")
    assert srv.stop(signal.SIGINT) == 0
    decodes = [r for r in parse_lines(srv.text().splitlines()) if isinstance(r, Decode)]
    assert {d.running_req for d in decodes} == {1}
    assert all(d.accept_len is None for d in decodes)
    # Throughput is the simulated GPU's, whatever the time scale (first line includes the idle wait).
    steady = [d.gen_throughput for d in decodes[1:] if d.gen_throughput]
    assert steady and 50 < sum(steady) / len(steady) < 120


def test_invalid_arguments_fail_cleanly(tmp_path: Path) -> None:
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "specmon.sim.server", *args], capture_output=True, text=True, timeout=DEADLINE
        )

    bad_topk = run("--steps", "2", "--topk", "0", "--log", str(tmp_path / "a.log"))
    assert bad_topk.returncode == 2 and "speculative_eagle_topk" in bad_topk.stderr
    no_dir = run("--steps", "2", "--log", str(tmp_path / "missing" / "a.log"))
    assert no_dir.returncode == 2 and "cannot open log" in no_dir.stderr and "Traceback" not in no_dir.stderr
    bad_scale = run("--steps", "2", "--log", str(tmp_path / "b.log"), "--time-scale", "0")
    assert bad_scale.returncode == 2 and "--time-scale" in bad_scale.stderr
